"""``GET /v1/cost/daily``: any reader gets cost per day and pool as camelCase JSON, the same
numbers as the service; anonymous callers get 401 and no data; out-of-range days are 422."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient

from automation.app import App
from automation.models import NewNodePool
from automation.services import node_pools
from automation.services.cost_report import cost_by_day
from tests.automation.api.conftest import POOL
from tests.automation.test_cost import _attempt


def _running_pool(app: App) -> str:
    made = node_pools.create_node_pool_reported(app, NewNodePool.model_validate(POOL))
    _attempt(app, made.id, "running", app.clock.now() - timedelta(hours=30))
    return made.id


def test_a_viewer_reads_cost_per_day_in_camel_case(world: App, http: TestClient,
                                                   callers: dict[str, dict[str, str]]) -> None:
    pool = _running_pool(world)
    resp = http.get("/v1/cost/daily", params={"days": 3}, headers=callers["viewer"])
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert len(body["days"]) == 3 and body["currency"] == "USD"
    (line,) = body["pools"]
    assert line["poolId"] == pool and len(line["perDay"]) == 3 and line["total"] > 0
    expected = cost_by_day(world.ledger, world.clock.now(), days=3)
    assert body == expected.model_dump(mode="json", by_alias=True)
    assert len(http.get("/v1/cost/daily", headers=callers["viewer"]).json()["days"]) == 30


def test_anonymous_gets_401_and_no_data(world: App, http: TestClient) -> None:
    _running_pool(world)
    resp = http.get("/v1/cost/daily")
    assert resp.status_code == 401 and "perDay" not in resp.text and "gpu" not in resp.text


def test_days_out_of_range_are_refused(world: App, http: TestClient,
                                       callers: dict[str, dict[str, str]]) -> None:
    for days in (0, 91):
        resp = http.get("/v1/cost/daily", params={"days": days}, headers=callers["viewer"])
        assert resp.status_code == 422
        assert (resp.json()["field"], resp.json()["value"]) == ("days", str(days))
