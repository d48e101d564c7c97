"""``automation.services.agent_pool_view`` over each ledger: per open AgentPool, its agents by
state, ready/idle/busy slots, pending and running sessions, the Ready reason, and its busy
slots a minute at a time over the last hour (``GET /v1/agent-pools`` and ``/ui/agent-pools``
read it)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.ledger import schema
from automation.services.agent_pool_view import busy_per_minute, list_agent_pools

MIN = timedelta(minutes=1)


def add_pool(app: App, pool: str, *, desired: int = 2, reason: str | None = "Reconciled",
             state: str = "open") -> None:
    now = app.clock.now()
    with app.ledger.write() as conn:
        conn.execute(sa.insert(schema.agent_pools).values(
            pool=pool, uid=f"uid-{pool}", state=state, desired_replicas=desired, reason=reason,
            opened_at=now - timedelta(hours=3), observed_at=now - 5 * MIN))


def add_agent(app: App, pool: str, agent: str, *, slots: int, busy: int,
              state: str = "ready") -> None:
    now = app.clock.now()
    with app.ledger.write() as conn:
        conn.execute(sa.insert(schema.agents).values(
            id=agent, pool=pool, pod_name=agent, slots=slots, busy_slots=busy,
            reported_busy_slots=busy, state=state, registered_at=now - timedelta(hours=2),
            last_heartbeat_at=now))


def add_session(app: App, pool: str, sid: str, state: str, *, assigned: timedelta | None,
                finished: timedelta | None = None) -> None:
    """``assigned``/``finished``: how long before now."""
    now = app.clock.now()
    values: dict[str, Any] = dict(
        id=sid, pool=pool, state=state, command=["true"], created_at=now - timedelta(hours=2),
        agent_id=None if assigned is None else f"{pool.split('/')[1]}-0",
        assigned_at=None if assigned is None else now - assigned,
        finished_at=None if finished is None else now - finished)
    with app.ledger.write() as conn:
        conn.execute(sa.insert(schema.sessions).values(**values))


@pytest.fixture
def pools(app: App) -> App:
    """``ci/build``: 2 ready agents of 4 slots (3 busy), one draining (1 busy), one unknown,
    one gone; 2 pending and 4 running sessions. ``ci/idle``: nothing. ``ci/old``: deleted."""
    add_pool(app, "ci/build", desired=3)
    add_pool(app, "ci/idle", desired=0, reason="ScaleFailed")
    add_pool(app, "ci/old", state="deleted")
    add_agent(app, "ci/build", "build-0", slots=4, busy=2)
    add_agent(app, "ci/build", "build-1", slots=4, busy=1)
    add_agent(app, "ci/build", "build-2", slots=4, busy=1, state="draining")
    add_agent(app, "ci/build", "build-3", slots=4, busy=0, state="unknown")
    add_agent(app, "ci/build", "build-4", slots=4, busy=0, state="gone")
    add_agent(app, "ci/old", "old-0", slots=9, busy=9)
    for i in range(2):
        add_session(app, "ci/build", f"p{i}", "pending", assigned=None)
    # Running: since before the hour, for the last 30 min, for the last 90 s, and 10 s.
    add_session(app, "ci/build", "r0", "running", assigned=timedelta(hours=2))
    add_session(app, "ci/build", "r1", "running", assigned=30 * MIN)
    add_session(app, "ci/build", "r2", "running", assigned=timedelta(seconds=90))
    add_session(app, "ci/build", "r3", "running", assigned=timedelta(seconds=10))
    # Ended: began before the window, ended 50 min ago (10 minutes inside it) ...
    add_session(app, "ci/build", "d0", "done", assigned=timedelta(hours=3), finished=50 * MIN)
    # ... half a minute in the window's 21st minute (from 40 min ago for 30 s) ...
    add_session(app, "ci/build", "d1", "failed", assigned=40 * MIN,
                finished=40 * MIN - timedelta(seconds=30))
    # ... and wholly before the window; never assigned (cancelled while pending).
    add_session(app, "ci/build", "d2", "done", assigned=timedelta(hours=3),
                finished=timedelta(hours=2))
    add_session(app, "ci/build", "c0", "cancelled", assigned=None, finished=MIN)
    return app


def test_counts_and_slots_of_each_open_pool(pools: App) -> None:
    found = {p.pool: p for p in list_agent_pools(pools.ledger, pools.clock.now())}
    assert sorted(found) == ["ci/build", "ci/idle"]  # a deleted pool is not listed
    build = found["ci/build"]
    assert (build.namespace, build.name, build.desired_replicas) == ("ci", "build", 3)
    assert (build.ready_agents, build.draining_agents, build.unknown_agents) == (2, 1, 1)
    # Slots and idle of the ready agents; busy of every live one (the broker's pool view).
    assert (build.slots, build.idle_slots, build.busy_slots) == (8, 5, 4)
    assert (build.pending_sessions, build.running_sessions) == (2, 4)
    assert build.ready and build.reason == "Reconciled"
    assert build.observed_at == pools.clock.now() - 5 * MIN
    idle = found["ci/idle"]
    assert (idle.ready_agents, idle.slots, idle.busy_slots, idle.pending_sessions) == (0, 0, 0, 0)
    assert not idle.ready and idle.reason == "ScaleFailed"
    assert idle.busy_slots_per_minute == [0.0] * 60


def test_busy_slots_minute_by_minute_over_the_last_hour(pools: App) -> None:
    now = pools.clock.now()
    build = next(p for p in list_agent_pools(pools.ledger, now) if p.pool == "ci/build")
    busy = build.busy_slots_per_minute
    assert build.busy_from == now - timedelta(hours=1) and len(busy) == 60
    # r0 (running since before the window) holds a slot every minute; d0 (assigned before
    # the window) the first ten; d1 half of minute 20; r1 the last thirty; r2 the last
    # minute and a half of the hour; r3 its last ten seconds.
    expected = [1.0] * 60
    for i in range(10):
        expected[i] += 1
    expected[20] += 0.5
    for i in range(30, 60):
        expected[i] += 1
    expected[58] += 0.5
    expected[59] += 1 + round(10 / 60, 3)
    assert busy == pytest.approx(expected, abs=0.001)
    assert max(busy) == pytest.approx(3 + 10 / 60, abs=0.001)


def test_a_session_that_ended_before_the_hour_or_never_ran_draws_nothing(app: App) -> None:
    add_pool(app, "ci/a")
    add_session(app, "ci/a", "old", "done", assigned=timedelta(hours=2),
                finished=timedelta(minutes=61))
    add_session(app, "ci/a", "gone", "cancelled", assigned=None, finished=MIN)
    add_session(app, "ci/a", "wait", "pending", assigned=None)
    (pool,) = list_agent_pools(app.ledger, app.clock.now())
    assert pool.busy_slots_per_minute == [0.0] * 60 and pool.pending_sessions == 1


def test_busy_per_minute_splits_a_span_across_minutes() -> None:
    start = datetime(2026, 1, 1, 12, 0)
    spans = [(start + timedelta(seconds=30), start + timedelta(minutes=2, seconds=15))]
    assert busy_per_minute(spans, start, minutes=4) == [0.5, 1.0, 0.25, 0.0]
    # Before the window and past its end: clipped to it.
    spans = [(start - timedelta(hours=1), start + timedelta(hours=1))]
    assert busy_per_minute(spans, start, minutes=3) == [1.0, 1.0, 1.0]


def test_no_pools_no_queries_past_the_first(app: App) -> None:
    assert list_agent_pools(app.ledger, app.clock.now()) == []
