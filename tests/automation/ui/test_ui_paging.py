"""The overview's pages of pools and its state filter (issue 24: a page in under 300 ms with
1,000 pools), and the cost chart as a fragment fetched after the page: 250 pools written
straight into the ledger, read through the dashboard over HTTP."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from automation.app import App
from automation.ledger import schema
from automation.ui.pages import PAGE_SIZE
from tests.automation.test_cost import _attempt
from tests.automation.ui.test_ui_http import _login, _viewer

POOLS = 250
FAILED = 7  # pools 0, 40, 80, ...: on pages 1, 2 and 3 of all pools
_ROW = re.compile(r'<tr id="pool-[^"]+" data-pool="([^"]+)" data-state="([^"]+)"')


@pytest.fixture
def many(world: App) -> App:
    """POOLS pools in the world's cluster (bench_cli_list.seed's bulk insert), FAILED failed."""
    cluster, org = world.ledger.query("SELECT id, org_id FROM clusters")[0].values()
    credential = world.ledger.query("SELECT id FROM credentials")[0]["id"]
    now = world.clock.now()
    with world.ledger.write() as conn:
        conn.execute(schema.node_pools.insert(), [dict(
            id=f"np-{i:06d}", name=f"pool-{i:04d}", cluster_id=cluster, org_id=org,
            credential_id=credential, provider="aws", region="us-east-1", zone="us-east-1a",
            vm_type="m7i.large", min_vms=1, max_vms=1,
            state="failed" if i % 40 == 0 else "ready", hosts_service=False,
            consecutive_failures=0, created_at=now, updated_at=now) for i in range(POOLS)])
    return world


def _rows(html: str) -> list[tuple[str, str]]:
    return _ROW.findall(html)


def _count(html: str, state: str) -> int:
    found = re.search(rf'class="count state-{state}"><a [^>]*><span class="n">(\d+)</span>',
                      html)
    assert found, state
    return int(found.group(1))


@pytest.fixture
def viewer(many: App, browser: TestClient) -> TestClient:
    return _login(browser, _viewer(many))


def test_the_first_page_shows_a_page_of_pools_and_counts_over_all(viewer: TestClient) -> None:
    page = viewer.get("/ui/")
    assert page.status_code == 200
    rows = _rows(page.text)
    assert len(rows) == PAGE_SIZE == 100
    assert rows[0][0] == "pool-0000" and rows[-1][0] == "pool-0099"  # in the API's order
    assert _count(page.text, "all") == POOLS
    assert _count(page.text, "failed") == FAILED and _count(page.text, "ready") == POOLS - FAILED
    nav = re.search(r'<nav class="pages" aria-label="Pages">(.*?)</nav>', page.text, re.S)
    assert nav, page.text[:3000]
    assert "pools 1\u2013100 of 250" in nav.group(1)
    assert 'href="/ui/?page=2"' in nav.group(1) and "Previous" not in nav.group(1)
    # The poll asks for the same page.
    assert 'data-fragment="/ui/fragments/pools"' in page.text


def test_the_last_page_shows_the_rest(viewer: TestClient) -> None:
    page = viewer.get("/ui/?page=3").text
    rows = _rows(page)
    assert len(rows) == POOLS - 2 * PAGE_SIZE == 50
    assert rows[0][0] == "pool-0200" and rows[-1][0] == "pool-0249"
    assert _count(page, "all") == POOLS and _count(page, "failed") == FAILED
    assert "pools 201\u2013250 of 250" in page
    assert 'href="/ui/?page=2" rel="prev"' in page and 'rel="next"' not in page
    assert 'data-fragment="/ui/fragments/pools?page=3"' in page


def test_the_state_filter_shows_only_that_states_pools(viewer: TestClient) -> None:
    page = viewer.get("/ui/?state=failed").text
    rows = _rows(page)
    assert len(rows) == FAILED and {state for _, state in rows} == {"failed"}
    assert _count(page, "all") == POOLS  # the counts stay over every pool
    assert 'href="/ui/?state=failed" aria-current="page"' in page
    assert "failed pools 1\u20137 of 7" in page
    assert 'data-fragment="/ui/fragments/pools?state=failed"' in page
    # No deleting pool: said in words.
    assert "No deleting node pools" in viewer.get("/ui/?state=deleting").text
    # All, explicitly, is the unfiltered first page.
    assert _rows(viewer.get("/ui/?state=all").text) == _rows(viewer.get("/ui/").text)


@pytest.mark.parametrize("query", ["", "?page=2", "?page=3", "?state=failed",
                                   "?state=ready&page=3"])
def test_the_fragment_with_the_same_query_shows_the_same_rows(viewer: TestClient,
                                                              query: str) -> None:
    page = viewer.get(f"/ui/{query}")
    fragment = viewer.get(f"/ui/fragments/pools{query}")
    assert page.status_code == fragment.status_code == 200
    assert _rows(fragment.text) == _rows(page.text) != []
    shown = re.search(r'id="live" [^>]*data-version="([0-9a-f]{16})"', page.text)
    assert shown and fragment.headers["X-Live-Version"] == shown.group(1)


def test_a_page_past_the_last_shows_the_last(viewer: TestClient) -> None:
    for query in ("?page=4", "?page=999999999999", "?page=" + "9" * 5000):
        page = viewer.get(f"/ui/{query}")
        assert page.status_code == 200
        assert _rows(page.text)[0][0] == "pool-0200", query
    assert len(_rows(viewer.get("/ui/?state=failed&page=2").text)) == FAILED


@pytest.mark.parametrize(("query", "named"), [
    ("?page=0", "page=&#39;0&#39;: a page is a whole number from 1"),
    ("?page=-1", "page=&#39;-1&#39;"), ("?page=two", "page=&#39;two&#39;"),
    ("?page=1.5", "page=&#39;1.5&#39;"), ("?page=%EF%BC%92", "a page is a whole number"),
    ("?state=broken", "state=&#39;broken&#39;: a state is all or one of pending, "
                      "provisioning, ready, failed, deleting"),
    ("?state=deleted", "state=&#39;deleted&#39;"),
    ("?state=%3Cscript%3E", "state=&#39;&lt;script&gt;&#39;"),
])
def test_a_bad_page_or_state_is_a_400_that_says_why(viewer: TestClient, query: str,
                                                    named: str) -> None:
    page = viewer.get(f"/ui/{query}")
    assert page.status_code == 400 and named in page.text, page.text
    assert "<h1>Bad request</h1>" in page.text and 'href="/ui/"' in page.text
    assert "<script>" not in page.text
    fragment = viewer.get(f"/ui/fragments/pools{query}")
    assert fragment.status_code == 400 and fragment.text.startswith(("page=", "state="))


def test_anonymous_gets_the_login_page_and_no_pools(many: App, browser: TestClient) -> None:
    for path in ("/ui/?page=2", "/ui/?state=failed", "/ui/?page=zero"):
        resp = browser.get(path)
        assert resp.status_code == 303 and resp.headers["location"] == "/ui/login", path
    for path in ("/ui/fragments/pools?page=2", "/ui/fragments/cost"):
        resp = browser.get(path)
        assert resp.status_code == 401 and "pool-" not in resp.text and "<svg" not in resp.text


def test_the_cost_chart_is_a_fragment_loaded_after_the_page(many: App,
                                                            viewer: TestClient) -> None:
    _attempt(many, "np-000001", "running", many.clock.now() - timedelta(hours=30))
    page = viewer.get("/ui/").text
    assert "<svg" not in page  # off the page's critical path ...
    assert re.search(r'<section id="cost" [^>]*data-fragment="/ui/fragments/cost"', page)
    assert 'href="/ui/fragments/cost"' in page  # ... with a link for no script
    chart = viewer.get("/ui/fragments/cost")
    assert chart.status_code == 200 and "<html" not in chart.text
    assert '<svg class="chart" role="img"' in chart.text and 'class="bar"' in chart.text
    assert "prod/pool-0001" in chart.text or "pool-0001" in chart.text
    assert chart.headers["Content-Security-Policy"].startswith("default-src 'none'")
