"""One pool never stops the others: whatever fails during a pool's turn is recorded as its
last error with a code, and the pass goes on; `serve` outlives a failed pass."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from automation.engine.errors import StackLocked
from automation.engine.runner import StackTarget
from automation.kube.port import ClusterUnavailable
from automation.reconciler.reconcile import Ports, Reconciler
from tests.automation.reconciler.conftest import Rig
from tests.automation.reconciler.test_reconcile import M, attempts, status


class Failing:
    """Wraps a runner or a cluster port: ``fail[name](*args)`` may raise instead."""

    def __init__(self, inner: Any, **fail: Any) -> None:
        self.inner, self.fail = inner, fail

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.inner, name)
        hook = self.fail.get(name)
        if hook is None or not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            hook(*args, **kwargs)
            return real(*args, **kwargs)

        return call


def with_ports(rig: Rig, **changes: Any) -> Reconciler:
    ports = rig.reconciler.ports
    return Reconciler(rig.app, Ports(**{**ports.__dict__, **changes}))


def test_a_locked_stack_fails_its_pool_alone(rig: Rig) -> None:
    locked, fine = rig.pool("locked", count=1), rig.pool("fine", count=1)

    def lock(target: StackTarget, **_: Any) -> None:
        if target.key == locked:
            raise StackLocked(target.stack_name, f"anycloud node-pool unlock {locked}", "held")

    reconciler = with_ports(rig, runner=Failing(rig.reconciler.ports.runner, up=lock))
    outcomes = reconciler.run_once()
    assert [o.pool_id for o in outcomes] == sorted([locked, fine])
    assert status(rig, locked).last_error_code == "STACK_LOCKED"
    assert f"anycloud node-pool unlock {locked}" in (status(rig, locked).last_error or "")
    assert [r["state"] for r in attempts(rig, fine)] == ["running"]  # the other pool went on


def test_a_cluster_that_fails_mid_step_fails_the_pool_not_the_pass(rig: Rig) -> None:
    pool = rig.pool("cpu", count=1)
    other = rig.pool("other", count=1)
    rig.passes(6, step=M)
    assert status(rig, pool).state == "ready"
    from automation.services import node_pools

    node_pools.delete_node_pool(rig.app, "cpu")  # the next pass cordons and deletes Nodes

    def unavailable(name: str) -> None:
        raise ClusterUnavailable("the API server answered 503 Service Unavailable")

    cluster = Failing(rig.world.cluster, cordon_node=unavailable)
    reconciler = with_ports(rig, cluster_for=lambda row: cluster)
    outcomes = {o.pool_id: o for o in reconciler.run_once()}
    assert outcomes[pool].skipped == "CLUSTER_UNAVAILABLE"
    assert status(rig, pool).last_error_code == "CLUSTER_UNAVAILABLE"
    assert "503" in (status(rig, pool).last_error or "")
    assert outcomes[other].skipped is None and status(rig, other).state == "ready"
    rig.passes(6, step=M)  # the cluster answers again: the delete goes on by itself
    assert status(rig, pool).state == "deleted"


def test_an_unexpected_error_is_recorded_with_a_report(rig: Rig) -> None:
    pool = rig.pool("cpu", count=1)

    def boom(target: StackTarget, **_: Any) -> None:
        raise KeyError("attempts")

    reconciler = with_ports(rig, runner=Failing(rig.reconciler.ports.runner, up=boom))
    (outcome,) = reconciler.run_once()
    s = status(rig, pool)
    assert outcome.skipped == s.last_error_code == "INTERNAL_ERROR"
    assert "KeyError: 'attempts'" in (s.last_error or "")
    report = Path((s.last_error or "").split("(report: ")[1].rstrip(")"))
    assert report.is_file() and "Traceback" in report.read_text()
    assert oct(report.stat().st_mode & 0o777) == "0o600"


def test_serve_outlives_a_failed_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from automation.cli import cli
    from automation.reconciler import reconcile

    monkeypatch.setenv("ANYCLOUD_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ANYCLOUD_DATABASE_URL", raising=False)
    calls: list[int] = []

    def run_once(self: Reconciler) -> list[Any]:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("the ledger's disk is full")
        os.kill(os.getpid(), signal.SIGTERM)  # the second pass ran: stop serving
        return []

    monkeypatch.setattr(reconcile.Reconciler, "run_once", run_once)
    result = CliRunner().invoke(cli, ["serve", "--simulate", "--interval", "0.05"])
    assert result.exit_code == 0, result.output
    assert len(calls) == 2
    assert "pass failed: OSError: the ledger's disk is full" in result.stderr
    assert "(report: " in result.stderr


def test_a_failed_turns_report_shows_its_error_as_status_does(rig: Rig) -> None:
    """What `reconcile` prints of a pool's failure (its events) is redacted like status; the
    ledger keeps the address for operators."""
    from automation.ledger import schema

    pool = rig.pool("cpu", count=1)
    rig.passes(6, step=M)

    def refused(name: str) -> None:
        raise ClusterUnavailable("dial tcp 203.0.113.10:6443: connect: connection refused")

    from automation.services import node_pools

    node_pools.delete_node_pool(rig.app, "cpu")  # the next pass cordons its Nodes
    cluster = Failing(rig.world.cluster, cordon_node=refused)
    ports = Ports(**{**rig.reconciler.ports.__dict__, "cluster_for": lambda row: cluster})
    Reconciler(rig.app, ports, report=lambda kind, msg, _: rig.log.append((kind, msg))
               ).run_once()
    errors = [m for kind, m in rig.log if kind == "error"]
    assert errors and "cpu: [CLUSTER_UNAVAILABLE] cluster unavailable: dial tcp <address>: " \
                      "connect: connection refused" in errors[-1]
    assert not any("203.0.113.10" in m for _, m in rig.log)
    assert "203.0.113.10" not in (status(rig, pool).last_error or "")
    with rig.app.ledger.read() as conn:
        stored = conn.execute(schema.node_pools.select()).mappings().one()["last_error"]
    assert "203.0.113.10:6443" in stored
