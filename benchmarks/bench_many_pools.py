"""Many pools at once (issue 9): new pools from create to ready, serial vs concurrent.

1. Simulated minutes. A discrete-event simulation on the simulated world's clock (nothing
   sleeps): the real reconciler turns run on the simulators (mock engine, simulated cloud and
   cluster: a VM's Node joins 2 min after the VM exists, Ready 30 s later), admitted by the
   same ``dispatch`` loop and ``SlotPolicy`` as a concurrent pass
   (``automation/reconciler/workers.py``). Each stack operation occupies its turn for the
   cloud's latency (``automation/simulators/cloud.py`` ``OPERATION_LATENCY``: a VM in ~60 s
   on AWS, ~40 s on GCP, ~150 s on Azure, deletes alike, a few seconds for an update),
   jittered +-20 % (seeded; median of the runs), and what it bought exists when it ends.
   Passes follow one another 30 s apart, as ``serve`` runs them. A pool is ready when the
   turn that records it ready ends. Program evaluation time is not charged: part 2 measures
   it.
2. Wall time of one pass in which 20 new pools each need a stack ``up`` under the mock
   engine, serial (in-process) vs concurrent (worker processes), median of the runs, after a
   warm-up pass that starts the workers.

    BENCH_RUNS=3 .venv/bin/python benchmarks/bench_many_pools.py [--skip-wall|--skip-simulated]
        [--smoke]     (BENCH_POOLS=100 by default)

A 100-pool run costs ~200 mock-engine evaluations (~0.5 s each): minutes per run.

--smoke: 2 pools, the two 1-pool baselines and the mixed scenario once (AWS, GCP and Azure all
run, and a concurrent pass; the AWS rows of many pools differ from the mixed one only in their
numbers: the same ``simulate``); one wall pass of 2 new pools serial and with the default 8
workers, no warm-up pool (the 2-worker mode differs only in its limit: with 2 pools both
concurrent modes start the same 2 workers).

Each ledger is a copy of one migrated once per run (``tests/ledger_templates.py``): a new one
costs ~0.25 s of migrations, never measured here.
"""

from __future__ import annotations

import argparse
import heapq
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, print_table

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
POOLS = int(os.environ.get("BENCH_POOLS", "100"))
BASELINE_RUNS = 5  # at least, for the 1-pool baselines
WALL_POOLS, WARM_POOLS = 20, 8  # part 2: new pools per timed pass, and in the warm-up pass
INTERVAL = timedelta(seconds=30)
JITTER = 0.2
REGION = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}
VM_TYPE = {"aws": "m7i.large", "gcp": "e2-standard-4", "azure": "Standard_D2s_v5"}


def _reference(provider: str) -> dict[str, str]:
    from automation.catalog.store import data_dir

    return {
        "aws": {"profile": "bench"},
        "gcp": {"project": "bench-project", "key_file": str(data_dir() / "demo" / "ca.pem")},
        "azure": {"subscription_id": "00000000-0000-0000-0000-000000000001",
                  "tenant_id": "00000000-0000-0000-0000-000000000002",
                  "client_id": "00000000-0000-0000-0000-000000000003"},
    }[provider]


@dataclass(frozen=True)
class Scenario:
    label: str
    pools: int
    credentials: int
    providers: tuple[str, ...]  # round-robin over the credentials
    per_credential: int
    overall: int


class LatencyRunner:
    """The in-process mock engine, each stack operation charged its cloud's latency on the
    simulated clock before it acts (the VMs it buys exist from its end)."""

    engine = "mock"

    def __init__(self, inner: Any, world: Any, rng: random.Random) -> None:
        self.inner, self.world, self.rng = inner, world, rng
        self.ops = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _charge(self, target: Any) -> None:
        from automation.simulators.cloud import OPERATION_LATENCY

        config = target.config
        latency = OPERATION_LATENCY[config.provider]
        wanted = {a.id for a in config.attempts}
        live = {v.attempt_id for v in self.world.cloud.vms_of_pool(config.pool_id)
                if v.state == "running"}
        base = (latency.create_vm if wanted - live else
                latency.delete_vm if live - wanted else latency.update)
        self.world.clock.advance(base * self.rng.uniform(1 - JITTER, 1 + JITTER))
        self.ops += 1

    def up(self, target: Any, **kw: Any) -> Any:
        self._charge(target)
        return self.inner.up(target, **kw)

    def destroy(self, target: Any, **kw: Any) -> Any:
        self._charge(target)
        return self.inner.destroy(target, **kw)


class VirtualTurns:
    """A ``TurnExecutor`` on the simulated clock: a turn starts when admitted, runs (for
    real, in this process) with the clock at its start, and ends when its operations'
    latencies have passed; ``wait_any`` moves the clock to the next turn's end."""

    def __init__(self, world: Any, turn: Any) -> None:
        self.world, self.turn = world, turn
        self.now: datetime = world.clock.now()
        self.ends: list[tuple[datetime, int, Any]] = []
        self.finished: dict[int, datetime] = {}

    def _set(self, at: datetime) -> None:
        self.world.clock.advance(at - self.world.clock.now())

    def submit(self, index: int, item: Any) -> None:
        self._set(self.now)
        outcome = self.turn(item)
        heapq.heappush(self.ends, (self.world.clock.now(), index, outcome))
        self._set(self.now)

    def wait_any(self) -> list[tuple[int, Any]]:
        end, index, outcome = heapq.heappop(self.ends)
        self.now = max(self.now, end)
        self.finished[index] = end
        return [(index, outcome)]


_templates: Any = None  # tests.ledger_templates.LedgerTemplates, for main's run


def _new_app(root: Path) -> tuple[Any, Any]:
    """``simulated_app`` under ``root`` over a new SQLite ledger: a copy of the run's
    template (the same tables ``open_ledger`` migrates an empty file to)."""
    from automation.simulators.world import simulated_app

    url = f"sqlite:///{root / 'a.db'}"
    if _templates is not None:
        _templates.seed(url)
    return simulated_app(root, url)


def simulate(scenario: Scenario, seed: int) -> tuple[float, float, int, int]:
    """Minutes until every pool is ready and the median pool's, passes, stack ops."""
    from automation.engine.mock.runner import MockEngineRunner
    from automation.reconciler.reconcile import Ports, Reconciler
    from automation.reconciler.workers import SlotPolicy, dispatch
    from automation.services import credentials, node_pools
    from automation.settings import Limits

    with tempfile.TemporaryDirectory() as tmp:
        app, world = _new_app(Path(tmp))
        for c in range(scenario.credentials):
            provider = scenario.providers[c % len(scenario.providers)]
            credentials.new_credential(app, credentials.NewCredential(
                f"cred-{c:02d}", provider, _reference(provider)))
        for p in range(scenario.pools):
            c = p % scenario.credentials
            provider = scenario.providers[c % len(scenario.providers)]
            node_pools.create_node_pool(app, node_pools.CreateNodePool(
                name=f"pool-{p:03d}", credentials=f"cred-{c:02d}", region=REGION[provider],
                vm_type=VM_TYPE[provider], min_vms=1, max_vms=1))
        runner = LatencyRunner(MockEngineRunner(app.home, cloud=world.cloud), world,
                               random.Random(seed))
        ports = Ports(runner=runner, cluster_for=lambda row: world.cluster,  # type: ignore[arg-type]
                      vm_lookup=lambda pool, ids: {a: world.cloud.lookup(a) for a in ids})
        reconciler = Reconciler(app, ports)
        limits = Limits(per_credential=scenario.per_credential, overall=scenario.overall)
        start = world.clock.now()
        ready: dict[str, datetime] = {}
        passes = 0
        while len(ready) < scenario.pools and passes < 200:
            snap = reconciler._snapshot()
            turns = VirtualTurns(world, lambda pool, snap=snap: reconciler._reconcile(pool,
                                                                                      snap))
            outcomes = dispatch(snap.pools, lambda pool: str(pool["credential_id"]),
                                SlotPolicy(limits), turns, lambda o: o.throttled)
            passes += 1
            for i, o in enumerate(outcomes):
                if o.state == "ready" and o.pool_id not in ready:
                    ready[o.pool_id] = turns.finished[i]
            world.clock.advance(turns.now - world.clock.now() + INTERVAL)
        app.ledger.dispose()
    assert len(ready) == scenario.pools, f"{scenario.label}: {len(ready)} ready"
    minutes = sorted((t - start).total_seconds() / 60 for t in ready.values())
    return minutes[-1], statistics.median(minutes), passes, runner.ops


def simulated_rows(smoke: bool = False) -> list[tuple[str, ...]]:
    n = POOLS
    aws = ("aws",)
    scenarios = [
        Scenario("1 pool, AWS (baseline)", 1, 1, aws, 4, 8),
        Scenario(f"{n} pools, AWS, serial (--concurrency 1)", n, 25, aws, 4, 1),
        Scenario(f"{n} pools, AWS, 25 credentials, 4 each, {n} overall", n, 25, aws, 4, n),
        Scenario(f"{n} pools, AWS, 25 credentials, 4 each, 8 overall (default)", n, 25, aws,
                 4, 8),
        Scenario(f"{n} pools, AWS, 1 credential, 4 each, {n} overall", n, 1, aws, 4, n),
        Scenario("1 pool, Azure (baseline of the mixed row)", 1, 1, ("azure",), 4, 8),
        Scenario(f"{n} pools, AWS/GCP/Azure, 30 credentials, 4 each, {n} overall", n, 30,
                 ("aws", "gcp", "azure"), 4, n),
    ]
    if smoke:  # the rows that differ only in their numbers run the same code: one of them
        scenarios = [scenarios[i] for i in (0, 5, 6)]
    results: dict[str, tuple[float, float, float, float]] = {}
    for s in scenarios:
        # A single pool costs two stack ops: its baseline is the median of at least 5.
        runs = [simulate(s, seed) for seed in range(
            RUNS if s.pools > 1 else max(RUNS, BASELINE_RUNS))]
        results[s.label] = (median([r[0] for r in runs]), median([r[1] for r in runs]),
                            median([r[2] for r in runs]), median([r[3] for r in runs]))
        print(f"  simulated {s.label}: {results[s.label][0]:.1f} min", file=sys.stderr)
    rows = []
    for s in scenarios:
        last, mid, passes, ops = results[s.label]
        base_label = ("1 pool, Azure (baseline of the mixed row)" if "Azure" in s.label
                      else "1 pool, AWS (baseline)")
        ratio = last / results[base_label][0]
        rows.append((s.label, f"{last:.1f}", f"{mid:.1f}", f"{ratio:.1f}x",
                     f"{passes:.0f}", f"{ops:.0f}"))
    return rows


def wall_rows(pools: int = WALL_POOLS, smoke: bool = False) -> list[tuple[str, ...]]:
    from automation.app import App
    from automation.reconciler.reconcile import Reconciler
    from automation.services import credentials, node_pools
    from automation.settings import Limits
    from automation.simulators.ports import simulated_ports

    modes: list[tuple[str, Limits | None]] = [
        ("serial, in-process", None),
        ("concurrent, 2 worker processes", Limits(per_credential=4, overall=2)),
        ("concurrent, 8 worker processes (default)", Limits(per_credential=4, overall=8)),
    ]
    if smoke:  # 2 pools start 2 workers in either concurrent mode: the default one
        modes = [modes[0], modes[2]]
    figures: dict[str, float] = {}
    for label, limits in modes:
        with tempfile.TemporaryDirectory() as tmp:
            app, world = _new_app(Path(tmp))
            for c in range(5):
                credentials.new_credential(app, credentials.NewCredential(
                    f"cred-{c}", "aws", _reference("aws")))
            reconciler = Reconciler(app, simulated_ports(app, world), limits=limits)

            def add(app: App, prefix: str, count: int) -> None:
                for p in range(count):
                    node_pools.create_node_pool(app, node_pools.CreateNodePool(
                        name=f"{prefix}-{p:02d}", credentials=f"cred-{p % 5}",
                        region="us-east-1", vm_type="m7i.large", min_vms=1, max_vms=1))

            add(app, "warm", WARM_POOLS)  # starts the workers, imports the SDKs everywhere
            reconciler.run_once()
            times = []
            for r in range(RUNS):
                add(app, f"run{r}", pools)
                t0 = time.perf_counter()
                outcomes = reconciler.run_once()
                times.append(time.perf_counter() - t0)
                applied = sum(o.actions.count("ApplyStack") for o in outcomes)
                skipped = [o.skipped for o in outcomes if o.skipped]
                assert applied == pools, (label, r, applied, skipped[:3])
            reconciler.close()
            app.ledger.dispose()
        figures[label] = median(times)
        print(f"  wall {label}: {figures[label]:.1f} s", file=sys.stderr)
    serial = figures[modes[0][0]]
    return [(f"one pass, {pools} new pools ({label})", f"{t:.1f}", f"{serial / t:.2f}x")
            for label, t in figures.items()]


def main() -> None:
    global RUNS, POOLS, BASELINE_RUNS, WALL_POOLS, WARM_POOLS, _templates

    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--skip-wall", action="store_true", help="part 1 only")
        p.add_argument("--skip-simulated", action="store_true", help="part 2 only")

    args = _cli.parse(__doc__, options=options)
    if args.smoke:
        RUNS, POOLS, BASELINE_RUNS, WALL_POOLS, WARM_POOLS = 1, 2, 1, 2, 0
    from tests.ledger_templates import LedgerTemplates

    with tempfile.TemporaryDirectory() as templates:
        _templates = LedgerTemplates(Path(templates), postgres_url="")  # SQLite only
        run(args)
        _templates = None


def run(args: argparse.Namespace) -> None:
    if not args.skip_simulated:
        print_table(f"{POOLS} new pools (1 VM each) from create to ready, simulated clock, "
                    f"median of {RUNS} run(s), 1-pool baselines of "
                    f"{max(RUNS, BASELINE_RUNS)} (latencies jittered +-20 %)",
                    ["scenario", "all ready (min)", "median pool (min)", "vs 1 pool",
                     "passes", "stack ops"], simulated_rows(args.smoke))
    if not args.skip_wall:
        print()
        print_table(f"Real wall time under the mock engine on {os.cpu_count()} cores "
                    f"(median of {RUNS})", ["pass", "s", "speed-up vs serial"],
                    wall_rows(WALL_POOLS, args.smoke))


if __name__ == "__main__":
    main()
