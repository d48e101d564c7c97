"""The reconciler's periodic drift check (issue 23): due or not, off by default under the mock
engine, and a failed check recorded as the check's outcome, never as the pool's failure."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from automation.engine.errors import EngineFailed
from automation.errors import InvalidInput
from automation.ledger import schema
from automation.services import pool_status
from automation.settings import Settings
from tests.automation.reconciler.conftest import Rig

M = timedelta(minutes=1)


def drift_rows(rig: Rig) -> list[dict[str, Any]]:
    with rig.app.ledger.read() as conn:
        return [dict(r) for r in conn.execute(sa.select(schema.pool_drift)).mappings()]


def ready_pool(rig: Rig) -> str:
    pool = rig.pool("cpu", count=2)
    rig.passes(6, step=M)
    assert pool_status.node_pool_status(rig.app.ledger, pool).state == "ready"
    return pool


def test_off_by_default_under_the_mock_engine(rig: Rig) -> None:
    ready_pool(rig)
    assert rig.reconciler.drift_interval == 0.0  # read from the settings on first use
    assert drift_rows(rig) == []


def test_checked_when_due_and_not_before(rig: Rig) -> None:
    rig.reconciler.drift_interval = 600.0
    pool = ready_pool(rig)
    first = pool_status.node_pool_status(rig.app.ledger, pool).drift
    assert first is not None and first.changes == [] and first.error is None
    assert first.engine == "mock" and first.source == "simulated cloud"

    vm = rig.world.cloud.vms_of_pool(pool)[0]
    rig.world.cloud.console_change_vm_type(vm.attempt_id, "m7i.4xlarge")
    rig.passes(3, step=M)  # not due yet: the last result stands
    again = pool_status.node_pool_status(rig.app.ledger, pool).drift
    assert again is not None and again.checked_at == first.checked_at and again.changes == []

    rig.world.advance(timedelta(minutes=10))
    rig.passes(1)
    status = pool_status.node_pool_status(rig.app.ledger, pool)
    assert status.drift is not None and status.drift.checked_at > first.checked_at
    assert [(c.type, c.op, c.properties) for c in status.drift.changes] == [
        ("aws:ec2/instance:Instance", "update", ["instanceType"])]
    assert status.state == "ready" and status.last_error is None
    assert any(kind == "drift" and "1 change(s)" in msg for kind, msg in rig.log)


def test_a_pool_not_applied_yet_is_not_checked(rig: Rig) -> None:
    rig.reconciler.drift_interval = 1.0
    rig.world.cloud.faults.create_errors.append("InsufficientInstanceCapacity")
    rig.pool("cpu", count=1)
    rig.reconciler.run_once()  # the up failed: nothing applied, nothing to drift
    assert drift_rows(rig) == []


@pytest.mark.parametrize("error", [
    EngineFailed("pulumi failed on stack node-pool-x: provider read timed out",
                 code="ENGINE_FAILED"),
    RuntimeError("a bug in the check"),
])
def test_a_failed_check_is_recorded_and_never_fails_the_pool(
        rig: Rig, monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    pool = ready_pool(rig)
    before = pool_status.node_pool_status(rig.app.ledger, pool)

    def broken(target: Any) -> Any:
        raise error

    monkeypatch.setattr(rig.reconciler.ports.runner, "check_drift", broken)
    rig.reconciler.drift_interval = 60.0
    outcomes = rig.reconciler.run_once()
    assert [o.error_code for o in outcomes] == [None] and not outcomes[0].skipped
    after = pool_status.node_pool_status(rig.app.ledger, pool)
    assert (after.state, after.last_error, after.last_error_code) == (
        before.state, before.last_error, before.last_error_code)
    assert after.drift is not None and after.drift.changes == []
    code = "ENGINE_FAILED" if isinstance(error, EngineFailed) else "INTERNAL_ERROR"
    assert after.drift.error_code == code and after.drift.error


def test_the_interval_setting(tmp_path: Any) -> None:
    assert Settings(tmp_path, "sqlite://").drift_seconds("pulumi") == 3600.0
    assert Settings(tmp_path, "sqlite://").drift_seconds("mock") == 0.0
    assert Settings(tmp_path, "sqlite://", drift_interval="90").drift_seconds("mock") == 90.0
    assert Settings(tmp_path, "sqlite://", drift_interval="0").drift_seconds("pulumi") == 0.0
    for bad in ("soon", "-5"):
        with pytest.raises(InvalidInput) as err:
            Settings(tmp_path, "sqlite://", drift_interval=bad).drift_seconds("pulumi")
        assert err.value.field == "ANYCLOUD_DRIFT_INTERVAL"
