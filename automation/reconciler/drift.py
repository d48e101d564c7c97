"""Drift checks (issue 23): run a pool's ``check_drift`` and record the result in the ledger.

A check reads the cloud and writes nothing there or in the stack's state. Its result
replaces the pool's previous one in ``pool_drift``; a check that fails is recorded there as
failed (its changes unknown), never as the pool's last error: drift is a finding, not a
failure of the pool. Used by ``node-pool status --check-drift`` (``services.pool_drift``)
and by the reconciler's periodic check (``ANYCLOUD_DRIFT_INTERVAL``).
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import sqlalchemy as sa

from automation.app import App
from automation.engine.runner import StackRunner, StackTarget
from automation.errors import AnycloudError
from automation.ledger import schema
from automation.models import DriftReport
from automation.models import drift_source as source_of
from automation.recorded_engines import recorded_engine

_T = schema.pool_drift
# Pools whose stack has been applied and is still theirs: there is something to drift.
CHECKED_STATES = ("provisioning", "ready", "failed")


def run_check(runner: StackRunner, target: StackTarget, now: datetime) -> DriftReport:
    """One check; an engine error becomes a failed report (the caller records it)."""
    began = time.perf_counter()
    engine = recorded_engine(runner)
    try:
        changes = runner.check_drift(target)
    except AnycloudError as exc:
        return DriftReport(checked_at=now, engine=engine, source=source_of(engine),
                           error=exc.message, error_code=exc.code,
                           seconds=round(time.perf_counter() - began, 3))
    return DriftReport(checked_at=now, engine=engine, source=source_of(engine),
                       changes=changes, seconds=round(time.perf_counter() - began, 3))


def record(app: App, pool_id: str, report: DriftReport) -> None:
    row = {"pool_id": pool_id, "checked_at": report.checked_at, "engine": report.engine,
           "changes": [c.model_dump(mode="json") for c in report.changes],
           "error": report.error, "error_code": report.error_code, "seconds": report.seconds}
    with app.ledger.write() as conn:
        conn.execute(sa.delete(_T).where(_T.c.pool_id == pool_id))
        conn.execute(_T.insert().values(**row))


def last_checked(app: App, pool_id: str) -> datetime | None:
    with app.ledger.read() as conn:
        found: datetime | None = conn.execute(
            sa.select(_T.c.checked_at).where(_T.c.pool_id == pool_id)).scalar_one_or_none()
    return found


def is_due(last: datetime | None, now: datetime, interval: float) -> bool:
    """``interval`` seconds; 0 or less: never (the periodic check is off)."""
    if interval <= 0:
        return False
    return last is None or now - last >= timedelta(seconds=interval)
