"""NvidiaAddons (cluster add-on stack) and TraefikIngress (a pool's ingress release stack)."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pytest
import yaml

from automation.engine.mock.model import ProgramRun
from automation.engine.mock.program import run_program
from components.nvidia import NvidiaAddons
from components.pins import DevicePluginPin
from stacks.cluster_addons import build_program
from stacks.config import ClusterAddonsStackConfig, ClusterRef
from stacks.pins import load_pins

CLUSTER = ClusterRef(
    id="cl-42",
    server_url="https://203.0.113.10:6443",
    ca_sha256="c" * 64,
    kubeconfig_path="/etc/anycloud/kubeconfig",
)


@pytest.fixture(scope="module")
def addons() -> ProgramRun:
    return run_program(build_program(ClusterAddonsStackConfig(cluster=CLUSTER)))


def test_addons_need_an_explicit_kubeconfig() -> None:
    bare = CLUSTER.model_copy(update={"kubeconfig_path": None})
    with pytest.raises(ValueError, match="kubeconfig_path is required"):
        run_program(build_program(ClusterAddonsStackConfig(cluster=bare)))


def test_runtime_class_nvidia(addons: ProgramRun) -> None:
    rc = addons.one("kubernetes:node.k8s.io/v1:RuntimeClass")
    assert rc.inputs["metadata"]["name"] == "nvidia"
    assert rc.inputs["handler"] == "nvidia"
    assert rc.inputs["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "anycloud",
        "anycloud.sh/cluster": "cl-42",
    }


def test_device_plugin_image_is_pinned_by_digest(addons: ProgramRun) -> None:
    ds = addons.one("kubernetes:apps/v1:DaemonSet")
    (ctr,) = ds.inputs["spec"]["template"]["spec"]["containers"]
    assert re.search(r"@sha256:[0-9a-f]{64}$", ctr["image"])
    assert ctr["image"] == load_pins().device_plugin.image
    with pytest.raises(ValueError):
        DevicePluginPin(image="nvcr.io/nvidia/k8s-device-plugin:v0.20.0")


def test_device_plugin_selects_only_this_clusters_gpu_nodes(addons: ProgramRun) -> None:
    ds = addons.one("kubernetes:apps/v1:DaemonSet")
    assert ds.inputs["metadata"]["name"] == "anycloud-nvidia-device-plugin"
    assert ds.inputs["metadata"]["namespace"] == "kube-system"
    pod = ds.inputs["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {
        "anycloud.sh/cluster": "cl-42",
        "anycloud.sh/accelerator": "nvidia",
    }
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {(e["key"], tuple(e["values"])) for e in term["matchExpressions"]} == {
        ("anycloud.sh/cluster", ("cl-42",)),
        ("anycloud.sh/accelerator", ("nvidia",)),
    }
    assert pod["runtimeClassName"] == "nvidia"


def test_device_plugin_tolerates_pool_taints_only(addons: ProgramRun) -> None:
    pod = addons.one("kubernetes:apps/v1:DaemonSet").inputs["spec"]["template"]["spec"]
    assert pod["tolerations"] == [
        {"key": "anycloud.sh/node-pool", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert all(t.get("key") for t in pod["tolerations"])  # never a blanket toleration


def test_addons_are_never_uninstalled_and_are_labelled_ours(addons: ProgramRun) -> None:
    for r in (
        addons.one("kubernetes:apps/v1:DaemonSet"),
        addons.one("kubernetes:node.k8s.io/v1:RuntimeClass"),
    ):
        assert r.options["retainOnDelete"] is True
        assert r.inputs["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "anycloud"
        assert r.urn.split("::")[2].startswith("anycloud:cluster:NvidiaAddons$")


def test_addon_checks_hung_on_the_resources_own_outputs() -> None:
    """Checks run when each resource resolves, on that resource's own outputs."""
    seen: list[str] = []

    def program() -> None:
        addons = NvidiaAddons("nv", "cl-9", load_pins().device_plugin)

        def check_ds(args: list[Any]) -> None:
            urn, metadata = args
            assert metadata["name"] == "anycloud-nvidia-device-plugin", urn
            assert metadata["labels"]["anycloud.sh/cluster"] == "cl-9", urn
            seen.append(urn)

        def check_rc(args: list[Any]) -> None:
            urn, handler = args
            assert handler == "nvidia", urn
            seen.append(urn)

        pulumi.Output.all(addons.daemonset.urn, addons.daemonset.metadata).apply(check_ds)
        pulumi.Output.all(addons.runtime_class.urn, addons.runtime_class.handler).apply(check_rc)

    run_program(program)
    assert len(seen) == 2


# ---------------------------------------------------------------- Traefik


def _release(pool_id: str = "np-7f3k") -> ProgramRun:
    from stacks.config import IngressReleaseStackConfig
    from stacks.ingress_release import build_program as release_program

    return run_program(release_program(IngressReleaseStackConfig(cluster=CLUSTER,
                                                                 pool_id=pool_id)))


def _values(run: ProgramRun) -> tuple[Any, dict[str, Any]]:
    chart = run.one("kubernetes:helm.cattle.io/v1:HelmChart")
    return chart, yaml.safe_load(chart.inputs["spec"]["valuesContent"])


@pytest.mark.parametrize("hosts_service", [False, True])
def test_the_pool_stack_never_holds_the_ingress_release(h: Any, hosts_service: bool) -> None:
    """The release is its own stack (the add-on mechanism); the pool stack keeps only the
    network's port-80 rule for a pool that hosts a Service."""
    run = h.run_pool("aws", hosts_service=hosts_service)
    assert run.of_type("kubernetes:helm.cattle.io/v1:HelmChart") == []
    assert not [r for r in run.resources if "TraefikIngress" in r.type]


def test_traefik_release_is_pinned_and_pool_scoped() -> None:
    chart, values = _values(_release())
    pin = load_pins().traefik
    spec = chart.inputs["spec"]
    assert (spec["repo"], spec["chart"], spec["version"]) == (pin.repo, pin.chart, pin.version)
    assert chart.inputs["apiVersion"] == "helm.cattle.io/v1" and chart.inputs["kind"] == "HelmChart"
    assert chart.urn.split("::")[2].startswith("anycloud:cluster:TraefikIngress$")
    assert chart.inputs["metadata"]["name"] == "anycloud-ingress-np-7f3k"
    assert chart.inputs["metadata"]["namespace"] == "kube-system"
    assert chart.inputs["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/cluster": "cl-42",
        "anycloud.sh/node-pool": "np-7f3k"}
    assert values["deployment"]["kind"] == "DaemonSet"
    assert values["nodeSelector"]["anycloud.sh/ingress-entry"] == "np-7f3k"
    assert values["ports"]["web"]["hostPort"] == 80
    assert values["tolerations"] == [
        {
            "key": "anycloud.sh/node-pool",
            "operator": "Equal",
            "value": "np-7f3k",
            "effect": "NoSchedule",
        }
    ]
    selector = "anycloud.sh/ingress-pool=np-7f3k"
    assert values["providers"]["kubernetesCRD"]["labelSelector"] == selector
    assert values["providers"]["kubernetesIngress"]["labelSelector"] == selector
    assert values["service"]["enabled"] is False
    assert values["ingressClass"]["enabled"] is False


def test_install_job_runs_on_the_management_node() -> None:
    """``bootstrap: true`` is the one HelmChart field that places the helm-controller's install
    Job: control-plane nodeSelector, hostNetwork, the control-plane taints tolerated. Traefik's
    own Pods are placed by the values, never on the management Node."""
    chart, values = _values(_release())
    assert chart.inputs["spec"]["bootstrap"] is True
    assert "node-role.kubernetes.io/control-plane" not in values["nodeSelector"]
    assert not [t for t in values["tolerations"]
                if t["key"] in ("node-role.kubernetes.io/control-plane", "CriticalAddonsOnly")
                or t.get("operator") == "Exists"]


def test_each_pool_gets_its_own_release() -> None:
    a, b = _release("np-a").one("kubernetes:helm.cattle.io/v1:HelmChart"), _release(
        "np-b").one("kubernetes:helm.cattle.io/v1:HelmChart")
    assert a.inputs["metadata"]["name"] != b.inputs["metadata"]["name"]
    assert a.inputs["spec"]["targetNamespace"] == a.inputs["metadata"]["name"]
