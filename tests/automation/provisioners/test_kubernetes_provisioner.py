"""The kubernetes and nodepool provisioners on the real API server (``control_plane``): kwok
plays the kubelets, so a Deployment's pods run on kwok Nodes and the Deployment goes
Available as on a real cluster; the scheduler, the PV binder and the garbage collector are
the real ones. The shipped templates (k8s/runtime-templates) are used, copied per test so a
test can change one."""

from __future__ import annotations

import json
import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from automation.devcluster.control_plane import ControlPlane
from automation.errors import Conflict, InvalidInput
from automation.provisioners.base import ProvisionRequest
from automation.provisioners.kubernetes import (
    CHECKSUM_ANNOTATION,
    FIELD_MANAGER,
    PROVISION_ID_LABEL,
    KubernetesProvisioner,
    NodePoolProvisioner,
    NotReady,
    PoolTarget,
)
from automation.provisioners.objects import differences, place_on_pool
from automation.provisioners.provisioner_set import KubernetesSpec, NodePoolSpec, TemplatePaths
from tests.automation.kube.objects import get, node, wait_for

REPO = Path(__file__).resolve().parents[3]
KINDS = ("deployment", "service", "persistentvolumeclaim", "ingress")
IMAGE = "registry.k8s.io/pause:3.10"
BIG = {"cpu": "1000", "memory": "4Ti", "pods": "1000"}


# -- pure rules (no cluster) -----------------------------------------------------------------


def test_place_on_pool_sets_exactly_the_pools_selector_and_toleration() -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c"}],
                            "tolerations": [{"key": "x", "operator": "Exists"}]}
    place_on_pool(spec, "np-1", "f")
    assert spec["nodeSelector"] == {"anycloud.sh/node-pool": "np-1"}
    assert spec["tolerations"] == [
        {"key": "x", "operator": "Exists"},
        {"key": "anycloud.sh/node-pool", "operator": "Equal", "value": "np-1",
         "effect": "NoSchedule"}]
    place_on_pool(spec, "np-1", "f")  # again: nothing added twice
    assert len(spec["tolerations"]) == 2


@pytest.mark.parametrize("spec, where", [
    ({"tolerations": [{"operator": "Exists"}]}, "f.tolerations[0]"),
    ({"tolerations": [{"key": "anycloud.sh/node-pool", "operator": "Exists"}]},
     "f.tolerations[0]"),
    ({"tolerations": [{"key": "anycloud.sh/node-pool", "operator": "Equal",
                       "value": "np-2", "effect": "NoSchedule"}]}, "f.tolerations[0]"),
    ({"nodeSelector": {"anycloud.sh/node-pool": "np-2"}},
     "f.nodeSelector.anycloud.sh/node-pool"),
    ({"nodeName": "somewhere"}, "f.nodeName"),
])
def test_place_on_pool_refuses_a_wider_template(spec: dict[str, Any], where: str) -> None:
    with pytest.raises(InvalidInput) as err:
        place_on_pool(spec, "np-1", "f")
    assert err.value.field == where


@given(st.recursive(st.one_of(st.integers(), st.text(max_size=5), st.booleans()),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=12))
def test_differences_none_against_itself_and_extra_fields_ignored(want: Any) -> None:
    assert list(differences(want, want)) == []
    if isinstance(want, dict):
        assert list(differences(want, {**want, "added-by-server": 1}
                                if "added-by-server" not in want else want)) == []


def test_differences_names_the_field_and_reads_quantities() -> None:
    want = {"spec": {"replicas": 1, "cpu": "1000m", "ports": [{"port": 80}]}}
    assert list(differences(want, {"spec": {"replicas": 1, "cpu": "1", "ports": [
        {"port": 80, "protocol": "TCP"}]}})) == []
    assert list(differences(want, {"spec": {"replicas": 3, "cpu": "1", "ports": [
        {"port": 80}]}})) == ["spec.replicas is 3, applied 1"]


def _resources(objects: list[Any]) -> tuple[dict[str, str], str]:
    body = {o.key: o.body for o in objects}
    container = body["deployment"]["spec"]["template"]["spec"]["containers"][0]
    return (container["resources"]["requests"],
            body["pvc"]["spec"]["resources"]["requests"]["storage"])


def test_slots_size_what_a_deployment_leaves_out(tmp_path: Path) -> None:
    """Rill sizes a runtime by its slots: N slots are N times the set's per_slot (1 CPU, 2Gi,
    10Gi by default), and an explicit --cpu/--memory/--storage wins."""
    shutil.copytree(REPO / "k8s/runtime-templates", tmp_path / "templates")
    spec = dict(timeout_seconds=5, data_dir="/data", image=IMAGE, host="http://rt-*.x",
                namespace="rt", kubeconfig_path=str(tmp_path / "none"),
                template_paths=_paths())
    default = KubernetesProvisioner("k8s", KubernetesSpec(**spec), tmp_path)
    requests, claim = _resources(default.render("rt-1", ProvisionRequest(slots=3)))
    assert (requests["cpu"], requests["memory"], claim) == ("3", "6Gi", "30Gi")
    requests, claim = _resources(default.render("rt-1", ProvisionRequest()))
    assert (requests["cpu"], requests["memory"], claim) == ("1", "2Gi", "10Gi")
    sized = KubernetesProvisioner("k8s", KubernetesSpec(
        **spec, per_slot={"cpu": "500m", "memory": "1.5Gi", "storage": "20Gi"}), tmp_path)
    requests, claim = _resources(sized.render(
        "rt-1", ProvisionRequest(slots=4, memory="3Gi")))
    assert (requests["cpu"], requests["memory"], claim) == ("2000m", "3Gi", "80Gi")


@pytest.mark.parametrize("per_slot", [{"cpu": "lots"}, {"memory": "-1Gi"}, {"disk": "1Gi"}])
def test_a_per_slot_that_is_not_a_quantity_is_refused(per_slot: dict[str, str]) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        KubernetesSpec(timeout_seconds=5, data_dir="/d", image=IMAGE, host="http://rt-*.x",
                       namespace="rt", kubeconfig_path="k", template_paths=_paths(),
                       per_slot=per_slot)
    assert err.value.errors()[0]["loc"][:2] == ("per_slot", next(iter(per_slot)))


# -- on the real API server ------------------------------------------------------------------




@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> ControlPlane:
    """One untainted kwok Node with room for every test's pods."""
    name = f"prov-{secrets.token_hex(3)}"
    node(control_plane, name)
    control_plane.patch_status("node", name, {"capacity": BIG, "allocatable": BIG})
    return control_plane


@pytest.fixture
def ns(plane: ControlPlane) -> Iterator[str]:
    name = f"prov-{secrets.token_hex(4)}"
    yield name
    plane.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found")


@pytest.fixture
def templates(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "k8s/runtime-templates", tmp_path / "templates")
    return tmp_path


def _paths(**over: str | None) -> TemplatePaths:
    paths: dict[str, str | None] = {
        "deployment": "templates/deployment.yaml", "service": "templates/service.yaml",
        "pvc": "templates/pvc.yaml", "http_ingress": "templates/http_ingress.yaml",
        "grpc_ingress": "templates/grpc_ingress.yaml"}
    paths.update(over)
    return TemplatePaths(**paths)


@pytest.fixture
def make(plane: ControlPlane, templates: Path, ns: str
         ) -> Iterator[Callable[..., KubernetesProvisioner]]:
    made: list[KubernetesProvisioner] = []

    def build(timeout: int = 30, **paths: str | None) -> KubernetesProvisioner:
        spec = KubernetesSpec(timeout_seconds=timeout, data_dir="/data", image=IMAGE,
                              host="http://rt-*.localhost", namespace=ns,
                              kubeconfig_path=str(plane.kubeconfig),
                              template_paths=_paths(**paths))
        p = KubernetesProvisioner("k8s", spec, templates, poll_seconds=0.1)
        made.append(p)
        return p

    yield build
    for p in made:
        p.close()


@pytest.fixture
def volumes(plane: ControlPlane) -> Iterator[Callable[[str, str], None]]:
    """A PersistentVolume pre-bound to one claim: no storage provisioner runs here, so the
    real PV binder binds the claim to it (as a static provisioner's PVs would be)."""
    made: list[str] = []

    def volume(namespace: str, claim: str, size: str = "10Gi") -> None:
        name = f"pv-{namespace}-{claim}"
        plane.apply({"apiVersion": "v1", "kind": "PersistentVolume",
                     "metadata": {"name": name},
                     "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                              "hostPath": {"path": f"/tmp/{name}"},
                              "persistentVolumeReclaimPolicy": "Retain",
                              "claimRef": {"namespace": namespace, "name": claim}}})
        made.append(name)

    yield volume  # type: ignore[misc]
    if made:
        plane.kubectl("delete", "pv", *made, "--wait=false", "--ignore-not-found")


def _labelled(plane: ControlPlane, ns: str, selector: str) -> list[dict[str, Any]]:
    done = plane.kubectl("get", ",".join(KINDS), "-n", ns, "-l", selector, "-o", "json",
                         "--show-managed-fields")
    return list(json.loads(done.stdout)["items"])


def _pods(plane: ControlPlane, ns: str, pid: str) -> list[dict[str, Any]]:
    done = plane.kubectl("get", "pods", "-n", ns, "-l", f"{PROVISION_ID_LABEL}={pid}",
                         "-o", "json")
    return [p for p in json.loads(done.stdout)["items"]
            if not p["metadata"].get("deletionTimestamp")]


@pytest.mark.kube
def test_provision_applies_every_template_labelled_under_our_field_manager(
        plane: ControlPlane, make: Callable[..., KubernetesProvisioner], ns: str) -> None:
    p = make()
    assert get(plane, "namespace", ns) is None
    done = p.provision("rt-a1", ProvisionRequest(cpu="250m", memory="64Mi", storage="1Gi"))
    assert done.host == "http://rt-rt-a1.localhost" and done.data_dir == "/data"
    objects = _labelled(plane, ns, f"{PROVISION_ID_LABEL}=rt-a1")
    assert sorted((o["kind"], o["metadata"]["name"]) for o in objects) == [
        ("Deployment", "runtime-rt-a1"), ("Ingress", "runtime-rt-a1-grpc"),
        ("Ingress", "runtime-rt-a1-http"), ("PersistentVolumeClaim", "runtime-rt-a1"),
        ("Service", "runtime-rt-a1")]
    for o in objects:
        assert o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "anycloud"
        managers = {(m["manager"], m["operation"]) for m in o["metadata"]["managedFields"]}
        assert (FIELD_MANAGER, "Apply") in managers, o["metadata"]["name"]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert deployment["metadata"]["annotations"][CHECKSUM_ANNOTATION] == done.checksum
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "64Mi"}
    assert container["args"] == ["--host=http://rt-rt-a1.localhost", "--data-dir=/data"]
    claim = next(o for o in objects if o["kind"] == "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    namespace = get(plane, "namespace", ns)
    assert namespace is not None
    assert namespace["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "anycloud"


@pytest.mark.kube
def test_ready_once_kwok_runs_the_pod_and_check_is_healthy(
        plane: ControlPlane, make: Callable[..., KubernetesProvisioner], ns: str,
        volumes: Callable[[str, str], None]) -> None:
    p = make()
    volumes(ns, "runtime-rt-b1")
    done = p.provision("rt-b1", ProvisionRequest(cpu="100m", memory="64Mi"))
    p.await_ready(done)
    pods = _pods(plane, ns, "rt-b1")
    assert [pod["status"]["phase"] for pod in pods] == ["Running"]
    health = p.check("rt-b1")
    assert health.ok, health.detail


@pytest.mark.kube
def test_a_pod_that_can_never_schedule_times_out_naming_the_cause(
        plane: ControlPlane, make: Callable[..., KubernetesProvisioner], ns: str,
        volumes: Callable[[str, str], None]) -> None:
    p = make(timeout=3)
    volumes(ns, "runtime-rt-c1")
    done = p.provision("rt-c1", ProvisionRequest(cpu="100000", memory="64Mi"))
    with pytest.raises(NotReady) as err:
        p.await_ready(done)
    message = err.value.message
    assert "Deployment runtime-rt-c1 not available after 3 s" in message
    assert "Pending" in message and "PodScheduled=False (Unschedulable" in message
    assert "Insufficient cpu" in message
    health = p.check("rt-c1")
    assert not health.ok and "Insufficient cpu" in health.detail


@pytest.mark.kube
def test_provisioning_the_same_id_twice_changes_nothing(
        plane: ControlPlane, make: Callable[..., KubernetesProvisioner], ns: str) -> None:
    p = make()
    request = ProvisionRequest(cpu="100m", memory="64Mi")
    first = p.provision("rt-d1", request)
    # The claim's resourceVersion moves on its own (the PV binder writes it): compare the
    # fields we manage (managedFields of anycloud) rather than versions for every object.
    def state() -> dict[tuple[str, str], Any]:
        return {(o["kind"], o["metadata"]["uid"]): [
            m for m in o["metadata"]["managedFields"] if m["manager"] == FIELD_MANAGER]
            for o in _labelled(plane, ns, f"{PROVISION_ID_LABEL}=rt-d1")}

    before = state()
    second = p.provision("rt-d1", request)
    after = state()
    assert first == second
    assert after == before and len(after) == 5
    replica_sets = json.loads(plane.kubectl(
        "get", "replicasets", "-n", ns, "-l", f"{PROVISION_ID_LABEL}=rt-d1",
        "-o", "json").stdout)["items"]
    assert len(replica_sets) == 1


@pytest.mark.kube
def test_a_claim_is_never_shrunk_and_nothing_is_applied(
        plane: ControlPlane, make: Callable[..., KubernetesProvisioner], ns: str) -> None:
    p = make()
    p.provision("rt-e1", ProvisionRequest(cpu="100m", memory="64Mi", storage="10Gi"))
    with pytest.raises(Conflict) as err:
        p.provision("rt-e1", ProvisionRequest(cpu="200m", memory="64Mi", storage="5Gi"))
    assert "10Gi" in err.value.message and "5Gi" in err.value.message
    assert err.value.code == "PVC_SHRINK"
    deployment = get(plane, "deployment", "runtime-rt-e1", ns)
    assert deployment is not None
    requests = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests["cpu"] == "100m"  # the refused provision applied nothing
    claim = get(plane, "pvc", "runtime-rt-e1", ns)
    assert claim is not None and claim["spec"]["resources"]["requests"]["storage"] == "10Gi"


@pytest.mark.kube
def test_drift_after_a_hand_edit_and_provision_takes_it_back(
        plane: ControlPlane, make: Callable[..., KubernetesProvisioner], ns: str,
        volumes: Callable[[str, str], None]) -> None:
    p = make()
    volumes(ns, "runtime-rt-f1")
    request = ProvisionRequest(cpu="100m", memory="64Mi")
    p.await_ready(p.provision("rt-f1", request))
    assert p.check("rt-f1").ok
    # What `kubectl edit` does: an update under another field manager.
    plane.kubectl("patch", "deployment", "runtime-rt-f1", "-n", ns, "--type=json", "-p",
                  json.dumps([{"op": "replace", "path": "/spec/template/spec/containers/0/image",
                               "value": "example/other:2"}]))
    health = p.check("rt-f1")
    assert not health.ok
    assert ("Deployment runtime-rt-f1 edited by hand: spec.template.spec.containers[0].image "
            f'is "example/other:2", applied "{IMAGE}"') in health.detail
    assert "templates changed" not in health.detail
    again = p.provision("rt-f1", request)
    assert any("took back fields" in w and "kubectl-patch" in w for w in again.warnings), \
        again.warnings
    deployment = get(plane, "deployment", "runtime-rt-f1", ns)
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
    p.await_ready(again)
    assert p.check("rt-f1").ok


@pytest.mark.kube
def test_drift_after_a_template_change(
        plane: ControlPlane, make: Callable[..., KubernetesProvisioner], ns: str,
        templates: Path, volumes: Callable[[str, str], None]) -> None:
    p = make()
    volumes(ns, "runtime-rt-g1")
    done = p.provision("rt-g1", ProvisionRequest(cpu="100m", memory="64Mi"))
    p.await_ready(done)
    assert p.check("rt-g1").ok
    service = templates / "templates/service.yaml"
    service.write_text(service.read_text() + "    - {name: metrics, port: 9100}\n")
    health = p.check("rt-g1")
    assert not health.ok
    assert f"templates changed since provisioning ({CHECKSUM_ANNOTATION} " \
           f"{done.checksum[:12]}" in health.detail  # type: ignore[index]
    again = p.provision("rt-g1", ProvisionRequest(cpu="100m", memory="64Mi"))
    assert again.checksum != done.checksum
    live = get(plane, "service", "runtime-rt-g1", ns)
    assert live is not None and [x["name"] for x in live["spec"]["ports"]] == [
        "http", "grpc", "metrics"]
    # The re-apply changed the Deployment: until its controller has observed the new spec
    # the runtime is rightly not reported available (this raced in CI), so wait as a start does.
    p.await_ready(again)
    assert p.check("rt-g1").ok


@pytest.mark.kube
def test_deprovision_deletes_exactly_its_objects(
        plane: ControlPlane, make: Callable[..., KubernetesProvisioner], ns: str) -> None:
    p = make()
    request = ProvisionRequest(cpu="100m", memory="64Mi")
    p.provision("rt-h1", request)
    p.provision("rt-h2", request)
    # Another object in the namespace that merely looks like ours: never deleted.
    plane.apply({"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "bystander", "namespace": ns,
        "labels": {PROVISION_ID_LABEL: "rt-h1"}},
        "spec": {"ports": [{"port": 80}]}})
    assert p.deprovision("rt-h1") is True
    assert _labelled(plane, ns, f"{PROVISION_ID_LABEL}=rt-h1") == [
        x for x in _labelled(plane, ns, f"{PROVISION_ID_LABEL}=rt-h1")
        if x["metadata"]["name"] == "bystander"]
    assert get(plane, "pvc", "runtime-rt-h1", ns) is None
    assert get(plane, "service", "bystander", ns) is not None
    assert len(_labelled(plane, ns, f"{PROVISION_ID_LABEL}=rt-h2")) == 5
    assert p.deprovision("rt-h1") is False
    assert not p.check("rt-h1").ok


@pytest.mark.kube
def test_an_object_of_another_id_is_never_taken_over(
        plane: ControlPlane, make: Callable[..., KubernetesProvisioner], ns: str) -> None:
    p = make()
    plane.kubectl("create", "namespace", ns)
    plane.apply({"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "runtime-rt-i1", "namespace": ns}, "spec": {"ports": [{"port": 80}]}})
    with pytest.raises(Conflict) as err:
        p.provision("rt-i1", ProvisionRequest())
    assert err.value.code == "OBJECT_EXISTS" and "Service runtime-rt-i1" in err.value.message
    assert get(plane, "deployment", "runtime-rt-i1", ns) is None


# -- nodepool ---------------------------------------------------------------------------------


@pytest.fixture
def pools(plane: ControlPlane) -> Iterator[tuple[str, str]]:
    """Two node pools, one tainted kwok Node each, as the reconciler labels and taints them."""
    ids = (f"np-{secrets.token_hex(3)}", f"np-{secrets.token_hex(3)}")
    for pool_id in ids:
        node(plane, f"node-{pool_id}", {"anycloud.sh/node-pool": pool_id},
             taints=[{"key": "anycloud.sh/node-pool", "value": pool_id,
                      "effect": "NoSchedule"}])
        plane.patch_status("node", f"node-{pool_id}", {"capacity": BIG, "allocatable": BIG})
    yield ids
    plane.kubectl("delete", "node", *(f"node-{i}" for i in ids), "--ignore-not-found")
    for pool_id in ids:
        plane.kubectl("delete", "namespace", f"anycloud-{pool_id}", "--wait=false",
                      "--ignore-not-found")


def _pool_provisioner(plane: ControlPlane, templates: Path, pool_id: str,
                      timeout: int = 30) -> NodePoolProvisioner:
    spec = NodePoolSpec(timeout_seconds=timeout, data_dir="/data", image=IMAGE,
                        host="http://np-*.localhost", node_pool=pool_id,
                        template_paths=_paths(pvc=None, http_ingress=None, grpc_ingress=None))
    target = PoolTarget(pool_id=pool_id, namespace=f"anycloud-{pool_id}",
                        kubeconfig_path=str(plane.kubeconfig), context="local")
    return NodePoolProvisioner("pool", spec, target, templates)


def _without_volume(templates: Path) -> None:
    """The shipped Deployment without its claim: these tests are about placement."""
    path = templates / "templates/deployment.yaml"
    text = path.read_text()
    path.write_text(text[:text.index("          volumeMounts:")])


@pytest.mark.kube
def test_nodepool_places_pods_on_exactly_the_pools_node(
        plane: ControlPlane, templates: Path, pools: tuple[str, str]) -> None:
    pool_id, other = pools
    _without_volume(templates)
    p = _pool_provisioner(plane, templates, pool_id)
    try:
        done = p.provision("np-a1", ProvisionRequest(cpu="100m", memory="64Mi"))
        p.await_ready(done)
    finally:
        p.close()
    ns = f"anycloud-{pool_id}"
    namespace = get(plane, "namespace", ns)
    assert namespace is not None
    assert namespace["metadata"]["labels"]["anycloud.sh/node-pool"] == pool_id
    deployment = get(plane, "deployment", "runtime-np-a1", ns)
    assert deployment is not None
    pod_spec = deployment["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {"anycloud.sh/node-pool": pool_id}
    assert pod_spec["tolerations"] == [{"key": "anycloud.sh/node-pool", "operator": "Equal",
                                        "value": pool_id, "effect": "NoSchedule"}]
    pods = _pods(plane, ns, "np-a1")
    assert [(x["spec"]["nodeName"], x["status"]["phase"]) for x in pods] == [
        (f"node-{pool_id}", "Running")]
    assert f"node-{other}" not in {x["spec"]["nodeName"] for x in pods}


@pytest.mark.kube
@pytest.mark.parametrize("insert, field", [
    ("      tolerations: [{operator: Exists}]\n", "tolerations[0]"),
    ("      nodeSelector: {anycloud.sh/node-pool: OTHER}\n", "nodeSelector"),
])
def test_nodepool_refuses_a_template_reaching_another_pool(
        plane: ControlPlane, templates: Path, pools: tuple[str, str], insert: str,
        field: str) -> None:
    pool_id, other = pools
    _without_volume(templates)
    path = templates / "templates/deployment.yaml"
    text = path.read_text()
    at = text.index("      containers:")
    path.write_text(text[:at] + insert.replace("OTHER", other) + text[at:])
    p = _pool_provisioner(plane, templates, pool_id)
    try:
        with pytest.raises(InvalidInput) as err:
            p.provision("np-b1", ProvisionRequest())
    finally:
        p.close()
    assert err.value.field is not None and field in err.value.field
    assert get(plane, "namespace", f"anycloud-{pool_id}") is None  # nothing applied


def _gpu_template(templates: Path, gpus: str, runtime: str | None = None) -> None:
    """The shipped Deployment (no claim) asking ``gpus`` nvidia.com/gpu (limits == requests),
    under ``runtime`` when given."""
    path = templates / "templates/deployment.yaml"
    shutil.copy(REPO / "k8s/runtime-templates/deployment.yaml", path)
    _without_volume(templates)
    text = path.read_text().replace(
        'limits: {memory: "{{ resources.memory }}"}',
        f'limits: {{memory: "{{{{ resources.memory }}}}", nvidia.com/gpu: "{gpus}"}}').replace(
        'requests: {cpu: "{{ resources.cpu }}", memory: "{{ resources.memory }}"}',
        'requests: {cpu: "{{ resources.cpu }}", memory: "{{ resources.memory }}", '
        f'nvidia.com/gpu: "{gpus}"}}')
    if runtime is not None:
        at = text.index("      containers:")
        text = text[:at] + f"      runtimeClassName: {runtime}\n" + text[at:]
    path.write_text(text)


def _offline_pool(templates: Path, gpus: int) -> NodePoolProvisioner:
    spec = NodePoolSpec(timeout_seconds=5, data_dir="/data", image=IMAGE,
                        host="http://np-*.localhost", node_pool="np-g",
                        template_paths=_paths(pvc=None, http_ingress=None, grpc_ingress=None))
    target = PoolTarget(pool_id="np-g", namespace="anycloud-np-g",
                        kubeconfig_path="/nonexistent/kubeconfig", gpus=gpus)
    return NodePoolProvisioner("pool", spec, target, templates)


def _deployment_spec(objects: list[Any]) -> dict[str, Any]:
    [deployment] = [o for o in objects if o.kind == "Deployment"]
    return deployment.body["spec"]["template"]["spec"]


def test_nodepool_on_a_gpu_pool_runs_gpu_work_under_the_nvidia_runtime(
        templates: Path) -> None:
    _gpu_template(templates, "2")
    spec = _deployment_spec(_offline_pool(templates, gpus=4).render("np-g1",
                                                                     ProvisionRequest()))
    assert spec["runtimeClassName"] == "nvidia"
    assert spec["nodeSelector"] == {"anycloud.sh/node-pool": "np-g",
                                    "anycloud.sh/accelerator": "nvidia"}
    # A template that names the nvidia runtime itself is the same.
    _gpu_template(templates, "1", runtime="nvidia")
    spec = _deployment_spec(_offline_pool(templates, gpus=1).render("np-g1",
                                                                     ProvisionRequest()))
    assert spec["runtimeClassName"] == "nvidia"


@pytest.mark.parametrize("gpus", ["0.5", "500m", "1.5"])
def test_nodepool_refuses_a_fractional_gpu(templates: Path, gpus: str) -> None:
    _gpu_template(templates, gpus)
    with pytest.raises(InvalidInput, match=r"whole nvidia\.com/gpu devices") as err:
        _offline_pool(templates, gpus=4).render("np-g1", ProvisionRequest())
    assert err.value.field == ("pool.spec.template_paths.deployment spec.template.spec."
                               "containers[0].resources.limits.nvidia.com/gpu")
    assert err.value.value == gpus


def test_nodepool_refuses_another_runtime_class_on_a_gpu_pool(templates: Path) -> None:
    _gpu_template(templates, "1", runtime="runc")
    with pytest.raises(InvalidInput, match="must run under the nvidia RuntimeClass") as err:
        _offline_pool(templates, gpus=1).render("np-g1", ProvisionRequest())
    assert err.value.field == ("pool.spec.template_paths.deployment spec.template.spec."
                               "runtimeClassName")
    assert err.value.value == "runc"


def test_nodepool_refuses_gpu_work_on_a_cpu_pool_and_more_than_one_node_has(
        templates: Path) -> None:
    _gpu_template(templates, "1")
    with pytest.raises(InvalidInput, match="work on a CPU node pool must request none"):
        _offline_pool(templates, gpus=0).render("np-g1", ProvisionRequest())
    _gpu_template(templates, "8")
    with pytest.raises(InvalidInput, match="no more than one Node advertises"):
        _offline_pool(templates, gpus=4).render("np-g1", ProvisionRequest())
    # CPU work on a CPU pool: no runtime class, no accelerator selector.
    shutil.copy(REPO / "k8s/runtime-templates/deployment.yaml",
                templates / "templates/deployment.yaml")
    _without_volume(templates)
    spec = _deployment_spec(_offline_pool(templates, gpus=0).render("np-g1",
                                                                     ProvisionRequest()))
    assert "runtimeClassName" not in spec
    assert spec["nodeSelector"] == {"anycloud.sh/node-pool": "np-g"}


@pytest.mark.kube
def test_nodepool_refuses_a_gpu_request_on_a_cpu_pool_before_creating_anything(
        plane: ControlPlane, templates: Path, pools: tuple[str, str]) -> None:
    pool_id, _ = pools
    _gpu_template(templates, "1")
    p = _pool_provisioner(plane, templates, pool_id)  # gpus=0: a CPU pool
    try:
        with pytest.raises(InvalidInput, match="CPU node pool"):
            p.preflight("np-c1", ProvisionRequest())
        with pytest.raises(InvalidInput, match="CPU node pool"):
            p.provision("np-c1", ProvisionRequest())
    finally:
        p.close()
    assert get(plane, "namespace", f"anycloud-{pool_id}") is None  # nothing applied


@pytest.mark.kube
@pytest.mark.slow
def test_a_deleted_pools_node_leaves_the_pod_pending(
        plane: ControlPlane, templates: Path, pools: tuple[str, str]) -> None:
    """The pool's Node is deleted (what deleting a pool's VM does), and with it the pod
    bound to it. The ReplicaSet's new pod then has no Node it may go to (the other pool's
    Node is tainted, the untainted one lacks the label): it stays Pending, and check names
    why. The pod is force-deleted here as kube-controller-manager's pod GC does to a pod
    whose Node is gone (pkg/controller/podgc: a delete with grace period 0), without its
    fixed 40 s quarantine (not a flag), which made this test take a minute: what follows
    the deletion is the ReplicaSet's and the scheduler's, both real."""
    pool_id, _ = pools
    _without_volume(templates)
    p = _pool_provisioner(plane, templates, pool_id, timeout=3)
    ns = f"anycloud-{pool_id}"
    try:
        p.await_ready(p.provision("np-c1", ProvisionRequest(cpu="100m", memory="64Mi")))
        assert p.check("np-c1").ok
        [running] = _pods(plane, ns, "np-c1")
        plane.kubectl("delete", "node", f"node-{pool_id}")
        plane.kubectl("delete", "pod", "-n", ns, running["metadata"]["name"],
                      "--grace-period=0", "--force")

        def pending() -> list[dict[str, Any]]:
            return [x for x in _pods(plane, ns, "np-c1")
                    if x["metadata"]["uid"] != running["metadata"]["uid"]
                    and any(c["type"] == "PodScheduled" and c["status"] == "False"
                            for c in x["status"].get("conditions") or [])]

        [waiting] = wait_for("the successor pod unschedulable", pending, timeout=60)
        assert waiting["status"]["phase"] == "Pending" and not waiting["spec"].get("nodeName")
        health = wait_for("check to see the pod", lambda: (h := p.check("np-c1")).detail
                          and "Unschedulable" in h.detail and h)
        assert not health.ok and "not available" in health.detail
        assert "didn't match Pod's node affinity/selector" in health.detail
    finally:
        p.close()


@pytest.mark.kube
def test_preflight_asks_the_api_servers_rbac_and_changes_nothing(
        plane: ControlPlane, make: Callable[..., KubernetesProvisioner], ns: str,
        templates: Path, tmp_path: Path) -> None:
    from automation.errors import AnycloudError

    make().preflight("rt-pre", ProvisionRequest())  # the admin: allowed, nothing made
    assert get(plane, "namespace", ns) is None
    weak = plane.token_kubeconfig(tmp_path / "weak.kubeconfig", "no-rights", "prov-weak")
    spec = KubernetesSpec(timeout_seconds=5, data_dir="/data", image=IMAGE,
                          host="http://rt-*.localhost", namespace=ns,
                          kubeconfig_path=str(weak), template_paths=_paths())
    p = KubernetesProvisioner("k8s-weak", spec, templates)
    try:
        with pytest.raises(AnycloudError) as err:
            p.preflight("rt-pre", ProvisionRequest())
    finally:
        p.close()
    assert err.value.code == "NAMESPACE_NOT_ALLOWED" and ns in err.value.message
