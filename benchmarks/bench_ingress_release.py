"""What the ingress-release step adds to a reconcile pass (simulators, mock engine).

Every pass of a pool that hosts a Service now reads its HelmChart and compares it with the
release stack's (evaluated once per pool and cached). Figures, in one run:

1. a converged pass over N CPU pools (the baseline: no release, nothing read for it);
2. a converged pass over N Service pools (each reads and compares its HelmChart);
3. the pass that installs the N releases (one refresh + up of each release stack) beside
   the pass that first buys the same pools' VMs (one up of each pool stack).

    .venv/bin/python benchmarks/bench_ingress_release.py [--smoke]   (BENCH_RUNS, BENCH_POOLS)

--smoke: 1 pool of each kind (every step above is per pool: N only repeats it), one
converged pass of each kind.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, ms, print_table

RUNS = int(os.environ.get("BENCH_RUNS", "5"))
POOLS = int(os.environ.get("BENCH_POOLS", "10"))


def world_of(home: Path, pools: int, services: bool) -> tuple[Any, Any, Any, float, float]:
    """N one-VM pools brought to ready; returns (reconciler, world, app, seconds of the
    first pass, seconds of the pass that installed the releases)."""
    from automation.app import App
    from automation.ledger import open_ledger
    from automation.models import WorkloadKind
    from automation.reconciler.reconcile import Reconciler
    from automation.services import credentials, node_pools, workloads
    from automation.simulators.ports import simulated_ports
    from automation.simulators.world import SimWorld, register_simulated_cluster

    world = SimWorld()
    app = App(ledger=open_ledger(f"sqlite:///{home / 'a.db'}"), clock=world.clock, home=home)
    register_simulated_cluster(app, home)
    credentials.new_credential(app, credentials.NewCredential("aws", "aws", {"profile": "p"}))
    for p in range(pools):
        node_pools.create_node_pool(app, node_pools.CreateNodePool(
            name=f"pool-{p:03d}", credentials="aws", region="us-east-1", vm_type="m7i.large",
            min_vms=1, max_vms=1))
    reconciler = Reconciler(app, simulated_ports(app, world))
    t0 = time.perf_counter()
    reconciler.run_once()
    first = time.perf_counter() - t0
    for _ in range(6):
        world.advance(timedelta(minutes=1))
        reconciler.run_once()
    install = 0.0
    if services:
        for p in range(pools):
            workloads.create_workload(app, f"site-{p:03d}", f"pool-{p:03d}",
                                      WorkloadKind.SERVICE)
        t0 = time.perf_counter()
        outcomes = reconciler.run_once()
        install = time.perf_counter() - t0
        assert all("EnsureIngressRelease" in o.actions for o in outcomes), outcomes
        assert len(world.cluster.helm) == pools
    for _ in range(3):
        world.advance(timedelta(minutes=1))
        reconciler.run_once()
    return reconciler, world, app, first, install


def converged(reconciler: Any) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        outcomes = reconciler.run_once()
        times.append(time.perf_counter() - t0)
        assert all(o.state == "ready" and not o.actions for o in outcomes), outcomes
    return median(times)


def main() -> None:
    global RUNS, POOLS
    if _cli.parse(__doc__).smoke:
        RUNS, POOLS = 1, 1
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        cpu, _, _, first_cpu, _ = world_of(Path(a), POOLS, services=False)
        svc, world, _, _, install = world_of(Path(b), POOLS, services=True)
        base = converged(cpu)
        reads = len(world.cluster.reads)
        with_release = converged(svc)
        chart_reads = [r for r in world.cluster.reads[reads:] if r.resource == "helmcharts"]
    rows = [
        (f"converged pass, {POOLS} CPU pools (baseline)", ms(base), "1.00x", "0"),
        (f"converged pass, {POOLS} Service pools", ms(with_release),
         f"{with_release / base:.2f}x", str(len(chart_reads) // RUNS)),
        (f"first pass, {POOLS} pools: buy VMs (pool stack up)", ms(first_cpu),
         f"{first_cpu / base:.2f}x", "-"),
        (f"install pass, {POOLS} releases (refresh + up each)", ms(install),
         f"{install / base:.2f}x", "-"),
    ]
    print_table(f"Ingress release step, simulators, median of {RUNS} converged passes",
                ("what", "ms", "vs baseline", "HelmChart reads/pass"), rows)


if __name__ == "__main__":
    main()
