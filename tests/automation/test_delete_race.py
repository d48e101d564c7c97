"""Delete versus admission, racing: exactly one of them wins, every time, on both ledgers."""

from __future__ import annotations

import multiprocessing as mp
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.clock import ManualClock
from automation.errors import Conflict
from automation.ledger import open_ledger, schema
from automation.models import PoolState, WorkloadKind
from automation.services import node_pools, workloads
from tests.automation.conftest import credential, ready_cluster

ITERATIONS_THREADS = 40
ITERATIONS_PROCESSES = 12


def _new_pool(app: App, i: int) -> str:
    return node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name=f"p{i}", credentials="team-aws", region="us-east-1", vm_type="m7i.large",
        min_vms=1, max_vms=1,
    )).id


def _try_delete(app: App, pool: str) -> str:
    try:
        node_pools.delete_node_pool(app, pool)
        return "deleted"
    except Conflict as err:
        assert err.code == "NODE_POOL_IN_USE", err
        return "refused"


def _try_admit(app: App, pool: str, name: str) -> str:
    try:
        workloads.create_workload(app, name, pool, WorkloadKind.DEPLOYMENT)
        return "admitted"
    except Conflict as err:
        assert err.code == "NODE_POOL_DELETING", err
        return "refused"


def _check(app: App, pool: str, outcome: tuple[str, str]) -> None:
    assert outcome in {("deleted", "refused"), ("refused", "admitted")}, outcome
    with app.ledger.read() as conn:
        state = conn.execute(
            sa.select(schema.node_pools.c.state).where(schema.node_pools.c.id == pool)
        ).scalar_one()
        targeting = conn.execute(
            sa.select(sa.func.count()).where(schema.workloads.c.pool_id == pool)
        ).scalar_one()
    # Never a deleting pool with work on it, never work refused by a live pool.
    assert (state == PoolState.DELETING) == (targeting == 0) == (outcome[0] == "deleted")


@pytest.fixture
def world(app: App, kubeconfig: Path) -> App:
    ready_cluster(app, kubeconfig)
    credential(app)
    return app


def test_race_threads(world: App) -> None:
    seen = set()
    for i in range(ITERATIONS_THREADS):
        pool = _new_pool(world, i)
        barrier = threading.Barrier(2)
        results: dict[str, str] = {}

        def delete(pool: str, barrier: threading.Barrier, results: dict[str, str]) -> None:
            barrier.wait()
            results["delete"] = _try_delete(world, pool)

        def admit(pool: str, barrier: threading.Barrier, results: dict[str, str], i: int) -> None:
            barrier.wait()
            results["admit"] = _try_admit(world, pool, f"w{i}")

        threads = [
            threading.Thread(target=delete, args=(pool, barrier, results)),
            threading.Thread(target=admit, args=(pool, barrier, results, i)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        outcome = (results["delete"], results["admit"])
        _check(world, pool, outcome)
        seen.add(outcome)
    print("outcomes seen:", sorted(seen))


def _process_worker(url: str, role: str, tasks, barrier, out) -> None:  # type: ignore[no-untyped-def]
    """One side of every race: a process of its own with its own ledger connections, kept
    across the iterations (a spawned process costs ~1 s of imports; the race is the same)."""
    app = App(ledger=open_ledger(url), clock=ManualClock())
    for pool, name in iter(tasks.get, None):
        barrier.wait()
        out.put((role, _try_delete(app, pool) if role == "delete" else _try_admit(app, pool, name)))
    app.ledger.dispose()


def test_race_processes(world: App, ledger_url: str) -> None:
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    tasks = {role: ctx.Queue() for role in ("delete", "admit")}
    procs = [ctx.Process(target=_process_worker,
                         args=(ledger_url, role, tasks[role], barrier, out))
             for role in tasks]
    for p in procs:
        p.start()
    try:
        for i in range(ITERATIONS_PROCESSES):
            pool = _new_pool(world, i)
            for queue in tasks.values():
                queue.put((pool, f"w{i}"))
            results = dict(out.get(timeout=120) for _ in procs)
            _check(world, pool, (results["delete"], results["admit"]))
    finally:
        for queue in tasks.values():
            queue.put(None)
        for p in procs:
            p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
