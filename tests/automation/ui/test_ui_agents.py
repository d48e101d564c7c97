"""The dashboard's AgentPools and Deployments pages (issue 24) over HTTP: their tables and
the busy-slot chart; anonymous callers sent to log in (pages) or refused (fragments); and
nothing on a page the API would not give the same token."""

from __future__ import annotations

import re
from datetime import timedelta
from html import escape

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from automation.app import App
from automation.ledger import schema
from automation.services import projects
from automation.services.tokens import create_token
from tests.automation.api.conftest import bearer
from tests.automation.test_agent_pool_view import add_agent, add_pool, add_session

PAGES = ("/ui/agent-pools", "/ui/deployments")
FRAGMENTS = ("/ui/fragments/agent-pools", "/ui/fragments/deployments")



@pytest.fixture
def viewer(app: App) -> dict[str, str]:
    return bearer(create_token(app, "watcher", "viewer", by="test").token)


@pytest.fixture
def agent_pools(app: App) -> App:
    """``ci/build`` (ready, busy) and ``ci/docs`` (not ready: ScaleFailed, a pending session)."""
    add_pool(app, "ci/build", desired=3)
    add_pool(app, "ci/docs", desired=1, reason="ScaleFailed")
    add_agent(app, "ci/build", "build-0", slots=4, busy=3)
    add_agent(app, "ci/build", "build-1", slots=2, busy=0, state="draining")
    for i in range(3):
        add_session(app, "ci/build", f"r{i}", "running", assigned=timedelta(minutes=10 + i))
    add_session(app, "ci/build", "d0", "done", assigned=timedelta(minutes=50),
                finished=timedelta(minutes=45))
    add_session(app, "ci/docs", "p0", "pending", assigned=None)
    return app


def _row(page: str, attr: str, value: str) -> str:
    found = re.search(rf'<tr {attr}="{re.escape(value)}".*?</tr>', page, re.S)
    assert found, f"no row {attr}={value}"
    return found.group(0)


def _cells(row: str) -> dict[str, str]:
    return {label: re.sub(r"<[^>]+>", "", body).strip() for label, body in
            re.findall(r'<t[dh] data-label="([^"]+)"[^>]*>(.*?)</t[dh]>', row, re.S)}


def test_the_agent_pools_page_shows_each_pool_and_its_busy_slots(
        agent_pools: App, browser: TestClient, viewer: dict[str, str]) -> None:
    resp = browser.get("/ui/agent-pools", headers=viewer)
    assert resp.status_code == 200, resp.text
    page = resp.text
    assert "<caption>AgentPools (2)</caption>" in page
    build = _cells(_row(page, "data-pool", "ci/build"))
    assert build["Agents ready / desired"] == "1 / 3"
    assert build["Draining / unknown"] == "1 / 0"
    assert build["Slots busy / idle / ready"] == "3 / 1 / 4"
    assert (build["Pending sessions"], build["Running sessions"]) == ("0", "3")
    assert "True" in build["Ready condition"] and "Reconciled" in build["Ready condition"]
    # The chart in words: r2, r1 and r0 began 12, 11 and 10 minutes ago (1, then 2, then 3
    # busy a minute); d0 held one slot from 50 to 45 minutes ago.
    assert "peak 3, now 3" in build["Busy slots, last hour"]
    docs = _cells(_row(page, "data-pool", "ci/docs"))
    assert "False" in docs["Ready condition"] and "ScaleFailed" in docs["Ready condition"]
    assert docs["Pending sessions"] == "1"
    assert "peak 0, now 0" in docs["Busy slots, last hour"]
    # A server-made SVG per pool, named for screen readers, no inline style or script.
    charts = re.findall(r'<svg class="spark" role="img".*?</svg>', page, re.S)
    assert len(charts) == 2
    assert "<title id=" in charts[0] and "Busy slots of ci/build" in charts[0]
    assert charts[0].count('<rect class="busy"') == 17  # d0's 5 minutes, r* the last 12
    assert 'class="busy"' not in charts[1]
    assert "style=" not in page and "<script>" not in page
    assert 'href="/ui/agent-pools"' in page and 'href="/ui/deployments"' in page


def test_the_agent_pools_page_agrees_with_the_api(agent_pools: App, browser: TestClient,
                                                 viewer: dict[str, str]) -> None:
    api = browser.get("/v1/agent-pools", headers=viewer).json()["items"]
    page = browser.get("/ui/fragments/agent-pools", headers=viewer).text
    assert [p["pool"] for p in api] == re.findall(r'<tr data-pool="([^"]+)"', page)
    for p in api:
        cells = _cells(_row(page, "data-pool", p["pool"]))
        assert cells["Slots busy / idle / ready"] == (
            f"{p['busySlots']} / {p['idleSlots']} / {p['slots']}")


def test_anonymous_is_sent_to_log_in_and_gets_no_data(agent_pools: App, deployments: App,
                                                      browser: TestClient) -> None:
    for path in PAGES:
        resp = browser.get(path)
        assert resp.status_code == 303 and resp.headers["location"] == "/ui/login"
        assert "ci/build" not in resp.text and "api" not in resp.text
    for path in FRAGMENTS:
        resp = browser.get(path)
        assert resp.status_code == 401 and "ci/build" not in resp.text
        assert "acme" not in resp.text


def test_an_agent_token_sees_neither_page(agent_pools: App, deployments: App,
                                          browser: TestClient,
                                          callers: dict[str, dict[str, str]]) -> None:
    """The API refuses an agent token both lists; so does the dashboard."""
    for api_path in ("/v1/agent-pools", "/v1/deployments"):
        assert browser.get(api_path, headers=callers["agent"]).status_code == 403
    for path in PAGES + FRAGMENTS:
        resp = browser.get(path, headers=callers["agent"])
        assert resp.status_code == 403, (path, resp.status_code)
        assert "ci/build" not in resp.text and "acme" not in resp.text


@pytest.fixture
def deployments(app: App) -> App:
    """Deployment ``api`` of project ``web`` (org ``acme``): running on ``static-a``, moving to
    ``static-b``, its last error naming an address; ``store`` of ``shop`` (org ``globex``),
    stopped; ``old`` of ``web``, deleted."""
    projects.create_org(app, "acme")
    projects.create_org(app, "globex")
    web = projects.create_project(app, "web", "acme")
    shop = projects.create_project(app, "shop", "globex")
    now = app.clock.now()
    rows = [
        dict(id="d1", name="api", project_id=web.id, state="running", provision_id="p1",
             provisioner="static-a", runtime_host="a1.example",
             move={"from": "static-a", "to": "static-b", "step": "provision"},
             last_error="dial tcp 203.0.113.10:6443: connection refused"),
        dict(id="d2", name="store", project_id=shop.id, state="stopped", provision_id="p2"),
        dict(id="d3", name="old", project_id=web.id, state="deleted", provision_id="p3",
             deleted_at=now),
    ]
    with app.ledger.write() as conn:
        for row in rows:
            conn.execute(sa.insert(schema.deployments).values(
                created_at=now, updated_at=now, **row))
    return app


def test_the_deployments_page_shows_what_the_api_gives(deployments: App,
                                                       browser: TestClient,
                                                       viewer: dict[str, str]) -> None:
    api = browser.get("/v1/deployments", headers=viewer)
    assert api.status_code == 200
    listed = [d["name"] for d in api.json()["items"]]
    resp = browser.get("/ui/deployments", headers=viewer)
    assert resp.status_code == 200
    page = resp.text
    assert re.findall(r'<tr data-deployment="([^"]+)"', page) == listed == ["api", "store"]
    assert "old" not in re.findall(r'data-deployment="([^"]+)"', page)  # deleted: as the API
    api_row = _cells(_row(page, "data-deployment", "api"))
    assert api_row["Project / org"] == "web / acme"
    assert (api_row["Provisioner"], api_row["Host"]) == ("static-a", "a1.example")
    assert api_row["State"].endswith("running")
    assert "static-a → static-b" in api_row["Pending move"]
    assert "provision" in api_row["Pending move"]
    # The last error as the API gives it: redacted.
    shown = next(d for d in api.json()["items"] if d["name"] == "api")["lastError"]
    assert "203.0.113.10" not in shown and escape(shown) in page and "203.0.113.10" not in page
    store = _cells(_row(page, "data-deployment", "store"))
    assert store["Project / org"] == "shop / globex"
    assert (store["Provisioner"], store["Host"], store["Pending move"]) == ("—", "—", "—")
    assert store["State"].endswith("stopped") and store["Last error"] == ""
    fragment = browser.get("/ui/fragments/deployments", headers=viewer)
    assert fragment.status_code == 200 and 'data-deployment="store"' in fragment.text


def test_the_busy_slot_chart_is_scaled_named_and_escaped() -> None:
    from datetime import UTC, datetime

    from automation.models import AgentPoolSummary
    from automation.ui.charts import busy_slots_svg

    now = datetime(2026, 1, 1, tzinfo=UTC)
    per_minute = [0.0] * 58 + [2.0, 4.0]
    pool = AgentPoolSummary(
        pool="ns/a<b>", namespace="ns", name="a<b>", desired_replicas=1, ready_agents=1,
        draining_agents=0, unknown_agents=0, slots=8, idle_slots=4, busy_slots=4,
        pending_sessions=0, running_sessions=4, ready=True, reason="Reconciled",
        observed_at=now, busy_from=now, busy_slots_per_minute=per_minute)
    svg = busy_slots_svg(pool)
    assert svg.startswith('<svg class="spark" role="img" aria-labelledby="busy-')
    assert "a&lt;b&gt;" in svg and "a<b>" not in svg
    assert "Peak 4 busy slots" in svg and "4 busy now of 8 ready" in svg
    heights = [float(h) for h in re.findall(r'<rect class="busy"[^>]* height="([\d.]+)"', svg)]
    assert heights == [11.0, 22.0]  # of 8 ready slots (44 units high): a quarter, a half
    assert "style" not in svg
    # Its ids differ from another pool's (several charts on one page).
    other = busy_slots_svg(pool.model_copy(update={"pool": "ns/c"}))
    assert re.search(r'id="([^"]+)"', svg)[1] != re.search(r'id="([^"]+)"', other)[1]  # type: ignore[index]
