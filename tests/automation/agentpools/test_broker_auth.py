"""The broker behind tokens (issue 20): every route by every kind of caller, generated from the
app's route table, and the attack the issue reproduced, as a test.

Each denial must change nothing in the ledger; each allowed call must get past the gate (not
401/403, and never a 5xx)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from automation.agentpools.registry import Registry
from automation.api.app import create_api
from automation.api.broker import Broker, create_app
from automation.app import App
from automation.auth import tokens
from automation.auth.roles import Access
from automation.clock import SystemClock
from automation.ledger import open_ledger, schema
from automation.ledger.db import Ledger
from tests.automation.agentpools.tokens import agent_token, bearer, member_token

POOL = "default/cpu"
OTHER = "default/gpu"


def _snapshot(ledger: Ledger) -> dict[str, list[Any]]:
    with ledger.read() as conn:
        return {t.name: [tuple(r) for r in conn.execute(
            sa.select(t).order_by(*t.primary_key.columns)).all()]
            for t in schema.metadata.sorted_tables}


def _token(ledger: Ledger, name: str, *, expires_in: timedelta | None = None,
           revoked: bool = False) -> str:
    now = SystemClock().now()
    with ledger.write() as conn:
        token, row = tokens.issue(conn, name=name, role="member", scope=None,
                                  expires_at=now + expires_in if expires_in else None,
                                  created_by="test", now=now - timedelta(hours=1))
        if revoked:
            tokens.revoke(conn, row["id"], by="test", now=now)
    return token


# Who may call each route, written out: a new route, or a rule changed, is a conscious edit.
# A frozenset: any of these (the agent's pool is checked by the handler).
EXPECTED: dict[tuple[str, str], Access | frozenset[Access] | str] = {
    ("GET", "/v1/healthz"): "public",
    ("POST", "/v1/agents"): Access.AGENT,
    ("POST", "/v1/agents/{agent_id}/heartbeat"): Access.AGENT,
    ("GET", "/v1/agents/{agent_id}/work"): Access.AGENT,
    ("DELETE", "/v1/agents/{agent_id}"): Access.AGENT,
    ("POST", "/v1/sessions"): Access.WRITE,
    ("GET", "/v1/sessions/{session_id}"): Access.WRITE,
    ("POST", "/v1/sessions/{session_id}/output"): Access.AGENT,
    ("GET", "/v1/sessions/{session_id}/output"): Access.WRITE,
    ("POST", "/v1/sessions/{session_id}/release"): frozenset({Access.AGENT, Access.WRITE}),
    ("GET", "/v1/pools/{namespace}/{name}"): Access.READ,
}


@pytest.fixture(params=["broker", "api"])
def world(request: pytest.FixtureRequest,
          ledger_url: str) -> Iterator[tuple[Registry, TestClient, dict[str, Any]]]:
    """POOL with agent pod-a registered and one session running on it; a caller of each kind.
    The broker on its own, and the same routes served by the API."""
    ledger = open_ledger(ledger_url)
    registry = Registry(ledger)
    settings: dict[str, Any] = {"expire_every": None, "poll_interval": 0.05}
    app = create_app(registry, **settings) if request.param == "broker" else \
        create_api(App(ledger=ledger), limiter=None, broker=Broker(registry, **settings))
    registry.register(POOL, "pod-a", "pod-a", 2)
    registry.register(OTHER, "pod-g", "pod-g", 1)
    session = registry.acquire(POOL, ["sh", "-c", "echo $SECRET"])
    assert session.agent_id == "pod-a"
    callers: dict[str, dict[str, str]] = {
        "none": {},
        "malformed": bearer("acy_not-a-token"),
        "not bearer": {"Authorization": "Basic dXNlcjpwYXNz"},
        "unknown": bearer("acy_" + "A" * 43),
        "revoked": bearer(_token(ledger, "gone", revoked=True)),
        "expired": bearer(_token(ledger, "old", expires_in=timedelta(seconds=-1))),
        "viewer": bearer(member_token(ledger, "v", "viewer")),
        "member": bearer(member_token(ledger, "m", "member")),
        "admin": bearer(member_token(ledger, "a", "admin")),
        "agent of this pool": bearer(agent_token(ledger, POOL)),
        "agent of another pool": bearer(agent_token(ledger, OTHER)),
    }
    with TestClient(app) as client:
        yield registry, client, {"callers": callers, "session": session.id}
    ledger.dispose()


def _requests(session: str) -> list[tuple[str, str, dict[str, Any] | None, frozenset[Access]]]:
    """One valid request per route (the release route twice: as its agent, as a client)."""
    s = session
    agent_release = {"agentId": "pod-a", "exitCode": 0}
    return [
        ("POST", "/v1/agents", {"pool": POOL, "agentId": "pod-b"}, frozenset({Access.AGENT})),
        ("POST", "/v1/agents/pod-a/heartbeat", {"busySlots": 1, "running": [s]},
         frozenset({Access.AGENT})),
        ("GET", "/v1/agents/pod-a/work", None, frozenset({Access.AGENT})),
        ("POST", "/v1/sessions", {"pool": POOL, "command": ["true"]},
         frozenset({Access.WRITE})),
        ("GET", f"/v1/sessions/{s}", None, frozenset({Access.WRITE})),
        ("POST", f"/v1/sessions/{s}/output",
         {"agentId": "pod-a", "chunks": [{"stream": "stdout", "data": "x"}]},
         frozenset({Access.AGENT})),
        ("GET", f"/v1/sessions/{s}/output", None, frozenset({Access.WRITE})),
        ("GET", "/v1/pools/default/cpu", None, frozenset({Access.READ})),
        ("GET", "/v1/healthz", None, frozenset()),
        ("POST", f"/v1/sessions/{s}/release", {}, frozenset({Access.WRITE})),
        ("POST", f"/v1/sessions/{s}/release", agent_release, frozenset({Access.AGENT})),
        ("DELETE", "/v1/agents/pod-a", None, frozenset({Access.AGENT})),
    ]


def _may(caller: str, needs: frozenset[Access]) -> bool | None:
    """True: allowed; False: 403; None: 401 (no valid token)."""
    if not needs:
        return True
    roles = {"viewer": {Access.READ}, "member": {Access.READ, Access.WRITE},
             "admin": {Access.READ, Access.WRITE, Access.ADMIN},
             "agent of this pool": {Access.READ, Access.AGENT}, "agent of another pool": set()}
    if caller not in roles:
        return None
    return bool(needs & roles[caller])


def test_every_route_has_a_rule() -> None:
    app = create_app(Registry.__new__(Registry), expire_every=None)
    routes = {(m, r.path) for r in app.routes if isinstance(r, APIRoute) for m in r.methods}
    assert app.state.route_access == EXPECTED and routes == set(EXPECTED)
    tried = {(m, p) for m, p, _, _ in _requests("{session_id}")}
    named = {(m, p.replace("pod-a", "{agent_id}").replace("default/cpu", "{namespace}/{name}"))
             for m, p in tried}
    assert named == set(EXPECTED), "the matrix below must try every route"
    # The API serves the same routes under the same rules (its own health probe aside).
    api = create_api(App(ledger=Ledger("sqlite://")), limiter=None)
    assert {k: v for k, v in api.state.route_access.items() if k in EXPECTED} == EXPECTED


def test_auth_matrix_every_route_every_caller(
        world: tuple[Registry, TestClient, dict[str, Any]]) -> None:
    registry, client, ctx = world
    wrong: list[str] = []
    allowed: list[tuple[str, str, dict[str, Any] | None, str]] = []
    for method, path, body, needs in _requests(ctx["session"]):
        for caller, headers in ctx["callers"].items():
            may = _may(caller, needs)
            if may:
                allowed.append((method, path, body, caller))
                continue
            before = _snapshot(registry.ledger)
            resp = client.request(method, path, json=body, headers=headers)
            expected = 401 if may is None else 403
            if resp.status_code != expected:
                wrong.append(f"{caller}: {method} {path} -> {resp.status_code} {resp.text}")
            elif _snapshot(registry.ledger) != before:
                wrong.append(f"{caller}: {method} {path} was refused but changed the ledger")
            elif expected == 401 and resp.headers.get("www-authenticate") is None:
                wrong.append(f"{caller}: {method} {path}: 401 without WWW-Authenticate")
            else:
                err = resp.json()
                if not (err["code"] and err["detail"] and err["rule"]
                        and resp.headers["content-type"] == "application/problem+json"):
                    wrong.append(f"{caller}: {method} {path}: refusal without code/rule")
    # Allowed calls last (they change the world): past the gate, and never a server error.
    for method, path, body, caller in allowed:
        resp = client.request(method, path, json=body, headers=ctx["callers"][caller])
        if resp.status_code in (401, 403) or resp.status_code >= 500:
            wrong.append(f"{caller}: {method} {path} -> {resp.status_code} {resp.text}")
    assert not wrong, "\n".join(wrong)


def test_the_attack_from_the_issue_fails_and_the_victims_session_is_untouched(
        world: tuple[Registry, TestClient, dict[str, Any]]) -> None:
    """Someone with no token, then someone holding another pool's agent token, tries to join
    the victim's pool, take the victim's command, answer it with forged output and read it."""
    registry, client, ctx = world
    victim = ctx["session"]
    before = registry.session(victim)
    for who, expected in (("none", 401), ("agent of another pool", 403)):
        headers = ctx["callers"][who]
        attempts = [
            client.post("/v1/agents", json={"pool": POOL, "agentId": "evil"}, headers=headers),
            client.get("/v1/agents/pod-a/work", headers=headers),
            client.post("/v1/agents/pod-a/heartbeat", json={"busySlots": 0}, headers=headers),
            client.post(f"/v1/sessions/{victim}/output", headers=headers, json={
                "agentId": "pod-a", "chunks": [{"stream": "stdout", "data": "forged"}]}),
            client.post(f"/v1/sessions/{victim}/release", headers=headers,
                        json={"agentId": "pod-a", "exitCode": 0}),
            client.get(f"/v1/sessions/{victim}", headers=headers),
            client.get(f"/v1/sessions/{victim}/output", headers=headers),
            client.get("/v1/pools/default/cpu", headers=headers),
        ]
        assert [r.status_code for r in attempts] == [expected] * len(attempts), \
            [r.text for r in attempts]
    after = registry.session(victim)
    assert after == before and after.state == "running"
    assert registry.output(victim).chunks == []
    assert [a.id for a in registry.pool_view(POOL).agents] == ["pod-a"]
