"""The overview's cost-per-day chart over HTTP: the numbers ``GET /v1/cost/daily`` gives the
same token, as SVG, a legend and a table; nothing for anyone else; the poll left as it was."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient

from automation.app import App
from tests.automation.test_cost import _attempt
from tests.automation.ui.test_ui_http import _login, _pool_id, _viewer, pooled  # noqa: F401


def test_the_overview_draws_the_cost_the_api_gives(pooled: App, browser: TestClient,  # noqa: F811
                                                   callers: dict[str, dict[str, str]]) -> None:
    _attempt(pooled, _pool_id(pooled), "running", pooled.clock.now() - timedelta(hours=30))
    _login(browser, _viewer(pooled))
    page = browser.get("/ui/fragments/cost").text  # fetched by app.js after the overview
    api = browser.get("/v1/cost/daily", headers=callers["viewer"]).json()
    (line,) = api["pools"]
    assert '<svg class="chart" role="img"' in page and 'class="bar"' in page
    assert page.count('class="bar"') == sum(1 for usd in line["perDay"] if usd > 0) >= 2
    assert "Cost per day as a table" in page and "prod/gpu" in page
    assert f"{line['perDay'][-1]:.2f}" in page and f"${api['totalUsd']:,.2f}" in page
    assert "style=" not in page  # the CSP allows no inline style
    fragment = browser.get("/ui/fragments/pools").text
    assert "<svg" not in fragment  # not in the 3 s poll


def test_no_cost_is_said_in_words(pooled: App, browser: TestClient) -> None:  # noqa: F811
    _login(browser, _viewer(pooled))
    page = browser.get("/ui/fragments/cost").text
    assert "No cost in the last 30 days." in page and '<svg class="chart"' not in page


def test_anonymous_gets_no_chart(pooled: App, browser: TestClient) -> None:  # noqa: F811
    _attempt(pooled, _pool_id(pooled), "running", pooled.clock.now() - timedelta(hours=3))
    resp = browser.get("/ui/fragments/cost")
    assert resp.status_code == 401 and "<svg" not in resp.text and "prod/gpu" not in resp.text
    resp = browser.get("/ui/")
    assert resp.status_code == 303 and "<svg" not in resp.text and "prod/gpu" not in resp.text
