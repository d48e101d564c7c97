"""Project deployments through a ``nodepool`` provisioner of the set, on the real API server
(``control_plane``, kwok Nodes): the factory finds the pool's namespace and cluster in the
ledger, the pool cannot be deleted while a deployment holds objects there, and a deleting
pool admits no new deployment (seed 003, now with real objects behind it)."""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from automation.app import App
from automation.clock import ManualClock
from automation.devcluster.control_plane import ControlPlane
from automation.errors import Conflict, InvalidInput
from automation.ledger import open_ledger
from automation.models import NodePool, PoolState
from automation.provisioners.base import ProvisionRequest
from automation.provisioners.kubernetes import PROVISION_ID_LABEL
from automation.provisioners.provisioner_set import ProvisionerSet, load
from automation.services import clusters, node_pools, projects
from automation.services import deployments as deps
from automation.services.provisioner_factory import provisioners
from tests.automation.conftest import DEMO_CA, credential
from tests.automation.kube.objects import node

REPO = Path(__file__).resolve().parents[3]
BIG = {"cpu": "1000", "memory": "4Ti", "pods": "1000"}
SMALL = ProvisionRequest(cpu="100m", memory="64Mi")

pytestmark = pytest.mark.kube


@pytest.fixture
def world(control_plane: ControlPlane, sqlite_url: str) -> Iterator[tuple[App, NodePool]]:
    """A ledger with the real cluster registered, a pool ``gpu`` on it and that pool's kwok
    Node (labelled and tainted as the reconciler does), an org and a project."""
    app = App(ledger=open_ledger(sqlite_url), clock=ManualClock())
    clusters.register_cluster(app, clusters.RegisterCluster(
        name="prod", kubeconfig=control_plane.kubeconfig, server_url="https://203.0.113.10:6443",
        kubernetes_version="v1.36.2+k3s1", ca_file=DEMO_CA, offline=True))
    credential(app)
    pool = node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name=f"gpu{secrets.token_hex(2)}", credentials="team-aws", region="us-east-1",
        zone="us-east-1a", vm_type="m7i.large", min_vms=1, max_vms=1))
    node(control_plane, f"node-{pool.id}", {"anycloud.sh/node-pool": pool.id},
         taints=[{"key": "anycloud.sh/node-pool", "value": pool.id, "effect": "NoSchedule"}])
    control_plane.patch_status("node", f"node-{pool.id}", {"capacity": BIG, "allocatable": BIG})
    projects.create_org(app, "acme")
    projects.create_project(app, "web", "acme")
    yield app, pool
    control_plane.kubectl("delete", "node", f"node-{pool.id}", "--ignore-not-found")
    control_plane.kubectl("delete", "namespace", f"anycloud-{pool.id}", "--wait=false",
                          "--ignore-not-found")
    app.ledger.dispose()


def the_set(tmp_path: Path, pool: str, **more: object) -> ProvisionerSet:
    shutil.copytree(REPO / "k8s/runtime-templates", tmp_path / "templates")
    deployment = tmp_path / "templates/deployment.yaml"
    text = deployment.read_text()  # placement is the point here, not the claim
    deployment.write_text(text[:text.index("          volumeMounts:")])
    return load({"pool": {"type": "nodepool", "spec": {
        "node_pool": pool, "timeout_seconds": 60, "data_dir": "/data",
        "image": "registry.k8s.io/pause:3.10", "host": "http://*.localhost",
        "template_paths": {"deployment": "templates/deployment.yaml",
                           "service": "templates/service.yaml"}}}, **more}, "pool", tmp_path)


def objects(plane: ControlPlane, namespace: str, pid: str) -> list[str]:
    done = plane.kubectl("get", "deployments,services,pods", "-n", namespace, "-l",
                         f"{PROVISION_ID_LABEL}={pid}", "-o", "json")
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in json.loads(done.stdout)["items"]
                  if not o["metadata"].get("deletionTimestamp"))


def test_a_deployment_on_a_pool_holds_it_until_deleted(
        world: tuple[App, NodePool], control_plane: ControlPlane, tmp_path: Path) -> None:
    app, pool = world
    pset = the_set(tmp_path, pool.name)
    namespace = f"anycloud-{pool.id}"
    dep = deps.create_deployment(app, "api", "web")
    with provisioners(app, pset, tmp_path) as built:
        up = deps.start_deployment(app, "api", pset, built, SMALL)
        assert (up.state, up.provisioner, up.node_pool_id) == ("running", "pool", pool.id)
        assert up.runtime_host == f"http://{dep.provision_id}.localhost"
        pods = json.loads(control_plane.kubectl(
            "get", "pods", "-n", namespace, "-l", f"{PROVISION_ID_LABEL}={dep.provision_id}",
            "-o", "json").stdout)["items"]
        assert [(p["spec"]["nodeName"], p["status"]["phase"]) for p in pods] == [
            (f"node-{pool.id}", "Running")]

        with pytest.raises(Conflict) as err:
            node_pools.delete_node_pool(app, pool.name)
        assert err.value.code == "NODE_POOL_IN_USE" and "api (running)" in err.value.message

        gone = deps.delete_deployment(app, "api", built)
        assert gone.node_pool_id is None
    assert objects(control_plane, namespace, dep.provision_id) == []
    assert node_pools.delete_node_pool(app, pool.name).state is PoolState.DELETING


def test_a_deleting_pool_admits_no_deployment_and_nothing_is_created(
        world: tuple[App, NodePool], control_plane: ControlPlane, tmp_path: Path) -> None:
    app, pool = world
    pset = the_set(tmp_path, pool.name)
    dep = deps.create_deployment(app, "late", "web")
    node_pools.delete_node_pool(app, pool.name)
    with provisioners(app, pset, tmp_path) as built, pytest.raises(Conflict) as err:
        deps.start_deployment(app, "late", pset, built, SMALL)
    assert err.value.code == "NODE_POOL_DELETING"
    assert objects(control_plane, f"anycloud-{pool.id}", dep.provision_id) == []
    after = deps.get_deployment(app, "late")
    assert (after.state, after.node_pool_id, after.provisioner) == ("stopped", None, None)
    assert after.last_error and "being deleted" in after.last_error


def test_a_move_off_the_pool_removes_its_objects_and_keeps_the_id(
        world: tuple[App, NodePool], control_plane: ControlPlane, tmp_path: Path) -> None:
    app, pool = world
    pset = the_set(tmp_path, pool.name, shared={"type": "static", "spec": {"runtimes": [
        {"host": "https://rt1.example", "slots": 2, "data_dir": "/srv",
         "audience_url": "https://rt1.example"}]}})
    dep = deps.create_deployment(app, "api", "web")
    with provisioners(app, pset, tmp_path) as built:
        assert deps.start_deployment(app, "api", pset, built, SMALL).node_pool_id == pool.id
        projects.set_project_provisioner(app, "web", "shared", pset, by="test")
        moved = deps.restart_deployment(app, "api", pset, built)
    assert (moved.provisioner, moved.provision_id, moved.runtime_host, moved.node_pool_id) == (
        "shared", dep.provision_id, "https://rt1.example", None)
    assert objects(control_plane, f"anycloud-{pool.id}", dep.provision_id) == []
    assert node_pools.delete_node_pool(app, pool.name).state is PoolState.DELETING


def _ask_gpus(pset_dir: Path, gpus: str) -> None:
    path = pset_dir / "templates/deployment.yaml"
    text = path.read_text().replace(
        'limits: {memory: "{{ resources.memory }}"}',
        f'limits: {{memory: "{{{{ resources.memory }}}}", nvidia.com/gpu: "{gpus}"}}')
    assert "nvidia.com/gpu" in text
    path.write_text(text)


def test_a_gpu_request_on_a_cpu_pool_is_refused_and_nothing_is_created_or_held(
        world: tuple[App, NodePool], control_plane: ControlPlane, tmp_path: Path) -> None:
    """Seed 003: work on a CPU node pool must request no nvidia.com/gpu. Refused before the
    pool records the deployment: no namespace, no object, the pool free to delete."""
    app, pool = world
    pset = the_set(tmp_path, pool.name)
    _ask_gpus(tmp_path, "1")
    dep = deps.create_deployment(app, "train", "web")
    with provisioners(app, pset, tmp_path) as built, pytest.raises(InvalidInput) as err:
        deps.start_deployment(app, "train", pset, built, SMALL)
    assert "work on a CPU node pool must request none" in err.value.message
    assert err.value.field is not None and err.value.field.endswith(
        "containers[0].resources.limits.nvidia.com/gpu")
    assert objects(control_plane, f"anycloud-{pool.id}", dep.provision_id) == []
    assert control_plane.kubectl("get", "namespace", f"anycloud-{pool.id}",
                                 "--ignore-not-found").stdout.strip() == ""
    after = deps.get_deployment(app, "train")
    assert (after.state, after.node_pool_id, after.provisioner) == ("stopped", None, None)
    assert after.last_error and "CPU node pool" in after.last_error
    assert node_pools.delete_node_pool(app, pool.name).state is PoolState.DELETING


def test_a_fractional_gpu_is_refused_on_a_gpu_pool_and_a_whole_one_gets_the_nvidia_runtime(
        world: tuple[App, NodePool], tmp_path: Path) -> None:
    app, _ = world
    gpu = node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name=f"g5{secrets.token_hex(2)}", credentials="team-aws", region="us-east-1",
        zone="us-east-1a", vm_type="g5.xlarge", min_vms=1, max_vms=1))
    assert node_pools.find_pool_placement(app, gpu.name, None, "f").gpus == 1
    pset = the_set(tmp_path, gpu.name)
    _ask_gpus(tmp_path, "500m")
    deps.create_deployment(app, "half", "web")
    with provisioners(app, pset, tmp_path) as built:
        with pytest.raises(InvalidInput, match=r"whole nvidia\.com/gpu devices"):
            deps.start_deployment(app, "half", pset, built, SMALL)
        assert deps.get_deployment(app, "half").node_pool_id is None
        path = tmp_path / "templates/deployment.yaml"
        path.write_text(path.read_text().replace('nvidia.com/gpu: "500m"',
                                                 'nvidia.com/gpu: "1"'))
        # Guarded -> AdmittedNodePool -> NodePoolProvisioner: what it would apply.
        inner = built("pool").inner.inner  # type: ignore[attr-defined]
        [deployment] = [o for o in inner.render("rt-g1", SMALL) if o.kind == "Deployment"]
    pod = deployment.body["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["nodeSelector"] == {"anycloud.sh/node-pool": gpu.id,
                                   "anycloud.sh/accelerator": "nvidia"}
