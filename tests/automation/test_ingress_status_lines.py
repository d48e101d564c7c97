"""``node-pool status``'s two ingress lines through the CLI (seed, "Ingress entry"):

    Ingress entry: <IP> — release installing|installed|failed (helm job <phase>[: <exit>])
    Ingress Traefik: <ready>/<desired> ready, entry Node Ready|not Ready — last event: …

and the same release in ``--json`` (state one of absent/installing/installed/failed, a
``cluster unavailable: …`` note when the cluster cannot be read). The pool and its Service
are real ledger rows made through the CLI; the cluster is a ``SimulatedCluster`` put where
the command would build its Kubernetes port, so no test needs the control plane.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from automation.clock import ManualClock
from automation.models import NodePoolStatus
from automation.services import ingress_status, pool_status
from automation.simulators.cluster import SimulatedCluster
from tests.automation.conftest import ok_json
from tests.automation.kube.test_ingress import (
    CRASH_LOOP,
    JOB,
    RUNNING,
    TERMINATED_OK,
    daemon_set_json,
    event_json,
    helm_chart_json,
    job_json,
    pod_json,
)
from tests.automation.test_cli import _register_offline

ENTRY_IP = "198.51.100.7"
RELEASE_STATES = {"absent", "installing", "installed", "failed"}


class Rig:
    """The CLI over a registered cluster with a Service pool ``web`` and a jobs-only pool
    ``jobs``; ``sim`` answers for the cluster, ``entry_ip`` is the elected entry's IP."""

    def __init__(self, run: Callable[..., Result], sim: SimulatedCluster) -> None:
        self.run, self.sim = run, sim
        self.entry_ip: str | None = ENTRY_IP
        self.pool_id = ""

    def lines(self, name: str = "web") -> list[str]:
        result = self.run("node-pool", "status", name)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return [line.strip() for line in result.stdout.splitlines()]

    def ingress(self, name: str = "web") -> list[str]:
        return [line for line in self.lines(name) if line.startswith("Ingress")]

    def release(self) -> dict[str, Any]:
        status: dict[str, Any] = ok_json(self.run("node-pool", "status", "web", "--json"))
        return dict(status["ingress"]["release"])


@pytest.fixture
def rig(run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    sim = SimulatedCluster(ManualClock())
    made = Rig(run, sim)
    _register_offline(run, tmp_path)
    ok_json(run("credentials", "new", "team", "--provider", "aws", "--profile", "team",
                "--json"))
    for name in ("web", "jobs"):
        ok_json(run("node-pool", "create", name, "--credentials", "team", "--region",
                    "us-east-1", "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1",
                    "--json"))
    ok_json(run("deployment", "create", "site", "--node-pool", "web", "--service", "--json"))
    made.pool_id = ok_json(run("node-pool", "status", "web", "--json"))["id"]

    # The cluster: the simulator instead of the registered kubeconfig's API server.
    monkeypatch.setattr(ingress_status, "kubernetes_port_factory",
                        lambda ledger, open_sealed=None: lambda status: sim)
    # The entry's IP: the reconciler elects it from a Ready VM, which no test runs here.
    read = pool_status.node_pool_status

    def with_entry(ledger: Any, ref: str) -> NodePoolStatus:
        found = read(ledger, ref)
        if not found.hosts_service:
            return found
        return found.model_copy(update={"ingress_entry_ip": made.entry_ip})

    monkeypatch.setattr(pool_status, "node_pool_status", with_entry)
    yield made


def _entry_node(rig: Rig, ready: bool) -> None:
    rig.sim.add_foreign_node("anycloud-web-1", {"anycloud.sh/ingress-entry": rig.pool_id},
                             ready=ready)


# -- the text lines --------------------------------------------------------------------------


def test_installed_with_a_ready_entry_and_a_last_event(rig: Rig) -> None:
    rig.sim.set_helm_chart(rig.pool_id, helm_chart_json())
    rig.sim.set_helm_job(rig.pool_id, job_json(complete=True))
    rig.sim.set_helm_pods(rig.pool_id, [pod_json("x1a2b", TERMINATED_OK)])
    rig.sim.set_ingress_daemon_set(rig.pool_id, daemon_set_json(desired=1, ready=1))
    _entry_node(rig, ready=True)
    namespace = f"anycloud-ingress-{rig.pool_id}"
    rig.sim.add_kube_event(namespace, event_json(
        namespace, "Pod", "traefik-abcde", "Started", "Started container traefik",
        "2026-07-01T11:59:00Z"))
    assert rig.ingress() == [
        f"Ingress entry: {ENTRY_IP} — release installed (helm job succeeded)",
        "Ingress Traefik: 1/1 ready, entry Node Ready — last event: Started: Started "
        "container traefik"]
    assert rig.release()["state"] == "installed"


def test_retrying_with_its_exit_and_no_entry_yet(rig: Rig) -> None:
    rig.entry_ip = None
    rig.sim.set_helm_chart(rig.pool_id, helm_chart_json())
    rig.sim.set_helm_job(rig.pool_id, job_json(active=1))
    rig.sim.set_helm_pods(rig.pool_id, [pod_json("x1a2b", CRASH_LOOP)])
    rig.sim.add_kube_event("kube-system", event_json(
        "kube-system", "Pod", f"{JOB}-x1a2b", "BackOff",
        "Back-off restarting failed container helm", "2026-07-01T11:59:10Z"))
    assert rig.ingress() == [
        "Ingress entry: not elected yet — release failed (helm job retrying: exit code 1)",
        "Ingress Traefik: not created yet — last event: BackOff: Back-off restarting "
        "failed container helm"]
    release = rig.release()
    assert (release["state"], release["helmJob"], release["daemonSet"]) == (
        "failed", {"phase": "retrying", "message": "exit code 1"}, None)


def test_installing_without_an_exit_and_no_last_event(rig: Rig) -> None:
    rig.sim.set_helm_chart(rig.pool_id, helm_chart_json())
    rig.sim.set_helm_job(rig.pool_id, job_json(active=1))
    rig.sim.set_helm_pods(rig.pool_id, [pod_json("x1a2b", RUNNING)])
    assert rig.ingress() == [
        f"Ingress entry: {ENTRY_IP} — release installing (helm job running)",
        "Ingress Traefik: not created yet"]
    assert rig.release()["lastEvent"] is None


def test_entry_node_not_ready(rig: Rig) -> None:
    rig.sim.set_helm_chart(rig.pool_id, helm_chart_json())
    rig.sim.set_helm_job(rig.pool_id, job_json(complete=True))
    rig.sim.set_ingress_daemon_set(rig.pool_id, daemon_set_json(desired=1, ready=0))
    _entry_node(rig, ready=False)
    assert rig.ingress() == [
        f"Ingress entry: {ENTRY_IP} — release installed (helm job succeeded)",
        "Ingress Traefik: 0/1 ready, entry Node not Ready"]
    assert rig.release()["daemonSet"] == {"desired": 1, "ready": 0, "entryNodeReady": False}


def test_absent_before_the_helm_chart_exists(rig: Rig) -> None:
    assert rig.ingress() == [
        f"Ingress entry: {ENTRY_IP} — release absent (no HelmChart on the cluster yet)",
        "Ingress Traefik: not created yet"]
    assert rig.release() == {"state": "absent", "helmJob": None, "daemonSet": None,
                             "lastEvent": None}


def test_unreadable_cluster_is_a_note(rig: Rig) -> None:
    rig.sim.set_unreachable(True)
    note = ("cluster unavailable: cannot reach the simulated cluster (get helmcharts): "
            "connection refused")
    assert rig.ingress() == [
        f"Ingress entry: {ENTRY_IP} — release state unknown",
        f"Ingress Traefik: unknown — last event: {note}"]
    release = rig.release()
    # Not one of the four: nothing on the cluster was read, so no state is claimed.
    assert release == {"state": None, "helmJob": None, "daemonSet": None, "lastEvent": note}


def test_a_jobs_only_pool_prints_no_ingress_lines(rig: Rig) -> None:
    lines = rig.lines("jobs")
    assert not [line for line in lines if "Ingress" in line]
    assert any(line.startswith("Node pool jobs") for line in lines)  # the table stays


def test_the_rest_of_the_table_stays(rig: Rig) -> None:
    lines = [" ".join(line.split()) for line in rig.lines()]
    assert any(line.startswith("State ") for line in lines)
    assert any(line.startswith("VMs ready / starting / draining") for line in lines)
    assert lines[-2].startswith("Ingress entry: ") and lines[-1].startswith("Ingress Traefik: ")


# -- the JSON --------------------------------------------------------------------------------


@pytest.mark.parametrize(("job", "pods", "state"), [
    (None, [], "installing"),
    (job_json(active=1), [pod_json("x1a2b", RUNNING)], "installing"),
    (job_json(complete=True), [pod_json("x1a2b", TERMINATED_OK)], "installed"),
    (job_json(active=1), [pod_json("x1a2b", CRASH_LOOP)], "failed"),
    (job_json(failed=True), [], "failed"),
])
def test_json_state_is_one_of_the_seeds_four(rig: Rig, job: dict[str, Any] | None,
                                             pods: list[dict[str, Any]], state: str) -> None:
    assert rig.release()["state"] == "absent"
    rig.sim.set_helm_chart(rig.pool_id, helm_chart_json())
    rig.sim.set_helm_job(rig.pool_id, job)
    rig.sim.set_helm_pods(rig.pool_id, pods)
    release = rig.release()
    assert release["state"] == state and state in RELEASE_STATES


def test_json_unavailable_note_is_redacted(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real port factory: the registered kubeconfig's file is named ``<file>``."""
    from automation.kube.port import ClusterUnavailable

    def broken(status: NodePoolStatus) -> Any:
        raise ClusterUnavailable(f"cannot load kubeconfig {Path('/srv/kc')}: no such file")

    monkeypatch.setattr(ingress_status, "kubernetes_port_factory",
                        lambda ledger, open_sealed=None: broken)
    note = rig.release()["lastEvent"]
    assert note.startswith("cluster unavailable: ")
    assert "/srv/kc" not in note
    assert any(line.endswith(note) for line in rig.ingress())
