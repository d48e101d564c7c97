"""Two orgs' worth of records for the tenant tests (``test_api_tenants``,
``test_api_tenant_matrix``)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient

from automation.app import App
from automation.ledger import schema
from automation.services import clusters, credentials
from tests.automation.conftest import DEMO_CA

ORGS = ("alpha", "beta")


def make_tenant(app: App, http: TestClient, admin: dict[str, str], org: str,
            kubeconfig: Any) -> dict[str, str]:
    """Org ``org`` with a cluster, a credential, a pool, a project, a project deployment and
    a placement on the pool, every name starting with the org's; the records' ids."""
    assert http.post("/v1/orgs", json={"name": org}, headers=admin).status_code == 201
    made = {"org": org}
    made["cluster"] = clusters.register_cluster(app, clusters.RegisterCluster(
        name=f"{org}-k3s", kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1",
        ca_file=DEMO_CA, offline=True, org=org)).name
    made["credential"] = credentials.new_credential(app, credentials.NewCredential(
        f"{org}-aws", "aws", {"profile": "team"}, org=org)).name
    pool = http.post("/v1/node-pools", headers=admin, json={
        "name": f"{org}-gpu", "cluster": f"{org}-k3s", "credentials": f"{org}-aws",
        "region": "us-east-1", "vmType": "m7i.large", "minVms": 1, "maxVms": 1})
    assert pool.status_code == 201, pool.text
    made["pool"] = f"{org}-gpu"
    now = app.clock.now()
    with app.ledger.write() as conn:  # a running VM: the pool costs something
        conn.execute(schema.vm_attempts.insert().values(
            id=f"at-{org}", pool_id=pool.json()["id"], state="running", node_state="Ready",
            token_generation=0, created_at=now, updated_at=now, vm_created_at=now))
    app.clock.advance(timedelta(hours=1))  # type: ignore[attr-defined]
    assert http.post("/v1/projects", json={"name": f"{org}-web", "org": org},
                     headers=admin).status_code == 201
    made["project"] = f"{org}-web"
    for body in ({"name": f"{org}-api", "project": f"{org}-web"},
                 {"name": f"{org}-job", "nodePool": f"{org}-gpu"}):
        resp = http.post("/v1/deployments", json=body, headers=admin)
        assert resp.status_code == 201, resp.text
    made["deployment"] = f"{org}-api"
    return made
