"""Two operator replicas: leader election over a Lease (automation/agentpools/leader.py).

In memory with the API server's optimistic concurrency (a write at a stale resourceVersion
is a 409), then ``anycloud operator --leader-elect`` twice on the real API server: the
leader is SIGKILLed mid scale-up, the standby takes over within the lease duration, and no
extra pod is made."""

from __future__ import annotations

import copy
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from automation.agentpools.leader import LeaderElector, LeaseTimes
from automation.devcluster.control_plane import ControlPlane
from tests.automation.agentpools.cases import example
from tests.automation.agentpools.test_operator import apply, eventually, ns, plane, pods

__all__ = ["ns", "plane"]  # fixtures, used by name
REPO = Path(__file__).resolve().parents[3]
TIMES = LeaseTimes(duration=15, renew_deadline=10, retry=2)


@dataclass
class FakeLeases:
    leases: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: int = 0

    def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.leases.get(name))

    def write_lease(self, namespace: str, lease: dict[str, Any], create: bool) -> bool:
        name = lease["metadata"]["name"]
        current = self.leases.get(name)
        if create and current is not None:
            return False
        if not create and (current is None or current["metadata"]["resourceVersion"]
                           != lease["metadata"].get("resourceVersion")):
            return False  # 409: changed since it was read
        self.version += 1
        stored = copy.deepcopy(lease)
        stored["metadata"]["resourceVersion"] = str(self.version)
        self.leases[name] = stored
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def elector(api: FakeLeases, who: str, clock: Clock) -> LeaderElector:
    return LeaderElector(api, "ops", identity=who, times=TIMES, monotonic=clock)


def test_one_leader_a_standby_waits_out_the_lease_as_it_observed_it() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    for _ in range(10):  # a renews every retry: b never gets it
        clock.t += 2
        assert a.try_acquire_or_renew() is True
        assert b.try_acquire_or_renew() is False
    # a dies: b takes over once the record has not changed for the lease duration, as b saw
    # it (14.9 s after its last look at a's renewal: not yet).
    clock.t += 14.9
    assert b.try_acquire_or_renew() is False
    clock.t += 0.2
    assert b.try_acquire_or_renew() is True
    spec = api.leases["anycloud-operator"]["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
    clock.t += 2
    assert a.try_acquire_or_renew() is False  # the old leader, back, is a standby now


def test_of_two_racing_candidates_one_wins() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew() and a.try_acquire_or_renew()
    clock.t += 100  # a is silent for long: both standbys see it expired
    c = elector(api, "c", clock)
    assert b.try_acquire_or_renew() is False and c.try_acquire_or_renew() is False  # observed
    clock.t += 16
    stale = api.read_lease("ops", "anycloud-operator")
    assert b.try_acquire_or_renew() is True
    # c read the Lease before b's write landed: its write at the old version is refused.
    api.read_lease = lambda namespace, name: copy.deepcopy(stale)  # type: ignore[method-assign]
    assert c.try_acquire_or_renew() is False
    assert api.leases["anycloud-operator"]["spec"]["holderIdentity"] == "b"


def test_a_clean_stop_releases_the_lease_for_an_at_once_takeover() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = elector(api, "a", clock), elector(api, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    a.release()
    assert b.try_acquire_or_renew() is True  # no need to wait 15 s


def test_a_leader_that_cannot_renew_stops_before_the_lease_runs_out() -> None:
    led: list[str] = []
    stopped = threading.Event()

    class Flaky(FakeLeases):
        down = False

        def read_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
            if self.down:
                from automation.kube.port import ClusterUnavailable
                raise ClusterUnavailable("the API server is away")
            return super().read_lease(namespace, name)

    flaky = Flaky()
    a = LeaderElector(flaky, "ops", identity="a",
                      times=LeaseTimes(duration=0.9, renew_deadline=0.6, retry=0.05))

    def lead() -> None:
        led.append("lead")
        flaky.down = True  # from now on every renewal fails

    outcome = a.run(lead=lead, stop_leading=lambda: led.append("stop"), stopped=stopped)
    assert outcome == "lost" and led == ["lead", "stop"]


def _lines(proc: subprocess.Popen[str]) -> queue.Queue[dict[str, Any]]:
    out: queue.Queue[dict[str, Any]] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                out.put(json.loads(line))

    threading.Thread(target=pump, daemon=True).start()
    return out


def _until(lines: queue.Queue[dict[str, Any]], event: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        got = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        if got["event"] == event:
            return got


@pytest.mark.kube
def test_two_replicas_the_leader_killed_mid_scale_the_standby_takes_over(
        plane: ControlPlane, ns: str, tmp_path: Path) -> None:
    duration = 4.0
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"provisioners": [{"kubernetes": {"namespace": ns}}]}))
    env = {**os.environ, "ANYCLOUD_HOME": str(tmp_path / "home"),
           "ANYCLOUD_DATABASE_URL": f"sqlite:///{tmp_path / 'ledger.db'}"}
    cmd = [sys.executable, "-c", "from automation.cli import cli; cli()", "operator",
           "--config", str(config), "--kubeconfig", str(plane.kubeconfig), "--interval",
           "0.5", "--leader-elect", "--lease-namespace", ns, "--lease-duration",
           str(duration), "--json"]
    pool = example("shell-pool.yaml")
    pool["spec"]["autoscaler"].update({"minReplicas": 8, "maxReplicas": 8})
    procs: list[subprocess.Popen[str]] = []

    def start() -> tuple[subprocess.Popen[str], queue.Queue[dict[str, Any]]]:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        procs.append(proc)
        lines = _lines(proc)
        assert _until(lines, "watching", 60)["namespaces"] == [ns]
        _until(lines, "standby", 30)
        return proc, lines

    try:
        first, first_lines = start()
        _until(first_lines, "leading", 30)
        second, second_lines = start()
        time.sleep(duration / 2)
        assert second_lines.empty(), "two leaders at once"
        apply(plane, ns, example("agent-config.yaml"), pool)
        eventually(lambda: pods(plane, ns, "shell"), "a first pod", timeout=30)
        first.send_signal(signal.SIGKILL)  # mid scale-up, the Lease not released
        killed = time.monotonic()
        first.wait(10)
        made = len(pods(plane, ns, "shell"))
        took = _until(second_lines, "leading", duration * 3)
        failover = time.monotonic() - killed
        assert failover <= duration + 2 * duration / 7.5 + 2, failover  # lease + a retry
        eventually(lambda: len(pods(plane, ns, "shell")) == 8, "8 pods after the failover")
        time.sleep(2)
        assert len(pods(plane, ns, "shell")) == 8, f"{made} before the kill"
        lease = json.loads(plane.kubectl("get", "lease", "anycloud-operator", "-n", ns,
                                         "-o", "json").stdout)
        assert lease["spec"]["holderIdentity"] == took["identity"]
        # A clean stop hands the Lease back at once.
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0
        lease = json.loads(plane.kubectl("get", "lease", "anycloud-operator", "-n", ns,
                                         "-o", "json").stdout)
        assert lease["spec"].get("holderIdentity", "") == ""
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
