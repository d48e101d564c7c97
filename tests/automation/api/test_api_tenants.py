"""Tenants (issue 36): a token scoped to an org sees that org's records and nothing of any
other's. Every list, by alpha's tokens, holds nothing of beta's; every route that names a
record is tried by every kind of caller in ``test_api_tenant_matrix``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automation.app import App
from automation.ledger import schema
from automation.services import clusters, credentials
from automation.services.tokens import create_token
from tests.automation.api.conftest import bearer
from tests.automation.api.tenants import ORGS, make_tenant
from tests.automation.conftest import DEMO_CA, snapshot

# Lists that run an engine over every pool in scope: out of this matrix.
SLOW_LISTS = {"/v1/preview", "/v1/policy"}


@pytest.fixture
def tenants(app: App, http: TestClient, callers: dict[str, dict[str, str]], kubeconfig: Any,
            monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Orgs alpha and beta, each with one of every record, and the callers: alpha's member
    and viewer, beta's member, an admin, an agent and no token."""
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps({"a": {
        "type": "static", "spec": {"runtimes": [{"host": "a1.example", "slots": 8,
                                                 "data_dir": "/data/a"}]}}}))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")
    records = {org: make_tenant(app, http, callers["admin"], org, kubeconfig) for org in ORGS}
    scoped = {f"{org}-{role}": bearer(create_token(app, f"{org}-{role}", role, by="test",
                                                    org=org).token)
              for org, role in (("alpha", "member"), ("alpha", "viewer"), ("beta", "member"))}
    return {"records": records, "callers": {
        **scoped, "admin": callers["admin"], "agent": callers["agent"], "anonymous": {}}}


def test_every_list_shows_alpha_nothing_of_beta(http: TestClient, api: Any,
                                                tenants: dict[str, Any]) -> None:
    callers = tenants["callers"]
    beta_ids = _ids_of(http, callers["admin"], "beta")
    lists = sorted(path for (method, path), _ in api.state.route_access.items()
                   if method == "GET" and "{" not in path and path.startswith("/v1/")
                   and path not in SLOW_LISTS)
    assert {"/v1/node-pools", "/v1/clusters", "/v1/deployments", "/v1/cost"} <= set(lists)
    wrong = []
    for caller in ("alpha-member", "alpha-viewer"):
        for path in lists:
            resp = http.get(path, headers=callers[caller])
            if resp.status_code in (401, 403):
                continue  # not this role's
            text = resp.text
            leaked = [t for t in ("beta", *beta_ids) if t in text]
            if leaked:
                wrong.append(f"{caller}: GET {path} shows {leaked}: {text[:300]}")
    assert not wrong, "\n".join(wrong)
    member = callers["alpha-member"]
    pools = http.get("/v1/node-pools", headers=member).json()["items"]
    assert [p["name"] for p in pools] == ["alpha-gpu"]
    assert {d["name"] for d in http.get("/v1/deployments", headers=member).json()["items"]} \
        == {"alpha-api", "alpha-job"}
    assert [o["name"] for o in http.get("/v1/orgs", headers=member).json()["items"]] == ["alpha"]
    assert len(http.get("/v1/node-pools", headers=callers["admin"]).json()["items"]) == 2
    cost = http.get("/v1/cost", headers=member).json()
    assert [line["group"] for line in cost["lines"]] == ["alpha-k3s/alpha-gpu"], cost


def _ids_of(http: TestClient, admin: dict[str, str], org: str) -> set[str]:
    """The ids of every record of ``org`` (as an admin lists them)."""
    found = set()
    for path in ("/v1/clusters", "/v1/credentials", "/v1/node-pools", "/v1/orgs",
                 "/v1/projects", "/v1/deployments"):
        for item in http.get(path, headers=admin).json()["items"]:
            if item["name"].startswith(org):
                found.add(item["id"])
    assert len(found) == 7, found  # org, cluster, credential, pool, project, 2 deployments
    return found


def test_a_scoped_member_creates_only_in_its_org(app: App, http: TestClient,
                                                 tenants: dict[str, Any]) -> None:
    member = tenants["callers"]["alpha-member"]
    before = snapshot(app)
    for body, field in (({"name": "x", "cluster": "beta-k3s", "credentials": "alpha-aws",
                          "region": "us-east-1", "vmType": "m7i.large", "minVms": 1,
                          "maxVms": 1}, "cluster"),
                        ({"name": "x", "cluster": "alpha-k3s", "credentials": "beta-aws",
                          "region": "us-east-1", "vmType": "m7i.large", "minVms": 1,
                          "maxVms": 1}, "credentials")):
        resp = http.post("/v1/node-pools", json=body, headers=member)
        assert (resp.status_code, resp.json()["field"]) == (404, field), resp.text
    for path, body, field in (("/v1/projects", {"name": "x", "org": "beta"}, "org"),
                              ("/v1/deployments", {"name": "x", "project": "beta-web"},
                               "project"),
                              ("/v1/deployments", {"name": "x", "nodePool": "beta-gpu"},
                               "nodePool")):
        resp = http.post(path, json=body, headers=member)
        assert (resp.status_code, resp.json()["field"]) == (404, field), resp.text
    assert snapshot(app) == before
    # Named in its own org, or not named (its one cluster): made there.
    made = http.post("/v1/node-pools", headers=member, json={
        "name": "cpu", "credentials": "alpha-aws", "region": "us-east-1",
        "vmType": "m7i.large", "minVms": 1, "maxVms": 1})
    assert made.status_code == 201, made.text
    alpha = http.get("/v1/orgs/alpha", headers=member).json()["id"]
    assert made.json()["orgId"] == alpha
    assert http.post("/v1/projects", json={"name": "api2", "org": "alpha"},
                     headers=member).json()["orgId"] == alpha


def test_an_admin_pairs_a_pool_with_a_credential_of_its_clusters_org(
        app: App, http: TestClient, tenants: dict[str, Any]) -> None:
    before = snapshot(app)
    resp = http.post("/v1/node-pools", headers=tenants["callers"]["admin"], json={
        "name": "x", "cluster": "alpha-k3s", "credentials": "beta-aws", "region": "us-east-1",
        "vmType": "m7i.large", "minVms": 1, "maxVms": 1})
    assert resp.status_code == 400 and resp.json()["field"] == "--credentials", resp.text
    assert "the org of cluster 'alpha-k3s'" in resp.json()["rule"]
    assert snapshot(app) == before


def test_scoped_tokens_are_for_members_and_viewers_of_a_real_org(app: App) -> None:
    from automation.errors import InvalidInput, NotFound

    with pytest.raises(InvalidInput, match="scopes a member's or viewer's token only"):
        create_token(app, "x", "admin", by="t", org="default")
    with pytest.raises(NotFound):
        create_token(app, "x", "viewer", by="t", org="nowhere")


def test_a_token_made_over_http_is_scoped_as_asked(app: App, http: TestClient,
                                                   tenants: dict[str, Any]) -> None:
    # The server once dropped --org/--project: remote `token create --org` made a global one.
    admin = tenants["callers"]["admin"]
    alpha = http.get("/v1/orgs/alpha", headers=admin).json()["id"]
    scopes: list[tuple[str, dict[str, str]]] = [("by-org", {"org": "alpha"}),
                                                 ("by-project", {"project": "alpha-web"})]
    for name, scope in scopes:
        made = http.post("/v1/tokens", json={"name": name, "role": "member", **scope},
                         headers=admin)
        assert made.status_code == 201 and made.json()["orgId"] == alpha, made.text
        me = http.get("/v1/me", headers=bearer(made.json()["token"])).json()
        assert me["orgId"] == alpha
        names = {p["name"] for p in http.get("/v1/projects", headers=bearer(
            made.json()["token"])).json()["items"]}
        assert names == {"alpha-web"}
    before = snapshot(app)
    refusals: list[tuple[dict[str, str], int]] = [
        ({"org": "nowhere"}, 404), ({"org": "a\x00"}, 404),
        ({"project": "nowhere"}, 404), ({"role": "admin", "org": "alpha"}, 400),
        ({"org": "alpha", "project": "beta-web"}, 400)]
    for body, status in refusals:
        refused = http.post("/v1/tokens", json={"name": "x", "role": "member", **body},
                            headers=admin)
        assert refused.status_code == status, (body, refused.text)
    assert snapshot(app) == before


def test_a_project_scoped_token_sees_its_project_alone(app: App, http: TestClient,
                                                       tenants: dict[str, Any]) -> None:
    admin = tenants["callers"]["admin"]
    assert http.post("/v1/projects", json={"name": "alpha-ops", "org": "alpha"},
                     headers=admin).status_code == 201
    assert http.post("/v1/deployments", json={"name": "alpha-cron", "project": "alpha-ops"},
                     headers=admin).status_code == 201
    ops = bearer(create_token(app, "ops", "member", by="t", project="alpha-ops").token)
    me = http.get("/v1/me", headers=ops).json()
    assert me["orgId"] == http.get("/v1/orgs/alpha", headers=admin).json()["id"]
    names = {d["name"] for d in http.get("/v1/deployments", headers=ops).json()["items"]}
    assert names == {"alpha-cron", "alpha-job"}  # its project's, and the org's placements
    assert http.get("/v1/deployments/alpha-api", headers=ops).status_code == 404
    assert [p["name"] for p in http.get("/v1/projects", headers=ops).json()["items"]] \
        == ["alpha-ops"]
    refused = http.post("/v1/projects", json={"name": "y", "org": "alpha"}, headers=ops)
    assert refused.status_code == 403 and refused.json()["field"] == "scope"


def test_the_whole_fleets_views_refuse_a_scoped_token(http: TestClient,
                                                      tenants: dict[str, Any]) -> None:
    viewer = tenants["callers"]["alpha-viewer"]
    for path in ("/metrics", "/v1/pools/default/cpu"):
        resp = http.get(path, headers=viewer)
        assert resp.status_code == 403 and resp.json()["field"] == "scope", (path, resp.text)
    assert http.get("/v1/agent-pools", headers=viewer).json()["items"] == []


def test_metrics_per_org_are_an_admins(http: TestClient, tenants: dict[str, Any],
                                       callers: dict[str, dict[str, str]]) -> None:
    admin = http.get("/metrics", headers=tenants["callers"]["admin"]).text
    for org in ORGS:
        assert f'anycloud_org_vms{{org="{org}",state="running"}} 1.0' in admin
        assert f'anycloud_org_node_pools{{org="{org}",state="pending"}} 1.0' in admin
    viewer = http.get("/metrics", headers=callers["viewer"])  # unscoped, not an admin
    assert viewer.status_code == 200 and "anycloud_vms" in viewer.text
    assert "anycloud_org_" not in viewer.text and "alpha" not in viewer.text


def test_the_dashboard_shows_a_scoped_token_its_org_alone(http: TestClient,
                                                          tenants: dict[str, Any]) -> None:
    viewer = tenants["callers"]["alpha-viewer"]
    pages = {path: http.get(path, headers=viewer) for path in (
        "/ui/", "/ui/fragments/pools", "/ui/fragments/cost", "/ui/deployments",
        "/ui/fragments/deployments", "/ui/agent-pools", "/ui/pools/alpha-gpu",
        "/ui/fragments/pools/alpha-gpu")}
    for path, page in pages.items():
        assert page.status_code == 200, (path, page.text[:300])
        assert "beta" not in page.text, path
    assert "alpha-gpu" in pages["/ui/"].text and "alpha-api" in pages["/ui/deployments"].text
    assert "alpha-job" in pages["/ui/deployments"].text
    # Another org's pool answers exactly as one that does not exist (only the name asked).
    for path in ("/ui/pools/{}", "/ui/fragments/pools/{}", "/ui/pools/{}/preview"):
        theirs = http.get(path.format("beta-gpu"), headers=viewer)
        missing = http.get(path.format("no-such-pool"), headers=viewer)
        assert theirs.status_code == missing.status_code == 404, path
        assert theirs.text.replace("beta-gpu", "?") == missing.text.replace(
            "no-such-pool", "?"), path
    # The admin still sees both orgs.
    both = http.get("/ui/", headers=tenants["callers"]["admin"]).text
    assert "alpha-gpu" in both and "beta-gpu" in both


def test_an_idempotency_key_is_the_callers_own(http: TestClient,
                                               tenants: dict[str, Any]) -> None:
    callers = tenants["callers"]
    key = {"Idempotency-Key": "same-key"}
    first = http.post("/v1/projects", json={"name": "alpha-two", "org": "alpha"},
                      headers=callers["alpha-member"] | key)
    assert first.status_code == 201
    replay = http.post("/v1/projects", json={"name": "alpha-two", "org": "alpha"},
                       headers=callers["beta-member"] | key)
    assert replay.status_code == 404 and first.json()["id"] not in replay.text


# --- the property: whatever two orgs make, one's answers hold nothing of the other's -------

_NAMES = st.sampled_from(["a", "b", "c"])
_OPS = st.lists(st.tuples(st.sampled_from(["one", "two"]),
                          st.sampled_from(["project", "pool", "deployment", "placement"]),
                          _NAMES), min_size=1, max_size=8)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(ops=_OPS)
def test_no_answer_to_one_org_holds_anything_of_the_others(
        app: App, http: TestClient, callers: dict[str, dict[str, str]], kubeconfig: Any,
        monkeypatch: pytest.MonkeyPatch, ops: list[tuple[str, str, str]]) -> None:
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps({"a": {
        "type": "static", "spec": {"runtimes": [{"host": "a1.example", "slots": 64,
                                                 "data_dir": "/data/a"}]}}}))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")
    admin = callers["admin"]
    run = len(http.get("/v1/orgs", headers=admin).json()["items"])  # a fresh pair per example
    org = {side: f"o{run}{side}" for side in ("one", "two")}
    token = {}
    for side, name in org.items():
        assert http.post("/v1/orgs", json={"name": name}, headers=admin).status_code == 201
        clusters.register_cluster(app, clusters.RegisterCluster(
            name=f"{name}-k3s", kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1",
            ca_file=DEMO_CA, offline=True, org=name))
        credentials.new_credential(app, credentials.NewCredential(
            f"{name}-aws", "aws", {"profile": "team"}, org=name))
        token[side] = bearer(create_token(app, f"{name}-m", "member", by="t", org=name).token)
        http.post("/v1/projects", json={"name": f"{name}-p", "org": name}, headers=token[side])
    answers: dict[str, list[str]] = {"one": [], "two": []}
    sent: dict[str, set[str]] = {"one": set(), "two": set()}
    for side, kind, short in ops:
        name = f"n{short}{run}z"  # the same names on both sides: they may collide
        sent[side].add(name)
        body, path = {
            "project": ({"name": name, "org": org[side]}, "/v1/projects"),
            "pool": ({"name": name, "credentials": f"{org[side]}-aws", "region": "us-east-1",
                      "vmType": "m7i.large", "minVms": 1, "maxVms": 1}, "/v1/node-pools"),
            "deployment": ({"name": name, "project": f"{org[side]}-p"}, "/v1/deployments"),
            "placement": ({"name": f"{name}-w", "nodePool": name}, "/v1/deployments"),
        }[kind]
        resp = http.post(path, json=body, headers=token[side])
        assert resp.status_code < 500, resp.text
        answers[side].append(resp.text)
        for listed in ("/v1/projects", "/v1/node-pools", "/v1/deployments", "/v1/orgs",
                       "/v1/clusters", "/v1/credentials", "/v1/cost"):
            answers[side].append(http.get(listed, headers=token[side]).text)
    for side, other in (("one", "two"), ("two", "one")):
        theirs = _owned(http, admin, org[other])
        for text in answers[side]:
            # The other's ids never; its names only where this side sent the same one (a
            # taken name: names of projects and deployments are global, like bucket names).
            leaked = {t for t in theirs if t in text and t not in sent[side]}
            assert not leaked, (side, leaked, text[:400])


def _owned(http: TestClient, admin: dict[str, str], org: str) -> set[str]:
    """Every id and name of ``org``'s records, as an admin sees them."""
    org_id = http.get(f"/v1/orgs/{org}", headers=admin).json()["id"]
    found = {org, org_id}
    pools = [p for p in http.get("/v1/node-pools?pageSize=1000", headers=admin).json()["items"]
             if p["cluster"].startswith(org + "-")]
    projects = [p for p in http.get("/v1/projects?pageSize=1000", headers=admin).json()["items"]
                if p["orgId"] == org_id]
    for item in (*pools, *projects):
        found |= {item["id"], item["name"]}
    for item in http.get("/v1/deployments?pageSize=1000", headers=admin).json()["items"]:
        if item.get("projectId") in {p["id"] for p in projects} or \
                item.get("poolId") in {p["id"] for p in pools}:
            found |= {item["id"], item["name"]}
    for path in ("/v1/clusters", "/v1/credentials"):
        for item in http.get(path, headers=admin).json()["items"]:
            if item["orgId"] == org_id:
                found |= {item["id"], item["name"]}
    return found


def test_a_cluster_moves_with_its_pools_and_credentials_to_another_org(
        app: App, http: TestClient, tenants: dict[str, Any], kubeconfig: Any) -> None:
    callers, admin = tenants["callers"], tenants["callers"]["admin"]
    # A second alpha cluster whose pool shares alpha's credential: the first cannot move.
    clusters.register_cluster(app, clusters.RegisterCluster(
        name="alpha-k3s-2", kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1",
        ca_file=DEMO_CA, offline=True, org="alpha"))
    shared = http.post("/v1/node-pools", headers=admin, json={
        "name": "alpha-cpu", "cluster": "alpha-k3s-2", "credentials": "alpha-aws",
        "region": "us-east-1", "vmType": "m7i.large", "minVms": 1, "maxVms": 1})
    assert shared.status_code == 201, shared.text
    before = snapshot(app)
    refused = http.post("/v1/clusters/alpha-k3s/move", json={"org": "beta"}, headers=admin)
    assert refused.status_code == 409
    assert "'alpha-aws' is also used by node pool 'alpha-cpu'" in refused.json()["detail"]
    in_use = http.post("/v1/credentials/alpha-aws/move", json={"org": "beta"}, headers=admin)
    assert in_use.status_code == 409 and "cluster move" in in_use.json()["detail"]
    member = http.post("/v1/clusters/alpha-k3s/move", json={"org": "beta"},
                       headers=callers["alpha-member"])
    assert member.status_code == 403
    assert snapshot(app) == before
    # Without the sharing pool, the cluster moves with its pool and that credential.
    assert http.delete("/v1/node-pools/alpha-cpu", headers=admin).status_code == 200
    with app.ledger.write() as conn:  # its destroy has run: deleted
        conn.execute(schema.node_pools.update().where(schema.node_pools.c.name == "alpha-cpu")
                     .values(state="deleted"))
    moved = http.post("/v1/clusters/alpha-k3s/move", json={"org": "beta"}, headers=admin)
    assert moved.status_code == 200, moved.text
    assert {k: moved.json()[k] for k in ("clusters", "nodePools", "credentials")} == {
        "clusters": ["alpha-k3s"], "nodePools": ["alpha-gpu"], "credentials": ["alpha-aws"]}
    for path in ("/v1/clusters/alpha-k3s", "/v1/node-pools/alpha-gpu",
                 "/v1/credentials/alpha-aws"):
        assert http.get(path, headers=callers["alpha-viewer"]).status_code == 404, path
        assert http.get(path, headers=callers["beta-member"]).status_code == 200, path
    pools = http.get("/v1/node-pools", headers=callers["beta-member"]).json()["items"]
    assert sorted(p["name"] for p in pools) == ["alpha-gpu", "beta-gpu"]
    # A credential no pool uses moves alone.
    credentials.new_credential(app, credentials.NewCredential(
        "spare", "aws", {"profile": "team"}, org="alpha"))
    alone = http.post("/v1/credentials/spare/move", json={"org": "beta"}, headers=admin)
    assert alone.status_code == 200 and alone.json()["credentials"] == ["spare"]
    assert http.get("/v1/credentials/spare", headers=callers["beta-member"]).status_code == 200


def test_a_cluster_moves_only_if_still_as_read(app: App, http: TestClient,
                                               tenants: dict[str, Any]) -> None:
    """``cluster move`` takes If-Match as the other moves do: checked under the cluster's
    row lock, a stale ETag is a 412 and nothing moves."""
    admin = tenants["callers"]["admin"]
    read = http.get("/v1/clusters/alpha-k3s", headers=admin).headers["ETag"]
    assert http.post("/v1/clusters/alpha-k3s/refresh", headers=admin).status_code == 200
    before = snapshot(app)
    stale = http.post("/v1/clusters/alpha-k3s/move", json={"org": "beta"},
                      headers={**admin, "If-Match": read})
    assert stale.status_code == 412 and stale.json()["field"] == "If-Match", stale.text
    assert snapshot(app) == before
    current = http.get("/v1/clusters/alpha-k3s", headers=admin).headers["ETag"]
    moved = http.post("/v1/clusters/alpha-k3s/move", json={"org": "beta"},
                      headers={**admin, "If-Match": current})
    assert moved.status_code == 200 and moved.json()["clusters"] == ["alpha-k3s"], moved.text


def test_a_project_scoped_member_reads_its_orgs_pools_and_changes_none(
        app: App, http: TestClient, tenants: dict[str, Any]) -> None:
    """A project scope is about deployments: the org's node pools serve all its projects,
    so a project-scoped member sees them but neither creates nor deletes one (403 naming
    the scope, nothing changed); an org-scoped member still does both."""
    admin = tenants["callers"]["admin"]
    spare = {"name": "alpha-spare", "cluster": "alpha-k3s", "credentials": "alpha-aws",
             "region": "us-east-1", "vmType": "m7i.large", "minVms": 1, "maxVms": 1}
    assert http.post("/v1/node-pools", json=spare, headers=admin).status_code == 201
    web = bearer(create_token(app, "web-dev", "member", by="t", project="alpha-web").token)
    assert {p["name"] for p in http.get("/v1/node-pools", headers=web).json()["items"]} == {
        "alpha-gpu", "alpha-spare"}
    assert http.get("/v1/node-pools/alpha-spare", headers=web).status_code == 200
    before = snapshot(app)
    for method, path, body in (("POST", "/v1/node-pools", {**spare, "name": "alpha-more"}),
                               ("DELETE", "/v1/node-pools/alpha-spare", None)):
        refused = http.request(method, path, json=body, headers=web)
        assert refused.status_code == 403, (path, refused.text)
        assert (refused.json()["field"], refused.json()["code"]) == ("scope",
                                                                     "PERMISSION_DENIED")
    # Another org's pool answers as a missing one, as for any record out of scope.
    theirs = http.delete("/v1/node-pools/beta-gpu", headers=web)
    assert theirs.status_code == 404 and "beta" not in theirs.text.replace("beta-gpu", "")
    assert snapshot(app) == before
    member = tenants["callers"]["alpha-member"]
    assert http.delete("/v1/node-pools/alpha-spare", headers=member).status_code == 200
