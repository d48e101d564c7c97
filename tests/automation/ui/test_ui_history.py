"""The pool page's history over HTTP: its VM attempts and last events tables, in the page
and in the fragment it polls, as the API gives them to the same token, redacted alike."""

from __future__ import annotations

from html import escape

from fastapi.testclient import TestClient

from automation.app import App
from tests.automation.test_pool_history import seed_history
from tests.automation.ui.test_ui_http import _login, _viewer


def test_the_pool_page_shows_the_attempts_and_events_the_api_gives(
        world: App, browser: TestClient,
        callers: dict[str, dict[str, str]]) -> None:
    pool = seed_history(world)
    api = browser.get(f"/v1/node-pools/{pool}/history", headers=callers["viewer"]).json()
    _login(browser, _viewer(world))
    for path in (f"/ui/pools/{pool}", f"/ui/fragments/pools/{pool}"):
        page = browser.get(path)
        assert page.status_code == 200, page.text
        assert "<caption>VM attempts (3, newest first; times UTC)</caption>" in page.text
        assert "<caption>Last events (5, newest first; times UTC)</caption>" in page.text
        # Newest first, state as text, released ones included, with their reason.
        rows = [page.text.index(f'data-attempt="{a["id"]}"') for a in api["attempts"]]
        assert rows == sorted(rows) and [a["id"] for a in api["attempts"]][-1] == "at-1"
        assert '<tr data-attempt="at-1" data-state="released">' in page.text
        assert "<td>released</td>" in page.text and "Node NotReady for 10 minutes" in page.text
        assert "(replaced by <code" in page.text
        # The events' messages as the API shows them: redacted.
        assert escape(api["events"][0]["message"]) in page.text
        assert "203.0.113.10" not in page.text and "k3s-abc" not in page.text
        assert "<script>" not in page.text and "style=" not in page.text  # the CSP's rule


def test_anonymous_gets_no_history(world: App, browser: TestClient) -> None:
    pool = seed_history(world)
    assert browser.get(f"/ui/fragments/pools/{pool}").status_code == 401
    page = browser.get(f"/ui/pools/{pool}")
    assert page.status_code == 303 and "pool_failed" not in page.text
