"""The broker's registry on SQLite and PostgreSQL: slot rules, queueing, heartbeats and
unknown agents, what the autoscaler is given, and no over-allocation under concurrent
acquires from several processes."""

from __future__ import annotations

import multiprocessing
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from automation.agentpools.autoscaler import Settings, decide
from automation.agentpools.registry import Registry
from automation.agentpools.wire import AgentRetired, PoolNotFound
from automation.clock import ManualClock
from automation.errors import Conflict, InvalidInput, NotFound
from automation.ledger import open_ledger, schema

POOL = "default/cpu"
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def reg(ledger_url: str, clock: ManualClock) -> Iterator[Registry]:
    ledger = open_ledger(ledger_url)
    yield Registry(ledger, clock, pool_grace=0)
    ledger.dispose()


def running_per_agent(reg: Registry) -> dict[str, int]:
    with reg.ledger.read() as conn:
        return dict(conn.execute(sa.select(schema.sessions.c.agent_id, sa.func.count())
                                 .where(schema.sessions.c.state == "running")
                                 .group_by(schema.sessions.c.agent_id)).all())


# -- input rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "field"), [
    (lambda r: r.register("cpu", "a", "a", 1), "pool"),
    (lambda r: r.register("Default/cpu", "a", "a", 1), "pool"),
    (lambda r: r.register(f"{'n' * 64}/cpu", "a", "a", 1), "pool"),
    (lambda r: r.register(POOL, "Agent_A", "a", 1), "agent"),
    (lambda r: r.register(POOL, "a", "a", 0), "slots"),
    (lambda r: r.register(POOL, "a", "a", 1025), "slots"),
    (lambda r: r.register(POOL, "a", "a", True), "slots"),
    (lambda r: r.acquire(POOL, []), "command"),
    (lambda r: r.acquire(POOL, [""]), "command"),
    (lambda r: r.acquire(POOL, ["sh", "a\0b"]), "command"),
    (lambda r: r.acquire(POOL, "echo hi"), "command"),
])
def test_bad_input_names_field_value_and_rule(reg: Registry, call: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        call(reg)
    assert err.value.field == field and err.value.rule
    with reg.ledger.read() as conn:  # nothing written
        assert conn.execute(sa.select(sa.func.count()).select_from(schema.agents)).scalar() == 0
        assert conn.execute(sa.select(sa.func.count()).select_from(schema.sessions)).scalar() == 0


def test_unknown_agent_and_session_are_not_found(reg: Registry) -> None:
    with pytest.raises(NotFound) as err:
        reg.heartbeat("nobody", 0)
    assert err.value.field == "agent"
    with pytest.raises(NotFound) as err:
        reg.session("se-nope")
    assert err.value.field == "session"


# -- slots and the queue ----------------------------------------------------------------------


def test_slots_are_never_over_allocated_and_the_queue_is_fifo(reg: Registry) -> None:
    reg.register(POOL, "a", "pod-a", 2)
    got = [reg.acquire(POOL, ["job", str(i)]) for i in range(5)]
    assert [s.state for s in got] == ["running", "running", "pending", "pending", "pending"]
    assert [s.ahead for s in got[2:]] == [0, 1, 2]
    assert reg.pool_view(POOL).busy_slots == 2 and reg.pending_sessions(POOL) == 3
    # A freed slot goes to the oldest pending session, never to a newcomer.
    reg.release(got[0].id, 0, agent="a")
    assert reg.session(got[2].id).state == "running"
    assert reg.session(got[3].id).ahead == 0
    late = reg.acquire(POOL, ["late"])
    assert late.state == "pending" and late.ahead == 2
    assert running_per_agent(reg) == {"a": 2}


def test_busiest_agent_with_room_is_filled_first(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 2)
    reg.register(POOL, "b", "b", 2)
    first = reg.acquire(POOL, ["x"])
    second = reg.acquire(POOL, ["x"])
    assert first.agent_id == second.agent_id == "a"  # b stays wholly idle, free to decay
    assert reg.acquire(POOL, ["x"]).agent_id == "b"


def test_sessions_pend_in_an_empty_pool_until_an_agent_registers(reg: Registry) -> None:
    reg.observe_pool(POOL, "uid-1", desired=0, reason="Reconciled")  # the operator's pass
    waiting = reg.acquire(POOL, ["x"])
    assert waiting.state == "pending" and waiting.agent_id is None
    reg.register("other/cpu", "o", "o", 1)  # another pool's agent is no use
    assert reg.session(waiting.id).state == "pending"
    reg.register(POOL, "a", "a", 1)
    assert reg.session(waiting.id).agent_id == "a"


def _sessions(reg: Registry) -> int:
    with reg.ledger.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(schema.sessions))
                   .scalar_one())


def test_a_session_for_a_pool_nobody_serves_is_refused_at_once(reg: Registry) -> None:
    with pytest.raises(PoolNotFound, match="no operator has recorded any AgentPool") as err:
        reg.acquire("default/no-such-pool", ["x"])
    assert (err.value.code, err.value.field) == ("POOL_NOT_FOUND", "pool")
    reg.serve_namespaces(["team-a", "team-b"])
    assert reg.served_namespaces() == ["team-a", "team-b"]
    with pytest.raises(PoolNotFound, match="no AgentPool of that name in namespace team-a"):
        reg.acquire("team-a/no-such-pool", ["x"])
    with pytest.raises(PoolNotFound, match=r"watches namespace\(s\) team-a, team-b, not other"):
        reg.acquire("other/cpu", ["x"])
    assert _sessions(reg) == 0  # a refusal writes nothing


def test_a_session_for_a_pool_applied_a_moment_ago_waits_for_the_operator(
        reg: Registry) -> None:
    """`kubectl apply` then `session run` at once: the operator records the AgentPool on its
    next event; the session waits for that instead of being refused."""
    import threading

    reg.serve_namespaces(["team-a"])
    reg.pool_grace = 30
    recorder = threading.Timer(0.3, reg.observe_pool, ("team-a/cpu", "uid-1"),
                               {"desired": 0, "reason": "Reconciled"})
    recorder.start()
    try:
        session = reg.acquire("team-a/cpu", ["x"])
    finally:
        recorder.cancel()
    assert session.state == "pending" and _sessions(reg) == 1


def test_a_pool_that_never_appears_is_refused_after_the_grace_saying_so(
        reg: Registry) -> None:
    reg.serve_namespaces(["team-a"])
    reg.pool_grace = 0.3
    with pytest.raises(PoolNotFound, match=r"no AgentPool of that name in namespace team-a .*"
                                           r"\(waited 0.3 s for the operator to record it\)"):
        reg.acquire("team-a/typo", ["x"])
    assert _sessions(reg) == 0
    # Deleted, or in a namespace nobody watches: refused at once, no grace.
    reg.pool_grace = 3600
    with pytest.raises(PoolNotFound, match="watches namespace"):
        reg.acquire("other/cpu", ["x"])


def test_a_deleted_pool_refuses_sessions_and_a_recreated_one_takes_them(
        reg: Registry, clock: ManualClock) -> None:
    reg.observe_pool(POOL, "uid-1", desired=1, reason="Reconciled")
    reg.acquire(POOL, ["x"])
    reg.close_pool(POOL)
    with pytest.raises(PoolNotFound, match="deleted at 2026"):
        reg.acquire(POOL, ["x"])
    reg.observe_pool(POOL, "uid-2", desired=1, reason="Reconciled")
    assert reg.acquire(POOL, ["x"]).state == "pending"


def test_a_pool_of_agents_run_by_hand_needs_no_agentpool(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 1)
    assert reg.acquire(POOL, ["x"]).agent_id == "a"
    reg.deregister("a")
    with pytest.raises(PoolNotFound):
        reg.acquire(POOL, ["x"])


def test_release_by_the_agent_records_exit_code_and_frees_the_slot(
        reg: Registry, clock: ManualClock) -> None:
    reg.register(POOL, "a", "a", 1)
    s = reg.acquire(POOL, ["x"])
    clock.advance(7 * S)
    done = reg.release(s.id, 3, agent="a")
    assert (done.state, done.exit_code, done.finished_at) == ("done", 3, T0 + 7 * S)
    assert reg.release(s.id, 3, agent="a") == done  # again: no change
    agent = reg.pool_view(POOL).agents[0]
    assert (agent.busy_slots, agent.idle_since) == (0, T0 + 7 * S)


def test_only_the_sessions_agent_can_release_it_and_it_must_say_how(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 1)
    reg.register(POOL, "b", "b", 1)
    s = reg.acquire(POOL, ["x"])
    with pytest.raises(Conflict):
        reg.release(s.id, 0, agent="b")
    with pytest.raises(InvalidInput) as err:
        reg.release(s.id, agent="a")
    assert err.value.field == "exitCode"
    with pytest.raises(InvalidInput):
        reg.release(s.id, 999, agent="a")
    failed = reg.release(s.id, agent="a", error="cannot run 'x': No such file")
    assert failed.state == "failed" and "No such file" in (failed.error or "")


def test_client_cancel_pending_at_once_running_after_the_agent_stops_it(
        reg: Registry) -> None:
    reg.register(POOL, "a", "a", 1)
    run = reg.acquire(POOL, ["x"])
    wait = reg.acquire(POOL, ["y"])
    assert reg.release(wait.id).state == "cancelled"
    asked = reg.release(run.id)
    assert asked.state == "running" and asked.cancel_requested_at is not None
    queued = reg.acquire(POOL, ["z"])
    assert queued.state == "pending"  # the slot is held until the command has ended
    assert reg.heartbeat("a", 1, [run.id]).cancel == [run.id]
    ended = reg.release(run.id, -15, agent="a")
    assert (ended.state, ended.exit_code) == ("cancelled", -15)
    assert reg.session(queued.id).state == "running"


def test_pending_sessions_whose_client_stopped_asking_are_cancelled(
        reg: Registry, clock: ManualClock) -> None:
    reg.register(POOL, "a", "a", 1)
    running = reg.acquire(POOL, ["x"])
    watched = reg.acquire(POOL, ["y"])
    orphan = reg.acquire(POOL, ["z"])
    clock.advance(60 * S)
    reg.session(watched.id, seen=True)  # its client polls
    reg.session(orphan.id)  # anyone else reading it does not count
    clock.advance(31 * S)
    assert reg.expire_pending(clock.now(), 90 * S) == [orphan.id]
    gone = reg.session(orphan.id)
    assert gone.state == "cancelled" and "stopped waiting" in (gone.error or "")
    assert reg.pending_sessions(POOL) == 1  # no longer demand for the autoscaler
    assert reg.session(running.id).state == "running"  # running ones are not touched
    reg.release(running.id, 0, agent="a")
    assert reg.session(watched.id).state == "running"


def test_a_cancelled_session_stays_cancelled_however_its_agent_ends_it(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 1)
    s = reg.acquire(POOL, ["x"])
    reg.release(s.id)  # the client cancels before the agent has started it
    ended = reg.release(s.id, agent="a", error="cancelled before it started")
    assert ended.state == "cancelled" and ended.error == "cancelled before it started"


def test_work_gives_each_session_once(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 2)
    s1 = reg.acquire(POOL, ["x"])
    assert [s.id for s in reg.work("a")] == [s1.id]
    assert reg.work("a") == []
    s2 = reg.acquire(POOL, ["y"])
    assert [s.id for s in reg.work("a")] == [s2.id]


def test_output_is_kept_in_order_and_complete_once_released(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 1)
    reg.register(POOL, "b", "b", 1)
    s = reg.acquire(POOL, ["x"])
    reg.append_output(s.id, "a", [("stdout", "hi\n"), ("stderr", "oops\n")])
    with pytest.raises(Conflict):
        reg.append_output(s.id, "b", [("stdout", "not mine")])
    with pytest.raises(InvalidInput):
        reg.append_output(s.id, "a", [("stdin", "x")])
    first = reg.output(s.id)
    assert [(c.stream, c.data) for c in first.chunks] == [("stdout", "hi\n"),
                                                           ("stderr", "oops\n")]
    assert not first.complete
    reg.append_output(s.id, "a", [("stdout", "bye\n")])
    reg.release(s.id, 0, agent="a")
    rest = reg.output(s.id, first.next_after)
    assert [c.data for c in rest.chunks] == ["bye\n"] and rest.complete
    assert reg.output(s.id, rest.next_after).chunks == []


# -- heartbeats, unknown agents, re-registration ----------------------------------------------


def test_heartbeat_reports_but_never_moves_the_brokers_slot_count(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 2)
    s = reg.acquire(POOL, ["x"])  # assigned, not yet picked up by the agent
    beat = reg.heartbeat("a", 0)
    assert (beat.agent.busy_slots, beat.agent.reported_busy_slots) == (1, 0)
    assert reg.acquire(POOL, ["y"]).state == "running"
    assert reg.acquire(POOL, ["z"]).state == "pending"  # 2 slots, whatever was reported
    assert reg.heartbeat("a", 2, [s.id]).cancel == []
    with pytest.raises(InvalidInput):
        reg.heartbeat("a", 3)


def test_silent_agents_become_unknown_and_take_no_session(
        reg: Registry, clock: ManualClock) -> None:
    reg.register(POOL, "a", "a", 1)
    reg.register(POOL, "b", "b", 1)
    busy = reg.acquire(POOL, ["x"])
    clock.advance(20 * S)
    reg.heartbeat("b", 0)
    clock.advance(15 * S)  # a: 35 s silent, b: 15 s
    assert reg.expire_unknown(clock.now(), 30 * S) == ["a"]
    assert reg.expire_unknown(clock.now(), 30 * S) == []
    a = next(x for x in reg.pool_view(POOL).agents if x.id == "a")
    assert (a.state, a.unknown_since, a.busy_slots) == ("unknown", T0, 1)
    assert reg.session(busy.id).state == "running"  # not given up yet
    assert reg.acquire(POOL, ["y"]).agent_id == "b"
    assert reg.acquire(POOL, ["z"]).state == "pending"  # a is unknown: not capacity
    # It comes back: ready again, and the pending session is assigned to it.
    back = reg.heartbeat("a", 1, [busy.id])
    assert back.agent.state == "ready" and back.agent.unknown_since is None
    assert back.agent.busy_slots == 1  # still runs busy; the queue waits for a free slot


def test_sessions_of_an_agent_unknown_too_long_are_given_up(
        reg: Registry, clock: ManualClock) -> None:
    reg.register(POOL, "a", "a", 1)
    lost = reg.acquire(POOL, ["x"])
    clock.advance(60 * S)
    reg.expire_unknown(clock.now(), 30 * S, give_up_after=300 * S)
    assert reg.session(lost.id).state == "running"
    clock.advance(241 * S)  # unknown since T0: 301 s ago
    reg.expire_unknown(clock.now(), 30 * S, give_up_after=300 * S)
    failed = reg.session(lost.id)
    assert failed.state == "failed" and "lost" in (failed.error or "")
    assert reg.pool_view(POOL).agents[0].busy_slots == 0
    # The agent was only cut off: it is told to stop what the broker gave up.
    assert reg.heartbeat("a", 1, [lost.id]).cancel == [lost.id]


def test_giving_up_an_unknown_agent_zeroes_its_busy_slots(
        reg: Registry, clock: ManualClock) -> None:
    """Once its sessions are given up the agent holds no slot, even if its count had drifted
    from its running sessions: the autoscaler then sees an idle unknown worker it may replace
    (one with busy slots it keeps forever), and the pool view counts no busy slot."""
    reg.register(POOL, "a", "pod-a", 2)
    lost = reg.acquire(POOL, ["x"])
    with reg.ledger.write() as conn:  # one session runs, two slots counted
        conn.execute(schema.agents.update().where(schema.agents.c.id == "a")
                     .values(busy_slots=2))
    clock.advance(60 * S)
    reg.expire_unknown(clock.now(), 30 * S, give_up_after=300 * S)
    clock.advance(241 * S)  # unknown since T0: 301 s ago
    reg.expire_unknown(clock.now(), 30 * S, give_up_after=300 * S)
    assert reg.session(lost.id).state == "failed"
    [worker] = reg.workers(POOL, clock.now())
    assert (worker.state, worker.busy_slots, worker.idle_since) == (
        "unknown", 0, clock.now())
    assert reg.pool_view(POOL).busy_slots == 0
    d = decide(Settings(max_replicas=2, min_idle=0, max_idle=1), [worker], 0, clock.now())
    assert d.delete == ("pod-a",), d.reasons
    # Given up once: a later round finds nothing more to give up.
    assert reg.expire_unknown(clock.now(), 30 * S, give_up_after=300 * S) == []


def test_registering_again_fails_what_the_agent_ran(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 1)
    s = reg.acquire(POOL, ["x"])
    again = reg.register(POOL, "a", "a", 2)
    assert (again.slots, again.busy_slots, again.state) == (2, 0, "ready")
    assert reg.session(s.id).state == "failed"
    with pytest.raises(Conflict):
        reg.register("other/cpu", "a", "a", 1)


def test_deregistered_agent_is_gone_and_must_register_again(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 1)
    s = reg.acquire(POOL, ["x"])
    gone = reg.deregister("a")
    assert gone.state == "gone" and reg.session(s.id).state == "failed"
    assert reg.workers(POOL, T0) == []
    with pytest.raises(NotFound):
        reg.heartbeat("a", 0)
    assert reg.register("other/cpu", "a", "a", 1).pool == "other/cpu"  # gone: free to move


def test_a_retired_agent_is_refused_but_a_new_agent_on_its_pod_registers(
        reg: Registry) -> None:
    """The operator retired the agent before deleting its pod: told 404/410 on its way out,
    it must not come back (in any pool), whatever it calls; its pod's successor (another
    agent id, the same pod name) is a new agent."""
    reg.observe_pool(POOL, "uid-1", desired=1, reason="Reconciled")
    reg.register(POOL, "a", "pod-a", 1)
    assert reg.retire_if_idle(POOL, "pod-a")
    for call, named in ((lambda: reg.register(POOL, "a", "pod-a", 1), True),
                        (lambda: reg.register("other/cpu", "a", "pod-a", 1), False),
                        (lambda: reg.heartbeat("a", 0), True), (lambda: reg.work("a"), True)):
        with pytest.raises(AgentRetired) as err:
            call()
        assert (err.value.code, err.value.field, err.value.value) == (
            "AGENT_RETIRED", "agent", "a")
        assert "another --agent-id" in (err.value.rule or "")
        # Its pool is named to that pool's agent, never to another pool's (issue 52, item 9).
        assert (POOL in err.value.message) is named, err.value.message
    # Its SIGTERM path deregisters: it stays retired (still refused).
    assert reg.deregister("a").state == "retired"
    with pytest.raises(AgentRetired):
        reg.register(POOL, "a", "pod-a", 1)
    waiting = reg.acquire(POOL, ["x"])
    assert reg.session(waiting.id).state == "pending"
    successor = reg.register(POOL, "a-2", "pod-a", 1)
    assert successor.state == "ready" and reg.session(waiting.id).agent_id == "a-2"
    assert [w.name for w in reg.workers(POOL, T0)] == ["pod-a"]


def test_agents_of_a_closed_pool_are_refused(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 1)
    reg.register(POOL, "b", "b", 1)
    reg.deregister("b")  # left before: stays gone, may come back (a process run by hand)
    run = reg.acquire(POOL, ["x"])
    reg.close_pool(POOL)
    with pytest.raises(AgentRetired):
        reg.heartbeat("a", 1, [run.id])
    with pytest.raises(AgentRetired):
        reg.register(POOL, "a", "a", 1)  # the same pool, made again: a new pod, a new id
    assert reg.session(run.id).state == "failed"
    assert reg.register(POOL, "b", "b", 1).state == "ready"
    assert reg.register(POOL, "c", "c", 1).state == "ready"


def test_draining_agent_takes_no_new_session(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 2)
    reg.heartbeat("a", 0, draining=True)
    waiting = reg.acquire(POOL, ["x"])
    assert waiting.state == "pending"
    assert reg.workers(POOL, T0)[0].state == "terminating"
    # Draining undone (the agent says so): the queue moves, and the reply says it did.
    assert reg.heartbeat("a", 0).assigned == 1
    assert reg.session(waiting.id).agent_id == "a"


def test_close_pool_ends_everything_of_that_pool_only(reg: Registry) -> None:
    reg.register(POOL, "a", "a", 1)
    reg.register("other/cpu", "o", "o", 1)
    run = reg.acquire(POOL, ["x"])
    wait = reg.acquire(POOL, ["y"])
    other = reg.acquire("other/cpu", ["z"])
    assert reg.close_pool(POOL) == 2
    assert (reg.session(run.id).state, reg.session(wait.id).state) == ("failed", "cancelled")
    assert reg.session(other.id).state == "running"
    assert reg.workers(POOL, T0) == [] and len(reg.workers("other/cpu", T0)) == 1


# -- what the autoscaler is given -------------------------------------------------------------


def test_workers_and_pending_are_the_autoscalers_input(
        reg: Registry, clock: ManualClock) -> None:
    reg.register(POOL, "a", "pod-a", 1)
    reg.register(POOL, "b", "pod-b", 1)
    reg.acquire(POOL, ["x"])
    for _ in range(3):
        reg.acquire(POOL, ["x"])
    clock.advance(10 * S)
    reg.heartbeat("a", 1)
    workers = {w.name: w for w in reg.workers(POOL, clock.now())}
    assert set(workers) == {"pod-a", "pod-b"}
    assert workers["pod-a"].busy_slots == 1 and workers["pod-a"].idle_since is None
    assert workers["pod-a"].created_at == T0 and workers["pod-a"].state == "ready"
    assert reg.pending_sessions(POOL) == 2
    # Both slots busy, 2 waiting: the autoscaler adds agents for minIdle 1 + 2 pending.
    d = decide(Settings(max_replicas=10, min_idle=1, max_idle=3), list(workers.values()),
               reg.pending_sessions(POOL), clock.now())
    assert d.create == 3 and d.delete == ()
    # A worker past the heartbeat timeout is unknown before expire_unknown has run.
    clock.advance(25 * S)
    late = {w.name: w for w in reg.workers(POOL, clock.now(), heartbeat_timeout=30 * S)}
    assert late["pod-b"].state == "unknown" and late["pod-b"].unknown_since == T0
    assert late["pod-a"].state == "ready"


# -- concurrent acquires from several processes -----------------------------------------------

AGENTS = {"a": 2, "b": 1, "c": 3}  # 6 slots
PROCS, ACQUIRES = 4, 15


def _hammer(url: str, seed: int, start: Any, out: Any) -> None:
    """One process: ACQUIRES acquires, releasing some running session now and then, and
    after each step reading how many sessions run on each agent."""
    rng = random.Random(seed)
    ledger = open_ledger(url)
    reg = Registry(ledger)
    start.wait()
    worst = 0
    for i in range(ACQUIRES):
        reg.acquire(POOL, ["job", str(seed), str(i)])
        if rng.random() < 0.4:
            with ledger.read() as conn:
                row = conn.execute(sa.select(schema.sessions.c.id, schema.sessions.c.agent_id)
                                   .where(schema.sessions.c.state == "running")
                                   .limit(1)).first()
            if row is not None:
                reg.release(row[0], 0, agent=row[1])  # done already by another: no change
        for agent, n in running_per_agent(reg).items():
            worst = max(worst, n - AGENTS[agent])
    ledger.dispose()
    out.put(worst)


@pytest.mark.slow
def test_concurrent_acquires_from_processes_never_over_allocate(ledger_url: str) -> None:
    ledger = open_ledger(ledger_url)
    reg = Registry(ledger)
    for agent, slots in AGENTS.items():
        reg.register(POOL, agent, agent, slots)
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(ledger_url, seed, start, out))
             for seed in range(PROCS)]
    for p in procs:
        p.start()
    start.set()
    worst = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert max(worst) <= 0, f"a process saw an agent with {max(worst)} session(s) too many"
    view = reg.pool_view(POOL)
    running = running_per_agent(reg)
    for a in view.agents:
        # The broker's count is exactly the running sessions, and within the slots.
        assert a.busy_slots == running.get(a.id, 0) <= a.slots
    with ledger.read() as conn:
        states = dict(conn.execute(sa.select(schema.sessions.c.state, sa.func.count())
                                   .group_by(schema.sessions.c.state)).all())
    assert sum(states.values()) == PROCS * ACQUIRES
    # Work conservation: a pending session is left only while every slot is taken.
    if states.get("pending"):
        assert view.idle_slots == 0 and states["running"] == sum(AGENTS.values())
    ledger.dispose()


def test_a_session_lost_on_its_way_to_its_agent_is_failed_not_running_forever(
        reg: Registry, clock: ManualClock) -> None:
    reg.register(POOL, "a", "a", 2)
    kept, lost = reg.acquire(POOL, ["x"]), reg.acquire(POOL, ["y"])
    assert {s.id for s in reg.work("a")} == {kept.id, lost.id}  # the answer never arrived
    reg.heartbeat("a", 1, [kept.id])  # at once: still within the grace
    assert reg.session(lost.id).state == "running"
    clock.advance(31 * S)
    reg.heartbeat("a", 1, [kept.id])
    gone = reg.session(lost.id)
    assert gone.state == "failed" and "never started it" in (gone.error or "")
    assert reg.session(kept.id).state == "running"
    assert reg.pool_view(POOL).agents[0].busy_slots == 1  # its slot is free again
    # An agent whose report does not list its sessions (busy 1, none named) is not judged.
    third = reg.acquire(POOL, ["z"])
    reg.work("a")
    clock.advance(31 * S)
    reg.heartbeat("a", 2, [kept.id])
    reg.heartbeat("a", 1, [])
    assert reg.session(third.id).state == "running"
