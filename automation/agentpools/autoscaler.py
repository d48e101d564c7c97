"""The AgentPool idle-slot autoscaler: a pure function of settings, workers, pending sessions
and the clock.

``decide(settings, workers, pending_sessions, now)`` says how many worker pods to create and
which to delete this pass, with one human line per action. It does no I/O and reads no
clock, so the operator gathers the observations, calls it and carries the decision out.

The rules, in the order they are applied:

0. *The hard cap*: every pod that exists counts toward ``maxReplicas``, whatever its state
   (``ready``, ``starting``, ``unknown``, ``terminating``, and those this pass deletes, which
   are still pods until they are gone). No pass creates a pod that would make more than
   ``maxReplicas`` pods: a replacement waits until what it replaces is gone.
1. *Capacity* is the ``ready`` and ``starting`` workers, and ``unknown`` ones still within
   ``killUnknownAfterSecond``: a heartbeat gap (a control-plane restart, a network blip)
   says nothing about the agent, so it is presumed alive, with the free slots it last
   reported, until the timeout. *Idle slots* = those free slots + ``defaultSlotsPerAgent``
   per starting worker (its slot count is not known until it registers) - pending sessions.
   Pending sessions count against idle: a session waiting now takes the next free slot.
2. *Timeouts* (``killUnknownAfterSecond``): a ``starting`` pod that has existed that long
   without registering, or an ``unknown`` worker whose heartbeats stopped that long ago, is
   deleted (``>=``: exactly at the timeout, not a second before) and is no longer capacity;
   its replacement comes once its pod is gone (rule 0).
3. *Above maxReplicas* (the spec was lowered): the excess goes at once, no decay — starting
   pods first (newest first: they serve nothing yet), then idle unknown ones, then fully
   idle ready workers (longest idle first). Busy workers stay until they free; the pool
   sits above the maximum meanwhile.
4. *Scale up* to the smallest number of new agents (each counted at
   ``defaultSlotsPerAgent`` slots) that brings idle slots to ``minIdle`` and capacity to
   ``minReplicas``, never above ``maxReplicas``.
5. *Scale down* only fully idle ready workers (no busy slot) idle for at least
   ``idleDecaySecond``, longest idle first (ties by name), while idle slots exceed the
   *effective* maxIdle, and only while the removal keeps idle >= ``minIdle`` and capacity >=
   ``minReplicas`` (a worker whose removal would break that is skipped).

No flapping: new agents come in whole agents of ``slots`` slots, so a pool just scaled up to
``minIdle`` may sit at up to ``minIdle + slots - 1`` idle slots. With a ``maxIdle`` below that
(say minIdle 3, maxIdle 3, 2 slots an agent: 4 idle after scale-up), removing an agent would
drop idle under ``minIdle`` and the next pass would add it back. So the bound used is
``max(maxIdle, minIdle + defaultSlotsPerAgent - 1)`` and, since agents may register with
another slot count than the default, every removal is also checked against ``minIdle``
itself: a scale-down never leaves the pool in a state that scales up, and a scale-up never
leaves one that scales down (idle after it is at most the effective maxIdle).

Never deleted, whatever the rule: a worker with a busy slot (``busy_slots > 0``), including
an ``unknown`` one whose last heartbeat reported busy slots (the reason lines say it is kept;
the broker decides when such sessions are given up and reports the worker idle) — and a
``terminating`` one (already going). The output is a function of the input set alone: every
choice is ordered by a time then the pod name, never by input order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

WorkerState = Literal["starting", "ready", "unknown", "terminating"]
STATES: frozenset[str] = frozenset({"starting", "ready", "unknown", "terminating"})


@dataclass(frozen=True, kw_only=True)
class Settings:
    """``spec.autoscaler`` of an AgentPool (the seed's field table), in seconds and slots."""

    max_replicas: int
    min_idle: int
    max_idle: int
    min_replicas: int = 0
    idle_decay_second: int = 60
    kill_unknown_after_second: int = 300
    default_slots_per_agent: int = 1

    def __post_init__(self) -> None:
        # The CRD refuses these for users; here they guard the arithmetic (a zero slot count
        # would make scale-up never reach minIdle).
        for name in ("max_replicas", "min_idle", "max_idle", "min_replicas",
                     "idle_decay_second", "kill_unknown_after_second"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} {getattr(self, name)}: must be >= 0")
        if self.default_slots_per_agent < 1:
            raise ValueError(f"default_slots_per_agent {self.default_slots_per_agent}: "
                             "must be >= 1")
        if self.max_replicas < self.min_replicas:
            raise ValueError(f"max_replicas {self.max_replicas}: must be >= min_replicas "
                             f"{self.min_replicas}")
        if self.max_idle < self.min_idle:
            raise ValueError(f"max_idle {self.max_idle}: must be >= min_idle {self.min_idle}")

    @property
    def effective_max_idle(self) -> int:
        """The scale-down bound: a whole new agent's slots above minIdle are tolerated."""
        return max(self.max_idle, self.min_idle + self.default_slots_per_agent - 1)


@dataclass(frozen=True, kw_only=True)
class Worker:
    """One worker pod as the operator and the broker see it.

    ``slots``/``busy_slots`` are what the agent last reported (ignored while ``starting``);
    ``idle_since`` is when it last became fully idle (None while a slot is busy);
    ``unknown_since`` is when its heartbeats stopped (required while ``unknown``).
    """

    name: str
    created_at: datetime
    state: WorkerState
    slots: int = 0
    busy_slots: int = 0
    idle_since: datetime | None = None
    unknown_since: datetime | None = None

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"state {self.state!r}: must be one of {sorted(STATES)}")
        if self.slots < 0 or self.busy_slots < 0:
            raise ValueError(f"{self.name}: slots and busy_slots must be >= 0")
        if self.state == "unknown" and self.unknown_since is None:
            raise ValueError(f"{self.name}: an unknown worker needs unknown_since")


@dataclass(frozen=True)
class Decision:
    """What to do this pass, and the figures behind it (for the AgentPool status).

    The figures are those after the decision is carried out: ``replicas`` is capacity
    (ready, starting and presumed-alive unknown workers kept, plus the agents created),
    ``pods`` every pod that will exist (rule 0: those deleted now included), ``idle_slots``
    is rule 1 with each
    created agent at the default slot count, ``ready`` and ``busy_slots`` count the ready
    workers kept (every busy one is kept).
    """

    create: int
    delete: tuple[str, ...]
    reasons: tuple[str, ...]
    replicas: int
    ready: int
    idle_slots: int
    busy_slots: int
    pending_sessions: int
    pods: int = 0


def _names(workers: Sequence[Worker]) -> str:
    return ", ".join(w.name for w in workers)


def _agents(n: int) -> str:
    return f"{n} agent" if n == 1 else f"{n} agents"


def decide(settings: Settings, workers: Sequence[Worker], pending_sessions: int,
           now: datetime) -> Decision:
    """The autoscaler's decision for one pool (rules in the module docstring)."""
    if pending_sessions < 0:
        raise ValueError(f"pending_sessions {pending_sessions}: must be >= 0")
    s = settings
    spa = s.default_slots_per_agent
    kill_before = now - timedelta(seconds=s.kill_unknown_after_second)
    delete: list[str] = []
    reasons: list[str] = []

    # Rule 1 and 2: sort the workers into capacity and timeouts in one pass.
    ready: list[Worker] = []
    starting: list[Worker] = []
    presumed: list[Worker] = []  # unknown, within the timeout
    stale_starting: list[Worker] = []
    stale_unknown: list[Worker] = []
    kept_busy_unknown: list[Worker] = []
    idle = -pending_sessions
    busy_slots = 0
    for w in workers:
        state = w.state
        if state == "ready":
            ready.append(w)
            busy = w.busy_slots
            busy_slots += busy
            if w.slots > busy:
                idle += w.slots - busy
        elif state == "starting":
            if w.created_at <= kill_before:
                stale_starting.append(w)
            else:
                starting.append(w)
        elif state == "unknown" and w.unknown_since is not None \
                and w.unknown_since <= kill_before:
            (kept_busy_unknown if w.busy_slots > 0 else stale_unknown).append(w)
        elif state == "unknown":
            presumed.append(w)
            busy_slots += w.busy_slots
            if w.slots > w.busy_slots:
                idle += w.slots - w.busy_slots
        # terminating: already going; neither capacity nor ours to delete again.

    kill = s.kill_unknown_after_second
    if stale_starting:
        stale_starting.sort(key=lambda w: w.name)
        delete.extend(w.name for w in stale_starting)
        reasons.append(f"never registered within killUnknownAfterSecond {kill}s: delete "
                       f"{_names(stale_starting)}")
    if stale_unknown:
        stale_unknown.sort(key=lambda w: w.name)
        delete.extend(w.name for w in stale_unknown)
        reasons.append(f"no heartbeat for killUnknownAfterSecond {kill}s: delete "
                       f"{_names(stale_unknown)}")
    if kept_busy_unknown:
        kept_busy_unknown.sort(key=lambda w: w.name)
        reasons.append(f"no heartbeat for killUnknownAfterSecond {kill}s but busy slots "
                       f"reported: kept {_names(kept_busy_unknown)}")

    idle += spa * len(starting)
    n = len(ready) + len(starting) + len(presumed)
    pods = len(workers)  # rule 0: every pod counts, deleted or not, until it is gone

    # Rule 3: above maxReplicas, the excess that is not busy goes at once.
    if n > s.max_replicas:
        excess = n - s.max_replicas
        starting.sort(key=lambda w: (w.created_at, w.name))
        victims = starting[::-1][:excess]  # newest first; ties: the later name first
        if len(victims) < excess:
            idle_unknown = sorted((w for w in presumed if w.busy_slots == 0),
                                  key=lambda w: (w.unknown_since or now, w.name))
            victims += idle_unknown[:excess - len(victims)]
        if len(victims) < excess:
            idle_ready = sorted((w for w in ready if w.busy_slots == 0),
                                key=lambda w: (w.idle_since or now, w.name))
            victims += idle_ready[:excess - len(victims)]
        if victims:
            gone = {w.name for w in victims}
            starting = [w for w in starting if w.name not in gone]
            ready = [w for w in ready if w.name not in gone]
            presumed = [w for w in presumed if w.name not in gone]
            for w in victims:
                idle -= spa if w.state == "starting" else max(0, w.slots - w.busy_slots)
            delete.extend(w.name for w in victims)
            n -= len(victims)
            busy_left = f", {n - s.max_replicas} busy kept until they free" \
                if n > s.max_replicas else ""
            reasons.append(f"replicas {n + len(victims)} > maxReplicas {s.max_replicas}: "
                           f"-{_agents(len(victims))} at once ({_names(victims)}){busy_left}")
        else:
            reasons.append(f"replicas {n} > maxReplicas {s.max_replicas}: every one is busy, "
                           "kept until they free")

    # Rule 4: scale up to minIdle and minReplicas, within maxReplicas.
    create = 0
    need_min = s.min_replicas - n
    short = s.min_idle - idle
    need_idle = -(-short // spa) if short > 0 else 0
    want = max(need_min, need_idle, 0)
    if want > 0:
        room = max(0, s.max_replicas - pods)
        create = min(want, room)
        why = (f"idle slots {idle} < minIdle {s.min_idle}" if need_idle >= need_min
               else f"replicas {n} < minReplicas {s.min_replicas}")
        if pending_sessions and need_idle >= need_min:
            why += f" ({pending_sessions} pending sessions counted)"
        # Pods that are not capacity still hold places under the cap: say how many.
        held = f" ({pods} pods exist, {pods - n} of them going or not answering)" \
            if pods > n else ""
        if create == 0:
            reasons.append(f"{why}: none added, maxReplicas {s.max_replicas} reached{held}")
        elif create < want:
            reasons.append(f"{why}: +{_agents(create)}, capped by maxReplicas "
                           f"{s.max_replicas}{held} (wanted +{want})")
        else:
            reasons.append(f"{why}: +{_agents(create)}")
        idle += create * spa
        n += create

    # Rule 5: scale down fully idle ready workers past their decay, longest idle first.
    eff_max = s.effective_max_idle
    ready_left = len(ready)
    if create == 0 and idle > eff_max and n > s.min_replicas:
        decayed_before = now - timedelta(seconds=s.idle_decay_second)
        candidates = sorted(
            (w for w in ready
             if w.busy_slots == 0 and w.idle_since is not None
             and w.idle_since <= decayed_before),
            key=lambda w: (w.idle_since, w.name))
        removed: list[Worker] = []
        before = idle
        for w in candidates:
            if idle <= eff_max or n <= s.min_replicas:
                break
            if idle - w.slots < s.min_idle:
                continue  # its slots are needed to stay at minIdle; a smaller one may go
            removed.append(w)
            idle -= w.slots
            n -= 1
        if removed:
            ready_left -= len(removed)
            delete.extend(w.name for w in removed)
            bound = f"maxIdle {s.max_idle}" if eff_max == s.max_idle else \
                f"effective maxIdle {eff_max} (minIdle {s.min_idle} + {spa} slots - 1)"
            reasons.append(f"idle slots {before} > {bound}: -{_agents(len(removed))} idle "
                           f">= idleDecaySecond {s.idle_decay_second}s ({_names(removed)})")

    return Decision(
        create=create,
        delete=tuple(delete),
        reasons=tuple(reasons),
        replicas=n,
        ready=ready_left,
        idle_slots=idle,
        busy_slots=busy_slots,  # every busy ready worker is kept
        pending_sessions=pending_sessions,
        pods=pods + create,
    )
