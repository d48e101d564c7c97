"""``anycloud demo --cluster local``: the demo's cluster side on a real local control plane.

The demo starts its own control plane and sets up its own PULUMI_HOME from the tools
``tools/build.py`` built; it runs in a subprocess, as a user runs it, so what it leaves
behind (processes, files) is what a user would find. Every assertion about the cluster is
on what the demo read back from the API server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from automation.catalog.store import load_catalog
from automation.clock import ManualClock
from automation.devcluster.control_plane import ControlPlane
from automation.devcluster.kubelets import Kubelets
from automation.simulators.cloud import SimVm
from components.join_script import JoinSpec, node_labels, node_taint
from components.naming import node_name
from stacks.pins import load_pins
from tests.automation.kube import objects
from tests.conftest import missing

pytestmark = [pytest.mark.kube, pytest.mark.engine, pytest.mark.slow]

ANYCLOUD = [sys.executable, "-c", "from automation.cli import cli; cli(prog_name='anycloud')"]
DS = "anycloud-nvidia-device-plugin"


def steps_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def of(steps: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [s for s in steps if s["step"] == kind]


def processes_mentioning(text: str) -> list[str]:
    """Command lines of running processes that mention ``text`` (pgrep -f, by hand)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found


@pytest.fixture(scope="module")
def local_demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of ``anycloud demo --cluster local --json``; its JSON lines and where it ran."""
    from automation.devcluster.binaries import ToolMissing
    from automation.devcluster.engine_env import local_tools

    try:
        local_tools()
    except ToolMissing as exc:
        missing(exc.message)
    tmp = tmp_path_factory.mktemp("demo-local")
    env = {**os.environ, "TMPDIR": str(tmp)}
    done = subprocess.run([*ANYCLOUD, "demo", "--cluster", "local", "--json"], env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:] + done.stdout[-4000:]
    return {"steps": steps_of(done.stdout), "stderr": done.stderr, "tmp": tmp}


def test_the_control_plane_is_real_and_gone_afterwards(local_demo: dict[str, Any]) -> None:
    steps = local_demo["steps"]
    started, stopped = of(steps, "controlPlane")
    assert started["data"]["server"].startswith("https://127.0.0.1:")
    assert set(started["data"]["pids"]) == {"etcd", "kube-apiserver", "kube-controller-manager",
                                            "kube-scheduler", "kwok"}
    assert started["data"]["startSeconds"] > 0
    assert stopped["data"]["stopped"] is True
    assert stopped["data"]["pids"] == started["data"]["pids"]
    root = started["data"]["root"]
    assert root.startswith(str(local_demo["tmp"]))
    # Nothing the demo started still runs, and its temporary home is gone.
    assert processes_mentioning(root) == []
    assert processes_mentioning(str(local_demo["tmp"])) == []
    assert subprocess.run(["pgrep", "-f", str(local_demo["tmp"])], check=False,
                          capture_output=True).returncode == 1
    assert not Path(root).exists()
    assert list(Path(local_demo["tmp"]).iterdir()) == []

    # Registered through the real probe: the API server's version and kube-system UID.
    (cluster,) = of(steps, "cluster")
    assert "Kubernetes v1.36.3" in cluster["message"]
    assert "kube-system UID " in cluster["message"]
    assert "real local control plane" in local_demo["stderr"].splitlines()[0]


def test_kubelets_register_nodes_and_released_ones_are_deleted(
        local_demo: dict[str, Any]) -> None:
    steps = local_demo["steps"]
    joins = [s["data"] for s in of(steps, "kubelet") if "registered Node" in s["message"]]
    never = [s for s in of(steps, "kubelet") if "never boots" in s["message"]]
    # cpu-pool: 2 VMs, one of which never boots and is replaced; gpu-pool: 1 VM.
    assert len(never) == 1 and len(joins) == 3
    assert all(j["uid"] and j["created"] for j in joins)  # the API server's answer
    assert never[0]["data"]["attempt"] not in {j["attempt"] for j in joins}
    for j in joins:
        assert j["node"] == node_name(j["attempt"])
        assert j["labels"]["anycloud.sh/attempt"] == j["attempt"]
        assert j["labels"]["anycloud.sh/node-pool"] == j["pool"]
        assert {"key": "anycloud.sh/node-pool", "value": j["pool"],
                "effect": "NoSchedule"} in j["taints"]

    (api,) = of(steps, "apiServer")
    data = api["data"]
    assert sorted(data["registeredNodes"]) == sorted(j["node"] for j in joins)
    # What remains: the GPU pool's Node, Ready, with its device and the ingress entry label.
    (gpu_node,) = data["nodes"]
    gpu_join = next(j for j in joins if j["node"] == gpu_node["name"])
    assert gpu_node["ready"] and gpu_node["gpus"] == 1
    assert gpu_node["labels"]["anycloud.sh/accelerator"] == "nvidia"
    assert gpu_node["labels"]["anycloud.sh/provider"] == "gcp"
    assert gpu_node["labels"]["anycloud.sh/ingress-entry"] == gpu_join["pool"]
    assert f"anycloud.sh/node-pool={gpu_join['pool']}:NoSchedule" in gpu_node["taints"]
    # The cpu-pool's Nodes were deleted (the reconciler removed them; GET answers 404).
    removed = [s["data"]["node"] for s in of(steps, "node") if "removed" in s["message"]]
    assert len(removed) == 2
    assert sorted(data["deletedNodes"]) == sorted(removed)
    assert sorted(data["deletedNodes"]) == sorted(
        j["node"] for j in joins if j["node"] != gpu_node["name"])
    # The GPU arrived once the device plugin ran on the Node.
    (device,) = [s["data"] for s in of(steps, "kubelet") if "device plugin Pod" in s["message"]]
    assert device["node"] == gpu_node["name"] and device["gpus"] == 1
    assert any(p["node"] == gpu_node["name"] and p["ready"]
               for p in data["devicePluginPods"])


def test_pools_converge_and_the_cpu_pool_is_deleted(local_demo: dict[str, Any]) -> None:
    steps = local_demo["steps"]
    assert of(steps, "ready") and of(steps, "deleted")
    (final,) = of(steps, "final")
    assert [(p["name"], p["state"], p["counts"]["ready"]) for p in final["data"]] == [
        ("gpu-pool", "ready", 1)]
    replaced = [s for s in of(steps, "vm") if "did not appear within 10 minutes" in s["message"]]
    assert len(replaced) == 1


def test_addons_are_installed_by_the_real_engine(local_demo: dict[str, Any]) -> None:
    steps = local_demo["steps"]
    ups = [s["data"] for s in of(steps, "engine") if s["data"].get("operation") == "up"]
    assert ups and all(u["engine"] == "pulumi" for u in ups)
    addon_ups = [u for u in ups if u["stack"].startswith("cluster-addons-")]
    assert addon_ups[0]["summary"]["create"] >= 3  # component, RuntimeClass, DaemonSet
    (addons,) = of(steps, "addons")
    assert "apply daemonset" in addons["data"]["actions"]
    data = of(steps, "apiServer")[0]["data"]
    ds, rc = data["daemonSet"], data["runtimeClass"]
    assert ds["namespace"] == "kube-system" and ds["name"] == DS
    assert ds["desired"] == ds["ready"] == 1
    assert any(m.startswith("pulumi-kubernetes") for m in ds["managers"]), ds["managers"]
    assert ds["labels"]["app.kubernetes.io/managed-by"] == "anycloud"
    assert rc["name"] == "nvidia" and any(m.startswith("pulumi") for m in rc["managers"])


def test_node_pools_run_on_the_real_engine_with_the_standin_cloud(
        local_demo: dict[str, Any]) -> None:
    """Every node-pool stack ran on the real engine (its events are the engine's), with the
    stand-in cloud plugins named as such where the user reads the engine set-up."""
    steps = local_demo["steps"]
    (setup,) = [s for s in of(steps, "engine") if "plugins" in s["data"]]
    assert setup["data"]["cloud"] == "stand-in cloud"
    assert "stand-in cloud plugins" in setup["message"]
    assert setup["data"]["plugins"]["aws"] == setup["data"]["plugins"]["gcp"] == (
        "0.0.0-anycloud.standin")
    pools = [s["data"] for s in of(steps, "engine")
             if str(s["data"].get("stack", "")).startswith("node-pool-")]
    ops = {(p["operation"], p["engine"]) for p in pools}
    # Bought, converged, released: every step of a pool's life by the real engine.
    assert {("up", "pulumi"), ("destroy", "pulumi")} <= ops and {e for _, e in ops} == {"pulumi"}
    creates = sum(p["summary"]["create"] for p in pools if p["operation"] == "up")
    assert creates >= 3 * 2  # each VM with its token: 3 first VMs and 1 replacement


def test_missing_tools_fail_before_anything_starts(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "ANYCLOUD_TOOLS_BIN": str(empty), "ANYCLOUD_TOOLS_CACHE": str(empty),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
           "TMPDIR": str(scratch)}
    done = subprocess.run([*ANYCLOUD, "demo", "--cluster", "local", "--json"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "TOOL_MISSING"
    assert "python3 tools/build.py" in error["message"]
    assert list(scratch.iterdir()) == []  # not even the temporary home


# -- the bridge alone, on the session's control plane ----------------------------------------


def test_a_vm_that_boots_registers_the_node_its_join_script_names(
        control_plane: ControlPlane) -> None:
    clock = ManualClock()
    reports: list[tuple[str, str, dict[str, Any]]] = []
    bridge = Kubelets(control_plane.kubeconfig, clock, server_url="https://203.0.113.10:6443",
                      ca_sha256="0" * 64, report=lambda *r: reports.append(r),
                      catalog=load_catalog())
    vm = SimVm(id="i-1", resource_type="aws:ec2/instance:Instance",
               attempt_id="at-kubelets-test1", pool_id="np-kubelets-test", public_ip="198.51.100.7",
               created_at=clock.now().isoformat(), vm_type="m7i.large", cluster_id="cl-kubelets")
    silent = SimVm(id="i-2", resource_type="aws:ec2/instance:Instance",
                   attempt_id="at-kubelets-test2", pool_id="np-kubelets-test",
                   public_ip="198.51.100.8", created_at=clock.now().isoformat(),
                   vm_type="m7i.large", cluster_id="cl-kubelets", boots=False)
    name, never = node_name(vm.attempt_id), node_name(silent.attempt_id)
    try:
        bridge.vm_created(vm)
        bridge.vm_created(silent)
        bridge.sync()
        assert objects.get(control_plane, "node", name) is None  # still booting
        clock.advance(timedelta(minutes=2))
        bridge.sync()
        bridge.settle()  # kwok made it Ready
        node = objects.get(control_plane, "node", name)
        assert node is not None and objects.ready(control_plane, name)
        spec = JoinSpec(provider="aws", server_url="https://203.0.113.10:6443",
                        ca_sha256="0" * 64, cluster_id="cl-kubelets", pool_id=vm.pool_id,
                        attempt_id=vm.attempt_id, k3s=load_pins().k3s)
        assert node_labels(spec).items() <= node["metadata"]["labels"].items()
        key_value, effect = node_taint(vm.pool_id).rsplit(":", 1)
        key, value = key_value.split("=", 1)
        # The join script's taint, and no other of ours; the node lifecycle controller may
        # still hold its own node.kubernetes.io/not-ready taint for a moment.
        ours = [t for t in node["spec"]["taints"]
                if not t["key"].startswith("node.kubernetes.io/")]
        assert ours == [{"key": key, "value": value, "effect": effect}]
        assert node["status"]["capacity"]["cpu"] == "2"  # m7i.large, from the catalog
        assert "nvidia.com/gpu" not in node["status"]["allocatable"]
        assert {"type": "ExternalIP", "address": "198.51.100.7"} in node["status"]["addresses"]
        assert objects.get(control_plane, "node", never) is None

        bridge.vm_deleted(vm)
        assert objects.get(control_plane, "node", name) is None
        assert bridge.history.deleted == [name]
        assert [r[2]["deleted"] for r in reports if "released" in r[1]] == [True]
    finally:
        objects.delete(control_plane, "node", name, never)
        bridge.close()


def test_the_real_engine_without_a_local_cluster_is_refused_before_anything_starts(
        tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([*ANYCLOUD, "demo", "--engine", "pulumi", "--json"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert (error["field"], error["value"]) == ("--engine", "pulumi")
    assert "--cluster local" in error["rule"] and "no API server" in error["rule"]
    assert list(tmp_path.iterdir()) == []  # not even the temporary home
