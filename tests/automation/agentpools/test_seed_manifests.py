"""The AgentPool guide's manifests as a user pastes them, on the real control plane with real
agent processes: only ``apiVersion`` changed (velda.io/v1 -> anycloud.sh/v1), no ConfigMap
of ours (the operator gives the agents the broker address), the GKE GPU pool scheduled as
written, and our own examples under PodSecurity ``restricted``.

Reuses test_e2e_agents' cluster, broker and ``Kubelet`` (agents as local processes)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from automation.agentpools.operator import ControlPlaneConfig, assemble
from automation.agentpools.pods import CONFIG_MOUNT, agent_container
from automation.agentpools.registry import Registry
from automation.api.broker import BrokerThread, create_app
from automation.cli.main import cli
from automation.devcluster.control_plane import KWOK_ANNOTATION, ControlPlane
from automation.ledger.db import Ledger
from tests.automation.agentpools.cases import example
from tests.automation.agentpools.test_e2e_agents import (
    Kubelet,
    apply,
    eventually,
    ledger,
    ns,
    plane,
    pool_pods,
)

SEED = Path(__file__).with_name("seed")
GKE_GPU = {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
__all__ = ["ledger", "ns", "plane"]  # fixtures, used by name


def seed(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SEED / name).read_text()) if d]


def conditions(plane: ControlPlane, ns: str, pool: str) -> dict[str, dict[str, Any]]:
    body = plane.get(f"/apis/anycloud.sh/v1/namespaces/{ns}/agentpools/{pool}")
    return {c["type"]: c for c in (body.get("status") or {}).get("conditions") or []}


@pytest.fixture(scope="module")
def gke_gpu_node(plane: ControlPlane) -> str:
    """A Node as GKE labels and taints its A100 node pools (the seed's GPU pool's target)."""
    name = f"gke-a100-{os.getpid()}"
    plane.apply({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {KWOK_ANNOTATION: "fake"},
        "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   "kubernetes.io/arch": "amd64", **GKE_GPU}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present",
                             "effect": "NoSchedule"}]}})
    resources = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
    plane.patch_status("node", name, {"capacity": resources, "allocatable": resources})
    return name


@pytest.fixture
def served(plane: ControlPlane, ns: str, ledger: Ledger) -> Iterator[Registry]:
    """The broker and an operator configured with its address (no agent ConfigMap)."""
    registry = Registry(ledger)
    broker = BrokerThread(create_app(registry, heartbeat_timeout=timedelta(seconds=5),
                                     expire_every=1.0), "127.0.0.1:0")
    config = ControlPlaneConfig.model_validate({
        "broker": {"address": broker.url},
        "provisioners": [{"kubernetes": {"namespace": ns}}]})
    op = assemble(config, ledger, kubeconfig=plane.kubeconfig, interval=0.5)
    op.start()
    try:
        yield registry
    finally:
        op.stop()
        broker.stop()


@pytest.mark.kube
@pytest.mark.slow
def test_the_seeds_pools_with_only_the_api_version_changed_get_running_agents(
        plane: ControlPlane, ns: str, served: Registry, gke_gpu_node: str,
        tmp_path: Path) -> None:
    docs = seed("velda-config.yaml") + [d for f in ("cpu-pool", "gpu-pool", "shell-pool")
                                        for d in seed(f"{f}-anycloud.yaml")]
    assert [d["apiVersion"] for d in docs] == ["v1"] + ["anycloud.sh/v1"] * 3
    apply(plane, ns, *docs)
    wanted = {"cpu-pool": 3, "gpu-pool": 1, "shell": 1}  # minIdle (cpu: minReplicas 2, idle 3)
    with Kubelet(plane, ns, tmp_path / "pods") as kubelet:
        for pool, n in wanted.items():
            eventually(lambda p=pool, n=n: served.pool_view(f"{ns}/{p}").ready_agents == n,
                       f"{n} registered agent(s) in {pool}", timeout=90)
        for pool in wanted:
            eventually(lambda p=pool: conditions(plane, ns, p)["Ready"]["status"] == "True",
                       f"{pool} Ready", timeout=30)
        assert not kubelet.errors
        # (Checked while the agents run: once they stop, the pools scale up again.)
        for pool, n in wanted.items():
            pods = pool_pods(plane, ns, pool)
            assert len(pods) == n
            for pod in pods:
                agent = agent_container(pod["spec"])
                env = {e["name"]: e.get("value") for e in agent["env"]}
                assert env["ANYCLOUD_BROKER"].startswith("http://127.0.0.1:")
                # Its own ConfigMap is mounted as written; none of ours.
                mounts = {m["mountPath"] for m in agent["volumeMounts"]}
                assert "/run/velda" in mounts and CONFIG_MOUNT not in mounts
        (gpu,) = pool_pods(plane, ns, "gpu-pool")
        assert gpu["spec"]["nodeName"] == gke_gpu_node
        assert gpu["spec"]["nodeSelector"] == GKE_GPU and "runtimeClassName" not in gpu["spec"]


@pytest.mark.kube
@pytest.mark.slow
def test_our_examples_run_under_pod_security_restricted_and_the_seeds_are_refused_by_name(
        plane: ControlPlane, ns: str, served: Registry, tmp_path: Path) -> None:
    plane.kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
    shell = example("shell-pool.yaml")
    privileged = seed("shell-pool-anycloud.yaml")[0]
    privileged["metadata"]["name"] = "privileged-shell"
    privileged["spec"]["template"]["spec"]["containers"][0]["args"] = ["--pool=privileged-shell"]
    apply(plane, ns, *seed("velda-config.yaml"), shell, privileged)
    with Kubelet(plane, ns, tmp_path / "pods"):
        eventually(lambda: served.pool_view(f"{ns}/shell").ready_agents == 1,
                   "the example's agent registered in a restricted namespace", timeout=90)
        c = eventually(lambda: conditions(plane, ns, "privileged-shell").get("Ready", {})
                       .get("reason") == "AdmissionRefused"
                       and conditions(plane, ns, "privileged-shell")["Ready"], "refused")
    assert c["status"] == "False" and "PodSecurity admission refused" in c["message"]
    assert "privileged" in c["message"] and "RBAC" not in c["message"]
    assert pool_pods(plane, ns, "privileged-shell") == []


def test_validate_refuses_the_seeds_api_version_with_the_one_line_change() -> None:
    result = CliRunner().invoke(cli, ["agent-pool", "validate", "-f", str(SEED / "velda.yaml"),
                                      "--json"])
    assert result.exit_code == 2, result.output
    verdicts = yaml.safe_load(result.stdout)["documents"]
    assert [v["verdict"] for v in verdicts] == ["skipped", "invalid", "invalid", "invalid"]
    for v in verdicts[1:]:
        (problem,) = v["problems"]
        assert problem["field"] == "apiVersion" and problem["value"] == "velda.io/v1"
        assert "change that one line to `apiVersion: anycloud.sh/v1`" in problem["rule"]
    fixed = CliRunner().invoke(cli, ["agent-pool", "validate", *(
        a for f in ("cpu-pool", "gpu-pool", "shell-pool")
        for a in ("-f", str(SEED / f"{f}-anycloud.yaml")))])
    assert fixed.exit_code == 0, fixed.output
