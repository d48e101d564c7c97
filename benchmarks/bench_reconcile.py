"""Reconciler figures.

1. The decision step over 1,000 pools x 10 VMs, converged (goal <= 200 ms), beside a bare
   loop over the same data.
2. A full converged reconcile pass with the ledger on SQLite and on PostgreSQL (goal <= 2 s),
   and the number of ledger writes it made (goal: zero). The cluster is an in-memory port
   holding one Ready Node per VM and the engine a stand-in that no converged pass may call,
   so the figure is the reconciler's and the ledger's. PostgreSQL is the one the tests use
   (ANYCLOUD_TEST_POSTGRES_URL), one fresh schema per figure; when it does not answer its
   rows say so, or under CI=true the script fails.
3. 100 pools x 10 VMs from create to ready on the simulators (mock engine, simulated cloud
   and cluster): passes needed and wall time.

    .venv/bin/python benchmarks/bench_reconcile.py [--skip-lifecycle] [--smoke]
        (BENCH_RUNS=5 by default)

--smoke: 3 pools x 2 VMs decided, one converged pass over 2 pools x 2 VMs on each ledger,
2 pools x 2 VMs from create to ready; one run, no warm-up pass.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, ms, print_table

MARKS = ("postgres",)
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
WARMUP = True
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def decision_bench(pools: int = 1000, vms: int = 10) -> list[tuple[str, str, str]]:
    from automation.reconciler.decide import (
        AttemptView,
        NodeView,
        PoolView,
        decide,
        stack_digest,
    )

    world = []
    for p in range(pools):
        pool_id = f"np-{p:05d}"
        attempts = [AttemptView(id=f"at-{p:05d}-{i}", state="running",
                                node_name=f"anycloud-at-{p:05d}-{i}", vm_created_at=NOW,
                                token_present=False, node_state="Ready") for i in range(vms)]
        view = PoolView(id=pool_id, state="ready", vm_count=vms, gpus=0,
                        applied_digest=stack_digest(False, attempts))
        nodes = [NodeView(name=a.node_name, pool_label=pool_id, attempt_label=a.id, ready=True)
                 for a in attempts]
        world.append((view, attempts, nodes))
    times, bare = [], []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        decisions = [decide(v, a, n, NOW) for v, a, n in world]
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _v, a, n in world:
            sum(1 for x in a if x.state == "running") + len(n)
        bare.append(time.perf_counter() - t0)
    assert all(d.state == "ready" and not d.actions for d in decisions)
    return [
        (f"decide(): {pools} pools x {vms} VMs, converged", ms(median(times)),
         f"{median(times) / median(bare):.0f}x bare loop; goal <= 200 ms"),
        ("baseline: bare loop over the same attempts and Nodes", ms(median(bare)), "1x"),
    ]


class NoEngine:
    """The runner of the converged pass: it names an engine (every pass reports one) and
    runs nothing. A converged pass makes no stack operation; if it tried, the pool would
    fail its turn and the figure's assertion says so."""

    engine: Literal["pulumi", "mock"] = "pulumi"
    cloud_label = None  # the real cloud (``models.recorded_engine``)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a converged pass called the engine ({name})")


class DictCluster:
    """A ClusterPort with one Ready Node per VM, looked up in O(1)."""

    def __init__(self) -> None:
        self.by_pool: dict[str, list[Any]] = {}

    def nodes_claiming(self, pool_id: str, issued: set[str]) -> list[Any]:
        return self.by_pool.get(pool_id, [])

    def service_objects_removed(self, namespace: str) -> bool:
        return True


def seed(url: str, pools: int, vms: int) -> tuple[Any, DictCluster]:
    from automation.kube.port import ObservedNode
    from automation.ledger import open_ledger, schema
    from automation.reconciler.decide import AttemptView, stack_digest

    def digest(p: int) -> str:
        return stack_digest(False, [AttemptView(id=f"at-{p:05d}-{i}", state="running",
                                                node_name="", token_present=False)
                                    for i in range(vms)])

    ledger = open_ledger(url)
    cluster = DictCluster()
    with ledger.write() as conn:
        conn.execute(schema.orgs.insert().values(id="org-b", name="default", created_at=NOW,
                                                 updated_at=NOW))
        conn.execute(schema.clusters.insert().values(
            org_id="org-b", id="cl-b", name="bench", state="ready", server_url="https://203.0.113.1:6443",
            ca_sha256="0" * 64, kubernetes_version="v1.36.2+k3s1", kubeconfig_path="/kc",
            created_at=NOW, updated_at=NOW))
        conn.execute(schema.credentials.insert().values(
            id="cr-b", name="bench", org_id="org-b", provider="aws", reference={"profile": "x"},
            state="active", created_at=NOW))
        conn.execute(schema.node_pools.insert(), [dict(
            id=f"np-{p:05d}", name=f"pool-{p:05d}", cluster_id="cl-b", credential_id="cr-b",
            org_id="org-b",
            provider="aws", region="us-east-1", zone="us-east-1a", vm_type="m7i.large",
            min_vms=vms, max_vms=vms, state="ready", hosts_service=False,
            consecutive_failures=0, applied_digest=digest(p), created_at=NOW,
            updated_at=NOW) for p in range(pools)])
        rows = []
        for p in range(pools):
            nodes = []
            for i in range(vms):
                aid = f"at-{p:05d}-{i}"
                rows.append(dict(
                    id=aid, pool_id=f"np-{p:05d}", state="running", token_generation=0,
                    node_name=f"anycloud-{aid}", node_state="Ready", vm_created_at=NOW,
                    token_issued_at=NOW, token_removed_at=NOW, created_at=NOW,
                    updated_at=NOW))
                nodes.append(ObservedNode(
                    name=f"anycloud-{aid}", ready=True, gpu_allocatable=0, unschedulable=False,
                    created_at=NOW, labels={"anycloud.sh/node-pool": f"np-{p:05d}",
                                            "anycloud.sh/attempt": aid}))
            cluster.by_pool[f"np-{p:05d}"] = nodes
        conn.execute(schema.vm_attempts.insert(), rows)
    return ledger, cluster


def pass_bench(label: str, url: str, pools: int, vms: int) -> tuple[str, str, str]:
    import sqlalchemy as sa

    from automation.app import App
    from automation.clock import ManualClock
    from automation.reconciler.reconcile import Ports, Reconciler

    ledger, cluster = seed(url, pools, vms)
    app = App(ledger=ledger, clock=ManualClock(NOW + timedelta(hours=1)))
    ports = Ports(runner=NoEngine(),
                  cluster_for=lambda row: cluster,  # type: ignore[arg-type,return-value]
                  vm_lookup=lambda p, ids: dict.fromkeys(ids, "running"))
    reconciler = Reconciler(app, ports)
    writes: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            writes.append(statement)

    if WARMUP:
        reconciler.run_once()  # warm-up
    sa.event.listen(ledger.engine, "before_cursor_execute", count)
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        outcomes = reconciler.run_once()
        times.append(time.perf_counter() - t0)
    sa.event.remove(ledger.engine, "before_cursor_execute", count)
    assert all(o.state == "ready" for o in outcomes), outcomes[:3]
    ledger.dispose()
    return (f"full converged pass, {label}, {pools} pools x {vms} VMs", ms(median(times)),
            f"{len(writes)} writes in {RUNS} passes; goal <= 2000 ms, 0 writes")


def pg_pass_bench(pools: int, vms: int) -> tuple[str, str, str]:
    """``pass_bench`` on PostgreSQL, in a schema of its own dropped afterwards."""
    import secrets

    import sqlalchemy as sa

    postgres = _cli.postgres_url()
    if postgres is None:
        return ("full converged pass, PostgreSQL", "-", "server not reachable")
    admin = sa.create_engine(postgres)
    schema_name = f"bench_{secrets.token_hex(4)}"
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema_name}")
    sep = "&" if "?" in postgres else "?"
    try:
        return pass_bench("PostgreSQL", f"{postgres}{sep}options=-csearch_path%3D{schema_name}",
                          pools, vms)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema_name} CASCADE")
        admin.dispose()


def lifecycle_bench(pools: int = 100, vms: int = 10) -> list[tuple[str, str, str]]:
    from automation.reconciler.reconcile import Reconciler
    from automation.services import credentials, node_pools
    from automation.simulators.ports import simulated_ports
    from automation.simulators.world import simulated_app

    with tempfile.TemporaryDirectory() as tmp:
        app, world = simulated_app(Path(tmp))
        credentials.new_credential(app, credentials.NewCredential("aws", "aws", {"profile": "p"}))
        for p in range(pools):
            node_pools.create_node_pool(app, node_pools.CreateNodePool(
                name=f"pool-{p:03d}", credentials="aws", region="us-east-1",
                vm_type="m7i.large", min_vms=vms, max_vms=vms))
        reconciler = Reconciler(app, simulated_ports(app, world))
        t0 = time.perf_counter()
        passes = 0
        while passes < 30:
            outcomes = reconciler.run_once()
            passes += 1
            if all(o.state == "ready" for o in outcomes):
                break
            world.advance(timedelta(seconds=30))
        wall = time.perf_counter() - t0
        simulated = passes * 30
        app.ledger.dispose()
    ready = sum(o.state == "ready" for o in outcomes)
    return [(f"create -> ready on the simulators, {pools} pools x {vms} VMs",
             f"{wall * 1000:.0f}",
             f"{passes} passes ({simulated // 60} min {simulated % 60} s simulated, "
             f"30 s apart), {ready}/{pools} ready, {wall / passes:.1f} s per pass")]


def main() -> None:
    global RUNS, WARMUP

    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--skip-lifecycle", action="store_true", help="leave out figure 3")

    args = _cli.parse(__doc__, MARKS, options)
    passes: tuple[int, ...] = (100, 1000)  # pools of the converged passes
    decided, vms, lifecycle = (1000, 10), 10, (100, 10)
    if args.smoke:
        RUNS, WARMUP = 1, False
        decided, passes, vms, lifecycle = (3, 2), (2,), 2, (2, 2)
    rows = decision_bench(*decided)
    for pools in passes:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(pass_bench("SQLite", f"sqlite:///{Path(tmp) / 'b.db'}", pools, vms))
        rows.append(pg_pass_bench(pools, vms))
    if not args.skip_lifecycle:
        rows += lifecycle_bench(*lifecycle)
    print_table(f"Reconciler (median of {RUNS} where timed repeatedly)",
                ["measure", "ms", "notes"], rows)


if __name__ == "__main__":
    main()
