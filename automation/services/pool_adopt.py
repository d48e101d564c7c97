"""``node-pool adopt``: rebuild a pool's lost engine state from what the cloud holds.

The reconciler stops a pool whose engine state lost what the ledger saw it apply
(``STATE_MISSING``); adopting looks every resource of the pool's stack up in the cloud (the
VMs by their attempt tag, as crash recovery does) and records what it finds, buying
nothing. The pool's ``STATE_MISSING`` error is cleared so the next pass acts again.
"""

from __future__ import annotations

from collections.abc import Callable

from automation.app import App
from automation.engine.runner import ProgressSink, RunResult, StackRunner
from automation.ledger import schema
from automation.ledger.records import record_event
from automation.stack_targets import pool_target


def adopt_pool(app: App, runner_for: Callable[[], StackRunner], ref: str,
               on_progress: ProgressSink | None = None) -> RunResult:
    """``runner_for`` is called once the pool is found: a bad reference changes nothing."""
    target = pool_target(app, ref, planned=False)
    result = runner_for().adopt(target, on_progress=on_progress)
    now = app.clock.now()
    pools = schema.node_pools
    with app.ledger.write() as conn:
        conn.execute(pools.update().where(pools.c.id == target.key,
                                          pools.c.last_error_code == "STATE_MISSING")
                     .values(last_error=None, last_error_code=None, updated_at=now))
        record_event(conn, now, "node_pool", target.key, "state_adopted",
                     f"stack {target.stack_name} rebuilt from the cloud: "
                     f"{result.summary.same} resource(s) adopted, {result.summary.create} "
                     "not found", {"engine": result.engine})
    return result
