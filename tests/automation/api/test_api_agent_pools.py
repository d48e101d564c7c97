"""``GET /v1/agent-pools``: a reader's list of the open AgentPools, camelCase, paged; no
token, no data."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient

from automation.app import App
from tests.automation.test_agent_pool_view import add_agent, add_pool, add_session


def _two_pools(app: App) -> None:
    add_pool(app, "ci/build", desired=2)
    add_pool(app, "ci/docs", desired=1, reason="ScaleFailed")
    add_agent(app, "ci/build", "build-0", slots=4, busy=1)
    add_session(app, "ci/build", "r0", "running", assigned=timedelta(minutes=2))
    add_session(app, "ci/build", "p0", "pending", assigned=None)


def test_a_viewer_reads_the_pools_in_camel_case(app: App, http: TestClient,
                                                callers: dict[str, dict[str, str]]) -> None:
    _two_pools(app)
    resp = http.get("/v1/agent-pools", headers=callers["viewer"])
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [p["pool"] for p in body["items"]] == ["ci/build", "ci/docs"]
    assert body["nextPageToken"] is None
    build = body["items"][0]
    assert {"desiredReplicas": 2, "readyAgents": 1, "slots": 4, "idleSlots": 3,
            "busySlots": 1, "pendingSessions": 1, "runningSessions": 1, "ready": True,
            "reason": "Reconciled"}.items() <= build.items()
    assert len(build["busySlotsPerMinute"]) == 60 and build["busySlotsPerMinute"][-1] == 1.0
    assert "busyFrom" in build and "observedAt" in build
    assert not any("_" in key for key in build)
    page = http.get("/v1/agent-pools?pageSize=1", headers=callers["viewer"]).json()
    assert [p["pool"] for p in page["items"]] == ["ci/build"] and page["nextPageToken"]
    rest = http.get(f"/v1/agent-pools?pageSize=1&pageToken={page['nextPageToken']}",
                    headers=callers["viewer"]).json()
    assert [p["pool"] for p in rest["items"]] == ["ci/docs"]


def test_no_token_no_data_and_an_agent_token_is_refused(
        app: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    _two_pools(app)
    anonymous = http.get("/v1/agent-pools")
    assert anonymous.status_code == 401 and "ci/build" not in anonymous.text
    agent = http.get("/v1/agent-pools", headers=callers["agent"])
    assert agent.status_code == 403 and "ci/build" not in agent.text
