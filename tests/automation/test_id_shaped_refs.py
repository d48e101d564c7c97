"""Ids and names never meet (issue 52, item 2): a name may not take the shape of an id, and a
reference shaped like an id matches ids only, so that no org can make another org's id name
two records (every later look-up of it by the owner was a 500 AMBIGUOUS)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from automation import ids
from automation.app import App
from automation.errors import InvalidInput
from automation.ledger import schema
from automation.services import clusters, credentials, node_pools, pool_status, projects
from automation.services.deployments import create_deployment
from automation.services.pool_history import read_pool_history
from automation.services.tokens import create_token
from automation.validation import check_name
from tests.automation.conftest import DEMO_CA, credential, ready_cluster, snapshot


@pytest.mark.parametrize("prefix", sorted(ids.PREFIXES))
def test_no_name_takes_the_shape_of_an_id(prefix: str) -> None:
    made = ids.new_id(prefix)
    assert ids.looks_like_id(made)
    with pytest.raises(InvalidInput) as err:
        check_name("project", made)
    assert (err.value.field, err.value.value) == ("project", made)
    assert "shape of an id" in (err.value.rule or "")
    # What is near the shape stays a name: another prefix, another length, another case.
    for name in (f"web-{made.split('-', 1)[1]}", made[:-1], f"{made}0", f"my-{made}"):
        assert check_name("name", name) == name


def test_an_unregistered_prefix_is_refused() -> None:
    with pytest.raises(ValueError, match=r"ids\.PREFIXES"):
        ids.new_id("zz")


def test_every_kind_of_record_refuses_an_id_shaped_name(app: App, kubeconfig: Path) -> None:
    """Org beta naming its records after org alpha's ids: each refused (InvalidInput, exit 2
    and 400 naming the field, the value and the rule), nothing written."""
    alpha = projects.create_org(app, "alpha")
    web = projects.create_project(app, "web", alpha.id)
    projects.create_org(app, "beta")
    cluster_id = ready_cluster(app, kubeconfig)
    credential_id = credential(app)
    before = snapshot(app)
    attempts = {
        "org": lambda: projects.create_org(app, alpha.id),
        "project": lambda: projects.create_project(app, web.id, "beta"),
        "cluster": lambda: clusters.register_cluster(app, clusters.RegisterCluster(
            name=cluster_id, kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1",
            ca_file=DEMO_CA, offline=True, org="beta")),
        "credential": lambda: credentials.new_credential(app, credentials.NewCredential(
            credential_id, "aws", {"profile": "team"}, org="beta")),
        "node pool": lambda: node_pools.create_node_pool(app, _pool(ids.new_id("np"))),
        "deployment": lambda: create_deployment(app, ids.new_id("dpl"), web.id),
        "token": lambda: create_token(app, ids.new_id("tok"), "viewer", by="test"),
    }
    for kind, attempt in attempts.items():
        with pytest.raises(InvalidInput) as err:
            attempt()
        assert "shape of an id" in (err.value.rule or ""), (kind, err.value)
        assert err.value.exit_code == 2
    assert snapshot(app) == before


def _pool(name: str) -> node_pools.CreateNodePool:
    return node_pools.CreateNodePool(name=name, credentials="team-aws", region="us-east-1",
                                     vm_type="m7i.large", min_vms=1, max_vms=1)


def _named_like(app: App, table: sa.Table, victim: str, **changes: Any) -> str:
    """A copy of ``victim``'s row named like its id, as a ledger written before names were
    checked could hold one (the services refuse such a name now); the copy's id."""
    with app.ledger.write() as conn:
        row = dict(conn.execute(sa.select(table).where(table.c.id == victim)).mappings().one())
        copy = ids.new_id(victim.split("-", 1)[0])
        conn.execute(table.insert().values({**row, "id": copy, "name": victim, **changes}))
    return copy


def test_a_look_up_by_id_never_matches_a_name(app: App, kubeconfig: Path) -> None:
    alpha = projects.create_org(app, "alpha")
    web = projects.create_project(app, "web", alpha.id)
    cluster_id = ready_cluster(app, kubeconfig)
    credential(app)
    pool = node_pools.create_node_pool(app, _pool("gpu"))
    _named_like(app, schema.projects, web.id)
    impostor = _named_like(app, schema.clusters, cluster_id)
    _named_like(app, schema.node_pools, pool.id, cluster_id=impostor)

    assert projects.get_project(app, web.id).id == web.id
    assert clusters.get_cluster(app, cluster_id).id == cluster_id
    assert node_pools.find_pool_placement(app, pool.id, None, "pool").pool_id == pool.id
    # The ledger's own SQL look-ups too: a pool's status, its history, a cluster's pools.
    assert pool_status.node_pool_status(app.ledger, pool.id).id == pool.id
    assert [p.id for p in pool_status.list_node_pools(app.ledger, cluster_id)] == [pool.id]
    assert read_pool_history(app.ledger, pool.id).pool.id == pool.id


def test_the_api_refuses_an_id_shaped_name_with_400(app: App, kubeconfig: Path) -> None:
    from fastapi.testclient import TestClient

    from automation.api.app import create_api
    from tests.automation.api.conftest import bearer

    alpha = projects.create_org(app, "alpha")
    web = projects.create_project(app, "web", alpha.id)
    projects.create_org(app, "beta")
    beta_admin = bearer(create_token(app, "ops", "admin", by="test").token)
    with TestClient(create_api(app, limiter=None), raise_server_exceptions=False) as http:
        answer = http.post("/v1/projects", json={"name": web.id, "org": "beta"},
                           headers=beta_admin)
        assert answer.status_code == 400, answer.text
        problem = answer.json()
        assert (problem["field"], problem["value"]) == ("project", web.id)
        assert "shape of an id" in problem["rule"]
        assert http.get(f"/v1/projects/{web.id}", headers=beta_admin).json()["name"] == "web"


def test_the_cli_refuses_an_id_shaped_name_with_exit_2(run: Any) -> None:
    victim = ids.new_id("prj")
    out = run("org", "create", victim, "--json")
    assert out.exit_code == 2, out.stdout
    assert victim in out.stdout and "shape of an id" in out.stdout
