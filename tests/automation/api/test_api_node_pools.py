"""The node-pool story over the API: the same service calls and JSON as the CLI, pages,
problem+json refusals, and a 500 that tells nothing but an error id."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from automation.app import App
from tests.automation.api.conftest import POOL
from tests.automation.conftest import snapshot


def test_create_list_status_delete(world: App, http: TestClient,
                                   callers: dict[str, dict[str, str]]) -> None:
    member = callers["member"]
    made = http.post("/v1/node-pools", json=POOL, headers=member)
    assert made.status_code == 201, made.text
    body = made.json()
    assert (body["name"], body["state"], body["zoneChosen"]) == ("gpu", "pending", True)
    assert body["zone"] == "us-east-1a" and body["cost"]["vms"] == 1 and "warnings" in body
    listed = http.get("/v1/node-pools", headers=callers["viewer"]).json()
    assert [p["id"] for p in listed["items"]] == [body["id"]]
    assert listed["nextPageToken"] is None
    status = http.get(f"/v1/node-pools/{body['id']}", headers=callers["viewer"]).json()
    assert status["name"] == "gpu" and status["ingress"] == {"entryIp": None, "release": None}
    gone = http.delete("/v1/node-pools/gpu", headers=member)
    assert gone.status_code == 200 and gone.json()["state"] == "deleting"


def test_the_api_answers_what_the_cli_prints(world: App, http: TestClient, run: Any,
                                             callers: dict[str, dict[str, str]]) -> None:
    """One contract: the CLI's --json and the API's body, for the same request."""
    via_api = http.post("/v1/node-pools", json=POOL, headers=callers["member"]).json()
    via_cli = json.loads(run("node-pool", "create", "cpu", "--credentials", "team-aws",
                             "--region", "us-east-1", "--vm-type", "m7i.large",
                             "--min-vms", "1", "--max-vms", "1", "--json").stdout)
    differ = {"id", "name", "createdAt", "updatedAt"}
    assert list(via_api) == list(via_cli)
    assert {k: v for k, v in via_api.items() if k not in differ} == \
        {k: v for k, v in via_cli.items() if k not in differ}
    listed = json.loads(run("node-pool", "list", "--json").stdout)
    page = http.get("/v1/node-pools", headers=callers["viewer"]).json()["items"]
    assert page == listed


def test_lists_page_with_opaque_tokens(world: App, http: TestClient,
                                       callers: dict[str, dict[str, str]]) -> None:
    for n in range(5):
        assert http.post("/v1/node-pools", json=POOL | {"name": f"p{n}"},
                         headers=callers["member"]).status_code == 201
    seen, token, pages = [], None, 0
    while True:
        params: dict[str, Any] = {"pageSize": 2} | ({"pageToken": token} if token else {})
        got = http.get("/v1/node-pools", params=params, headers=callers["viewer"]).json()
        seen += [p["name"] for p in got["items"]]
        pages += 1
        token = got["nextPageToken"]
        if token is None:
            break
    assert seen == [f"p{n}" for n in range(5)] and pages == 3
    first = http.get("/v1/node-pools", params={"pageSize": 2},
                     headers=callers["viewer"]).json()["nextPageToken"]
    other = http.get("/v1/node-pools", params={"pageSize": 2, "pageToken": first,
                                                "cluster": "prod"},
                     headers=callers["viewer"])
    assert other.status_code == 400 and other.json()["field"] == "pageToken"
    for bad in ("%%%", "eyJrIjoxfQ"):
        resp = http.get("/v1/node-pools", params={"pageToken": bad},
                        headers=callers["viewer"])
        assert resp.status_code == 400 and "nextPageToken" in resp.json()["rule"]
    for size in (0, 1001):
        resp = http.get("/v1/node-pools", params={"pageSize": size},
                        headers=callers["viewer"])
        assert resp.status_code == 400 and resp.json()["field"] == "pageSize"


def _every_page(http: TestClient, path: str, headers: dict[str, str],
                params: dict[str, Any] | None = None) -> tuple[list[str], int]:
    names, token, pages = [], None, 0
    while True:
        asked = {**(params or {}), "pageSize": 2} | ({"pageToken": token} if token else {})
        got = http.get(path, params=asked, headers=headers)
        assert got.status_code == 200, got.text
        names += [i["name"] for i in got.json()["items"]]
        pages += 1
        token = got.json()["nextPageToken"]
        if token is None:
            return names, pages


def test_every_list_pages(world: App, http: TestClient,
                          callers: dict[str, dict[str, str]]) -> None:
    """Clusters, credentials, orgs, projects, deployments and tokens page as node pools do."""
    admin, member = callers["admin"], callers["member"]
    for n in range(3):
        assert http.post("/v1/orgs", json={"name": f"o{n}"}, headers=admin).is_success
        assert http.post("/v1/projects", json={"name": f"w{n}", "org": "o0"},
                         headers=member).is_success
    assert http.post("/v1/node-pools", json=POOL, headers=member).is_success
    for n in range(3):
        assert http.post("/v1/deployments", json={"name": f"d{n}", "nodePool": "gpu"},
                         headers=member).is_success
    # "default": the org that owns the world's cluster (made with it)
    assert _every_page(http, "/v1/orgs", member) == (["default", "o0", "o1", "o2"], 2)
    assert _every_page(http, "/v1/projects", member, {"org": "o0"}) == (
        ["w0", "w1", "w2"], 2)
    assert _every_page(http, "/v1/deployments", member) == (["d0", "d1", "d2"], 2)
    assert _every_page(http, "/v1/clusters", member)[0] == ["prod"]
    assert _every_page(http, "/v1/credentials", member)[0] == ["team-aws"]
    tokens, pages = _every_page(http, "/v1/tokens", admin)
    assert tokens == sorted(tokens) and {"admin", "member", "viewer"} <= set(tokens)
    assert pages == (len(tokens) + 1) // 2
    first = http.get("/v1/projects", params={"pageSize": 1, "org": "o0"},
                     headers=member).json()["nextPageToken"]
    other = http.get("/v1/projects", params={"pageToken": first}, headers=member)
    assert other.status_code == 400 and other.json()["field"] == "pageToken"


@pytest.mark.parametrize(("body", "status", "code", "field"), [
    (POOL | {"minVms": 2}, 400, "INVALID_ARGUMENT", "--max-vms"),
    (POOL | {"name": "Bad_Name"}, 400, "INVALID_ARGUMENT", "name"),
    (POOL | {"credentials": "nobody"}, 404, "NOT_FOUND", "--credentials"),
    (POOL | {"vmType": 7}, 422, "INVALID_ARGUMENT", "vmType"),
    ({"name": "x"}, 422, "INVALID_ARGUMENT", "credentials"),
    (POOL | {"surprise": 1}, 422, "INVALID_ARGUMENT", "surprise"),
])
def test_bad_input_is_a_4xx_problem_and_writes_nothing(world: App, http: TestClient,
                                                       callers: dict[str, dict[str, str]],
                                                       body: dict[str, Any], status: int,
                                                       code: str, field: str) -> None:
    before = snapshot(world)
    resp = http.post("/v1/node-pools", json=body, headers=callers["member"])
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/problem+json"
    problem = resp.json()
    assert (problem["status"], problem["code"], problem["field"]) == (status, code, field)
    assert problem["type"] == "https://anycloud.sh/problems/invalid-argument" or status == 404
    assert problem["title"] and problem["detail"] and problem["rule"]
    assert snapshot(world) == before


def test_a_name_taken_is_409(world: App, http: TestClient,
                             callers: dict[str, dict[str, str]]) -> None:
    assert http.post("/v1/node-pools", json=POOL, headers=callers["member"]).status_code == 201
    again = http.post("/v1/node-pools", json=POOL, headers=callers["member"])
    assert again.status_code == 409 and again.json()["field"] == "name"


def test_no_route_and_a_wrong_method_are_problems_too(http: TestClient,
                                                       callers: dict[str, dict[str, str]],
                                                       ) -> None:
    """A 405 names every method of the path in Allow (several routes share one path)."""
    missing = http.get("/v1/no-such-thing", headers=callers["viewer"])
    assert missing.status_code == 404 and missing.json()["code"] == "NOT_FOUND"
    assert missing.headers["content-type"] == "application/problem+json"
    wrong = http.put("/v1/node-pools/cpu", headers=callers["viewer"])
    assert wrong.status_code == 405 and wrong.headers["Allow"] == "DELETE, GET"
    assert (wrong.json()["code"], wrong.json()["field"]) == ("METHOD_NOT_ALLOWED", "method")
    document = http.get("/v1/openapi.json", headers=callers["viewer"]).json()
    answers = document["paths"]["/v1/node-pools"]["post"]["responses"]
    assert list(answers["409"]["content"]) == ["application/problem+json"]
    assert answers["201"]["links"]["GetNodePools"]["parameters"] == {
        "ref": "$response.body#/id"}


def test_an_unexpected_error_is_a_500_with_only_an_error_id(
        world: App, http: TestClient, callers: dict[str, dict[str, str]],
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from automation.api.routes import node_pools

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("secret detail: s3cr3t")

    monkeypatch.setattr(node_pools, "list_node_pools", broken)
    resp = http.get("/v1/node-pools", headers=callers["viewer"])
    assert resp.status_code == 500
    problem = resp.json()
    assert problem["code"] == "INTERNAL" and len(problem["errorId"]) == 12
    assert "s3cr3t" not in resp.text
    assert problem["errorId"] in caplog.text and "s3cr3t" in caplog.text  # logged, with why


def test_if_match_deletes_only_the_version_that_was_read(world: App, http: TestClient,
                                                        callers: dict[str, dict[str, str]]
                                                        ) -> None:
    from datetime import timedelta

    member = callers["member"]
    made = http.post("/v1/node-pools", json=POOL, headers=member).json()
    read = http.get(f"/v1/node-pools/{made['id']}", headers=callers["viewer"])
    etag = read.headers["etag"]
    assert etag.startswith('"') and http.get(f"/v1/node-pools/{made['id']}",
                                             headers=member).headers["etag"] == etag
    # Someone else changes the pool (the control loop records an error, say).
    world.clock.advance(timedelta(seconds=5))  # type: ignore[attr-defined]
    from automation.ledger import schema

    with world.ledger.write() as conn:
        conn.execute(schema.node_pools.update().where(schema.node_pools.c.id == made["id"])
                     .values(last_error="quota", updated_at=world.clock.now()))
    before = snapshot(world)
    stale = http.delete("/v1/node-pools/gpu", headers=member | {"If-Match": etag})
    assert stale.status_code == 412, stale.text
    problem = stale.json()
    assert (problem["code"], problem["field"], problem["value"]) == (
        "PRECONDITION_FAILED", "If-Match", etag)
    assert snapshot(world) == before
    fresh = http.get("/v1/node-pools/gpu", headers=member).headers["etag"]
    assert fresh != etag
    gone = http.delete("/v1/node-pools/gpu", headers=member | {"If-Match": fresh})
    assert gone.status_code == 200 and gone.json()["state"] == "deleting"
    assert gone.headers["etag"] not in (etag, fresh)


def test_a_token_lifetime_beyond_ten_years_is_refused_not_a_500(
        http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    """schemathesis found this: a lifetime no date can hold was an OverflowError (500)."""
    for seconds in (2**56, 3650 * 86400 + 1):
        resp = http.post("/v1/tokens", json={"name": "t", "role": "member",
                                             "expiresInSeconds": seconds},
                         headers=callers["admin"])
        assert resp.status_code == 422 and resp.json()["field"] == "expiresInSeconds"
    ok = http.post("/v1/tokens", json={"name": "t", "role": "member",
                                       "expiresInSeconds": 3650 * 86400},
                   headers=callers["admin"])
    assert ok.status_code == 201, ok.text


def test_no_cluster_registered_is_node_pools_unavailable(
        app: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    """The seed's code for "no ready cluster", whether one is pending or none is registered."""
    from tests.automation.conftest import credential

    credential(app)
    before = snapshot(app)
    resp = http.post("/v1/node-pools", json=POOL, headers=callers["member"])
    assert resp.status_code == 409, resp.text
    problem = resp.json()
    assert (problem["code"], problem["field"]) == ("NODE_POOLS_UNAVAILABLE", "--cluster")
    assert "cluster register" in problem["detail"] and snapshot(app) == before


def test_a_drift_check_is_a_member_post_and_shows_in_status(
        world: App, http: TestClient, callers: dict[str, dict[str, str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """POST /node-pools/{ref}/drift-check runs the server's engine; a viewer may read the
    result (status ``drift``) but not run one. The server's plain mock engine keeps no cloud
    to compare with: the check fails, answered 200 with its error, the pool untouched."""
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")
    made = http.post("/v1/node-pools", json=POOL, headers=callers["member"]).json()
    before = http.get(f"/v1/node-pools/{made['id']}", headers=callers["viewer"]).json()
    assert before["drift"] is None
    refused = http.post(f"/v1/node-pools/{made['id']}/drift-check", headers=callers["viewer"])
    assert refused.status_code == 403
    checked = http.post(f"/v1/node-pools/{made['id']}/drift-check", headers=callers["member"])
    assert checked.status_code == 200, checked.text
    report = checked.json()
    assert (report["engine"], report["source"], report["errorCode"]) == (
        "mock", "simulated cloud", "DRIFT_UNSUPPORTED")
    after = http.get(f"/v1/node-pools/{made['id']}", headers=callers["viewer"]).json()
    assert after["drift"] == report
    assert (after["state"], after["lastError"]) == (before["state"], before["lastError"])
    missing = http.post("/v1/node-pools/ghost/drift-check", headers=callers["member"])
    assert missing.status_code == 404


def test_a_viewer_reads_a_pools_history_anonymous_gets_401(
        world: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    from tests.automation.test_pool_history import seed_history

    pool = seed_history(world)
    path = f"/v1/node-pools/{pool}/history"
    assert http.get(path, headers=callers["none"]).status_code == 401
    read = http.get(path, params={"limit": 2}, headers=callers["viewer"])
    assert read.status_code == 200, read.text
    body = read.json()
    assert body["pool"] == {"id": pool, "name": "gpu"}
    assert [a["id"] for a in body["attempts"]] == ["at-3", "at-2"]
    assert body["attempts"][1]["replaces"] == "at-1" and "joinedAt" in body["attempts"][1]
    assert body["events"][0]["kind"] == "pool_failed"
    assert "203.0.113.10" not in read.text and "k3s-abc" not in read.text
    refused = http.get(path, params={"limit": 501}, headers=callers["viewer"])
    assert refused.status_code == 400 and "limit" in refused.text, refused.text
    assert http.get("/v1/node-pools/nope/history",
                    headers=callers["viewer"]).status_code == 404
