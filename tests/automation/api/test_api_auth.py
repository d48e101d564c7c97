"""Every API route by every kind of caller, generated from the app's route table: a new
route is in the matrix without being listed, and one without a gate does not start."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from automation.api.security import RouteAccess, route_access
from automation.app import App
from automation.auth.roles import Access
from tests.automation.agentpools.test_broker_auth import EXPECTED as BROKER_EXPECTED
from tests.automation.conftest import snapshot

BAD = ("none", "malformed", "not bearer", "unknown", "revoked", "expired")
HAS = {"viewer": {Access.READ}, "member": {Access.READ, Access.WRITE},
       "admin": {Access.READ, Access.WRITE, Access.ADMIN}, "agent": set()}


def _expected(caller: str, access: RouteAccess) -> int | bool | None:
    """401, 403, None (past the gate), or False: an agent let through to a handler that
    checks the pool concerned (tests/automation/agentpools/test_broker_auth.py tries those
    with agents of that pool and of another)."""
    if access == "public":
        return None
    if caller in BAD:
        return 401
    needs = access if isinstance(access, frozenset) else {access}
    if caller == "agent" and Access.AGENT in needs:
        return False
    return None if needs & HAS[caller] else 403


def test_auth_matrix_every_route_every_caller(api: FastAPI, http: TestClient, app: App,
                                              callers: dict[str, dict[str, str]]) -> None:
    table = api.state.route_access
    assert table, "no routes?"
    wrong: list[str] = []
    allowed: list[tuple[str, str, dict[str, str]]] = []
    for (method, path), access in sorted(table.items()):
        if path.startswith("/ui/"):
            # The dashboard sends a browser to its log-in page rather than answering
            # problem+json; tests/automation/ui/test_ui_http.py tries it with every caller.
            continue
        url = path
        for param in ("{ref}", "{name:path}", "{agent_id}", "{session_id}", "{namespace}",
                      "{name}", "{vm_type}"):
            url = url.replace(param, "nothing-here")
        for caller, headers in callers.items():
            expected = _expected(caller, access)
            if expected is False:
                continue
            if expected is None:
                allowed.append((method, url, headers))
                continue
            before = snapshot(app)
            # An empty body: the gate answers before the body is read or validated.
            resp = http.request(method, url, headers=headers,
                                json={} if method in ("POST", "PUT", "PATCH") else None)
            if resp.status_code != expected:
                wrong.append(f"{caller}: {method} {path} -> {resp.status_code}, "
                             f"expected {expected}: {resp.text}")
                continue
            body = resp.json()
            if resp.headers["content-type"] != "application/problem+json" or not (
                    body["type"].startswith("https://anycloud.sh/problems/")
                    and body["status"] == expected and body["code"] and body["rule"]):
                wrong.append(f"{caller}: {method} {path}: not a problem+json refusal: "
                             f"{resp.headers['content-type']} {resp.text}")
            if snapshot(app) != before:
                wrong.append(f"{caller}: {method} {path}: refused but the ledger changed")
    for method, url, headers in allowed:
        resp = http.request(method, url, headers=headers,
                            json={} if method in ("POST", "PUT", "PATCH") else None)
        if resp.status_code in (401, 403) or resp.status_code >= 500:
            wrong.append(f"allowed {method} {url} -> {resp.status_code}: {resp.text}")
    assert not wrong, "\n".join(wrong)


def test_a_route_without_a_gate_does_not_start(api: FastAPI) -> None:
    extra = APIRouter()

    @extra.get("/v1/leaky")
    def leaky() -> dict[str, Any]:
        return {}

    api.router.routes.extend(extra.routes)
    with pytest.raises(RuntimeError, match="/v1/leaky has no gate"):
        route_access(api)


def test_every_answer_names_the_server_version(http: TestClient,
                                                callers: dict[str, dict[str, str]]) -> None:
    from automation import __version__

    for headers in (callers["none"], callers["viewer"]):
        resp = http.get("/v1/me", headers=headers)
        assert resp.headers["anycloud-version"] == __version__
    me = http.get("/v1/me", headers=callers["viewer"]).json()
    assert me == {"name": "viewer", "role": "viewer", "scope": None, "expiresAt": None,
                  "orgId": None, "projectId": None, "serverVersion": __version__}


def test_the_openapi_document_needs_a_token_and_names_every_nested_schema(
        http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    assert http.get("/v1/openapi.json").status_code == 401
    doc = http.get("/v1/openapi.json", headers=callers["viewer"]).json()
    schemas = doc["components"]["schemas"]
    for name in ("NodePoolStatus", "IngressView", "IngressRelease", "HelmJob",
                 "IngressDaemonSet", "Cost", "VmCounts", "NodePoolPage", "NodePoolCreated"):
        assert name in schemas, name
    status = json.dumps(schemas["NodePoolStatus"])
    assert "#/components/schemas/IngressView" in status and "#/components/schemas/Cost" in status
    assert "/v1/node-pools" in doc["paths"] and "/v1/openapi.json" not in doc["paths"]


# The policy, written out: a new route, or a rule changed, is a conscious edit here.
EXPECTED = {
    ("GET", "/v1/healthz"): "public",
    ("GET", "/v1/me"): Access.READ,
    ("GET", "/v1/openapi.json"): Access.READ,
    ("GET", "/metrics"): Access.READ,  # a scraper reads (automation/api/metrics.py)
    ("GET", "/v1/tokens"): Access.ADMIN,
    ("POST", "/v1/tokens"): Access.ADMIN,
    ("DELETE", "/v1/tokens/{name:path}"): Access.ADMIN,
    ("GET", "/v1/clusters"): Access.READ,
    ("GET", "/v1/clusters/{ref}"): Access.READ,
    ("POST", "/v1/clusters"): Access.ADMIN,
    ("POST", "/v1/clusters/{ref}/refresh"): Access.WRITE,
    ("PUT", "/v1/clusters/{ref}/kubeconfig"): Access.ADMIN,
    ("POST", "/v1/clusters/{ref}/move"): Access.ADMIN,
    ("POST", "/v1/credentials/{ref}/move"): Access.ADMIN,
    ("DELETE", "/v1/clusters/{ref}"): Access.ADMIN,
    ("GET", "/v1/credentials"): Access.READ,
    ("GET", "/v1/credentials/{ref}"): Access.READ,
    ("POST", "/v1/credentials"): Access.ADMIN,
    ("POST", "/v1/credentials/{ref}/rotate"): Access.ADMIN,
    ("DELETE", "/v1/credentials/{ref}"): Access.ADMIN,
    ("GET", "/v1/orgs"): Access.READ,
    ("POST", "/v1/orgs"): Access.ADMIN,
    ("GET", "/v1/projects"): Access.READ,
    ("GET", "/v1/projects/{ref}"): Access.READ,
    ("GET", "/v1/orgs/{ref}"): Access.READ,
    ("POST", "/v1/projects"): Access.WRITE,
    ("GET", "/v1/deployments"): Access.READ,
    ("POST", "/v1/deployments"): Access.WRITE,
    ("GET", "/v1/deployments/{ref}"): Access.READ,
    ("POST", "/v1/deployments/{ref}/start"): Access.WRITE,
    ("POST", "/v1/deployments/{ref}/restart"): Access.WRITE,
    ("POST", "/v1/deployments/{ref}/stop"): Access.WRITE,
    ("DELETE", "/v1/deployments/{ref}"): Access.WRITE,
    ("POST", "/v1/deployments/{ref}/token"): Access.WRITE,  # a runtime's token: a member's
    ("GET", "/v1/.well-known/jwks.json"): "public",  # public keys, fetched by runtimes
    ("GET", "/v1/runtime-keys"): Access.READ,  # their ids and states, no key material
    ("POST", "/v1/runtime-keys/rotate"): Access.ADMIN,
    ("POST", "/v1/sudo/projects/{ref}/provisioner"): Access.ADMIN,
    ("POST", "/v1/sudo/projects/{ref}/restart"): Access.ADMIN,
    ("POST", "/v1/sudo/orgs/{ref}/default-provisioner"): Access.ADMIN,
    # The secrets key: which key ids seal and open, and the rotation (the key never sent).
    ("GET", "/v1/secrets-key"): Access.ADMIN,
    ("POST", "/v1/secrets-key/rotate"): Access.ADMIN,
    ("GET", "/v1/node-pools"): Access.READ,
    ("POST", "/v1/node-pools"): Access.WRITE,
    ("GET", "/v1/agent-pools"): Access.READ,
    ("GET", "/v1/node-pools/{ref}"): Access.READ,
    ("GET", "/v1/node-pools/{ref}/history"): Access.READ,
    ("DELETE", "/v1/node-pools/{ref}"): Access.WRITE,
    ("GET", "/v1/node-pools/{ref}/plan"): Access.READ,
    ("GET", "/v1/node-pools/{ref}/policy"): Access.READ,
    ("GET", "/v1/node-pools/{ref}/preview"): Access.READ,
    ("POST", "/v1/node-pools/{ref}/unlock"): Access.ADMIN,
    ("POST", "/v1/node-pools/{ref}/adopt"): Access.ADMIN,
    ("POST", "/v1/node-pools/{ref}/drift-check"): Access.WRITE,
    ("GET", "/v1/clusters/{ref}/addons/preview"): Access.READ,
    ("POST", "/v1/clusters/{ref}/addons/unlock"): Access.ADMIN,
    ("GET", "/v1/preview"): Access.READ,
    ("GET", "/v1/policy"): Access.READ,
    ("GET", "/v1/cost"): Access.READ,
    ("GET", "/v1/cost/daily"): Access.READ,
    ("GET", "/v1/catalog"): Access.READ,
    ("GET", "/v1/catalog/{vm_type}"): Access.READ,
    ("GET", "/v1/catalog/refreshes"): Access.READ,
    ("POST", "/v1/catalog/refreshes"): Access.ADMIN,
    # The agent broker's routes, served by the API too.
    **{route: rule for route, rule in BROKER_EXPECTED.items() if route[1] != "/v1/healthz"},
    # The read-only dashboard (tests/automation/ui/): its log-in form, log-out (checked by
    # its CSRF token) and assets are open; every page and fragment needs a viewer.
    ("GET", "/ui/login"): "public",
    ("POST", "/ui/login"): "public",
    ("POST", "/ui/logout"): "public",
    ("GET", "/ui/static/{name}"): "public",
    ("GET", "/ui/"): Access.READ,
    ("GET", "/ui/pools/{ref}"): Access.READ,
    ("GET", "/ui/pools/{ref}/preview"): Access.READ,
    ("GET", "/ui/fragments/pools"): Access.READ,
    ("GET", "/ui/fragments/pools/{ref}"): Access.READ,
    ("GET", "/ui/fragments/cost"): Access.READ,
    ("GET", "/ui/agent-pools"): Access.READ,
    ("GET", "/ui/deployments"): Access.READ,
    ("GET", "/ui/fragments/agent-pools"): Access.READ,
    ("GET", "/ui/fragments/deployments"): Access.READ,
}


def test_the_route_table_is_the_policy(api: FastAPI) -> None:
    assert api.state.route_access == EXPECTED
