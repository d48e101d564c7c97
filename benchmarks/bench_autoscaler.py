"""AgentPool autoscaler figures: decisions for 1,000 pools x 100 agents (issue 11 goal <= 100 ms).

The pools are a seeded mix of the seed's CPU, GPU and shell autoscaler settings, a quarter
each converged, decaying (a fifth of the agents idle), short of slots (pending sessions,
starting and lost agents) and mixed (every state, past and within every timer), so every rule
runs. Beside it, in the
same run: one mixed 100-agent pool decided 1,000 times (its data stays in cache), the
same 1,000 pools at 10 agents (how it scales), and a bare loop reading each worker once (the
floor any decision over these inputs pays).

    .venv/bin/python benchmarks/bench_autoscaler.py [--smoke]     (BENCH_RUNS=7 by default)

--smoke: 4 pools (one of each shape) of 10 and of 3 agents, the mixed pool decided 10 times,
one run, no warm-up.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from automation.agentpools.autoscaler import Decision, Settings, Worker, decide
from benchmarks import _cli
from benchmarks._table import median, ms, print_table

RUNS = int(os.environ.get("BENCH_RUNS", "7"))
WARMUP = True
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
SETTINGS = (  # the seed's cpu-pool, gpu-pool and shell, maxReplicas raised to hold 100 agents
    Settings(min_replicas=2, max_replicas=120, min_idle=3, max_idle=8, idle_decay_second=300),
    Settings(min_idle=1, max_idle=3, max_replicas=110, idle_decay_second=600,
             kill_unknown_after_second=900),
    Settings(min_idle=1, max_idle=2, max_replicas=90, idle_decay_second=60,
             default_slots_per_agent=2),
)
Pool = tuple[Settings, list[Worker], int]


def make_pool(rnd: random.Random, p: int, agents: int) -> Pool:
    """One pool in one of four shapes, in turn: converged, decaying, short of slots, mixed."""
    s = SETTINGS[p % len(SETTINGS)]
    shape = p % 4
    slots = s.default_slots_per_agent
    workers = []
    for i in range(agents):
        name = f"pool-{p:04d}-{i:03d}"
        created = NOW - timedelta(seconds=rnd.randint(0, 7200))
        ago = NOW - timedelta(seconds=rnd.randint(0, 1200))
        roll = rnd.random()
        if shape == 0:  # converged: minIdle slots idle (recently), the rest busy
            idle = i < s.min_idle // slots + 1
            w = Worker(name=name, created_at=created, state="ready", slots=slots,
                       busy_slots=0 if idle else slots,
                       idle_since=NOW - timedelta(seconds=5) if idle else None)
        elif shape == 1:  # the load went away: a fifth idle, most past their decay
            idle = i % 5 == 0
            w = Worker(name=name, created_at=created, state="ready", slots=slots,
                       busy_slots=0 if idle else slots, idle_since=ago if idle else None)
        elif shape == 2:  # all busy, some still starting or lost: scale up
            if roll < 0.05:
                w = Worker(name=name, created_at=created, state="starting")
            elif roll < 0.08:
                w = Worker(name=name, created_at=created, state="unknown", slots=slots,
                           unknown_since=ago)
            else:
                w = Worker(name=name, created_at=created, state="ready", slots=slots,
                           busy_slots=slots)
        elif roll < 0.05:  # mixed: every state, partly busy agents
            w = Worker(name=name, created_at=created, state="starting")
        elif roll < 0.08:
            w = Worker(name=name, created_at=created, state="unknown", slots=slots,
                       busy_slots=rnd.randint(0, 1), unknown_since=ago)
        elif roll < 0.10:
            w = Worker(name=name, created_at=created, state="terminating", slots=slots)
        else:
            busy = rnd.randint(0, slots) if roll < 0.7 else 0
            w = Worker(name=name, created_at=created, state="ready", slots=slots,
                       busy_slots=busy, idle_since=None if busy else ago)
        workers.append(w)
    rnd.shuffle(workers)  # decide() must not rely on input order
    return s, workers, rnd.randint(1, 20) if shape == 2 else 0


def timed(fn: Callable[[], object]) -> list[float]:
    if WARMUP:
        fn()  # warm-up, not counted
    out = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def all_pools(world: list[Pool]) -> Callable[[], list[Decision]]:
    return lambda: [decide(s, w, pending, NOW) for s, w, pending in world]


def main() -> None:
    global RUNS, WARMUP
    args = _cli.parse(__doc__)
    pools, agents, few_agents, calls = 1000, 100, 10, 1000
    if args.smoke:
        RUNS, WARMUP = 1, False
        pools, agents, few_agents, calls = 4, 10, 3, 10
    rnd = random.Random(11)
    world = [make_pool(rnd, p, agents) for p in range(pools)]
    small = [make_pool(rnd, p, few_agents) for p in range(pools)]
    one = world[3]  # the mixed shape, the dearest of the four

    decisions = all_pools(world)()
    created = sum(d.create for d in decisions)
    deleted = sum(len(d.delete) for d in decisions)
    acting = sum(1 for d in decisions if d.create or d.delete)

    big = timed(all_pools(world))
    repeat = timed(lambda: [decide(one[0], one[1], one[2], NOW) for _ in range(calls)])
    few = timed(all_pools(small))

    def bare() -> int:
        n = 0
        for _s, workers, _p in world:
            for w in workers:
                n += w.busy_slots
        return n

    floor = timed(bare)
    per = median(big) / pools
    print_table(
        f"AgentPool autoscaler, median of {RUNS} runs (ms); {acting} of {pools} pools acting: "
        f"+{created} agents, -{deleted} pods",
        ("case", "ms", "min ms", "vs goal / baseline"),
        [
            (f"decide(): {pools:,} pools x {agents} agents", ms(median(big)), ms(min(big)),
             f"goal <= 100 ms; {per * 1e6:.0f} us a pool"),
            (f"baseline: 1 mixed pool x {agents} agents x {calls:,} calls", ms(median(repeat)),
             ms(min(repeat)), f"{median(big) / median(repeat):.2f}x of it"),
            (f"decide(): {pools:,} pools x {few_agents} agents", ms(median(few)),
             ms(min(few)), f"{median(big) / median(few):.1f}x for "
             f"{agents / few_agents:.0f}x the agents"),
            (f"floor: bare loop reading each of the {pools * agents:,} workers",
             ms(median(floor)), ms(min(floor)),
             f"decide() is {median(big) / median(floor):.1f}x"),
        ],
    )


if __name__ == "__main__":
    main()
