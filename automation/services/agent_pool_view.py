"""The AgentPools the operator serves, read from the ledger only (``GET /v1/agent-pools`` and
the dashboard's AgentPools page): per open pool, the operator's last decision and Ready
reason, its live agents' slots, its pending and running sessions, and its busy slots over the
last hour a minute at a time.

Four queries whatever the number of pools: the open pools, the live agents grouped by pool
and state, the pending and running sessions grouped likewise, and the sessions that held a
slot during the hour (one slot each: the broker adds one to its agent's ``busy_slots`` when it
assigns a session and takes it back when the session ends)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

import sqlalchemy as sa

from automation.ledger import Ledger, schema
from automation.models import BUSY_HISTORY_MINUTES, AgentPoolSummary

_LIVE_AGENT = ("ready", "draining", "unknown")  # the broker's (agentpools.registry)
_MINUTE = timedelta(minutes=1)
READY_REASON = "Reconciled"  # the Ready condition is True with this reason, False otherwise


def list_agent_pools(ledger: Ledger, now: datetime) -> list[AgentPoolSummary]:
    """Every open AgentPool, by ``<namespace>/<name>``."""
    pools, agents, sessions = schema.agent_pools, schema.agents, schema.sessions
    start = now - BUSY_HISTORY_MINUTES * _MINUTE
    with ledger.read() as conn:
        rows = conn.execute(sa.select(pools).where(pools.c.state == "open")
                            .order_by(pools.c.pool)).mappings().all()
        if not rows:
            return []
        names = [r["pool"] for r in rows]
        agent_rows = conn.execute(
            sa.select(agents.c.pool, agents.c.state, sa.func.count(),
                      sa.func.sum(agents.c.slots), sa.func.sum(agents.c.busy_slots))
            .where(agents.c.pool.in_(names), agents.c.state.in_(_LIVE_AGENT))
            .group_by(agents.c.pool, agents.c.state)).all()
        session_rows = conn.execute(
            sa.select(sessions.c.pool, sessions.c.state, sa.func.count())
            .where(sessions.c.pool.in_(names), sessions.c.state.in_(("pending", "running")))
            .group_by(sessions.c.pool, sessions.c.state)).all()
        # Held a slot at some time in [start, now): assigned before now, not ended before start.
        held = conn.execute(
            sa.select(sessions.c.pool, sessions.c.state, sessions.c.assigned_at,
                      sessions.c.finished_at)
            .where(sessions.c.pool.in_(names), sessions.c.assigned_at.is_not(None),
                   sessions.c.assigned_at < now,
                   sa.or_(sessions.c.state == "running", sessions.c.finished_at > start))
        ).all()
    counts: dict[str, dict[str, tuple[int, int, int]]] = defaultdict(dict)
    for pool, state, n, slots, busy in agent_rows:
        counts[pool][state] = (int(n), int(slots or 0), int(busy or 0))
    waiting: dict[str, dict[str, int]] = defaultdict(dict)
    for pool, state, n in session_rows:
        waiting[pool][state] = int(n)
    spans: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for pool, state, assigned, finished in held:
        end = now if state == "running" or finished is None else finished
        if state != "running" and finished is None:
            continue  # ended without an end time: nothing to draw
        spans[pool].append((assigned, end))
    out = []
    for row in rows:
        pool = row["pool"]
        by_state = counts.get(pool, {})
        ready = by_state.get("ready", (0, 0, 0))
        namespace, _, name = pool.partition("/")
        out.append(AgentPoolSummary(
            pool=pool, namespace=namespace, name=name,
            desired_replicas=int(row["desired_replicas"] or 0),
            ready_agents=ready[0],
            draining_agents=by_state.get("draining", (0, 0, 0))[0],
            unknown_agents=by_state.get("unknown", (0, 0, 0))[0],
            slots=ready[1], idle_slots=ready[1] - ready[2],
            busy_slots=sum(c[2] for c in by_state.values()),
            pending_sessions=waiting[pool].get("pending", 0),
            running_sessions=waiting[pool].get("running", 0),
            ready=row["reason"] == READY_REASON, reason=row["reason"],
            observed_at=row["observed_at"], busy_from=start,
            busy_slots_per_minute=busy_per_minute(spans.get(pool, []), start)))
    return out


def busy_per_minute(spans: list[tuple[datetime, datetime]], start: datetime,
                    minutes: int = BUSY_HISTORY_MINUTES) -> list[float]:
    """Each minute from ``start``: the slot-seconds the spans hold in it, over 60 (the mean
    busy slots of that minute), to the millislot."""
    seconds = [0.0] * minutes
    for begin, end in spans:
        first = max(0, int((begin - start) // _MINUTE))
        last = min(minutes - 1, int((end - start) // _MINUTE))
        for i in range(first, last + 1):
            lo, hi = start + i * _MINUTE, start + (i + 1) * _MINUTE
            overlap = (min(end, hi) - max(begin, lo)).total_seconds()
            if overlap > 0:
                seconds[i] += overlap
    return [round(s / 60, 3) for s in seconds]
