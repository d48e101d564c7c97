"""The mass-failure brake's decision cost (issue 23).

1,000 pools x 10 VMs on one cluster, converged but for a share of failing VMs (NotReady
for 20 minutes: what ``decide`` replaces). Per pattern: today's decision pass (``decide()``
over every pool, the baseline), the brake alone (every pool's tally, the cluster's verdict,
each pool's hold: what a pass adds before deciding; goal <= 10 % of the baseline), and the
decision pass given the holds. Two patterns: 10 % of the VMs failing (under the 40 %
threshold: nothing held, the replacements decided as today) and 60 % failing (braked: every
pool held; today's pass parks every pool instead, after three replacements in a row, so its
decide() takes a shorter path than a held pool's, which still fits counts and digests).
Timing starts from the decide inputs (``AttemptView``s, ``NodeView``s), as the reconciler
has them after its snapshot; runs are interleaved, median of BENCH_RUNS.

    .venv/bin/python benchmarks/bench_brake.py [--smoke]   (BENCH_RUNS=5 by default)

--smoke: 3 pools x 2 VMs, one run, no warm-up.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, ms, print_table

MARKS = ()
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
WARMUP = True
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def world(pools: int, vms: int, failing_share: float) -> list[tuple[Any, list[Any], list[Any]]]:
    from automation.reconciler.decide import AttemptView, NodeView, PoolView, stack_digest

    out = []
    n = 0
    for p in range(pools):
        pool_id = f"np-{p:05d}"
        attempts, nodes = [], []
        for i in range(vms):
            n += 1
            # Evenly spread: the share of VMs failing is exactly ``failing_share``.
            sick = int(n * failing_share) != int((n - 1) * failing_share)
            aid = f"at-{p:05d}-{i}"
            attempts.append(AttemptView(
                id=aid, state="running", node_name=f"anycloud-{aid}",
                vm_created_at=NOW - timedelta(hours=1), token_present=False,
                not_ready_since=NOW - timedelta(minutes=20) if sick else None,
                node_state="NotReady" if sick else "Ready"))
            nodes.append(NodeView(name=f"anycloud-{aid}", pool_label=pool_id,
                                  attempt_label=aid, ready=not sick))
        view = PoolView(id=pool_id, state="ready", vm_count=vms, gpus=0,
                        applied_digest=stack_digest(False, attempts))
        out.append((view, attempts, nodes))
    return out


def today(pools: list[tuple[Any, list[Any], list[Any]]]) -> list[Any]:
    from automation.reconciler.decide import decide

    return [decide(v, a, n, NOW) for v, a, n in pools]


def the_brake(pools: list[tuple[Any, list[Any], list[Any]]]) -> dict[str, str | None]:
    """What the brake adds to a pass: every pool's tally, the cluster's verdict, each
    pool's hold (pool id → ``PoolView.held``)."""
    from automation.reconciler import brake as b
    from automation.settings import BrakeLimits

    tallies = [b.pool_health(v.id, [(x.state, x.node_state, x.not_ready_since,
                                     x.vm_created_at) for x in a], NOW) for v, a, _ in pools]
    found = b.evaluate({"c1": tallies}, BrakeLimits()).get("c1")
    return {v.id: found.held(v.id) if found else None for v, _, _ in pools}


def held_pass(pools: list[tuple[Any, list[Any], list[Any]]],
              holds: dict[str, str | None]) -> list[Any]:
    from automation.reconciler.decide import decide

    return [decide(v, a, n, NOW) for v, a, n in _with_holds(pools, holds)]


def _with_holds(pools: list[tuple[Any, list[Any], list[Any]]],
                holds: dict[str, str | None]) -> list[tuple[Any, list[Any], list[Any]]]:
    # The reconciler builds each PoolView with its hold; here the views are rebuilt once,
    # outside the timing.
    return [(replace(v, held=holds[v.id]) if holds[v.id] else v, a, n) for v, a, n in pools]


def bench(pools: int, vms: int, share: float) -> list[tuple[str, str, str]]:
    from automation.reconciler.decide import NewAttempt

    data = world(pools, vms, share)
    holds = the_brake(data)
    held_data = _with_holds(data, holds)
    if WARMUP:
        today(data)
        today(held_data)
    base, brake, after = [], [], []
    for _ in range(RUNS):  # interleaved, so drift hits all alike
        t0 = time.perf_counter()
        plain = today(data)
        base.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        the_brake(data)
        brake.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        held = today(held_data)
        after.append(time.perf_counter() - t0)
    bought = sum(len(d.of(NewAttempt)) for d in held)
    bought_today = sum(len(d.of(NewAttempt)) for d in plain)
    parked = sum(1 for d in plain if d.state == "failed")
    held_pools = sum(1 for h in holds.values() if h)
    ratio = median(brake) / median(base)
    label = f"{pools} pools x {vms} VMs, {share:.0%} failing"
    return [
        (f"today's pass: decide() over {label}", ms(median(base)),
         f"baseline; {bought_today} replacements, {parked} pools parked"),
        (f"  the brake (tallies, verdict, holds): {label}", ms(median(brake)),
         f"+{ratio * 100:.1f} % of the baseline; goal <= +10 %"),
        (f"  decide() with the holds: {label}", ms(median(after)),
         f"{median(after) / median(base):.2f}x; {held_pools} pools held, {bought} "
         "replacements"),
    ]


def main() -> None:
    global RUNS, WARMUP
    args = _cli.parse(__doc__, MARKS)
    size = (1000, 10)
    if args.smoke:
        RUNS, WARMUP, size = 1, False, (3, 2)
    rows = bench(*size, 0.10) + bench(*size, 0.60)
    print_table(f"Mass-failure brake, decision pass (median of {RUNS})",
                ["measure", "ms", "notes"], rows)


if __name__ == "__main__":
    main()
