"""``node-pool status``'s ingress view: with_ingress over the cluster port, and the CLI's
JSON and human lines end to end against the real control plane (``control_plane``)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import Result

from automation.cli.node_pool import _show
from automation.clock import ManualClock
from automation.devcluster.control_plane import ControlPlane, free_port
from automation.kube.adapter import KubernetesCluster
from automation.kube.port import ClusterUnavailable, IngressObjects, ingress_release_name
from automation.models import (
    HelmJob,
    IngressDaemonSet,
    IngressRelease,
    IngressView,
    NodePoolStatus,
    PoolState,
    VmCounts,
)
from automation.services.ingress_status import IngressReader, with_ingress
from automation.simulators.cluster import SimulatedCluster
from tests.automation.conftest import DEMO_CA, ok_json
from tests.automation.kube import objects
from tests.automation.kube.conftest import Recorder, Sent, record_requests
from tests.automation.kube.ingress_objects import plain_node, pool_release
from tests.automation.kube.objects import wait_for
from tests.automation.kube.test_ingress import (
    CRASH_LOOP,
    TERMINATED_OK,
    daemon_set_json,
    helm_chart_json,
    job_json,
    pod_json,
)
from tests.automation.kube_api_server import write_kubeconfig
from tests.automation.test_cli import ANYCLOUD, GUARDED, _subprocess
from tests.imports import _PROBE

STAMP = datetime(2026, 7, 1, 12, 0, tzinfo=UTC)


def pool_status(pool_id: str, *, hosts_service: bool,
                entry_ip: str | None = None) -> NodePoolStatus:
    return NodePoolStatus(
        id=pool_id, name="web", cluster="prod", credentials="team", provider="aws",
        region="us-east-1", zone=None, vm_type="m7i.large", vms=2, state=PoolState.READY,
        last_error=None, counts=VmCounts(ready=2), hosts_service=hosts_service,
        ingress_entry_ip=entry_ip, created_at=STAMP, updated_at=STAMP)


def never(status: NodePoolStatus) -> IngressReader:
    raise AssertionError("a pool without a Service must not touch the cluster")


# -- with_ingress ----------------------------------------------------------------------------


def test_no_service_no_release_and_no_cluster() -> None:
    out = with_ingress(pool_status("np-jobs", hosts_service=False), never)
    assert out.ingress == IngressView(entry_ip=None, release=None)
    dumped = out.model_dump(mode="json")
    assert dumped["ingress"] == {"entryIp": None, "release": None}
    assert dumped["ingressEntryIp"] is None


def test_service_pool_reads_the_cluster() -> None:
    pool = "np-web1"
    sim = SimulatedCluster(ManualClock())
    sim.set_helm_chart(pool, helm_chart_json())
    sim.set_helm_job(pool, job_json(complete=True))
    sim.set_helm_pods(pool, [pod_json("x1a2b", TERMINATED_OK)])
    sim.set_ingress_daemon_set(pool, daemon_set_json(desired=1, ready=1))
    sim.add_foreign_node("anycloud-a-1", {"anycloud.sh/ingress-entry": pool})
    seen: list[str] = []

    def factory(status: NodePoolStatus) -> IngressReader:
        seen.append(status.id)
        return sim

    out = with_ingress(pool_status(pool, hosts_service=True, entry_ip="198.51.100.7"), factory)
    assert seen == [pool]
    assert out.ingress == IngressView(entry_ip="198.51.100.7", release=IngressRelease(
        state="installed", helm_job=HelmJob(phase="succeeded"),
        daemon_set=IngressDaemonSet(desired=1, ready=1, entry_node_ready=True)))
    assert out.model_dump(mode="json")["ingress"] == {
        "entryIp": "198.51.100.7",
        "release": {"state": "installed", "helmJob": {"phase": "succeeded", "message": None},
                    "daemonSet": {"desired": 1, "ready": 1, "entryNodeReady": True},
                    "lastEvent": None}}
    assert out.ingress_entry_ip == "198.51.100.7"  # the shortcut stays


def test_unreachable_cluster_is_a_note_not_an_error() -> None:
    sim = SimulatedCluster(ManualClock())
    sim.set_unreachable(True)
    out = with_ingress(pool_status("np-web1", hosts_service=True), lambda s: sim)
    assert out.ingress is not None and out.ingress.release is not None
    release = out.ingress.release
    assert release.state is None and release.helm_job is None and release.daemon_set is None
    assert release.last_event == ("cluster unavailable: cannot reach the simulated cluster "
                                  "(get helmcharts): connection refused")


def test_forbidden_and_unbuildable_ports_are_notes() -> None:
    sim = SimulatedCluster(ManualClock())
    sim.deny("get", "helmcharts")
    out = with_ingress(pool_status("np-web1", hosts_service=True), lambda s: sim)
    assert out.ingress is not None and out.ingress.release is not None
    assert out.ingress.release.last_event is not None
    assert out.ingress.release.last_event.startswith(
        "cluster unavailable: the cluster's RBAC denies `get` on `helmcharts`")

    def broken(status: NodePoolStatus) -> IngressReader:
        raise ClusterUnavailable("cannot load kubeconfig /gone: no such file")

    out = with_ingress(pool_status("np-web1", hosts_service=True), broken)
    assert out.ingress is not None and out.ingress.release is not None
    assert out.ingress.release.last_event == (
        "cluster unavailable: cannot load kubeconfig <file>: no such file")


def test_the_port_is_closed_after_reading() -> None:
    closed: list[bool] = []

    class Port:
        def ingress_objects(self, pool_id: str) -> IngressObjects:
            return IngressObjects(pool_id=pool_id, release="r")

        def close(self) -> None:
            closed.append(True)

    out = with_ingress(pool_status("np-web1", hosts_service=True), lambda s: Port())
    assert closed == [True]
    assert out.ingress is not None and out.ingress.release == IngressRelease(state="absent")


# -- the human lines -------------------------------------------------------------------------


def _shown(status: NodePoolStatus, capsys: pytest.CaptureFixture[str]) -> list[str]:
    _show(status)
    return [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]


def _with(release: IngressRelease | None, entry_ip: str | None = "198.51.100.7",
          hosts_service: bool = True) -> NodePoolStatus:
    status = pool_status("np-web1", hosts_service=hosts_service, entry_ip=entry_ip)
    view = IngressView(entry_ip=entry_ip, release=release)
    return status.model_copy(update={"ingress": view})


def test_human_lines_installed(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _shown(_with(IngressRelease(
        state="installed", helm_job=HelmJob(phase="succeeded"),
        daemon_set=IngressDaemonSet(desired=1, ready=1, entry_node_ready=True),
        last_event="Started: Started container traefik")), capsys)
    assert ("Ingress entry: 198.51.100.7 — release installed (helm job succeeded)" in lines)
    assert ("Ingress Traefik: 1/1 ready, entry Node Ready — last event: Started: Started "
            "container traefik") in lines


def test_human_lines_failed(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _shown(_with(IngressRelease(
        state="failed", helm_job=HelmJob(phase="retrying", message="exit code 1"),
        last_event="BackOff: Back-off restarting failed container helm"), entry_ip=None),
        capsys)
    assert ("Ingress entry: not elected yet — release failed (helm job retrying: exit code 1)"
            in lines)
    assert ("Ingress Traefik: not created yet — last event: BackOff: Back-off "
            "restarting failed container helm") in lines


def test_human_lines_absent_not_ready_and_unavailable(
        capsys: pytest.CaptureFixture[str]) -> None:
    lines = _shown(_with(IngressRelease(state="absent")), capsys)
    assert ("Ingress entry: 198.51.100.7 — release absent (no HelmChart on the cluster yet)"
            in lines)
    assert "Ingress Traefik: not created yet" in lines
    lines = _shown(_with(IngressRelease(
        state="installing", helm_job=HelmJob(phase="running"),
        daemon_set=IngressDaemonSet(desired=1, ready=0, entry_node_ready=False))), capsys)
    assert "Ingress entry: 198.51.100.7 — release installing (helm job running)" in lines
    assert "Ingress Traefik: 0/1 ready, entry Node not Ready" in lines
    lines = _shown(_with(IngressRelease(state=None, last_event="cluster unavailable: boom")),
                   capsys)
    assert "Ingress entry: 198.51.100.7 — release state unknown" in lines
    assert "Ingress Traefik: unknown — last event: cluster unavailable: boom" in lines


def test_human_lines_absent_for_pools_without_a_service(
        capsys: pytest.CaptureFixture[str]) -> None:
    lines = _shown(_with(None, entry_ip=None, hosts_service=False), capsys)
    assert not [line for line in lines if line.startswith("Ingress")]


# -- the CLI end to end ----------------------------------------------------------------------


def _flat(result: Result) -> list[str]:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return [" ".join(line.split()) for line in result.stdout.splitlines()]


@pytest.fixture
def cluster_requests(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[Sent]]:
    """Every request a KubernetesCluster of this process sends (the CLI builds its own for
    each command): recorded around each adapter's ApiClient when it is made."""
    recorders: list[Recorder] = []
    build = KubernetesCluster._client

    def client(self: KubernetesCluster) -> Any:
        fresh = self._api is None
        api = build(self)
        if fresh:
            recorders.append(record_requests(self))  # calls client() again: not fresh then
        return api

    monkeypatch.setattr(KubernetesCluster, "_client", client)
    return lambda: [c for r in recorders for c in r.calls]


@pytest.mark.kube
def test_cli_status_reads_the_release(run: Any, tmp_path: Path, control_plane: ControlPlane,
                                      cluster_requests: Callable[[], list[Sent]]) -> None:
    """The CLI against the real control plane, registered with its admin kubeconfig (under
    a public --server-url, as agents would join it). The test plays the helm-controller,
    Helm and the kubelet of two Nodes no kubelet runs; the Job, DaemonSet and scheduler
    controllers act for real."""
    kc = tmp_path / "kc"
    kc.write_bytes(control_plane.kubeconfig.read_bytes())
    registered = ok_json(run("cluster", "register", "prod", "--kubeconfig", str(kc),
                             "--server-url", "https://203.0.113.10:6443", "--json"))
    kube_system = objects.get(control_plane, "namespace", "kube-system") or {}
    assert (registered["state"], registered["kubeSystemUid"]) == (
        "ready", kube_system["metadata"]["uid"])
    # Agents join the public address; reads go where the registered kubeconfig points.
    assert registered["serverUrl"] == "https://203.0.113.10:6443"
    assert registered["kubeconfigPath"] == str(kc.resolve())
    ok_json(run("credentials", "new", "team", "--provider", "aws", "--profile", "team",
                "--json"))
    for name in ("web", "jobs"):
        ok_json(run("node-pool", "create", name, "--credentials", "team", "--region",
                    "us-east-1", "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms",
                    "1", "--json"))
    web = ok_json(run("node-pool", "status", "web", "--json"))
    assert web["ingress"] == {"entryIp": None, "release": None}  # no Service yet
    ok_json(run("deployment", "create", "site", "--node-pool", "web", "--service", "--json"))

    before = len(cluster_requests())
    jobs = ok_json(run("node-pool", "status", "jobs", "--json"))
    assert jobs["ingress"] == {"entryIp": None, "release": None}
    assert len(cluster_requests()) == before  # never asked the cluster

    pool_id = web["id"]
    chart = ("/apis/helm.cattle.io/v1/namespaces/kube-system/helmcharts/"
             + ingress_release_name(pool_id))
    before = len(cluster_requests())
    absent = ok_json(run("node-pool", "status", "web", "--json"))
    assert absent["ingress"] == {"entryIp": None, "release": {
        "state": "absent", "helmJob": None, "daemonSet": None, "lastEvent": None}}
    assert [(c.method, c.path) for c in cluster_requests()[before:]] == [("GET", chart)]

    server, entry = f"{pool_id}-server", f"{pool_id}-a1"
    with pool_release(control_plane, pool_id, server, entry) as rel:
        plain_node(control_plane, server)
        rel.helm_chart()
        rel.install_job(server)
        pod = rel.bound_pod()["metadata"]["name"]
        wait_for("the scheduler's Scheduled event", lambda: rel.has_event("Scheduled", pod))
        rel.kubelet_status(pod, CRASH_LOOP)
        wait_for("the Job to count the Pod active",
                 lambda: (rel.job_object().get("status") or {}).get("active") == 1)
        rel.event("Pod", pod, "BackOff", "Back-off restarting failed container helm",
                  type_="Warning", host=server)
        failing = ok_json(run("node-pool", "status", "web", "--json"))
        assert failing["ingress"] == {"entryIp": None, "release": {
            "state": "failed", "helmJob": {"phase": "retrying", "message": "exit code 1"},
            "daemonSet": None,
            "lastEvent": "BackOff: Back-off restarting failed container helm"}}
        assert failing["ingressEntryIp"] is None
        lines = _flat(run("node-pool", "status", "web"))
        assert ("Ingress entry: not elected yet — release failed (helm job retrying: exit code "
                "1)") in lines
        assert ("Ingress Traefik: not created yet — last event: BackOff: Back-off "
                "restarting failed container helm") in lines

        # The next try exits 0: the Job controller completes the Job. Helm has created the
        # DaemonSet; its Pod is bound to the entry Node, whose kubelet never reported.
        rel.kubelet_status(pod, {**TERMINATED_OK, "restartCount": 3}, phase="Succeeded")
        plain_node(control_plane, entry, {"anycloud.sh/node-pool": pool_id,
                                          "anycloud.sh/ingress-entry": pool_id})
        rel.traefik(tolerate_not_ready=True)
        wait_for("the install Job to complete", lambda: rel.job_condition("Complete"))
        traefik = wait_for("the scheduler to bind the Traefik Pod", lambda: [
            e["involvedObject"]["name"] for e in rel.events(rel.release)
            if e["reason"] == "Scheduled"])[0]
        wait_for("the DaemonSet controller to count it",
                 lambda: rel.daemon_set_status().get("desiredNumberScheduled") == 1)
        rel.event("Pod", traefik, "Pulling", 'Pulling image "docker.io/traefik:v3.5"',
                  namespace=rel.release, host=entry)
        installed = ok_json(run("node-pool", "status", "web", "--json"))
        assert installed["ingress"]["release"] == {
            "state": "installed", "helmJob": {"phase": "succeeded", "message": None},
            "daemonSet": {"desired": 1, "ready": 0, "entryNodeReady": False},
            "lastEvent": 'Pulling: Pulling image "docker.io/traefik:v3.5"'}
        lines = _flat(run("node-pool", "status", "web"))
        assert "Ingress entry: not elected yet — release installed (helm job succeeded)" in lines
        assert ("Ingress Traefik: 0/1 ready, entry Node not Ready — last event: "
                'Pulling: Pulling image "docker.io/traefik:v3.5"') in lines

    # The API server is no longer where the kubeconfig points: status still answers, with
    # the note.
    moved = yaml.safe_load(kc.read_text())
    moved["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    kc.write_text(yaml.safe_dump(moved))
    gone = ok_json(run("node-pool", "status", "web", "--json"))
    release = gone["ingress"]["release"]
    assert release["state"] is None and release["helmJob"] is None
    assert release["lastEvent"].startswith("cluster unavailable: cannot reach ")
    human = run("node-pool", "status", "web")
    assert human.exit_code == 0 and "cluster unavailable: cannot reach" in human.stdout


def test_status_json_without_a_service_imports_no_kubernetes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    kc = write_kubeconfig(tmp_path / "kc", "https://203.0.113.10:6443", DEMO_CA.read_bytes())
    anycloud = [str(ANYCLOUD)]
    steps = [
        ["cluster", "register", "prod", "--kubeconfig", str(kc), "--offline",
         "--kubernetes-version", "v1.36.2+k3s1"],
        ["credentials", "new", "team", "--provider", "aws", "--profile", "team"],
        ["node-pool", "create", "jobs", "--credentials", "team", "--region", "us-east-1",
         "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1"],
    ]
    for args in steps:
        done = _subprocess([*anycloud, *args, "--json"], home)
        assert done.returncode == 0, done.stderr
    result = _subprocess([sys.executable, "-c", _PROBE, "node-pool", "status", "jobs",
                          "--json"], home)
    assert json.loads(result.stdout)["ingress"] == {"entryIp": None, "release": None}
    loaded = set(json.loads(result.stderr.strip().splitlines()[-1]))
    assert not loaded & set(GUARDED), loaded & set(GUARDED)
