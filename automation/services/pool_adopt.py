"""``node-pool adopt``: rebuild a pool's lost engine state from what the cloud holds.

The reconciler stops a pool whose engine state lost what the ledger saw it apply
(``STATE_MISSING``); adopting looks every resource of the pool's stack up in the cloud (the
VMs by their attempt tag, as crash recovery does) and records what it finds, buying
nothing. What is looked up is what the ledger says may exist, not only what today's program
declares: the VMs of attempts being released too (a deleting pool's program has none), so
the next ``up``, without them, deletes them and the release is confirmed.

The pool's ``STATE_MISSING`` (or ``NO_PROGRESS``) error is cleared and its applied digest
forgotten, so the next pass applies the stack again over the rebuilt state.
"""

from __future__ import annotations

from collections.abc import Callable

from automation.app import App
from automation.engine.runner import ProgressSink, RunResult, StackRunner
from automation.ledger import schema
from automation.ledger.records import record_event
from automation.stack_targets import pool_target

# The errors adopting answers: a lost state, and the stall a state missing VMs leads to.
CLEARED = ("STATE_MISSING", "NO_PROGRESS")


def adopt_pool(app: App, runner_for: Callable[[], StackRunner], ref: str,
               on_progress: ProgressSink | None = None) -> RunResult:
    """``runner_for`` is called once the pool is found: a bad reference changes nothing."""
    target = pool_target(app, ref, planned=False, unreleased=True)
    result = runner_for().adopt(target, on_progress=on_progress)
    now = app.clock.now()
    pools = schema.node_pools
    with app.ledger.write() as conn:
        conn.execute(pools.update().where(pools.c.id == target.key,
                                          pools.c.last_error_code.in_(CLEARED))
                     .values(last_error=None, last_error_code=None, updated_at=now))
        # A person acted: the next pass applies the stack again (the rebuilt state holds
        # the VMs being released, which that up deletes), and the stall count starts over.
        conn.execute(pools.update().where(pools.c.id == target.key).values(
            applied_digest=None, progress_mark=None, passes_without_progress=0))
        record_event(conn, now, "node_pool", target.key, "state_adopted",
                     f"stack {target.stack_name} rebuilt from the cloud: "
                     f"{result.summary.same} resource(s) adopted, {result.summary.create} "
                     "not found", {"engine": result.engine})
    return result
