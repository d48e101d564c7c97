"""The AgentPool autoscaler: the seed's manifests as examples, and its rules as properties."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automation.agentpools.autoscaler import Decision, Settings, Worker, decide

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
S = timedelta(seconds=1)
HOUR = timedelta(hours=1)

# The seed's example manifests (000_13a98a07e909e4d5), spec.autoscaler with its defaults.
CPU_POOL = Settings(min_replicas=2, max_replicas=20, min_idle=3, max_idle=8,
                    idle_decay_second=300, default_slots_per_agent=1)
GPU_POOL = Settings(min_idle=1, max_idle=3, max_replicas=10, idle_decay_second=600,
                    kill_unknown_after_second=900, default_slots_per_agent=1)
SHELL = Settings(min_idle=1, max_idle=2, max_replicas=4, idle_decay_second=60)


def ready(name: str, *, slots: int = 1, busy: int = 0, idle_for: float = 0,
          age: timedelta = HOUR, now: datetime = T0) -> Worker:
    return Worker(name=name, created_at=now - age, state="ready", slots=slots, busy_slots=busy,
                  idle_since=None if busy else now - idle_for * S)


def starting(name: str, *, age: float = 0, now: datetime = T0) -> Worker:
    return Worker(name=name, created_at=now - age * S, state="starting")


def unknown(name: str, *, for_: float, busy: int = 0, now: datetime = T0) -> Worker:
    return Worker(name=name, created_at=now - HOUR, state="unknown", slots=1, busy_slots=busy,
                  unknown_since=now - for_ * S)


# --- the seed's pools ------------------------------------------------------------------------

def test_cpu_pool_from_empty_creates_min_idle_which_covers_min_replicas() -> None:
    d = decide(CPU_POOL, [], 0, T0)
    assert (d.create, d.delete) == (3, ())
    assert d.reasons == ("idle slots 0 < minIdle 3: +3 agents",)
    assert (d.replicas, d.idle_slots, d.ready, d.busy_slots) == (3, 3, 0, 0)


def test_cpu_pool_with_busy_agents_keeps_min_idle_free_and_counts_starting_ones() -> None:
    workers = [ready(f"cpu-{i}", busy=1) for i in range(5)] + [ready("cpu-5", idle_for=10)]
    d = decide(CPU_POOL, workers, 0, T0)
    assert d.create == 2 and d.reasons == ("idle slots 1 < minIdle 3: +2 agents",)
    # Next pass: the two pods exist but have not registered; they count, nothing more.
    again = decide(CPU_POOL, [*workers, starting("cpu-6", age=5), starting("cpu-7", age=5)],
                   0, T0 + 5 * S)
    assert (again.create, again.delete, again.idle_slots) == (0, (), 3)


def test_cpu_pool_decays_idle_agents_down_to_max_idle_longest_idle_first() -> None:
    workers = [ready(f"cpu-{i}", idle_for=300 + i) for i in range(10)]
    d = decide(CPU_POOL, workers, 0, T0)
    assert d.delete == ("cpu-9", "cpu-8") and d.create == 0
    assert d.reasons == ("idle slots 10 > maxIdle 8: -2 agents idle >= idleDecaySecond 300s "
                         "(cpu-9, cpu-8)",)
    assert (d.replicas, d.idle_slots) == (8, 8)


def test_cpu_pool_keeps_idle_agents_until_the_decay_has_passed() -> None:
    workers = [ready(f"cpu-{i}", idle_for=299) for i in range(10)]
    assert decide(CPU_POOL, workers, 0, T0).delete == ()
    # Only those idle for 300 s qualify, even when more are above maxIdle.
    workers[4] = ready("cpu-4", idle_for=300)
    assert decide(CPU_POOL, workers, 0, T0).delete == ("cpu-4",)


def test_cpu_pool_never_decays_below_min_replicas() -> None:
    busy_free = Settings(min_replicas=2, max_replicas=20, min_idle=0, max_idle=0,
                         idle_decay_second=300)
    workers = [ready(f"cpu-{i}", idle_for=1000 + i) for i in range(4)]
    d = decide(busy_free, workers, 0, T0)
    assert d.delete == ("cpu-3", "cpu-2") and d.replicas == 2


def test_gpu_pool_starting_pod_is_killed_exactly_at_900s_and_replaced() -> None:
    d = decide(GPU_POOL, [starting("gpu-0", age=899)], 0, T0)
    assert (d.create, d.delete) == (0, ())
    d = decide(GPU_POOL, [starting("gpu-0", age=900)], 0, T0)
    assert d.delete == ("gpu-0",) and d.create == 1
    assert d.reasons[0] == "never registered within killUnknownAfterSecond 900s: delete gpu-0"


def test_gpu_pool_unknown_worker_is_presumed_alive_until_900s_then_killed() -> None:
    before = decide(GPU_POOL, [unknown("gpu-0", for_=899)], 0, T0)
    assert (before.create, before.delete, before.replicas, before.idle_slots) == (0, (), 1, 1)
    at = decide(GPU_POOL, [unknown("gpu-0", for_=900)], 0, T0)
    assert at.delete == ("gpu-0",) and at.create == 1
    assert at.reasons[0] == "no heartbeat for killUnknownAfterSecond 900s: delete gpu-0"


def test_a_heartbeat_gap_on_a_full_pool_creates_nothing() -> None:
    # The case: a control-plane restart left every heartbeat 40 s old on a pool at
    # maxReplicas 10. Before, none of the 10 counted and one pass made 10 more GPU pods.
    workers = [unknown(f"gpu-{i}", for_=40) for i in range(10)]
    d = decide(GPU_POOL, workers, 3, T0)
    assert (d.create, d.delete, d.pods, d.idle_slots) == (0, (), 10, 7)
    assert d.reasons == ()  # presumed alive: 10 idle slots, 3 pending sessions
    d = decide(GPU_POOL, workers, 12, T0)
    assert (d.create, d.delete, d.pods) == (0, (), 10)
    assert d.reasons == ("idle slots -2 < minIdle 1 (12 pending sessions counted): none "
                         "added, maxReplicas 10 reached",)


def test_a_replacement_waits_until_the_pod_it_replaces_is_gone() -> None:
    full = [unknown("gpu-0", for_=900), *(ready(f"gpu-{i}", idle_for=5) for i in range(1, 10))]
    d = decide(replace(GPU_POOL, min_idle=10, max_idle=10), full, 0, T0)
    assert d.delete == ("gpu-0",) and d.create == 0 and d.pods == 10
    assert "(10 pods exist, 1 of them going or not answering)" in d.reasons[-1]
    going = [replace(full[0], state="terminating"), *full[1:]]
    assert decide(replace(GPU_POOL, min_idle=10, max_idle=10), going, 0, T0).create == 0
    gone = decide(replace(GPU_POOL, min_idle=10, max_idle=10), full[1:], 0, T0)
    assert gone.create == 1 and gone.pods == 10


def test_unknown_worker_that_last_reported_busy_slots_is_kept_and_said_so() -> None:
    d = decide(GPU_POOL, [unknown("gpu-0", for_=5000, busy=1), ready("gpu-1", idle_for=5)],
               0, T0)
    assert d.delete == ()
    assert d.reasons == ("no heartbeat for killUnknownAfterSecond 900s but busy slots "
                         "reported: kept gpu-0",)


def test_shell_pending_sessions_are_capped_by_max_replicas() -> None:
    workers = [ready(f"shell-{i}", busy=1) for i in range(3)]
    d = decide(SHELL, workers, 3, T0)
    assert d.create == 1 and d.replicas == 4
    assert d.reasons == ("idle slots -3 < minIdle 1 (3 pending sessions counted): +1 agent, "
                         "capped by maxReplicas 4 (wanted +4)",)


def test_shell_max_replicas_lowered_removes_idle_ones_at_once_never_busy_ones() -> None:
    lowered = replace(SHELL, max_replicas=2)
    workers = [ready("shell-0", busy=1), ready("shell-1", busy=1), ready("shell-2"),
               ready("shell-3")]
    d = decide(lowered, workers, 0, T0)  # idle for 0 s: no decay above the maximum
    assert d.delete == ("shell-2", "shell-3") and d.replicas == 2
    workers = [ready("shell-0", busy=1), ready("shell-1", busy=1), ready("shell-2", busy=1),
               ready("shell-3")]
    d = decide(lowered, workers, 0, T0)
    assert d.delete == ("shell-3",) and d.replicas == 3 and d.create == 0
    assert d.reasons == ("replicas 4 > maxReplicas 2: -1 agent at once (shell-3), "
                         "1 busy kept until they free",
                         "idle slots 0 < minIdle 1: none added, maxReplicas 2 reached "
                         "(4 pods exist, 1 of them going or not answering)")


def test_above_max_replicas_starting_pods_go_first_newest_first() -> None:
    lowered = replace(SHELL, max_replicas=1, min_idle=0, max_idle=0)
    workers = [ready("shell-0", idle_for=10), starting("shell-1", age=30),
               starting("shell-2", age=10)]
    assert decide(lowered, workers, 0, T0).delete == ("shell-2", "shell-1")


def test_effective_max_idle_stops_the_flap_of_multi_slot_agents() -> None:
    # minIdle 3 with 2-slot agents: scale-up ends at 4 idle slots, above maxIdle 3.
    pool = Settings(min_idle=3, max_idle=3, max_replicas=10, default_slots_per_agent=2)
    assert pool.effective_max_idle == 4
    up = decide(pool, [], 0, T0)
    assert up.create == 2 and up.idle_slots == 4
    workers = [ready("a", slots=2, idle_for=3600), ready("b", slots=2, idle_for=3600)]
    assert decide(pool, workers, 0, T0).delete == ()


def test_effective_max_idle_is_where_scale_down_stops() -> None:
    # Agents registered with 1 slot in a pool whose default is 2: scale-down stops at the
    # effective bound 4 (minIdle 3 + 2 - 1), not at maxIdle 3.
    pool = Settings(min_idle=3, max_idle=3, max_replicas=10, default_slots_per_agent=2)
    workers = [ready(f"a-{i}", slots=1, idle_for=3600 + i) for i in range(6)]
    d = decide(pool, workers, 0, T0)
    assert d.delete == ("a-5", "a-4") and d.idle_slots == 4
    assert d.reasons == ("idle slots 6 > effective maxIdle 4 (minIdle 3 + 2 slots - 1): "
                         "-2 agents idle >= idleDecaySecond 60s (a-5, a-4)",)


def test_scale_down_skips_an_agent_whose_slots_are_needed_for_min_idle() -> None:
    # An agent registered with more slots than the default: removing it would leave 1 < 3.
    pool = Settings(min_idle=3, max_idle=4, max_replicas=10)
    workers = [ready("big", slots=5, idle_for=9000), ready("small", slots=1, idle_for=100)]
    d = decide(pool, workers, 0, T0)
    assert d.delete == ("small",) and d.idle_slots == 5


def test_terminating_workers_are_neither_capacity_nor_deleted_again() -> None:
    gone = Worker(name="shell-0", created_at=T0 - HOUR, state="terminating", slots=1)
    d = decide(SHELL, [gone], 0, T0)
    assert d.delete == () and d.create == 1


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_replicas 1: must be >= min_replicas 2"):
        Settings(min_replicas=2, max_replicas=1, min_idle=0, max_idle=0)
    with pytest.raises(ValueError, match="max_idle 1: must be >= min_idle 2"):
        Settings(max_replicas=1, min_idle=2, max_idle=1)
    with pytest.raises(ValueError, match="default_slots_per_agent 0"):
        Settings(max_replicas=1, min_idle=0, max_idle=0, default_slots_per_agent=0)
    with pytest.raises(ValueError, match="idle_decay_second -1"):
        Settings(max_replicas=1, min_idle=0, max_idle=0, idle_decay_second=-1)
    with pytest.raises(ValueError, match="needs unknown_since"):
        Worker(name="w", created_at=T0, state="unknown")
    with pytest.raises(ValueError, match="pending_sessions -1"):
        decide(SHELL, [], -1, T0)


# --- properties ------------------------------------------------------------------------------

@st.composite
def pool_settings(draw: st.DrawFn) -> Settings:
    min_replicas = draw(st.integers(0, 6))
    min_idle = draw(st.integers(0, 8))
    return Settings(
        min_replicas=min_replicas,
        max_replicas=min_replicas + draw(st.integers(0, 12)),
        min_idle=min_idle,
        max_idle=min_idle + draw(st.integers(0, 8)),
        idle_decay_second=draw(st.integers(0, 600)),
        # 0 would kill every pod on the pass that creates it: a degenerate spec, left out.
        kill_unknown_after_second=draw(st.integers(1, 900)),
        default_slots_per_agent=draw(st.integers(1, 4)),
    )


@st.composite
def a_worker(draw: st.DrawFn, name: str) -> Worker:
    state = draw(st.sampled_from(["starting", "ready", "ready", "ready", "unknown",
                                  "terminating"]))
    created_at = T0 - draw(st.integers(0, 2000)) * S
    slots = draw(st.integers(0, 4))
    busy = draw(st.integers(0, slots))
    idle_since = None if busy else T0 - draw(st.integers(0, 2000)) * S
    unknown_since = T0 - draw(st.integers(0, 2000)) * S if state == "unknown" else None
    if state == "starting":
        slots = busy = 0
        idle_since = None
    return Worker(name=name, created_at=created_at, state=state, slots=slots,  # type: ignore[arg-type]
                  busy_slots=busy, idle_since=idle_since, unknown_since=unknown_since)


@st.composite
def pool_workers(draw: st.DrawFn) -> list[Worker]:
    n = draw(st.integers(0, 25))
    return [draw(a_worker(f"w-{i:02d}")) for i in range(n)]


PROPS = settings(max_examples=200, deadline=None)


def is_capacity(s: Settings, w: Worker, now: datetime) -> bool:
    """Rule 1, written out again: ready, starting and unknown within the timeout."""
    kill_before = now - s.kill_unknown_after_second * S
    return w.state == "ready" or (w.state == "starting" and w.created_at > kill_before) or (
        w.state == "unknown" and w.unknown_since is not None and w.unknown_since > kill_before)


def after(workers: list[Worker], d: Decision, now: datetime, first: int = 0) -> list[Worker]:
    """The pool once a decision is carried out: deleted pods terminating (still pods until
    they are gone), created ones starting."""
    gone = set(d.delete)
    return [replace(w, state="terminating") if w.name in gone else w for w in workers] + [
        Worker(name=f"new-{first + i:04d}", created_at=now, state="starting")
        for i in range(d.create)]


def idle_of(s: Settings, workers: list[Worker], pending: int, now: datetime = T0) -> int:
    """Rule 1, written out again independently of the module."""
    return sum(max(0, w.slots - w.busy_slots) for w in workers
               if w.state in ("ready", "unknown") and is_capacity(s, w, now)) + \
        s.default_slots_per_agent * sum(w.state == "starting" for w in workers) - pending


@PROPS
@given(pool_settings(), pool_workers(), st.integers(0, 30))
def test_replicas_stay_within_min_and_max(s: Settings, workers: list[Worker],
                                          pending: int) -> None:
    d = decide(s, workers, pending, T0)
    kept = [w for w in workers if w.name not in set(d.delete) and is_capacity(s, w, T0)]
    assert d.replicas == len(kept) + d.create
    assert d.pods == len(workers) + d.create  # the deleted are still pods, going
    if d.create:  # the hard cap: never a pod above maxReplicas
        assert d.pods <= s.max_replicas
    assert d.replicas >= s.min_replicas or d.pods >= s.max_replicas
    if d.replicas > s.max_replicas:  # only busy workers may hold the pool above its maximum
        assert d.create == 0
        assert all(w.busy_slots > 0 for w in kept)


@PROPS
@given(pool_settings(), pool_workers(), st.integers(0, 30))
def test_never_deletes_a_busy_or_terminating_worker(s: Settings, workers: list[Worker],
                                                    pending: int) -> None:
    d = decide(s, workers, pending, T0)
    by_name = {w.name: w for w in workers}
    assert len(set(d.delete)) == len(d.delete)
    for name in d.delete:
        assert by_name[name].busy_slots == 0
        assert by_name[name].state != "terminating"
    assert d.create >= 0 and len(d.reasons) >= (d.create > 0) + (len(d.delete) > 0)


@PROPS
@given(pool_settings(), pool_workers(), st.integers(0, 30))
def test_scale_up_covers_pending_sessions_with_the_fewest_agents(
        s: Settings, workers: list[Worker], pending: int) -> None:
    d = decide(s, workers, pending, T0)
    pool = after(workers, d, T0)
    idle = idle_of(s, pool, pending)
    assert d.idle_slots == idle
    if d.pods < s.max_replicas:  # not capped: pending sessions and minIdle are covered
        assert idle >= s.min_idle
    if d.create:  # and one agent fewer would not have done
        assert idle - s.default_slots_per_agent < s.min_idle or d.replicas - 1 < s.min_replicas


@PROPS
@given(pool_settings(), pool_workers(), st.integers(0, 30), st.randoms(use_true_random=False))
def test_same_input_in_any_order_gives_the_same_decision(
        s: Settings, workers: list[Worker], pending: int, rnd: random.Random) -> None:
    shuffled = list(workers)
    rnd.shuffle(shuffled)
    assert decide(s, shuffled, pending, T0) == decide(s, workers, pending, T0)


@PROPS
@given(pool_settings(), pool_workers(), st.integers(0, 30))
def test_a_decision_carried_out_needs_no_other_at_the_same_instant(
        s: Settings, workers: list[Worker], pending: int) -> None:
    # The one-step form of "no flapping": what scale-up leaves is not scaled down, and the
    # reverse, and no timeout fires twice.
    d = decide(s, workers, pending, T0)
    again = decide(s, after(workers, d, T0), pending, T0)
    assert (again.create, again.delete) == (0, ())


@PROPS
@given(pool_settings(), pool_workers(), st.integers(0, 30),
       st.sampled_from(["starting", "unknown"]))
def test_the_unknown_rule_fires_exactly_at_the_timeout(
        s: Settings, others: list[Worker], pending: int, state: str) -> None:
    kill = s.kill_unknown_after_second
    # Every other worker is still within its timeout, so only the one under test can fire.
    others = [replace(w, created_at=T0, unknown_since=T0 if w.unknown_since else None)
              for w in others]

    def the_pod(seconds: int) -> Worker:
        since = T0 - seconds * S
        if state == "starting":
            return Worker(name="x-pod", created_at=since, state="starting")
        return Worker(name="x-pod", created_at=T0 - 10 * HOUR, state="unknown", slots=1,
                      unknown_since=since)

    # (Rule 3 may delete a starting x-pod for another reason: above maxReplicas.)
    early = decide(s, [*others, the_pod(kill - 1)], pending, T0)
    assert not any("killUnknownAfterSecond" in r for r in early.reasons)
    at = decide(s, [*others, the_pod(kill)], pending, T0)
    assert at.delete[0] == "x-pod"
    said = ("never registered within" if state == "starting" else "no heartbeat for")
    assert [r for r in at.reasons if "killUnknownAfterSecond" in r] == [
        f"{said} killUnknownAfterSecond {kill}s: delete x-pod"]


# --- a steady load settles -------------------------------------------------------------------

@dataclass
class Agent:
    name: str
    created_at: datetime
    state: str
    slots: int = 0
    busy: int = 0
    idle_since: datetime | None = None

    def view(self) -> Worker:
        return Worker(name=self.name, created_at=self.created_at, state=self.state,  # type: ignore[arg-type]
                      slots=self.slots, busy_slots=self.busy, idle_since=self.idle_since)


def simulate(s: Settings, sessions: int, agents: list[Agent], *, tick: int, startup: int,
             registered_slots: int, limit: int, quiet_needed: int) -> tuple[int, list[Decision]]:
    """Run the pool on a simulated clock with `sessions` sessions that never end.

    Returns the pass at which `quiet_needed` passes in a row did nothing (or `limit`), and
    every decision. Pods register `startup` seconds after creation with `registered_slots`.
    """
    now = T0
    made = 0
    decisions: list[Decision] = []
    quiet = 0
    for step in range(limit):
        for a in agents:
            if a.state == "starting" and now - a.created_at >= startup * S:
                a.state, a.slots, a.busy, a.idle_since = "ready", registered_slots, 0, now
        # Sessions waiting take free slots, agents in name order (the broker's job).
        waiting = sessions - sum(a.busy for a in agents)
        for a in sorted(agents, key=lambda a: a.name):
            if waiting <= 0:
                break
            if a.state == "ready" and a.busy < a.slots:
                took = min(waiting, a.slots - a.busy)
                a.busy += took
                a.idle_since = None
                waiting -= took
        d = decide(s, [a.view() for a in agents], waiting, now)
        decisions.append(d)
        doomed = set(d.delete)
        assert all(a.busy == 0 for a in agents if a.name in doomed)  # no session is lost
        agents = [a for a in agents if a.name not in doomed]
        for _ in range(d.create):
            agents.append(Agent(name=f"pod-{made:05d}", created_at=now, state="starting"))
            made += 1
        quiet = quiet + 1 if (d.create, d.delete) == (0, ()) else 0
        if quiet >= quiet_needed:
            return step, decisions
        now += tick * S
    return limit, decisions


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pool_settings(), st.integers(0, 40), st.integers(0, 20), st.integers(10, 60),
       st.integers(0, 120), st.integers(1, 300), st.integers(-1, 1))
def test_a_steady_load_settles_and_stays_settled(
        s: Settings, sessions: int, initial_idle: int, tick: int, startup: int,
        kill_margin: int, slot_skew: int) -> None:
    # Pods register before the kill timeout (else they are replaced forever, by design), and
    # may register with a slot count one off the default.
    s = replace(s, kill_unknown_after_second=startup + kill_margin)
    registered = max(1, s.default_slots_per_agent + slot_skew)
    agents = [Agent(name=f"old-{i:02d}", created_at=T0 - HOUR, state="ready",
                    slots=registered, idle_since=T0 - i * 7 * S) for i in range(initial_idle)]
    # A quiet stretch longer than every timer means nothing will ever change again.
    quiet_needed = math.ceil((startup + s.idle_decay_second + s.kill_unknown_after_second)
                             / tick) + 3
    settled_at, decisions = simulate(s, sessions, agents, tick=tick, startup=startup,
                                     registered_slots=registered, limit=400,
                                     quiet_needed=quiet_needed + 20)
    assert settled_at < 400, f"still acting after 400 passes: {decisions[-1]}"
    last = decisions[-1]
    assert last.replicas >= s.min_replicas
    assert last.idle_slots >= s.min_idle or last.replicas >= s.max_replicas
