"""Deployments through the API: the record's ETag, and If-Match on start, stop, restart and
delete (412, nothing changed or released, when another client changed it since)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from automation.app import App
from tests.automation.api.conftest import POOL, static_provisioner
from tests.automation.conftest import snapshot


@pytest.fixture
def running(world: App, http: TestClient, callers: dict[str, dict[str, str]],
            monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Deployment ``api`` of project ``web``, running on the server's static provisioner."""
    static_provisioner(monkeypatch, slots=2)
    member = callers["member"]
    assert http.post("/v1/orgs", json={"name": "acme"}, headers=callers["admin"]).is_success
    assert http.post("/v1/projects", json={"name": "web", "org": "acme"},
                     headers=member).is_success
    made = http.post("/v1/deployments", json={"name": "api", "project": "web", "start": True},
                     headers=member)
    assert made.status_code == 201 and made.json()["state"] == "running", made.text
    return member


def _tick(world: App) -> None:
    world.clock.advance(timedelta(seconds=5))  # type: ignore[attr-defined]


def test_if_match_on_every_change_of_a_deployment(world: App, http: TestClient,
                                                  running: dict[str, str]) -> None:
    member = running
    read = http.get("/v1/deployments/api", headers=member)
    etag = read.headers["etag"]
    assert read.json()["health"]["ok"] is True  # the answer adds health; the ETag is not of it
    _tick(world)
    assert http.post("/v1/deployments/api/restart", headers=member).is_success  # someone else
    for method, path in (("POST", "/v1/deployments/api/stop"),
                         ("POST", "/v1/deployments/api/restart"),
                         ("DELETE", "/v1/deployments/api")):
        before = snapshot(world)
        stale = http.request(method, path, headers=member | {"If-Match": etag})
        assert stale.status_code == 412, (path, stale.text)
        assert (stale.json()["code"], stale.json()["field"]) == ("PRECONDITION_FAILED",
                                                                 "If-Match")
        assert snapshot(world) == before, path  # nothing written, nothing released
    fresh = http.get("/v1/deployments/api", headers=member).headers["etag"]
    _tick(world)
    stopped = http.post("/v1/deployments/api/stop", headers=member | {"If-Match": fresh})
    assert stopped.status_code == 200 and stopped.json()["state"] == "stopped"
    now = stopped.headers["etag"]
    assert now == http.get("/v1/deployments/api", headers=member).headers["etag"] != fresh
    started = http.post("/v1/deployments/api/start", headers=member | {"If-Match": now})
    assert started.status_code == 200 and started.json()["state"] == "running"
    assert http.post("/v1/deployments/api/start",
                     headers=member | {"If-Match": now}).status_code == 412
    gone = http.delete("/v1/deployments/api",
                       headers=member | {"If-Match": started.headers["etag"]})
    assert gone.status_code == 200 and gone.json()["state"] == "deleted"
    assert http.delete("/v1/deployments/api", headers=member | {"If-Match": "*"}
                       ).status_code == 404


def test_if_match_on_a_placement(world: App, http: TestClient,
                                 callers: dict[str, dict[str, str]]) -> None:
    member = callers["member"]
    assert http.post("/v1/node-pools", json=POOL, headers=member).status_code == 201
    made = http.post("/v1/deployments", json={"name": "edge", "nodePool": "gpu"},
                     headers=member)
    assert made.status_code == 201, made.text
    etag = http.get("/v1/deployments/edge", headers=member).headers["etag"]
    before = snapshot(world)
    stale = http.delete("/v1/deployments/edge", headers=member | {"If-Match": '"old"'})
    assert stale.status_code == 412 and snapshot(world) == before
    gone = http.delete("/v1/deployments/edge", headers=member | {"If-Match": etag})
    assert gone.status_code == 200, gone.text


def test_if_match_on_the_provisioner_choices(world: App, http: TestClient,
                                             callers: dict[str, dict[str, str]],
                                             running: dict[str, str]) -> None:
    """``sudo`` changes of a project's provisioner or an org's default take If-Match too."""
    admin = callers["admin"]
    for read, change in (("/v1/projects/web", "/v1/sudo/projects/web/provisioner"),
                         ("/v1/orgs/acme", "/v1/sudo/orgs/acme/default-provisioner")):
        etag = http.get(read, headers=callers["viewer"]).headers["etag"]
        _tick(world)
        done = http.post(change, json={"provisioner": "a"}, headers=admin | {"If-Match": etag})
        assert done.status_code == 200, done.text
        assert done.headers["etag"] == http.get(read, headers=admin).headers["etag"] != etag
        before = snapshot(world)
        stale = http.post(change, json={"provisioner": None},
                          headers=admin | {"If-Match": etag})
        assert stale.status_code == 412 and snapshot(world) == before, stale.text


def test_an_answer_that_carries_a_new_token_is_never_cached(
        world: App, http: TestClient, running: dict[str, str],
        callers: dict[str, dict[str, str]]) -> None:
    """The only answers that hold a usable token (a new API token, a runtime's token) say
    ``Cache-Control: no-store``: no browser, proxy or client cache keeps a copy."""
    import os

    from automation.sealing import SealingKey

    world.sealing = SealingKey(os.urandom(32))
    runtime = http.post("/v1/deployments/api/token", headers=running)
    assert runtime.status_code == 200 and runtime.json()["token"], runtime.text
    admin = callers["admin"]
    made = [http.post("/v1/tokens", json={"name": "ci", "role": "member"}, headers=admin),
            http.post("/v1/tokens", json={"name": "cd", "role": "member"},
                      headers=admin | {"Idempotency-Key": "k-1"})]
    for answer in (runtime, *made):
        assert answer.is_success and answer.json()["token"], answer.text
        assert answer.headers.get("cache-control") == "no-store", answer.headers


def test_a_shared_runtimes_token_opens_its_own_deployment_alone(
        world: App, http: TestClient, running: dict[str, str],
        callers: dict[str, dict[str, str]]) -> None:
    """Two orgs' deployments on one static runtime get tokens of the same ``aud`` (the
    runtime's); the verifier tells them apart by ``sub``: a token of one org's deployment is
    refused for the other's."""
    import os

    from automation.auth.runtime_tokens import RuntimeTokenRefused, verify
    from automation.sealing import SealingKey
    from automation.services.tokens import create_token
    from tests.automation.api.conftest import bearer

    world.sealing = SealingKey(os.urandom(32))
    assert http.post("/v1/orgs", json={"name": "rival"}, headers=callers["admin"]).is_success
    rival = bearer(create_token(world, "rival-dev", "member", by="t", org="rival").token)
    assert http.post("/v1/projects", json={"name": "shop", "org": "rival"},
                     headers=rival).is_success
    made = http.post("/v1/deployments", json={"name": "cart", "project": "shop",
                                              "start": True}, headers=rival)
    assert made.status_code == 201 and made.json()["state"] == "running", made.text
    ours = http.post("/v1/deployments/api/token", headers=running).json()
    theirs = http.post("/v1/deployments/cart/token", headers=rival).json()
    assert ours["audience"] == theirs["audience"] == "https://a1.example"
    jwks = http.get("/v1/.well-known/jwks.json").json()
    now = world.clock.now()
    assert verify(theirs["token"], jwks, audience="https://a1.example", now=now,
                  subject=theirs["subject"])["sub"] == theirs["subject"]
    with pytest.raises(RuntimeTokenRefused) as refused:
        verify(theirs["token"], jwks, audience="https://a1.example", now=now,
               subject=ours["subject"])
    assert (refused.value.field, refused.value.value) == ("sub", theirs["subject"])
