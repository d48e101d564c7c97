"""What ``/metrics`` reads from the ledger at each scrape: node pools and VMs by state, each
AgentPool's agents, slots and sessions. Four GROUP BY queries in one read transaction,
however many pools there are, so the numbers of one scrape agree with each other.

Counts that only grow (sessions started, sessions finished by outcome) are counted from the
session rows themselves, so every API worker answers the same totals and a restart loses
none. The AgentPool figures follow the broker's own pool view (``Registry.pool_view``):
ready agents and their idle slots, busy slots of every live agent, pending sessions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from automation.ledger import schema
from automation.ledger.db import Ledger

# Every state a row can be in, reported even at zero: a series that vanished would read
# as "no data", not as none left.
NODE_POOL_STATES = ("pending", "provisioning", "ready", "failed", "deleting", "deleted")
VM_STATES = ("pending", "creating", "running", "releasing", "released")
SESSION_OUTCOMES = ("done", "failed", "cancelled")
_LIVE_AGENT = ("ready", "draining", "unknown")


@dataclass
class AgentPoolCounts:
    ready_agents: int = 0
    idle_slots: int = 0
    busy_slots: int = 0
    pending_sessions: int = 0
    running_sessions: int = 0
    sessions_started: int = 0  # every session ever asked for
    sessions_finished: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(SESSION_OUTCOMES, 0))


@dataclass
class FleetCounts:
    node_pools: dict[str, int]
    vms: dict[str, int]
    agent_pools: dict[str, AgentPoolCounts]  # "<namespace>/<name>" -> its figures


def _by_state(known: tuple[str, ...], rows: Sequence[Any]) -> dict[str, int]:
    counts = dict.fromkeys(known, 0)
    counts.update({str(state): int(n) for state, n in rows})
    return counts


def read_counts(ledger: Ledger) -> FleetCounts:
    pools, attempts = schema.node_pools, schema.vm_attempts
    agents, sessions = schema.agents, schema.sessions
    with ledger.read() as conn:
        pool_rows = conn.execute(sa.select(pools.c.state, sa.func.count())
                                 .group_by(pools.c.state)).all()
        vm_rows = conn.execute(sa.select(attempts.c.state, sa.func.count())
                               .group_by(attempts.c.state)).all()
        agent_rows = conn.execute(
            sa.select(agents.c.pool, agents.c.state, sa.func.count(),
                      sa.func.sum(agents.c.slots), sa.func.sum(agents.c.busy_slots))
            .where(agents.c.state.in_(_LIVE_AGENT))
            .group_by(agents.c.pool, agents.c.state)).all()
        session_rows = conn.execute(
            sa.select(sessions.c.pool, sessions.c.state, sa.func.count())
            .group_by(sessions.c.pool, sessions.c.state)).all()
    agent_pools: dict[str, AgentPoolCounts] = {}
    for pool, state, n, slots, busy in agent_rows:
        c = agent_pools.setdefault(pool, AgentPoolCounts())
        c.busy_slots += int(busy or 0)
        if state == "ready":
            c.ready_agents += int(n)
            c.idle_slots += int(slots or 0) - int(busy or 0)
    for pool, state, n in session_rows:
        c = agent_pools.setdefault(pool, AgentPoolCounts())
        c.sessions_started += int(n)
        if state == "pending":
            c.pending_sessions = int(n)
        elif state == "running":
            c.running_sessions = int(n)
        else:
            c.sessions_finished[state] = int(n)
    return FleetCounts(_by_state(NODE_POOL_STATES, pool_rows),
                       _by_state(VM_STATES, vm_rows), agent_pools)


def desired_replicas(ledger: Ledger) -> dict[str, int]:
    """Each open AgentPool's desired agents, as its operator last decided (one query)."""
    pools = schema.agent_pools
    with ledger.read() as conn:
        rows = conn.execute(sa.select(pools.c.pool, pools.c.desired_replicas)
                            .where(pools.c.state == "open")).all()
    return {str(pool): int(n) for pool, n in rows}


def read_org_counts(ledger: Ledger) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    """Per org (by name): its node pools by state and their VMs by state, every state even
    at zero (tenants: for an admin's scrape)."""
    pools, attempts, orgs = schema.node_pools, schema.vm_attempts, schema.orgs
    with ledger.read() as conn:
        names = list(conn.execute(sa.select(orgs.c.name).order_by(orgs.c.name)).scalars())
        pool_rows = conn.execute(
            sa.select(orgs.c.name, pools.c.state, sa.func.count())
            .join(pools, pools.c.org_id == orgs.c.id)
            .group_by(orgs.c.name, pools.c.state)).all()
        vm_rows = conn.execute(
            sa.select(orgs.c.name, attempts.c.state, sa.func.count())
            .join(pools, pools.c.org_id == orgs.c.id)
            .join(attempts, attempts.c.pool_id == pools.c.id)
            .group_by(orgs.c.name, attempts.c.state)).all()
    return {name: (_by_state(NODE_POOL_STATES, [(st, n) for o, st, n in pool_rows if o == name]),
                   _by_state(VM_STATES, [(st, n) for o, st, n in vm_rows if o == name]))
            for name in names}

