"""A waiting session scales its pool up at once, not at the operator's next timer pass
(automation/agentpools/pending_watch.py): in memory, then on the real API server with a
timer too slow to be the cause."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from automation.agentpools.operator import ControlPlaneConfig, assemble
from automation.agentpools.pending_watch import PendingWatch
from automation.agentpools.registry import Registry
from automation.devcluster.control_plane import ControlPlane
from automation.ledger.db import Ledger
from tests.automation.agentpools.cases import example
from tests.automation.agentpools.test_operator import (
    apply,
    eventually,
    ledger,
    ns,
    plane,
    pods,
)

__all__ = ["ledger", "ns", "plane"]  # fixtures, used by name
T0 = datetime(2026, 12, 3, tzinfo=UTC)


def test_a_pool_gets_a_pass_once_per_new_pending_session_in_watched_namespaces() -> None:
    pending = {"a/cpu": T0, "b/cpu": T0, "a/gone": T0}
    passes: list[str] = []

    def read(namespace: str, name: str) -> dict[str, Any] | None:
        if name == "gone":
            return None
        return {"metadata": {"namespace": namespace, "name": name}}

    watch = PendingWatch(lambda: dict(pending), read,
                         lambda pool: passes.append(pool["metadata"]["name"]), ["a"])
    assert watch.once() == ["a/cpu"] and passes == ["cpu"]  # b: not watched; gone: no pool
    assert watch.once() == []  # nothing new waits
    pending["a/cpu"] = T0 + timedelta(seconds=1)  # another session
    assert watch.once() == ["a/cpu"]
    del pending["a/cpu"]  # served
    assert watch.once() == []


@pytest.mark.kube
def test_a_session_burst_makes_pods_long_before_the_timer(
        plane: ControlPlane, ns: str, ledger: Ledger, tmp_path: Path) -> None:
    registry = Registry(ledger)
    config = ControlPlaneConfig.model_validate({"provisioners": [{"kubernetes": {
        "namespace": ns}}]})
    # A 60 s timer: only the watch can explain a pod within seconds.
    op = assemble(config, ledger, kubeconfig=plane.kubeconfig, interval=60.0)
    pool = example("shell-pool.yaml")
    pool["spec"]["autoscaler"].update({"minIdle": 0, "maxIdle": 0, "maxReplicas": 4})
    apply(plane, ns, example("agent-config.yaml"), pool)
    op.start()
    try:
        key = f"{ns}/shell"
        eventually(lambda: registry.pool_view(key) is not None
                   and _observed(ledger, key), "the pool's first pass", timeout=30)
        assert pods(plane, ns, "shell") == []  # minIdle 0: nothing yet
        asked = time.monotonic()
        for _ in range(3):
            registry.acquire(key, ["make"])
        eventually(lambda: len(pods(plane, ns, "shell")) == 3, "a pod per waiting session",
                   timeout=20)
        assert time.monotonic() - asked < 20  # (the timer would have been 60 s)
    finally:
        op.stop()


def _observed(ledger: Ledger, key: str) -> bool:
    import sqlalchemy as sa

    from automation.ledger import schema

    with ledger.read() as conn:
        return conn.execute(sa.select(schema.agent_pools.c.state).where(
            schema.agent_pools.c.pool == key)).scalar() == "open"
