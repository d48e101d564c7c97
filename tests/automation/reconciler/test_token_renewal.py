"""A retry gets a new bootstrap token, and no VM is bought with one about to expire.

Through the reconciler on the simulated cloud: the stack target handed to the engine is what
the VM's user data and its token Secret are built from (``stacks.node_pool``), so the
generation and issue time it carries are what the VM would boot with.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from automation.ledger import schema
from automation.reconciler.decide import NODE_APPEAR_TIMEOUT
from automation.reconciler.token_renewal import EXPIRING, RETRY, renewal_reason
from automation.stack_targets import token_ttl_minutes
from tests.automation.reconciler.conftest import Rig

M = timedelta(minutes=1)
T0 = datetime(2026, 1, 1, 12, 0)
TTL = timedelta(minutes=30)


def spy_on_up(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every attempt spec the engine was asked to build, one tuple per ``up``."""
    runner = rig.reconciler.ports.runner
    real_up = runner.up
    seen: list[Any] = []

    def up(target: Any, **kw: Any) -> Any:
        seen.append(target.config.attempts)
        return real_up(target, **kw)

    monkeypatch.setattr(runner, "up", up)
    return seen


def token_events(rig: Rig, pool: str) -> list[str]:
    with rig.app.ledger.read() as conn:
        return list(conn.execute(sa.select(schema.events.c.message).where(
            schema.events.c.subject_id == pool, schema.events.c.kind == "token_renewed")
            .order_by(schema.events.c.id)).scalars())


def test_each_retry_after_a_failed_run_builds_the_vm_with_a_new_token(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    rig.world.cloud.faults.create_errors = ["InsufficientInstanceCapacity"] * 2
    seen = spy_on_up(rig, monkeypatch)
    pool = rig.pool("cpu", count=1)
    for _ in range(10):
        rig.reconciler.run_once()
        rig.world.advance(M)
    # Three runs: two refused by the cloud, the third bought the VM.
    assert [specs[0].token_generation for specs in seen[:3]] == [0, 1, 2]
    assert len({specs[0].id for specs in seen[:3]}) == 1  # the same attempt, retried
    assert len(rig.world.cloud.vms) == 1
    events = token_events(rig, pool)
    assert len(events) == 2 and all(RETRY in e for e in events)


def test_a_vm_bought_long_after_its_attempt_carries_a_token_that_outlives_the_join_window(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    # Throttled: no failure is counted, so only the token's age can renew it.
    rig.world.cloud.faults.create_errors = ["RequestLimitExceeded"]
    seen = spy_on_up(rig, monkeypatch)
    rig.pool("cpu", count=1)
    rig.reconciler.run_once()
    written = seen[0][0]
    rig.world.advance(timedelta(minutes=token_ttl_minutes() + 5))  # its token has expired
    rig.reconciler.run_once()
    bought = seen[-1][0]
    now = rig.world.clock.now()
    assert bought.id == written.id and len(rig.world.cloud.vms) == 1
    assert bought.token_generation == written.token_generation + 1
    assert bought.token_issued_at is not None
    expires = bought.token_issued_at + timedelta(minutes=token_ttl_minutes())
    assert expires >= now + NODE_APPEAR_TIMEOUT


def test_a_fresh_attempt_and_a_vm_that_exists_keep_their_token(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = spy_on_up(rig, monkeypatch)
    pool = rig.pool("cpu", count=1)
    rig.passes(30, step=M)
    assert seen and all(s.token_generation == 0 for specs in seen for s in specs)
    assert token_events(rig, pool) == []


@given(issued=st.integers(-120, 120), failures=st.integers(0, 6),
       state=st.sampled_from(["pending", "creating", "running", "releasing"]),
       removed=st.booleans())
def test_renewal_rule(issued: int, failures: int, state: str, removed: bool) -> None:
    issued_at = T0 + timedelta(minutes=issued)
    why = renewal_reason(state=state, token_removed=removed, issued_at=issued_at, ttl=TTL,
                         now=T0, pool_failures=failures)
    if state != "pending" or removed:
        assert why is None  # a VM that may exist is never renewed: it would be replaced
    elif failures:
        assert why == RETRY
    elif issued_at + TTL < T0 + NODE_APPEAR_TIMEOUT:
        assert why == EXPIRING
    else:
        assert why is None
