"""The broker behind tokens (issue 20): every route by every kind of caller, generated from the
app's route table, and the attack the issue reproduced, as a test. Issue 52: tokens scoped to
an org or a project reach no broker route; a session is its starter's (anyone else but an
admin is told 404); an agent out of its pool is told 404, exactly as for a missing id.

Each denial must change nothing in the ledger; each allowed call must get past the gate (not
401/403/404, and never a 5xx)."""

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
from tests.automation.agentpools.tokens import (
    agent_token,
    bearer,
    member_token,
    scoped_token,
    token_id,
)

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
    member = member_token(ledger, "m", "member")
    session = registry.acquire(POOL, ["sh", "-c", "echo $SECRET"],
                               owner=token_id(ledger, member))
    assert session.agent_id == "pod-a"
    callers: dict[str, dict[str, str]] = {
        "none": {},
        "malformed": bearer("acy_not-a-token"),
        "not bearer": {"Authorization": "Basic dXNlcjpwYXNz"},
        "unknown": bearer("acy_" + "A" * 43),
        "revoked": bearer(_token(ledger, "gone", revoked=True)),
        "expired": bearer(_token(ledger, "old", expires_in=timedelta(seconds=-1))),
        "viewer": bearer(member_token(ledger, "v", "viewer")),
        "member": bearer(member),  # the session's owner
        "other member": bearer(member_token(ledger, "m2", "member")),
        "admin": bearer(member_token(ledger, "a", "admin")),
        "org member": bearer(scoped_token(ledger, "om")),
        "org viewer": bearer(scoped_token(ledger, "ov", "viewer")),
        "project member": bearer(scoped_token(ledger, "pm", project=True)),
        "agent of this pool": bearer(agent_token(ledger, POOL)),
        "agent of another pool": bearer(agent_token(ledger, OTHER)),
    }
    with TestClient(app) as client:
        yield registry, client, {"callers": callers, "session": session.id}
    ledger.dispose()


# What a request names, for the 404s of issue 52: an agent's or a session's id that only its
# pool's agent may learn exists ("agent's id"), or a session only its owner (and admins) may.
AGENT_ID, CLIENT_ID = "agent's id", "client's id"
Request = tuple[str, str, dict[str, Any] | None, frozenset[Access], str | None]


def _requests(session: str) -> list[Request]:
    """One valid request per route (the release route twice: as its agent, as a client)."""
    s = session
    agent_release = {"agentId": "pod-a", "exitCode": 0}
    agent, write = frozenset({Access.AGENT}), frozenset({Access.WRITE})
    return [
        ("POST", "/v1/agents", {"pool": POOL, "agentId": "pod-b"}, agent, None),
        ("POST", "/v1/agents/pod-a/heartbeat", {"busySlots": 1, "running": [s]}, agent,
         AGENT_ID),
        ("GET", "/v1/agents/pod-a/work", None, agent, AGENT_ID),
        ("POST", "/v1/sessions", {"pool": POOL, "command": ["true"]}, write, None),
        ("GET", f"/v1/sessions/{s}", None, write, CLIENT_ID),
        ("POST", f"/v1/sessions/{s}/output",
         {"agentId": "pod-a", "chunks": [{"stream": "stdout", "data": "x"}]}, agent, AGENT_ID),
        ("GET", f"/v1/sessions/{s}/output", None, write, CLIENT_ID),
        ("GET", "/v1/pools/default/cpu", None, frozenset({Access.READ}), None),
        ("GET", "/v1/healthz", None, frozenset(), None),
        ("POST", f"/v1/sessions/{s}/release", {}, write, CLIENT_ID),
        ("POST", f"/v1/sessions/{s}/release", agent_release, agent, AGENT_ID),
        ("DELETE", "/v1/agents/pod-a", None, agent, AGENT_ID),
    ]


SCOPED = ("org member", "org viewer", "project member")


def _expected(caller: str, needs: frozenset[Access], names: str | None) -> int | None:
    """None: allowed (past the gate and the checks); else the status of the refusal."""
    if not needs:
        return None
    roles = {"viewer": {Access.READ}, "member": {Access.READ, Access.WRITE},
             "other member": {Access.READ, Access.WRITE},
             "admin": {Access.READ, Access.WRITE, Access.ADMIN},
             "agent of this pool": {Access.READ, Access.AGENT},
             "agent of another pool": {Access.AGENT}}
    if caller in SCOPED:
        return 403  # the broker is the whole control plane's
    if caller not in roles:
        return 401
    if not needs & roles[caller]:
        return 403
    if (caller, names) in (("agent of another pool", AGENT_ID), ("other member", CLIENT_ID)):
        return 404  # as if it did not exist
    if caller == "agent of another pool":
        return 403  # a pool it named itself (register in it, read its view)
    return None


def test_every_route_has_a_rule() -> None:
    app = create_app(Registry.__new__(Registry), expire_every=None)
    routes = {(m, r.path) for r in app.routes if isinstance(r, APIRoute)
              for m in r.methods or ()}
    assert app.state.route_access == EXPECTED and routes == set(EXPECTED)
    tried = {(m, p) for m, p, _, _, _ in _requests("{session_id}")}
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
    for method, path, body, needs, names in _requests(ctx["session"]):
        for caller, headers in ctx["callers"].items():
            expected = _expected(caller, needs, names)
            if expected is None:
                allowed.append((method, path, body, caller))
                continue
            before = _snapshot(registry.ledger)
            resp = client.request(method, path, json=body, headers=headers)
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
                elif expected == 404 and POOL in resp.text:
                    wrong.append(f"{caller}: {method} {path}: a 404 naming a pool or agent")
    # Allowed calls last (they change the world): past the gate, and never a server error.
    for method, path, body, caller in allowed:
        resp = client.request(method, path, json=body, headers=ctx["callers"][caller])
        if resp.status_code in (401, 403, 404) or resp.status_code >= 500:
            wrong.append(f"{caller}: {method} {path} -> {resp.status_code} {resp.text}")
    assert not wrong, "\n".join(wrong)


def test_the_attack_from_the_issue_fails_and_the_victims_session_is_untouched(
        world: tuple[Registry, TestClient, dict[str, Any]]) -> None:
    """Someone with no token, then someone holding another pool's agent token, tries to join
    the victim's pool, take the victim's command, answer it with forged output and read it."""
    registry, client, ctx = world
    victim = ctx["session"]
    before = registry.session(victim)
    # Out of its pool an agent learns nothing: the ids it names are "not found" (issue 52).
    for who, expected in (("none", [401] * 8),
                          ("agent of another pool", [403, 404, 404, 404, 404, 403, 403, 403])):
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
        assert [r.status_code for r in attempts] == expected, [r.text for r in attempts]
    after = registry.session(victim)
    assert after == before and after.state == "running"
    assert registry.output(victim).chunks == []
    assert [a.id for a in registry.pool_view(POOL).agents] == ["pod-a"]


def _as_missing(resp: Any, real: str, missing: str) -> tuple[int, str, str]:
    return resp.status_code, resp.headers["content-type"], resp.text.replace(real, missing)


def test_out_of_its_pool_an_agent_is_told_404_exactly_as_for_a_missing_id(
        world: tuple[Registry, TestClient, dict[str, Any]]) -> None:
    """Issue 52, item 9: another pool's agent token learned that an agent or session exists
    (403 naming its pool) where a missing one was a 404. Both are now the same 404."""
    registry, client, ctx = world
    headers = ctx["callers"]["agent of another pool"]
    session, gone_session = ctx["session"], "se-000000000000000"
    before = _snapshot(registry.ledger)
    for method, path, body in (
            ("POST", "/v1/agents/{}/heartbeat", {"busySlots": 0}),
            ("GET", "/v1/agents/{}/work", None),
            ("DELETE", "/v1/agents/{}", None)):
        there = client.request(method, path.format("pod-a"), json=body, headers=headers)
        missing = client.request(method, path.format("nobody"), json=body, headers=headers)
        assert there.status_code == 404, there.text
        assert _as_missing(there, "pod-a", "nobody") == _as_missing(missing, "", ""), path
    posts: list[tuple[str, dict[str, Any]]] = [
        ("/v1/sessions/{}/output", {"agentId": "pod-g", "chunks": []}),
        ("/v1/sessions/{}/release", {"agentId": "pod-g", "exitCode": 0})]
    for path, payload in posts:
        there = client.post(path.format(session), json=payload, headers=headers)
        missing = client.post(path.format(gone_session), json=payload, headers=headers)
        assert there.status_code == 404, there.text
        assert _as_missing(there, session, gone_session) == _as_missing(missing, "", "")
        assert POOL not in there.text
    assert _snapshot(registry.ledger) == before


def test_a_session_is_its_starters_and_admins(
        world: tuple[Registry, TestClient, dict[str, Any]]) -> None:
    """Issue 52, item 0: another member reading, or cancelling, someone's session is told
    404, byte for byte what a missing session gets; its starter reads it and cancels it (no
    403), and so may an admin."""
    registry, client, ctx = world
    callers, session, missing = ctx["callers"], ctx["session"], "se-000000000000000"
    mine = client.post("/v1/sessions", json={"pool": POOL, "command": ["true"]},
                       headers=callers["other member"])
    assert mine.status_code == 201, mine.text
    before = _snapshot(registry.ledger)
    for method, path, body in (("GET", "/v1/sessions/{}", None),
                               ("GET", "/v1/sessions/{}/output", None),
                               ("POST", "/v1/sessions/{}/release", {})):
        there = client.request(method, path.format(session), json=body,
                               headers=callers["other member"])
        absent = client.request(method, path.format(missing), json=body,
                                headers=callers["other member"])
        assert there.status_code == 404, there.text
        assert _as_missing(there, session, missing) == _as_missing(absent, "", ""), path
    assert _snapshot(registry.ledger) == before
    assert client.get(f"/v1/sessions/{session}", headers=callers["member"]).status_code == 200
    assert client.get(f"/v1/sessions/{session}/output",
                      headers=callers["admin"]).status_code == 200
    # Its starter cancels its own (the agent is told to stop it at its next heartbeat).
    cancelled = client.post(f"/v1/sessions/{session}/release", json={},
                            headers=callers["member"])
    assert cancelled.status_code == 200, cancelled.text
    assert registry.session(session).cancel_requested_at is not None
    # A session from before owners (none recorded) is the admins' alone.
    old = registry.acquire(POOL, ["true"])
    assert client.get(f"/v1/sessions/{old.id}", headers=callers["member"]).status_code == 404
    assert client.get(f"/v1/sessions/{old.id}", headers=callers["admin"]).status_code == 200


def test_scoped_tokens_reach_no_broker_route(
        world: tuple[Registry, TestClient, dict[str, Any]]) -> None:
    """Issue 52, item 1: AgentPools are the whole control plane's; a member scoped to an org
    (or a project) ran commands on every pool. Every broker route's gate is a fleet gate, and
    the scoped member's session is refused before anything is written."""
    registry, client, ctx = world
    app = client.app
    gates = {(m, r.path): [d.call for d in r.dependant.dependencies
                           if getattr(d.call, "access", None) is not None]
             for r in app.routes if isinstance(r, APIRoute)  # type: ignore[attr-defined]
             for m in r.methods or () if (m, r.path) in EXPECTED and r.path != "/v1/healthz"}
    assert gates and all(getattr(g[0], "fleet", False) for g in gates.values()), gates
    before = _snapshot(registry.ledger)
    for who in SCOPED:
        resp = client.post("/v1/sessions", json={"pool": POOL, "command": ["id"]},
                           headers=ctx["callers"][who])
        assert resp.status_code == 403, resp.text
        assert resp.json()["field"] == "scope" and "whole control plane" in resp.text
    assert _snapshot(registry.ledger) == before
