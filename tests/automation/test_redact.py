"""Status never shows where a cluster is or how anycloud reaches it (node-pool seed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.ledger import schema
from automation.redact import known_values, redact
from automation.services import node_pools, pool_status
from automation.services.ingress_status import with_ingress
from tests.automation.conftest import credential, ready_cluster

LEAKY = ("cluster unavailable: cannot reach https://203.0.113.10:6443 (list nodes): "
         "HTTPSConnectionPool(host='203.0.113.10', port=6443): Max retries exceeded; "
         "then cannot load kubeconfig {kubeconfig}: not a kubeconfig document; key file "
         "/keys/team-sa.json")


def test_redact_hides_urls_hosts_kubeconfig_paths_and_known_values() -> None:
    text = redact(LEAKY.format(kubeconfig="/home/me/.kube/config"), ["/keys/team-sa.json"])
    assert text is not None
    for leak in ("203.0.113.10", "6443", "/home/me/.kube/config", "/keys/team-sa.json"):
        assert leak not in text
    assert "cannot reach <endpoint> (list nodes)" in text
    assert redact(None) is None and redact("") == ""


def test_known_values_reads_credential_references() -> None:
    assert known_values('{"profile": "team", "key_file": "/k/sa.json"}', "x", None) == [
        "/k/sa.json"]


@pytest.fixture
def pool_with_a_leaky_error(app: App, kubeconfig: Path) -> str:
    ready_cluster(app, kubeconfig)
    credential(app)
    pool = node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name="cpu", credentials="team-aws", region="us-east-1", vm_type="m7i.large",
        min_vms=1, max_vms=1))
    with app.ledger.write() as conn:
        conn.execute(schema.node_pools.update().where(schema.node_pools.c.id == pool.id).values(
            last_error=LEAKY.format(kubeconfig=kubeconfig), last_error_code="CLUSTER_UNAVAILABLE"))
    return pool.id


def test_pool_status_and_list_show_no_endpoint_path_or_credential(
    app: App, kubeconfig: Path, pool_with_a_leaky_error: str
) -> None:
    for status in (pool_status.node_pool_status(app.ledger, pool_with_a_leaky_error),
                   *pool_status.list_node_pools(app.ledger)):
        shown = status.model_dump_json()
        for leak in ("203.0.113.10", str(kubeconfig)):
            assert leak not in shown
        assert status.last_error_code == "CLUSTER_UNAVAILABLE"
    with app.ledger.read() as conn:  # the ledger keeps the detail for operators
        stored = conn.execute(sa.select(schema.node_pools.c.last_error)).scalar_one()
    assert "203.0.113.10" in stored


def test_an_unreadable_cluster_in_the_ingress_view_names_no_path() -> None:
    from automation.kube.port import ClusterUnavailable
    from automation.models import NodePoolStatus

    def factory(status: NodePoolStatus) -> object:
        raise ClusterUnavailable("cannot load kubeconfig /srv/anycloud/kc.yaml: no such file")

    status = NodePoolStatus.model_validate({
        "id": "np-1", "name": "web", "cluster": "prod", "credentials": "aws",
        "provider": "aws", "region": "us-east-1", "zone": None, "vm_type": "m7i.large",
        "vms": 1, "state": "ready", "last_error": None,
        "counts": {"ready": 1, "starting": 0, "draining": 0}, "hosts_service": True,
        "created_at": "2026-12-01T00:00:00Z", "updated_at": "2026-12-01T00:00:00Z"})
    release = with_ingress(status, factory).ingress.release  # type: ignore[arg-type,union-attr]
    assert release is not None and "/srv/anycloud" not in (release.last_event or "")
    assert "cannot load kubeconfig <hidden>" in (release.last_event or "")
