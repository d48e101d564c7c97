"""``node-pool status --check-drift``: a pool's drift check run now (issue 23).

The check is the engine's ``check_drift`` (a refresh previewed: nothing is written to the
cloud or the stack's state); its result replaces the pool's last one in the ledger, which
``node-pool status`` shows. A check that fails is recorded as failed and answered, not
raised: drift is a finding about the pool, and the check's failure is not the pool's.
"""

from __future__ import annotations

from collections.abc import Callable

from automation.app import App
from automation.engine.runner import StackRunner
from automation.errors import Conflict
from automation.models import DriftReport
from automation.reconciler import drift
from automation.recorded_engines import recorded_engine
from automation.services.pool_status import node_pool_status
from automation.stack_targets import pool_target


def check_pool_drift(app: App, runner_for: Callable[[], StackRunner], ref: str) -> DriftReport:
    status = node_pool_status(app.ledger, ref)
    target = pool_target(app, status.id)
    runner = runner_for()
    engine = recorded_engine(runner)
    if status.engine is not None and status.engine != engine:
        # Another engine's state holds the pool's resources: this one would find nothing
        # and answer "no drift".
        raise Conflict(
            f"node pool {status.name}'s VMs were bought by the {status.engine} engine; its "
            f"drift can only be checked with that engine, not {engine}",
            code="ENGINE_MISMATCH", field="--engine", value=engine)
    report = drift.run_check(runner, target, app.clock.now())
    drift.record(app, status.id, report)
    return report
