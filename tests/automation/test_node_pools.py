from pathlib import Path

import pytest

from automation.app import App
from automation.errors import AnycloudError, Conflict, InvalidInput, NotFound
from automation.models import PoolState, WorkloadKind
from automation.services import clusters, credentials, node_pools, pool_status, workloads
from tests.automation.conftest import credential, ready_cluster, snapshot


def _req(**kw: object) -> node_pools.CreateNodePool:
    base: dict[str, object] = dict(
        name="cpu", credentials="team-aws", region="us-east-1", zone="us-east-1a",
        vm_type="m7i.large", min_vms=2, max_vms=2,
    )
    base.update(kw)
    return node_pools.CreateNodePool(**base)  # type: ignore[arg-type]


@pytest.fixture
def world(app: App, kubeconfig: Path) -> App:
    ready_cluster(app, kubeconfig)
    for provider in ("aws", "gcp", "azure", "lambda"):
        credential(app, f"team-{provider}", provider)
    return app


def test_create_stores_intent_and_returns(world: App) -> None:
    pool = node_pools.create_node_pool(world, _req())
    assert pool.id.startswith("np-") and pool.state is PoolState.PENDING
    status = pool_status.node_pool_status(world.ledger, "cpu")
    assert (status.cluster, status.credentials, status.vms, status.zone) == (
        "prod", "team-aws", 2, "us-east-1a"
    )
    assert status.counts.model_dump() == {"ready": 0, "starting": 0, "draining": 0}
    assert [p.id for p in pool_status.list_node_pools(world.ledger)] == [pool.id]
    assert [p.id for p in pool_status.list_node_pools(world.ledger, "prod")] == [pool.id]


@pytest.mark.parametrize(("cred", "region", "zone", "vm"), [
    ("team-gcp", "us-central1", "us-central1-a", "g2-standard-4"),
    ("team-azure", "eastus", "1", "Standard_NC4as_T4_v3"),
    ("team-aws", "us-east-1", None, "p5.48xlarge"),
])
def test_each_cloud(world: App, cred: str, region: str, zone: str | None, vm: str) -> None:
    pool = node_pools.create_node_pool(
        world, _req(credentials=cred, region=region, zone=zone, vm_type=vm, name="p")
    )
    assert pool.provider == cred.removeprefix("team-")


@pytest.mark.parametrize(("kw", "field", "code"), [
    ({"name": "CPU"}, "name", "INVALID_ARGUMENT"),
    ({"min_vms": 0, "max_vms": 0}, "--min-vms", "INVALID_ARGUMENT"),
    ({"min_vms": 1, "max_vms": 3}, "--max-vms", "INVALID_ARGUMENT"),
    ({"zone": "us-west-2a"}, "--zone", "INVALID_ARGUMENT"),
    ({"vm_type": "m7g.large"}, "--vm-type", "INVALID_ARGUMENT"),
    ({"vm_type": "nope"}, "--vm-type", "INVALID_ARGUMENT"),
    ({"region": "mars-1", "zone": None}, "--region", "INVALID_ARGUMENT"),
    ({"credentials": "team-lambda", "region": "us-west-1", "zone": None,
      "vm_type": "gpu_1x_a10"}, "--credentials", "PROVIDER_UNSUPPORTED"),
    ({"credentials": "missing"}, "--credentials", "NOT_FOUND"),
    ({"cluster": "staging"}, "--cluster", "NOT_FOUND"),
    ({"credentials": "team-azure", "region": "eastus", "zone": "eastus-1",
      "vm_type": "Standard_D4s_v5"}, "--zone", "INVALID_ARGUMENT"),
])
def test_bad_input_refused_nothing_written(
    world: App, kw: dict[str, object], field: str, code: str
) -> None:
    before = snapshot(world)
    with pytest.raises(AnycloudError) as err:
        node_pools.create_node_pool(world, _req(**kw))
    assert (err.value.field, err.value.code) == (field, code)
    assert err.value.exit_code == 2
    assert snapshot(world) == before


def test_name_unique_among_live_pools_of_the_cluster(world: App, kubeconfig: Path) -> None:
    node_pools.create_node_pool(world, _req())
    with pytest.raises(Conflict) as err:
        node_pools.create_node_pool(world, _req(vm_type="m7i.xlarge"))
    assert err.value.code == "ALREADY_EXISTS" and err.value.field == "name"
    # Another cluster may use the same name; then bare names are ambiguous.
    ready_cluster(world, kubeconfig, "staging")
    other = node_pools.create_node_pool(world, _req(cluster="staging"))
    with pytest.raises(InvalidInput, match="several clusters"):
        pool_status.node_pool_status(world.ledger, "cpu")
    assert pool_status.node_pool_status(world.ledger, other.id).cluster == "staging"


def test_cluster_is_required_when_several_exist(world: App, kubeconfig: Path) -> None:
    ready_cluster(world, kubeconfig, "staging")
    with pytest.raises(InvalidInput) as err:
        node_pools.create_node_pool(world, _req())
    assert err.value.field == "--cluster" and "prod, staging" in err.value.message
    assert node_pools.create_node_pool(world, _req(cluster="staging")).name == "cpu"


def test_no_cluster_registered_refuses_with_node_pools_unavailable(app: App) -> None:
    """No cluster at all is the seed's NODE_POOLS_UNAVAILABLE, as a pending one is."""
    credential(app)
    before = snapshot(app)
    with pytest.raises(Conflict) as err:
        node_pools.create_node_pool(app, _req())
    assert (err.value.code, err.value.field) == ("NODE_POOLS_UNAVAILABLE", "--cluster")
    assert "cluster register" in err.value.message and err.value.exit_code == 2
    assert snapshot(app) == before


def test_pending_cluster_refuses_with_node_pools_unavailable(
    app: App, kubeconfig: Path
) -> None:
    clusters.register_cluster(app, clusters.RegisterCluster(name="prod", kubeconfig=kubeconfig))
    credential(app)
    before = snapshot(app)
    with pytest.raises(Conflict) as err:
        node_pools.create_node_pool(app, _req())
    assert err.value.code == "NODE_POOLS_UNAVAILABLE"
    assert snapshot(app) == before


def test_no_command_changes_placement() -> None:
    # The fixed-for-life rule: the service layer offers no update of these fields at all.
    public = {n for n in dir(node_pools) if not n.startswith("_")}
    assert not {n for n in public if n.startswith(("update", "set", "patch", "edit"))}


def test_delete_refused_while_targeted_then_moves_to_deleting(world: App) -> None:
    node_pools.create_node_pool(world, _req())
    workloads.create_workload(world, "web", "cpu", WorkloadKind.DEPLOYMENT)
    before = snapshot(world)
    with pytest.raises(Conflict) as err:
        node_pools.delete_node_pool(world, "cpu")
    assert err.value.code == "NODE_POOL_IN_USE" and "web (active)" in err.value.message
    assert snapshot(world) == before
    workloads.delete_workload(world, "web")
    assert node_pools.delete_node_pool(world, "cpu").state is PoolState.DELETING
    # Idempotent, and a deleting pool admits no new work.
    assert node_pools.delete_node_pool(world, "cpu").state is PoolState.DELETING
    with pytest.raises(Conflict) as err:
        workloads.create_workload(world, "web2", "cpu", WorkloadKind.DEPLOYMENT)
    assert err.value.code == "NODE_POOL_DELETING"


def test_terminated_service_still_counts(world: App) -> None:
    node_pools.create_node_pool(world, _req())
    workloads.create_workload(world, "site", "cpu", WorkloadKind.SERVICE)
    assert pool_status.node_pool_status(world.ledger, "cpu").hosts_service
    assert workloads.delete_workload(world, "site").state == "terminated"
    with pytest.raises(Conflict, match=r"site \(terminated\)"):
        node_pools.delete_node_pool(world, "cpu")


def test_credential_in_use_cannot_be_deleted(world: App) -> None:
    node_pools.create_node_pool(world, _req())
    with pytest.raises(Conflict) as err:
        credentials.delete_credential(world, "team-aws")
    assert err.value.code == "CREDENTIAL_IN_USE" and "cpu" in err.value.message


def test_cluster_with_pools_cannot_be_deleted(world: App) -> None:
    node_pools.create_node_pool(world, _req())
    with pytest.raises(Conflict) as err:
        clusters.delete_cluster(world, "prod")
    assert err.value.code == "CLUSTER_IN_USE"
    assert "work still targets" not in err.value.message


def test_cluster_delete_names_the_services_that_block_it(world: App) -> None:
    node_pools.create_node_pool(world, _req())
    workloads.create_workload(world, "site", "cpu", WorkloadKind.SERVICE)
    workloads.create_workload(world, "api", "cpu", WorkloadKind.SERVICE)
    workloads.delete_workload(world, "site")  # terminated: counts until its objects are gone
    with pytest.raises(Conflict) as err:
        clusters.delete_cluster(world, "prod")
    assert ("work still targets them: service api; service site (terminated, its objects "
            "not yet removed from the cluster)") in err.value.message


def test_unknown_pool(world: App) -> None:
    with pytest.raises(NotFound) as err:
        pool_status.node_pool_status(world.ledger, "ghost")
    assert err.value.exit_code == 2
    with pytest.raises(NotFound):
        node_pools.delete_node_pool(world, "ghost")
    with pytest.raises(NotFound):
        workloads.create_workload(world, "w", "ghost", WorkloadKind.DEPLOYMENT)
