"""Two control loops on one PostgreSQL ledger, as a team runs them: separate processes over
one simulated world (its cloud, cluster and clock served by this process, as the workers'
cloud is), the engine state shared as a PersistentVolume would share it. One replica is
SIGKILLed mid-pass and started again. Every pool gets ready, every attempt is bought once,
and no pool is ever acted on by two replicas at once.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import secrets
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from multiprocessing.managers import BaseManager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.ledger import open_ledger, schema
from automation.services import credentials, node_pools
from automation.simulators.world import SimWorld, register_simulated_cluster
from tests.automation.reconciler.test_crash_safety import POOLS

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

M = timedelta(minutes=1)
POOL_COUNT = 50
LEASE_TTL = timedelta(seconds=8)  # real time: leases use the system clock, as in serve


class _WorldManager(BaseManager):
    pass


_world: dict[str, Any] = {}
_WorldManager.register("cloud", callable=lambda: _world["cloud"])
_WorldManager.register("cluster", callable=lambda: _world["cluster"])
_WorldManager.register("clock", callable=lambda: _world["clock"])


class _Witnessed:
    """The replica's engine, writing when each stack operation starts and ends."""

    def __init__(self, inner: Any, holder: str, evidence: str) -> None:
        self.inner, self.holder, self.evidence = inner, holder, evidence

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _witness(self, op: str, target: Any, *args: Any, **kwargs: Any) -> Any:
        self._write("start", target.key)
        try:
            return getattr(self.inner, op)(target, *args, **kwargs)
        finally:
            self._write("end", target.key)

    def _write(self, kind: str, pool: str) -> None:
        line = json.dumps([self.holder, kind, pool, time.monotonic()]) + "\n"
        fd = os.open(self.evidence, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def up(self, target: Any, **kwargs: Any) -> Any:
        return self._witness("up", target, **kwargs)

    def destroy(self, target: Any, **kwargs: Any) -> Any:
        return self._witness("destroy", target, **kwargs)


def replica(address: Any, authkey: bytes, url: str, home: str, holder: str, evidence: str,
            crash_at: str | None) -> None:
    """One control loop: ``serve`` as it runs its passes, over the served world."""
    from automation.clock import SystemClock
    from automation.engine.mock.runner import MockEngineRunner
    from automation.reconciler.lease import Leases
    from automation.reconciler.reconcile import Ports, Reconciler

    if crash_at:
        os.environ["ANYCLOUD_CRASH_AT"] = crash_at
    manager = _WorldManager(address=address, authkey=authkey)
    manager.connect()
    cloud, cluster, clock = manager.cloud(), manager.cluster(), manager.clock()  # type: ignore[attr-defined]
    app = App(ledger=open_ledger(url), clock=clock, home=Path(home))
    runner = _Witnessed(MockEngineRunner(app.home, cloud=cloud), holder, evidence)
    ports = Ports(runner=runner, cluster_for=lambda row: cluster,  # type: ignore[arg-type]
                  vm_lookup=lambda pool, ids: {a: cloud.lookup(a) for a in ids})
    reconciler = Reconciler(app, ports, leases=Leases(app.ledger, SystemClock(), holder=holder,
                                                       ttl=LEASE_TTL))
    while True:
        reconciler.run_once()
        time.sleep(0.2)


@pytest.fixture
def served(tmp_path: Path, postgres_url: str) -> Iterator[tuple[SimWorld, App, Any]]:
    world = SimWorld()
    _world.update(cloud=world.cloud, cluster=world.cluster, clock=world.clock)
    app = App(ledger=open_ledger(postgres_url), clock=world.clock, home=tmp_path / "home")
    register_simulated_cluster(app, tmp_path)
    for provider, (options, _, _) in POOLS.items():
        credentials.new_credential(app, credentials.NewCredential(provider, provider, options))
    providers = list(POOLS)
    for i in range(POOL_COUNT):
        provider = providers[i % len(providers)]
        _, region, vm_type = POOLS[provider]
        node_pools.create_node_pool(app, node_pools.CreateNodePool(
            name=f"p{i:02d}", credentials=provider, region=region, vm_type=vm_type,
            min_vms=1, max_vms=1))
    authkey = secrets.token_bytes(16)
    server = _WorldManager(address=("127.0.0.1", 0), authkey=authkey).get_server()
    server.stop_event = threading.Event()  # type: ignore[attr-defined]
    threading.Thread(target=server.accepter, daemon=True).start()
    yield world, app, (server.address, authkey)
    server.stop_event.set()  # type: ignore[attr-defined]
    server.listener.close()  # type: ignore[attr-defined]
    app.ledger.dispose()
    _world.clear()


def states(app: App) -> Counter[str]:
    with app.ledger.read() as conn:
        return Counter(conn.execute(sa.select(schema.node_pools.c.state)).scalars())


def test_two_replicas_one_killed_mid_pass(served: tuple[SimWorld, App, Any], tmp_path: Path,
                                          postgres_url: str) -> None:
    world, app, (address, authkey) = served
    evidence = str(tmp_path / "evidence.jsonl")
    spawn = multiprocessing.get_context("spawn")

    def start(holder: str, crash_at: str | None = None) -> Any:
        proc = spawn.Process(target=replica, args=(address, authkey, postgres_url,
                                                   str(app.home), holder, evidence, crash_at),
                             daemon=True)
        proc.start()
        return proc

    # Replica a dies the first time it has bought a pool's VMs and not yet saved the
    # engine's state: SIGKILL, as an OOM kill or a lost node.
    a, b = start("a", crash_at="mid-stack-up"), start("b")
    restarted = None
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            time.sleep(1.0)
            world.advance(M)
            if restarted is None and not a.is_alive():
                assert a.exitcode == -signal.SIGKILL
                killed_at = time.monotonic()
                restarted = start("a2")  # the same replica, started again
            if states(app) == Counter({"ready": POOL_COUNT}):
                break
    finally:
        for proc in (a, b, restarted):
            if proc is not None and proc.is_alive():
                proc.kill()
                proc.join()
    assert restarted is not None, "replica a never reached its crash point"
    assert states(app) == Counter({"ready": POOL_COUNT})

    # Every attempt bought exactly once, one running VM per live attempt, no orphan.
    with app.ledger.read() as conn:
        live = set(conn.execute(sa.select(schema.vm_attempts.c.id).where(
            schema.vm_attempts.c.state.in_(["pending", "creating", "running"]))).scalars())
    bought = Counter(attempt for verb, attempt in world.cloud.journal if verb == "create")
    assert set(bought.values()) == {1}, [a for a, n in bought.items() if n > 1]
    running = Counter(v.attempt_id for v in world.cloud.vms.values() if v.state == "running")
    assert running == Counter(live) and len(live) == POOL_COUNT

    # No pool acted on by two replicas at once: per pool, the stack operations of different
    # replicas never overlap (the killed replica's last one open until its death).
    spans: dict[str, list[tuple[str, float, float]]] = {}
    opened: dict[tuple[str, str], float] = {}
    for line in Path(evidence).read_text().splitlines():
        holder, kind, pool, at = json.loads(line)
        if kind == "start":
            opened[(holder, pool)] = at
        else:
            spans.setdefault(pool, []).append((holder, opened.pop((holder, pool)), at))
    for (holder, pool), began in opened.items():
        assert holder == "a", (holder, pool)  # only the killed replica left one open
        spans.setdefault(pool, []).append((holder, began, killed_at))
    taken_over = 0
    for pool, ops in spans.items():
        ops.sort(key=lambda s: s[1])
        for (h1, _, end1), (h2, start2, _) in itertools.pairwise(ops):
            assert h1 == h2 or end1 <= start2, (pool, ops)
        taken_over += len({h for h, _, _ in ops}) > 1
    assert {h for ops in spans.values() for h, _, _ in ops} == {"a", "b", "a2"}
    assert taken_over >= 1  # the pool a died on was finished by another replica
