"""The static provisioner at scale (issue 12, "Measure"): 1,000 deployments created and
started through ``start_deployment`` (the service path the CLI takes) on a static set of 50
runtimes of 24 slots each, on SQLite and on PostgreSQL, then the slot ledger checked exactly.

Each run starts from a fresh ledger (migrated, one org and project; not timed) and times:

- ``sequential``: one process creating and starting N deployments one after the other, for
  the baseline of 100 and for 1,000 (the per-deployment cost should stay about flat);
- ``4 processes``: 4 spawned processes each creating and starting 250 at once, all
  competing for the same runtimes' slots (the race ``_lock_runtimes`` serialises). The wall
  time runs from a barrier all of them wait at (imports and ledger opened) to the last one done.

Every 10th deployment asks for 2 slots, the others 1 (1,100 of 1,200 slots), so the check
sees slot sizes and not only counts. After every run the ledger is checked exactly: each
deployment running on the set with exactly one allocation of its slots on its own host, no
allocation without a deployment, per runtime the slots held equal to its deployments' slots
and never above its capacity, the provisioner's own ``usage()`` agreeing. Any difference is
printed and the script exits 1; otherwise the table says "consistent: yes".

    .venv/bin/python benchmarks/bench_static_provisioner.py [--runs 3] [--quick]
        [--ledgers sqlite,postgresql] [--smoke]

--smoke: 2 and 4 deployments sequential, 2 processes x 2, one run on each ledger (the exact
check as always).

PostgreSQL is the one the tests use (ANYCLOUD_TEST_POSTGRES_URL, else the role and database
``.ci/postgres.sh`` makes), one fresh schema per run. When it is not reachable it is skipped
with a note, or under CI=true the script exits 1.

Here (2 cores, idle, 2026-12-01; about 2 minutes in all): SQLite ~6 ms a deployment for 100
and for 1,000 (ratio 0.94), 4 processes 6.4 s for 1,000 (one writer at a time, so no gain);
PostgreSQL ~13 ms vs ~15 ms a deployment (ratio 1.13), 4 processes 7.1 s for 1,000 (about
half the sequential time). Runtimes end at 21-23 of 24 slots; consistent in every run. A
profile (300 starts) puts about a third of each in the provisioner's transaction, a third to
nearly half of that in ``_lock_runtimes`` (the upsert of the set's 50 runtime rows and their
lock, on every provision); the rest is the deployment's own ledger work: reads, and 3 of the
4 write transactions of a create+start (create, the intent, running).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import secrets
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, ms, print_table

MARKS = ("postgres", "slow")
RUNTIMES = 50
SLOTS = 24
PROVISIONER = "fleet"
PROJECT = "web"
POSTGRES = _cli.POSTGRES_URL


def slots_for(index: int) -> int:
    return 2 if index % 10 == 0 else 1


def name_for(index: int) -> str:
    return f"d{index:05d}"


def fleet() -> Any:
    from automation.provisioners.provisioner_set import ProvisionerSet, StaticEntry

    runtimes = [{"host": f"http://rt-{i:02d}.bench:8080", "slots": SLOTS, "data_dir": "/data",
                 "audience_url": f"https://rt-{i:02d}.bench"} for i in range(RUNTIMES)]
    entry = StaticEntry.model_validate({"type": "static", "spec": {"runtimes": runtimes}})
    return ProvisionerSet(provisioners={PROVISIONER: entry}, default=PROVISIONER)


# -- ledgers ---------------------------------------------------------------------------------


@contextmanager
def fresh_ledger(kind: str) -> Iterator[str]:
    """The URL of an empty ledger, migrated and holding the org and project (not timed);
    removed afterwards (the SQLite file, or the PostgreSQL schema)."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="bench-static-") as tmp:
            url = f"sqlite:///{tmp}/ledger.db"
            _seed(url)
            yield url
        return
    import sqlalchemy as sa

    schema = f"bench_static_{secrets.token_hex(4)}"
    admin = sa.create_engine(POSTGRES)
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in POSTGRES else "?"
    url = f"{POSTGRES}{sep}options=-csearch_path%3D{schema}"
    try:
        _seed(url)
        yield url
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def _seed(url: str) -> None:
    from automation.app import App
    from automation.ledger import open_ledger
    from automation.services import projects

    ledger = open_ledger(url)
    app = App(ledger=ledger)
    projects.create_org(app, "acme")
    projects.create_project(app, PROJECT, "acme")
    ledger.dispose()


# -- the measured path -----------------------------------------------------------------------


class Starter:
    """One process's control plane: its ledger, the set and the provisioners built from it."""

    def __init__(self, url: str) -> None:
        from automation.app import App
        from automation.ledger import open_ledger
        from automation.services.provisioner_factory import provisioners

        self.ledger = open_ledger(url)
        self.app = App(ledger=self.ledger)
        self.pset = fleet()
        self.provisioners = provisioners(self.app, self.pset)

    def start(self, indexes: range) -> None:
        from automation.provisioners.base import ProvisionRequest
        from automation.services import deployments as deps

        for i in indexes:
            dep = deps.create_deployment(self.app, name_for(i), PROJECT)
            deps.start_deployment(self.app, dep.id, self.pset, self.provisioners,
                                  ProvisionRequest(slots=slots_for(i)))

    def close(self) -> None:
        self.ledger.dispose()


def sequential(url: str, count: int) -> float:
    starter = Starter(url)
    try:
        begin = time.perf_counter()
        starter.start(range(count))
        return time.perf_counter() - begin
    finally:
        starter.close()


def _worker(url: str, indexes: range, barrier: Any, results: Any) -> None:
    try:
        starter = Starter(url)
        barrier.wait(timeout=300)
        starter.start(indexes)
        starter.close()
        results.put(None)
    except BaseException:
        results.put(traceback.format_exc())


def concurrent(url: str, procs: int, each: int) -> float:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs + 1)
    results = ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(url, range(p * each, (p + 1) * each),
                                                 barrier, results)) for p in range(procs)]
    for w in workers:
        w.start()
    barrier.wait(timeout=300)  # every worker has imported and opened its ledger
    begin = time.perf_counter()
    errors = [e for e in (results.get(timeout=900) for _ in workers) if e]
    wall = time.perf_counter() - begin
    for w in workers:
        w.join()
    if errors:
        sys.exit(f"a worker failed:\n{errors[0]}")
    return wall


# -- the exact check -------------------------------------------------------------------------


def check(url: str, count: int) -> tuple[list[str], tuple[int, int]]:
    """Every difference between the ledger and what ``count`` started deployments must hold,
    and the (least, most) slots held on one runtime."""
    import sqlalchemy as sa

    from automation.clock import SystemClock
    from automation.ledger import open_ledger, schema
    from automation.provisioners.static import StaticProvisioner

    pset = fleet()
    capacity = {r.host: r.slots for r in pset.get(PROVISIONER).spec.runtimes}
    ledger = open_ledger(url)
    try:
        with ledger.read() as conn:
            deps = {r["name"]: r for r in conn.execute(sa.select(schema.deployments).where(
                schema.deployments.c.state != "deleted")).mappings()}
            allocs = [dict(r) for r in conn.execute(
                sa.select(schema.static_allocations)).mappings()]
            locked = {r.host for r in conn.execute(sa.select(schema.static_runtimes.c.host)
                      .where(schema.static_runtimes.c.provisioner == PROVISIONER))}
        usage = {u.host: u.used for u in StaticProvisioner(
            PROVISIONER, pset.get(PROVISIONER).spec, ledger, SystemClock()).usage()}
    finally:
        ledger.dispose()

    problems: list[str] = []
    wanted = {name_for(i): slots_for(i) for i in range(count)}
    for name in sorted(wanted.keys() - deps.keys()):
        problems.append(f"deployment {name} is missing")
    for name in sorted(deps.keys() - wanted.keys()):
        problems.append(f"deployment {name} was not started by the benchmark")
    per_id = Counter(a["provision_id"] for a in allocs)
    by_id = {a["provision_id"]: a for a in allocs}
    expected: Counter[str] = Counter()
    for name, d in sorted(deps.items()):
        got = (d["state"], d["provisioner"], d["move"], d["last_error"])
        if got != ("running", PROVISIONER, None, None):
            problems.append(f"deployment {name}: state, provisioner, move, last error {got}, "
                            f"expected ('running', {PROVISIONER!r}, None, None)")
        if d["runtime_host"] not in capacity:
            problems.append(f"deployment {name}: host {d['runtime_host']} is not in the set")
        expected[d["runtime_host"]] += wanted.get(name, 0)
        if per_id[d["provision_id"]] != 1:
            problems.append(f"deployment {name} ({d['provision_id']}) holds "
                            f"{per_id[d['provision_id']]} allocations, expected 1")
            continue
        a = by_id[d["provision_id"]]
        if (a["provisioner"], a["host"], a["slots"]) != (
                PROVISIONER, d["runtime_host"], wanted.get(name)):
            problems.append(f"deployment {name}: allocation {a['provisioner']} {a['host']} "
                            f"{a['slots']} slot(s), expected {PROVISIONER} "
                            f"{d['runtime_host']} {wanted.get(name)}")
    live_ids = {d["provision_id"] for d in deps.values()}
    for a in allocs:
        if a["provision_id"] not in live_ids:
            problems.append(f"allocation {a['provision_id']} on {a['host']} "
                            f"({a['slots']} slot(s)) has no deployment (orphaned)")
    held: Counter[str] = Counter()
    for a in allocs:
        held[a["host"]] += a["slots"]
    for host in sorted(held.keys() | expected.keys() | usage.keys()):
        if held[host] != expected[host]:
            problems.append(f"runtime {host} holds {held[host]} slots, its deployments "
                            f"{expected[host]}")
        if held[host] > capacity.get(host, 0):
            problems.append(f"runtime {host} holds {held[host]} slots of "
                            f"{capacity.get(host, 0)}")
        if usage.get(host, 0) != held[host]:
            problems.append(f"runtime {host}: usage() says {usage.get(host, 0)} used, "
                            f"the allocations {held[host]}")
    if locked != capacity.keys():
        problems.append(f"static_runtimes rows {len(locked)}, the set has {len(capacity)}")
    spread = [held[h] for h in capacity]
    return problems, (min(spread), max(spread))


# -- the table -------------------------------------------------------------------------------


def main() -> None:
    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--runs", type=int, default=3, help="runs per figure (median)")
        p.add_argument("--quick", action="store_true",
                       help="100 deployments, baseline 10, 4 processes x 25")
        p.add_argument("--ledgers", default="sqlite,postgresql")

    args = _cli.parse(__doc__, MARKS, options)
    base, total, procs = (10, 100, 4) if args.quick else (100, 1000, 4)
    if args.smoke:
        args.runs, (base, total, procs) = 1, (2, 4, 2)
    each = total // procs

    kinds = args.ledgers.split(",")
    # Under CI=true a PostgreSQL that does not answer is a failure (_cli.postgres_url).
    if "postgresql" in kinds and _cli.postgres_url() is None:
        print(f"PostgreSQL not reachable at {POSTGRES}: skipped (start it with "
              ".ci/postgres.sh)", file=sys.stderr)
        kinds.remove("postgresql")

    variants = [("sequential", base), ("sequential", total), (f"{procs} processes", total)]
    rows = []
    for kind in kinds:
        times: dict[int, list[float]] = {n: [] for n in range(len(variants))}
        spreads: dict[int, list[tuple[int, int]]] = {n: [] for n in range(len(variants))}
        for run in range(args.runs):
            # Interleaved, so drift over the runs weighs on every variant alike.
            for n, (variant, count) in enumerate(variants):
                with fresh_ledger(kind) as url:
                    seconds = (sequential(url, count) if variant == "sequential"
                               else concurrent(url, procs, each))
                    problems, spread = check(url, count)
                if problems:
                    print(f"consistent: no ({kind}, {variant}, {count} deployments, run "
                          f"{run + 1}): {len(problems)} difference(s)", file=sys.stderr)
                    for p in problems[:20]:
                        print(f"  {p}", file=sys.stderr)
                    sys.exit(1)
                times[n].append(seconds)
                spreads[n].append(spread)
                print(f"{kind} {variant} {count}: {seconds:.2f} s, consistent",
                      file=sys.stderr, flush=True)
        per_base = median(times[0]) / base
        for n, (variant, count) in enumerate(variants):
            wall = median(times[n])
            low = min(s[0] for s in spreads[n])
            high = max(s[1] for s in spreads[n])
            rows.append((kind, variant, count, ms(wall), f"{wall / count * 1000:.1f}",
                         f"{wall / count / per_base:.2f}",
                         f"{min(times[n]):.2f}-{max(times[n]):.2f}", f"{low}-{high}"))
    print_table(f"static provisioner, {RUNTIMES} runtimes x {SLOTS} slots, create+start "
                f"through start_deployment, median of {args.runs} runs, milliseconds",
                ["ledger", "variant", "deployments", "wall", "ms/deployment",
                 f"ratio to {base}", "range s", "slots/runtime"], rows)
    print("consistent: yes")


if __name__ == "__main__":
    main()
