"""The tenant matrix (issue 52): every route the running app mounts that names something in its
path (a record, an agent, a session, an AgentPool, a dashboard page), by every kind of caller an
operator hands a token to, on every kind of target. A route with a path parameter the matrix
cannot place fails the suite, so a new route is in the matrix without being listed.

What each caller gets is one table below (``SEES``), reviewed as data. Beyond the table, two
rules hold for every route and caller: a target the caller may not see is answered exactly as
one that does not exist (the same status, and the same body but for the reference asked), and
no refusal writes anything."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient

from automation.agentpools.registry import Registry
from automation.app import App
from automation.auth import tokens
from automation.auth.roles import Access
from automation.ledger import schema
from automation.services.tokens import create_token
from tests.automation.api.conftest import bearer, static_provisioner
from tests.automation.api.tenants import ORGS, make_tenant
from tests.automation.conftest import snapshot

OK = "ok"  # found: a cheap read answers 200, a change with a stale If-Match 412
# The targets of a route whose parameter names an org's record.
RECORD_TARGETS = ("alpha by name", "alpha by id", "missing name", "near-miss id",
                  "beta by name")
# The targets of the agent broker's routes: pool A's (agent, session or AgentPool), pool B's.
BROKER_TARGETS = ("pool A's", "missing", "near-miss id", "pool B's")

# What each caller gets, per target, on a route its role opens. A number: that status,
# whatever the target. Reviewed as data: a change of policy is an edit here.
SEES: dict[str, dict[str, tuple[Any, ...] | int]] = {
    # caller                 record routes (RECORD_TARGETS)
    "admin":                {"record": (OK, OK, 404, 404, OK)},
    "alpha-member":         {"record": (OK, OK, 404, 404, 404)},
    "alpha-viewer":         {"record": (OK, OK, 404, 404, 404)},
    "beta-member":          {"record": (404, 404, 404, 404, OK)},
    "beta-viewer":          {"record": (404, 404, 404, 404, OK)},
    # scoped to project alpha-web: alpha's clusters, credentials and pools, its own project
    # and that project's deployments (the targets here are all of those)
    "alpha-project-member": {"record": (OK, OK, 404, 404, 404)},
    "agent-a":              {"record": 403},
    "agent-b":              {"record": 403},
    "anonymous":            {"record": 401},
    "made-up":              {"record": 401},
}
# The broker's routes (BROKER_TARGETS): AgentPools are the whole control plane's, so a token
# scoped to an org reaches none of them (403 whatever the target), and an agent reaches only
# its own pool's, answering for another pool's exactly as for a missing one.
BROKER_SEES: dict[str, dict[Access, tuple[Any, ...] | int]] = {
    # (an AgentPool the broker has heard nothing of reads as an empty one: the operator may
    # not have recorded a pool just applied)
    "admin":                {Access.AGENT: 403, Access.WRITE: (OK, 404, 404, OK),
                             Access.READ: (OK, OK, OK, OK)},
    "alpha-member":         {Access.AGENT: 403, Access.WRITE: 403, Access.READ: 403},
    "alpha-viewer":         {Access.AGENT: 403, Access.WRITE: 403, Access.READ: 403},
    "beta-member":          {Access.AGENT: 403, Access.WRITE: 403, Access.READ: 403},
    "beta-viewer":          {Access.AGENT: 403, Access.WRITE: 403, Access.READ: 403},
    "alpha-project-member": {Access.AGENT: 403, Access.WRITE: 403, Access.READ: 403},
    "agent-a":              {Access.AGENT: (OK, 404, 404, 404), Access.WRITE: 403,
                             Access.READ: (OK, 403, 403, 403)},
    "agent-b":              {Access.AGENT: (404, 404, 404, OK), Access.WRITE: 403,
                             Access.READ: (403, 403, 403, OK)},
    "anonymous":            {Access.AGENT: 401, Access.WRITE: 401, Access.READ: 401},
    "made-up":              {Access.AGENT: 401, Access.WRITE: 401, Access.READ: 401},
}
# Where a route differs from its family's row above.
OVERRIDES: dict[tuple[str, str, str], tuple[Any, ...]] = {
    # A project scope is about deployments: its member reads the org's pools but deletes
    # none (a pool serves every project of the org); another org's is still a 404.
    ("alpha-project-member", "DELETE", "/v1/node-pools/{ref}"): (403, 403, 404, 404, 404),
}
ROLE = {"admin": "admin", "alpha-member": "member", "alpha-viewer": "viewer",
        "beta-member": "member", "beta-viewer": "viewer", "alpha-project-member": "member"}
OPENS = {"viewer": {Access.READ}, "member": {Access.READ, Access.WRITE},
         "admin": {Access.READ, Access.WRITE, Access.ADMIN}}

# What a record route's {ref} names: the longest prefix of its path listed here.
KIND_OF = {"/v1/node-pools/": "pool", "/v1/clusters/": "cluster",
           "/v1/credentials/": "credential", "/v1/orgs/": "org", "/v1/projects/": "project",
           "/v1/deployments/": "deployment", "/v1/sudo/projects/": "project",
           "/v1/sudo/orgs/": "org", "/ui/pools/": "pool", "/ui/fragments/pools/": "pool"}
# What a broker route's parameter names.
BROKER_PARAMS = {"{agent_id}": "agent", "{session_id}": "session",
                 "{namespace}/{name}": "agentpool"}
# Paths whose parameter names no record (a static file, a token by name: admin-only routes
# with no tenant in them, tried by tests/automation/api/test_api_auth.py).
NOT_RECORDS = {"/ui/static/{name}", "/v1/tokens/{name:path}", "/v1/catalog/{vm_type}"}
# Routes tried for real when the target is found (the rest run an engine or change it).
CHEAP = {("GET", p) for p in (
    "/v1/node-pools/{ref}", "/v1/node-pools/{ref}/history", "/v1/clusters/{ref}",
    "/v1/credentials/{ref}", "/v1/orgs/{ref}", "/v1/projects/{ref}", "/v1/deployments/{ref}",
    "/ui/pools/{ref}", "/ui/fragments/pools/{ref}", "/v1/sessions/{session_id}",
    "/v1/sessions/{session_id}/output", "/v1/pools/{namespace}/{name}")}
# Routes that take If-Match but are not tried on a found record: a new kubeconfig is read
# (and needs the secrets key) before the record is compared (tests/automation/api/
# test_api_clusters.py tries it).
NOT_TRIED_FOUND = {("PUT", "/v1/clusters/{ref}/kubeconfig")}
POOL_A, POOL_B = "default/pool-a", "default/pool-b"


def _near_miss(an_id: str) -> str:
    """``an_id`` with its last character changed: the shape of an id, naming nothing."""
    return an_id[:-1] + ("0" if an_id[-1] != "0" else "1")


@pytest.fixture
def world(app: App, http: TestClient, callers: dict[str, dict[str, str]], kubeconfig: Any,
          monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Orgs alpha and beta with one of every record; AgentPools A and B, each with an agent
    and a session; a token of every kind of caller."""
    static_provisioner(monkeypatch, slots=8)
    admin = callers["admin"]
    names = {org: make_tenant(app, http, admin, org, kubeconfig) for org in ORGS}
    ids = {org: _ids(http, admin, names[org]) for org in ORGS}
    registry = Registry(app.ledger, app.clock)
    now = app.clock.now()
    with app.ledger.write() as conn:  # the operator's record of the two AgentPools
        for pool in (POOL_A, POOL_B):
            conn.execute(schema.agent_pools.insert().values(
                pool=pool, uid=f"uid-{pool[-1]}", state="open", opened_at=now,
                observed_at=now))
    agents = {pool: registry.register(pool, f"agent-{pool[-1]}", f"agent-{pool[-1]}", 2).id
              for pool in (POOL_A, POOL_B)}
    sessions = {pool: registry.acquire(pool, ["true"]).id for pool in (POOL_A, POOL_B)}
    # Token names say nothing of the org (a refusal names the token, not what was asked).
    made = {
        f"{org}-{role}": bearer(create_token(app, f"t{n}", role, by="test", org=org).token)
        for n, (org, role) in enumerate((("alpha", "member"), ("alpha", "viewer"),
                                         ("beta", "member"), ("beta", "viewer")))}
    made["alpha-project-member"] = bearer(create_token(
        app, "t9", "member", by="test", project="alpha-web").token)
    for pool, caller in ((POOL_A, "agent-a"), (POOL_B, "agent-b")):
        made[caller] = bearer(tokens.mint_agent_token(app.ledger, pool, by="test", now=now))
    return {"names": names, "ids": ids, "agents": agents, "sessions": sessions,
            "callers": {**made, "admin": admin, "anonymous": {},
                        "made-up": bearer("acy_" + "Q" * 43)}}


def _ids(http: TestClient, admin: dict[str, str], names: dict[str, str]) -> dict[str, str]:
    """The id of each of ``names``' records, as an admin reads it."""
    paths = {"pool": "node-pools", "cluster": "clusters", "credential": "credentials",
             "org": "orgs", "project": "projects", "deployment": "deployments"}
    return {kind: http.get(f"/v1/{paths[kind]}/{names[kind]}", headers=admin).json()["id"]
            for kind in paths}


def _record_targets(world: dict[str, Any], kind: str) -> dict[str, str]:
    names, ids = world["names"], world["ids"]
    return {"alpha by name": names["alpha"][kind], "alpha by id": ids["alpha"][kind],
            "missing name": f"no-such-{kind}", "near-miss id": _near_miss(ids["alpha"][kind]),
            "beta by name": names["beta"][kind]}


def _broker_targets(world: dict[str, Any], kind: str) -> dict[str, str]:
    if kind == "agentpool":
        return {"pool A's": POOL_A, "missing": "default/no-such-pool",
                "near-miss id": POOL_A[:-1] + "c", "pool B's": POOL_B}
    mine = world["agents" if kind == "agent" else "sessions"]
    return {"pool A's": mine[POOL_A], "missing": f"no-such-{kind}",
            "near-miss id": _near_miss(mine[POOL_A]), "pool B's": mine[POOL_B]}


def _place(path: str) -> tuple[str, str, str]:
    """(the parameter's text in ``path``, 'record' or 'broker', the kind it names)."""
    if "{ref}" in path:
        found = [prefix for prefix in KIND_OF if path.startswith(prefix)]
        assert found, f"{path} names a record: say its kind in KIND_OF"
        return "{ref}", "record", KIND_OF[max(found, key=len)]
    for param, kind in BROKER_PARAMS.items():
        if param in path:
            return param, "broker", kind
    raise AssertionError(f"{path}: a path parameter the tenant matrix cannot place: add it to "
                         "KIND_OF, BROKER_PARAMS or NOT_RECORDS")


def _expected(caller: str, method: str, path: str, access: Any, family: str,
              target_index: int) -> Any:
    if (caller, method, path) in OVERRIDES:
        return OVERRIDES[caller, method, path][target_index]
    if family == "record":
        row = SEES[caller]["record"]
        if caller in ROLE:
            needs = access if isinstance(access, frozenset) else {access}
            if not needs & OPENS[ROLE[caller]]:
                return 403
    else:
        needs = access if isinstance(access, frozenset) else frozenset({access})
        # A route open to agents and members (release): tried as the agent for agents.
        key = Access.AGENT if Access.AGENT in needs and caller.startswith("agent") else (
            Access.WRITE if Access.WRITE in needs else next(iter(needs)))
        row = BROKER_SEES[caller][key]
    return row if isinstance(row, int) else row[target_index]


@pytest.mark.parametrize("ledger_url", ["sqlite"], indirect=True)  # both: the property
def test_every_route_that_names_something_by_every_caller(
        app: App, http: TestClient, api: Any, world: dict[str, Any]) -> None:
    if_match = {(m.upper(), p) for p, ops in api.openapi()["paths"].items()
                for m, op in ops.items()
                if any(x.get("name", "").lower() == "if-match"
                       for x in op.get("parameters", []))}
    wrong: list[str] = []
    tried = 0
    for (method, path), access in sorted(api.state.route_access.items()):
        if "{" not in path or path in NOT_RECORDS:
            continue
        param, family, kind = _place(path)
        targets = (_record_targets(world, kind) if family == "record"
                   else _broker_targets(world, kind))
        for caller, headers in world["callers"].items():
            plan = [(target, ref, _expected(caller, method, path, access, family, index))
                    for index, (target, ref) in enumerate(targets.items())]
            answers: dict[str, tuple[Any, str]] = {}
            before = snapshot(app)
            for target, ref, expected in plan:
                if expected == OK:
                    continue
                resp = _send(http, method, path.replace(param, ref), headers, world, caller)
                tried += 1
                if _status(path, resp) != expected:
                    wrong.append(f"{caller}: {method} {path} [{target}] -> {resp.status_code}"
                                 f", expected {expected}: {resp.text[:300]}")
                answers[target] = (expected, _masked(resp.text, ref))
            if answers and snapshot(app) != before:
                wrong.append(f"{caller}: {method} {path}: refused, yet the ledger changed")
            # Whatever a caller may not see is answered as what does not exist: the same
            # refusal, word for word but the reference asked.
            if len(set(answers.values())) > len({e for e, _ in answers.values()}):
                wrong.append(f"{caller}: {method} {path}: refusals differ by target: "
                             f"{json.dumps(answers)[:600]}")
            for target, ref, expected in plan:
                if expected != OK:
                    continue
                if (method, path) in CHEAP:
                    expected, sent = 200, headers
                elif (method, path) in if_match - NOT_TRIED_FOUND:  # a stale If-Match
                    expected, sent = 412, {**headers, "If-Match": '"stale"'}
                else:
                    continue  # it would run an engine or change the record
                resp = _send(http, method, path.replace(param, ref), sent, world, caller)
                tried += 1
                if _status(path, resp) != expected:
                    wrong.append(f"{caller}: {method} {path} [{target}] -> {resp.status_code}"
                                 f", expected {expected}: {resp.text[:300]}")
    assert tried > 1000 and not wrong, f"{len(wrong)} wrong:\n" + "\n".join(wrong[:60])


def _send(http: TestClient, method: str, url: str, headers: dict[str, str],
          world: dict[str, Any], caller: str) -> Any:
    body = _body(url, world, caller) if method in ("POST", "PUT") else None
    return http.request(method, url, headers=headers, json=body, follow_redirects=False)


def _body(url: str, world: dict[str, Any], caller: str) -> dict[str, Any]:
    """A body of the right shape, so that what answers is the route's lookup, not its
    validation. An agent's calls name pool A's agent (the handler checks its pool); anyone
    else's release is a client's cancel."""
    agent = world["agents"][POOL_A]
    as_agent = caller.startswith("agent")
    return {"heartbeat": {"busySlots": 0},
            "output": {"agentId": agent, "chunks": [{"stream": "stdout", "data": "x"}]},
            "release": {"agentId": agent, "exitCode": 0} if as_agent else {},
            "move": {"org": "alpha"},
            "rotate": {"secret": {"accessKeyId": "AKIAEXAMPLE", "secretAccessKey": "x" * 40}},
            "kubeconfig": {"kubeconfig": "apiVersion: v1\nkind: Config\n"},
            "provisioner": {"provisioner": "a"}, "default-provisioner": {"provisioner": "a"},
            }.get(url.rsplit("/", 1)[-1], {})


def _status(path: str, resp: Any) -> int:
    """The dashboard sends a browser without a valid session to its log-in page: a 401."""
    if path.startswith("/ui/") and resp.status_code == 303 and \
            resp.headers.get("location", "").endswith("/ui/login"):
        return 401
    return int(resp.status_code)


def _masked(text: str, ref: str) -> str:
    """An answer with the reference asked (and the error id of a 500) masked out."""
    return re.sub(r'"errorId":"[0-9a-f]+"', "", text.replace(json.dumps(ref)[1:-1], "<ref>"))
