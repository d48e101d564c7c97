"""Idempotency-Key on the API's POSTs: a retried create creates once, across clients too."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.testclient import TestClient

from automation.app import App
from automation.ledger import schema
from automation.serving import ServerThread
from tests.automation.api.conftest import POOL
from tests.automation.conftest import snapshot


def pools(app: App) -> list[str]:
    with app.ledger.read() as conn:
        return list(conn.execute(sa.select(schema.node_pools.c.name)).scalars())


def keyed(headers: dict[str, str], key: str) -> dict[str, str]:
    return headers | {"Idempotency-Key": key}


def test_a_retry_with_the_same_key_creates_once(world: App, http: TestClient,
                                                callers: dict[str, dict[str, str]]) -> None:
    headers = keyed(callers["member"], "create-gpu-1")
    first = http.post("/v1/node-pools", json=POOL, headers=headers)
    again = http.post("/v1/node-pools", json=POOL, headers=headers)
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json() and again.headers["idempotency-replayed"] == "true"
    assert "idempotency-replayed" not in first.headers
    assert pools(world) == ["gpu"]


def test_the_same_key_with_another_body_is_422_and_writes_nothing(
        world: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    headers = keyed(callers["member"], "k1")
    assert http.post("/v1/node-pools", json=POOL, headers=headers).status_code == 201
    before = snapshot(world)
    other = http.post("/v1/node-pools", json=POOL | {"name": "cpu"}, headers=headers)
    assert other.status_code == 422 and other.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    assert snapshot(world) == before


def test_a_failed_request_keeps_no_answer(world: App, http: TestClient,
                                          callers: dict[str, dict[str, str]]) -> None:
    headers = keyed(callers["member"], "k2")
    bad = POOL | {"credentials": "nobody"}
    assert http.post("/v1/node-pools", json=bad, headers=headers).status_code == 404
    # Nothing kept: the same key may carry the corrected request.
    assert http.post("/v1/node-pools", json=POOL, headers=headers).status_code == 201
    assert pools(world) == ["gpu"]


def test_keys_belong_to_their_token(world: App, http: TestClient,
                                    callers: dict[str, dict[str, str]]) -> None:
    assert http.post("/v1/node-pools", json=POOL,
                     headers=keyed(callers["member"], "same")).status_code == 201
    # Another token's request with the same key runs for itself (and finds the name taken).
    theirs = http.post("/v1/node-pools", json=POOL, headers=keyed(callers["admin"], "same"))
    assert theirs.status_code == 409 and theirs.json()["field"] == "name"


def test_answers_are_kept_a_day(world: App, http: TestClient,
                                callers: dict[str, dict[str, str]]) -> None:
    headers = keyed(callers["member"], "day")
    assert http.post("/v1/node-pools", json=POOL, headers=headers).status_code == 201
    world.clock.advance(timedelta(hours=24, seconds=1))  # type: ignore[attr-defined]
    late = http.post("/v1/node-pools", json=POOL, headers=headers)
    assert late.status_code == 409  # run again: the pool exists


def test_a_new_token_is_never_replayed(world: App, http: TestClient,
                                       callers: dict[str, dict[str, str]]) -> None:
    headers = keyed(callers["admin"], "tok")
    made = http.post("/v1/tokens", json={"name": "ci", "role": "member"}, headers=headers)
    assert made.status_code == 201
    again = http.post("/v1/tokens", json={"name": "ci", "role": "member"}, headers=headers)
    assert again.status_code == 409 and "shown only" in again.json()["detail"]
    assert made.json()["token"] not in again.text
    with world.ledger.read() as conn:
        kept = conn.execute(sa.select(schema.idempotency_keys.c.response)).scalars().all()
    assert kept == [None]


@pytest.mark.parametrize("key", ["", "has space", "x" * 256])
def test_a_malformed_key_is_400(world: App, http: TestClient,
                                callers: dict[str, dict[str, str]], key: str) -> None:
    resp = http.post("/v1/node-pools", json=POOL, headers=keyed(callers["member"], key))
    assert resp.status_code == 400 and resp.json()["field"] == "Idempotency-Key"
    assert pools(world) == []


def test_two_clients_racing_with_one_key_create_once(world: App, api: FastAPI,
                                                     callers: dict[str, dict[str, str]]
                                                     ) -> None:
    import httpx2

    server = ServerThread(api, "127.0.0.1:0")
    answers: list[httpx2.Response] = []
    gate = threading.Barrier(4)

    def client() -> None:
        with httpx2.Client(base_url=server.url) as http:
            gate.wait()
            answers.append(http.post("/v1/node-pools", json=POOL,
                                     headers=keyed(callers["member"], "race")))

    threads = [threading.Thread(target=client) for _ in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        server.stop()
    codes = sorted(a.status_code for a in answers)
    assert pools(world) == ["gpu"], codes
    assert 201 in codes and set(codes) <= {201, 409}, [a.text for a in answers]
    for a in answers:
        if a.status_code == 409:
            assert a.json()["code"] == "IDEMPOTENCY_KEY_IN_USE"


def test_a_key_is_bound_to_the_path_not_the_route(app: App, http: TestClient,
                                                   callers: dict[str, dict[str, str]]) -> None:
    """The same key and body on another record's rotate runs for that record: it is not
    ``rot1``'s answer replayed (which left ``rot2`` unrotated)."""
    from automation.sealing import SealingKey
    from tests.automation.api.test_api_credentials import AWS, AWS_SECRET

    app.sealing = SealingKey(bytes(range(32)))
    admin = callers["admin"]
    for name in ("rot1", "rot2"):
        assert http.post("/v1/credentials", json=AWS | {"name": name},
                         headers=admin).status_code == 201
    body = {"secret": {"accessKeyId": "AKIAIOSFODNN7EXAMPL2", "secretAccessKey": AWS_SECRET[::-1]}}
    answers = {name: http.post(f"/v1/credentials/{name}/rotate", json=body,
                               headers=keyed(admin, "rotate-1")) for name in ("rot1", "rot2")}
    for name, answer in answers.items():
        assert answer.status_code == 200, answer.text
        assert "idempotency-replayed" not in answer.headers
        assert answer.json()["name"] == name and answer.json()["secret"]["rotatedAt"]
    again = http.post("/v1/credentials/rot2/rotate", json=body, headers=keyed(admin, "rotate-1"))
    assert again.headers["idempotency-replayed"] == "true" and again.json()["name"] == "rot2"
    with app.ledger.read() as conn:
        routes = set(conn.execute(sa.select(schema.idempotency_keys.c.route)).scalars())
    assert routes == {"POST /v1/credentials/rot1/rotate", "POST /v1/credentials/rot2/rotate"}


def test_a_path_the_ledger_cannot_hold_is_held_by_its_digest(
        app: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    """A path that does not fit the route column (or holds a NUL, which PostgreSQL's text
    cannot) still claims its key, and answers as it would without one."""
    from automation.sealing import SealingKey
    from tests.automation.api.test_api_credentials import AWS

    app.sealing = SealingKey(bytes(range(32)))
    for ref in ("x" * 300, "a%00b"):
        answer = http.post(f"/v1/credentials/{ref}/rotate", json={"secret": AWS["secret"]},
                           headers=keyed(callers["admin"], "long"))
        assert answer.status_code == 404, answer.text
