"""AgentPools in production (issue 21, "Measure"), on the local control plane (kwok plays
the kubelets):

1. Scale-up latency from a session burst: from the first of three sessions asked for (a pool
   at minIdle 0, no pod) to its first worker pod created, with the operator's 10 s timer
   alone (the pending-session watch off) and with the watch (a ledger look every 0.25 s).
   The timer's figure is where its tick happens to fall: uniform over 0..10 s.
2. Leader failover: two candidates on one Lease (lease 4 s, retry 0.53 s, as
   ``--lease-duration 4`` sets them); the leader stops renewing without releasing (a
   SIGKILL); from its last renewal to the standby holding the Lease. The baseline: the lease
   duration itself, the least any failover can take.

    .venv/bin/python benchmarks/bench_agentpool_ha.py [--smoke]    (BENCH_RUNS=5)

--smoke: one run of each, with a 0.2 s timer and a 1 s lease (a Lease holds whole seconds:
1 s is its least), the same code paths, sooner; the failover runs beside the scale-up runs
(a full run measures each alone).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _agentpool_plane, _cli, _kube_plane
from benchmarks._table import median, ms, print_table

MARKS = ("kube", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
REPO = Path(__file__).resolve().parent.parent
INTERVAL = 10.0
LEASE = 4.0


def _first_pod_after_burst(plane: Any, registry: Any, ns: str, name: str) -> float:
    doc = yaml.safe_load((REPO / "k8s/examples/shell-pool.yaml").read_text())
    doc["metadata"].update({"name": name, "namespace": ns})
    doc["spec"]["autoscaler"].update({"minIdle": 0, "maxIdle": 0, "maxReplicas": 3})
    doc["spec"]["template"]["spec"]["containers"][0]["args"] = [f"--pool={name}"]
    _kube_plane.apply(plane, f"/apis/anycloud.sh/v1/namespaces/{ns}/agentpools", doc)
    key = f"{ns}/{name}"
    deadline = time.monotonic() + 60
    while True:  # the first session, once the pool's first pass (kopf's create handler)
        try:     # recorded it (before: POOL_NOT_FOUND)
            start = time.perf_counter()
            registry.acquire(key, ["true"])
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    for _ in range(2):
        registry.acquire(key, ["true"])
    path = f"/api/v1/namespaces/{ns}/pods?labelSelector=anycloud.sh/agent-pool%3D{name}"
    while not plane.get(path)["items"]:
        if time.perf_counter() - start > 60:
            raise SystemExit(f"{name}: no pod within 60 s")
        time.sleep(0.01)
    return time.perf_counter() - start


def _failover(api: Any, ns: str, i: int) -> float:
    from automation.agentpools.leader import LeaderElector, LeaseTimes

    times = LeaseTimes(LEASE, LEASE * 2 / 3, LEASE / 7.5)
    name = f"bench-lease-{i}"
    leader = LeaderElector(api, ns, identity="leader", name=name, times=times)
    standby = LeaderElector(api, ns, identity="standby", name=name, times=times)
    assert leader.try_acquire_or_renew()
    won = threading.Event()
    stopped = threading.Event()
    thread = threading.Thread(target=standby.run, kwargs={
        "lead": won.set, "stop_leading": lambda: None, "stopped": stopped}, daemon=True)
    thread.start()
    time.sleep(times.retry * 1.5)  # the standby has seen the leader's record
    assert leader.try_acquire_or_renew()  # the last renewal, then silence
    died = time.perf_counter()
    if not won.wait(LEASE * 4):
        raise SystemExit("the standby never took over")
    took = time.perf_counter() - died
    stopped.set()
    thread.join(10)
    return took


def main() -> None:
    global RUNS, INTERVAL, LEASE
    smoke = _cli.parse(__doc__, MARKS).smoke
    if smoke:
        RUNS, INTERVAL, LEASE = 1, 0.2, 1.0
    modes = ((f"timer only ({INTERVAL:g} s)", "timer", 1e9),
             ("pending-session watch", "watch", 0.25))

    with tempfile.TemporaryDirectory() as tmp:
        def meanwhile() -> dict[str, Any]:  # while the control plane starts
            _agentpool_plane.imports()
            from automation.ledger import open_ledger

            return {ns: open_ledger(f"sqlite:///{Path(tmp) / f'{ns}.db'}")
                    for _, ns, _ in modes}

        plane, ledgers = _agentpool_plane.start(Path(tmp) / "cp", meanwhile)
        try:
            from automation.agentpools.kubeapi import KubeApi
            from automation.agentpools.operator import ControlPlaneConfig, assemble
            from automation.agentpools.registry import Registry
            from automation.kube.kubeconfig import client_configuration

            for ns in ("timer", "watch", "lease"):
                _kube_plane.namespace(plane, ns)
            api = KubeApi(client_configuration(plane.kubeconfig, None))
            failover: list[float] = []
            errors: list[BaseException] = []

            def failovers() -> None:
                try:
                    failover.extend(_failover(api, "lease", i) for i in range(RUNS))
                except BaseException as exc:  # raised in the main thread below
                    errors.append(exc)

            # --smoke: the failover beside the scale-up runs (its figures mean nothing
            # there); a full run measures each alone.
            beside = threading.Thread(target=failovers, daemon=True) if smoke else None
            if beside is not None:
                beside.start()
            latency: dict[str, list[float]] = {}
            for mode, ns, period in modes:
                ledger = ledgers[ns]
                config = ControlPlaneConfig.model_validate(  # (no agent runs: any address)
                    {"broker": {"address": "http://127.0.0.1:9"},
                     "provisioners": [{"kubernetes": {"namespace": ns}}]})
                op = assemble(config, ledger, kubeconfig=plane.kubeconfig, interval=INTERVAL,
                              pending_period=period)
                op.start()
                try:
                    registry = Registry(ledger)
                    latency[mode] = [_first_pod_after_burst(plane, registry, ns, f"burst-{i}")
                                     for i in range(RUNS)]
                finally:
                    op.stop()
                    ledger.dispose()
            if beside is None:
                failovers()
            else:
                beside.join()
            if errors:
                raise errors[0]
        finally:
            plane.stop()
    timer = modes[0][0]
    base = median(latency[timer])
    print_table(f"Scale-up: first of 3 sessions asked -> first pod created, {RUNS} runs, ms",
                ["trigger", "median", "min", "max", "vs timer"],
                [(mode, ms(median(v)), ms(min(v)), ms(max(v)), f"{median(v) / base:.2f}x")
                 for mode, v in latency.items()])
    print_table(f"Leader failover: last renewal -> standby leads, {RUNS} runs, ms",
                ["lease", "median", "min", "max", "vs lease duration"],
                [(f"{LEASE:g} s", ms(median(failover)), ms(min(failover)), ms(max(failover)),
                  f"{median(failover) / LEASE:.2f}x")])


if __name__ == "__main__":
    main()
