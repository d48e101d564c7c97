"""The broker's state: agents of AgentPools, their slots, and the sessions that use them.

Pure ledger and an injected clock, no HTTP: the broker (``broker.py``) serves these over
FastAPI, and the operator can call them from the same process over the same ledger.

Who owns what:
- ``busy_slots`` is the broker's own count of slots held by running sessions. An agent's
  heartbeat reports what it runs (kept as ``reported_busy_slots``, for people) but never
  moves ``busy_slots``: a session assigned a moment ago and not yet picked up would
  otherwise free its slot again.
- Every change of who holds a slot first locks all the pool's agent rows in id order
  (``SELECT … FOR UPDATE`` on PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already serialises
  writers), then changes the session rows: one lock order, so no deadlock, and an allocation
  always sees the counts the last one committed. The slot increment is also a conditional
  UPDATE (``busy_slots < slots``), a second guard against over-allocation.
- Sessions queue in arrival order: ``acquire`` adds a pending session and then assigns the
  pool's oldest pending sessions first, so a newcomer never jumps the queue. A freed slot,
  a new agent and every heartbeat assign again.

Session states: pending -> running -> done (the command ended; ``exit_code``), failed (it
could not run, or its agent was lost or restarted; ``error``), cancelled (its client released
it first). Agent states: ready, draining (SIGTERM: runs what it has, takes nothing new),
unknown (heartbeats stopped), gone (it left: it may register again, as a process restarted
by hand does), retired (the operator took it out before deleting its pod, or its pool was
deleted: that agent id is refused from then on, ``AgentRetired``, so an agent told 404 on
its way out cannot register itself back into the pool its pod is leaving).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from automation.agentpools.autoscaler import Worker, WorkerState
from automation.agentpools.wire import (
    EXIT_CODES,
    MAX_OUTPUT_CHARS,
    MAX_SLOTS,
    TERMINAL,
    Agent,
    AgentRetired,
    Chunk,
    HeartbeatReply,
    Output,
    PoolNotFound,
    PoolView,
    Session,
    check_command,
    check_count,
    check_name,
    check_pool,
)
from automation.auth.tokens import authenticate, mint_agent_token, revoke_pool_tokens
from automation.clock import Clock, SystemClock
from automation.errors import Conflict, InvalidInput, NotFound, Unauthenticated
from automation.ids import new_id
from automation.ledger import schema
from automation.ledger.db import Ledger

agents = schema.agents
sessions = schema.sessions
agent_pools = schema.agent_pools
pool_namespaces = schema.agent_pool_namespaces
session_output = schema.session_output

DEFAULT_HEARTBEAT_TIMEOUT = timedelta(seconds=30)
# A session handed to an agent that, this long after, does not list it as running was lost
# on its way (the agent starts what it is handed within a moment and lists it at once).
LOST_DELIVERY_GRACE = DEFAULT_HEARTBEAT_TIMEOUT

# How long a session for an AgentPool the operator has not recorded (in a namespace it
# watches) waits for it before POOL_NOT_FOUND: one just applied is recorded on the
# operator's next event, normally within a second, longer while its API server is busy.
POOL_APPEAR_GRACE = 10.0

_LIVE_AGENT = ("ready", "draining", "unknown")
_WORKER_STATE: dict[str, WorkerState] = {
    "ready": "ready", "draining": "terminating", "unknown": "unknown"}


# -- the registry -----------------------------------------------------------------------------


class Registry:
    def __init__(self, ledger: Ledger, clock: Clock | None = None,
                 pool_grace: float = POOL_APPEAR_GRACE) -> None:
        self.ledger = ledger
        self.clock = clock or SystemClock()
        self.pool_grace = pool_grace  # seconds, real time (see POOL_APPEAR_GRACE)

    # agents

    def register(self, pool: str, agent: str, pod: str, slots: int) -> Agent:
        """Add the agent to its pool, ready with all its slots free. An agent that registers
        again (its container restarted) starts afresh: the sessions it ran are failed. A
        retired agent id is refused (``AgentRetired``), in any pool: its pod is on its way
        out. Another agent id, even with the same pod name, registers as usual."""
        check_pool(pool)
        check_name(agent, "agent")
        check_name(pod, "pod")
        check_count(slots, "slots", 1, MAX_SLOTS)
        now = self.clock.now()
        with self.ledger.write() as conn:
            _lock_pool(conn, pool)
            old = conn.execute(sa.select(agents).where(agents.c.id == agent)
                               .with_for_update()).mappings().first()
            # Another pool's agent is never named to the caller (issue 52): its agent token
            # is this pool's, and learns no other pool's name.
            elsewhere = old is not None and old["pool"] != pool
            if old is not None and old["state"] == "retired":
                raise AgentRetired(agent, old["pool"], message=None if not elsewhere else (
                    f"agent id {agent!r} was retired (its pod is being deleted, or its pool "
                    "was): it takes no more sessions"))
            if elsewhere and old is not None and old["state"] != "gone":
                raise Conflict(
                    f"agent id {agent!r} is taken by an agent of another pool", field="agent",
                    value=agent, rule="an agent serves one pool: give it another pod name")
            fresh = dict(pool=pool, pod_name=pod, slots=slots, busy_slots=0,
                         reported_busy_slots=0, state="ready", registered_at=now,
                         last_heartbeat_at=now, idle_since=now, unknown_since=None,
                         gone_at=None)
            if old is None:
                conn.execute(agents.insert().values(id=agent, **fresh))
            else:
                _fail_agent_sessions(conn, agent, now,
                                     f"agent {agent} registered again: the session was lost")
                conn.execute(agents.update().where(agents.c.id == agent).values(**fresh))
            _assign(conn, pool, now)
            return _agent(conn, agent)

    def heartbeat(self, agent: str, busy_slots: int, running: Sequence[str] = (),
                  draining: bool = False) -> HeartbeatReply:
        """The agent is alive, running ``running`` (``busy_slots`` of its slots). An unknown
        agent becomes ready (or draining) again."""
        row = self._live_agent(agent)
        check_count(busy_slots, "busySlots", 0, row["slots"])
        now = self.clock.now()
        with self.ledger.write() as conn:
            _lock_pool(conn, row["pool"])
            row = self._live_agent(agent, conn)
            conn.execute(agents.update().where(agents.c.id == agent).values(
                last_heartbeat_at=now, reported_busy_slots=busy_slots,
                state="draining" if draining else "ready", unknown_since=None))
            rows = conn.execute(
                sa.select(sessions.c.id, sessions.c.cancel_requested_at,
                          sessions.c.delivered_at).where(
                    sessions.c.agent_id == agent, sessions.c.state == "running")).mappings()
            ours = {r["id"]: r for r in rows}
            cancel = sorted({s for s, r in ours.items() if r["cancel_requested_at"] is not None}
                            | {s for s in running if s not in ours})
            # Handed over long ago, yet not among what the agent says it runs (and it lists
            # all it runs): the hand-over was lost (the agent had given up waiting for that
            # answer). Failed now, its slot freed, rather than "running" forever.
            if len(running) == busy_slots:
                lost = sorted(s for s, r in ours.items() if s not in set(running)
                              and r["delivered_at"] is not None
                              and r["delivered_at"] <= now - LOST_DELIVERY_GRACE)
                for sid in lost:
                    _end_running(conn, sid, agent, now, state="failed",
                                 error=f"lost on its way to agent {agent}: it never started it")
            assigned = 0 if draining else _assign(conn, row["pool"], now)
            return HeartbeatReply(agent=_agent(conn, agent), cancel=cancel, assigned=assigned)

    def deregister(self, agent: str, reason: str = "left") -> Agent:
        """The agent is gone for good (it exited, or its pod was deleted): its running
        sessions are failed and it is no longer a worker of its pool. A retired agent stays
        retired (still refused if it registers)."""
        row = self._agent_row(agent)
        now = self.clock.now()
        with self.ledger.write() as conn:
            _lock_pool(conn, row["pool"])
            _fail_agent_sessions(conn, agent, now, f"agent {agent} {reason}")
            conn.execute(agents.update().where(agents.c.id == agent,
                                               agents.c.state.in_(_LIVE_AGENT))
                         .values(state="gone", gone_at=now, busy_slots=0))
            return _agent(conn, agent)

    def retire_if_idle(self, pool: str, pod: str) -> bool:
        """The autoscaler chose ``pod`` for removal: its agents leave the pool only if none
        holds a slot, in one locked step, so no session is assigned to an agent whose pod is
        about to be deleted. False: one became busy since the decision (keep the pod).
        Retired agents are refused from then on: told 404 or 410, they do not come back."""
        now = self.clock.now()
        with self.ledger.write() as conn:
            mine = [r for r in _lock_pool(conn, pool)
                    if r["pod_name"] == pod and r["state"] in _LIVE_AGENT]
            if any(r["busy_slots"] for r in mine):
                return False
            for r in mine:
                conn.execute(agents.update().where(agents.c.id == r["id"]).values(
                    state="retired", gone_at=now))
            return True

    def expire_unknown(self, now: datetime, heartbeat_timeout: timedelta,
                       give_up_after: timedelta | None = None) -> list[str]:
        """Agents with no heartbeat for ``heartbeat_timeout`` become ``unknown`` (since their
        last heartbeat). With ``give_up_after``: the running sessions of agents unknown that
        long are failed and their slots freed, ``busy_slots`` zeroed (the agent, should it
        come back, is told to stop them). Returns the agents that became unknown in this
        call."""
        stale = now - heartbeat_timeout
        lost = now - give_up_after if give_up_after is not None else None
        silent = sa.and_(agents.c.state.in_(("ready", "draining")),
                         agents.c.last_heartbeat_at <= stale)
        abandoned = sa.and_(agents.c.state == "unknown", agents.c.busy_slots > 0,
                            agents.c.unknown_since <= lost) if lost is not None else sa.false()
        with self.ledger.read() as conn:
            pools = sorted(conn.execute(sa.select(agents.c.pool).where(
                sa.or_(silent, abandoned)).distinct()).scalars())
        became: list[str] = []
        for pool in pools:
            with self.ledger.write() as conn:
                _lock_pool(conn, pool)
                ids = list(conn.execute(sa.select(agents.c.id).where(
                    agents.c.pool == pool, silent)).scalars())
                if ids:
                    conn.execute(agents.update().where(agents.c.id.in_(ids)).values(
                        state="unknown", unknown_since=agents.c.last_heartbeat_at))
                    became += ids
                if give_up_after is not None:
                    why = f"no heartbeat for {int(give_up_after.total_seconds())}s"
                    given_up = conn.execute(sa.select(agents.c.id).where(
                        agents.c.pool == pool, abandoned)).scalars().all()
                    for agent in given_up:
                        _fail_agent_sessions(conn, agent, now, f"agent {agent} lost: {why}")
                    if given_up:
                        # Nothing runs there as far as the broker knows: no slot is held, even
                        # if the count had drifted from the sessions (else the autoscaler would
                        # keep the unknown worker as busy forever, and the pool view count it).
                        conn.execute(agents.update().where(agents.c.id.in_(given_up))
                                     .values(busy_slots=0))
                        conn.execute(agents.update().where(agents.c.id.in_(given_up),
                                                           agents.c.idle_since.is_(None))
                                     .values(idle_since=now))
                    _assign(conn, pool, now)
        return sorted(became)

    def close_pool(self, pool: str) -> int:
        """The AgentPool is deleted: every live agent retired (refused if it registers
        again), running sessions failed, pending ones cancelled, its agent tokens revoked.
        Returns the sessions ended."""
        check_pool(pool)
        now = self.clock.now()
        with self.ledger.write() as conn:
            ids = [r["id"] for r in _lock_pool(conn, pool)]
            ended = 0
            for agent in ids:
                ended += _fail_agent_sessions(conn, agent, now, f"pool {pool} was deleted")
            conn.execute(agents.update().where(agents.c.pool == pool,
                                               agents.c.state.in_(_LIVE_AGENT))
                         .values(state="retired", gone_at=now, busy_slots=0))
            ended += conn.execute(sessions.update().where(
                sessions.c.pool == pool, sessions.c.state == "pending").values(
                state="cancelled", error=f"pool {pool} was deleted",
                finished_at=now)).rowcount
            revoke_pool_tokens(conn, pool, by="operator (pool deleted)", now=now)
            conn.execute(agent_pools.update().where(agent_pools.c.pool == pool).values(
                state="deleted", deleted_at=now))
            return ended

    # the pools the operator serves

    def serve_namespaces(self, namespaces: Sequence[str]) -> None:
        """The operator watches exactly these namespaces (what a refused session names)."""
        now = self.clock.now()
        with self.ledger.write() as conn:
            conn.execute(pool_namespaces.delete())
            if namespaces:
                conn.execute(pool_namespaces.insert(), [
                    {"namespace": ns, "seen_at": now} for ns in sorted(set(namespaces))])

    def served_namespaces(self) -> list[str]:
        with self.ledger.read() as conn:
            return sorted(conn.execute(sa.select(pool_namespaces.c.namespace)).scalars())

    def pool_open(self, pool: str) -> bool:
        """Whether the operator has recorded the AgentPool as open (sessions are taken)."""
        with self.ledger.read() as conn:
            return conn.execute(sa.select(agent_pools.c.state).where(
                agent_pools.c.pool == pool)).scalar_one_or_none() == "open"

    def observe_pool(self, pool: str, uid: str, desired: int, reason: str) -> None:
        """The operator's pass saw the AgentPool (a recreated one, new uid, opens afresh)."""
        check_pool(pool)
        now = self.clock.now()
        values = {"uid": uid, "state": "open", "desired_replicas": desired,
                  "reason": reason, "observed_at": now, "deleted_at": None}
        with self.ledger.write() as conn:
            old = conn.execute(sa.select(agent_pools.c.uid, agent_pools.c.state).where(
                agent_pools.c.pool == pool)).first()
            if old is None:
                conn.execute(agent_pools.insert().values(pool=pool, opened_at=now, **values))
            else:
                if (old.uid, old.state) != (uid, "open"):
                    values["opened_at"] = now
                conn.execute(agent_pools.update().where(agent_pools.c.pool == pool)
                             .values(**values))

    def agent_token(self, pool: str, current: str | None) -> str | None:
        """None when ``current`` (what the pool's Secret holds) is the pool's live agent
        token; else a new one, every earlier one revoked, for the operator to write there."""
        now = self.clock.now()
        if current is not None:
            try:
                who = authenticate(self.ledger, current, now)
            except Unauthenticated:
                pass
            else:
                if who.role == "agent" and who.scope == pool:
                    return None
        return mint_agent_token(self.ledger, pool, by="operator", now=now)

    # sessions

    def acquire(self, pool: str, command: Sequence[str], owner: str | None = None) -> Session:
        """Ask the pool for a slot to run ``command``: the session comes back running on an
        agent, or pending (it is assigned, in arrival order, when a slot frees). ``owner``:
        the id of the API token that asks (``owner_of``)."""
        check_pool(pool)
        argv = check_command(command)
        deadline = time.monotonic() + self.pool_grace
        while True:
            try:
                return self._acquire(pool, argv, owner)
            except _NotRecordedYet as exc:
                # Perhaps applied a moment ago: wait for the operator, outside any lock.
                if time.monotonic() >= deadline:
                    raise PoolNotFound(pool, f"{exc.why} (waited {self.pool_grace:g} s for "
                                             "the operator to record it)") from None
                time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))

    def _acquire(self, pool: str, argv: list[str], owner: str | None) -> Session:
        now = self.clock.now()
        sid = new_id("se")
        with self.ledger.write() as conn:
            if not any(r["state"] in _LIVE_AGENT for r in _lock_pool(conn, pool)):
                _check_served(conn, pool)
            conn.execute(sessions.insert().values(id=sid, pool=pool, state="pending",
                                                  command=argv, created_at=now,
                                                  client_seen_at=now, owner_token_id=owner))
            _assign(conn, pool, now)
            return _session(conn, sid)

    def session(self, session_id: str, *, seen: bool = False) -> Session:
        """The session; ``seen``: its client is asking (a pending session's client is still
        waiting for it, see ``expire_pending``)."""
        with self.ledger.read() as conn:
            found = _session(conn, session_id)
        if seen and found.state == "pending":  # a write only while it is pending
            with self.ledger.write() as conn:
                conn.execute(sessions.update().where(
                    sessions.c.id == session_id, sessions.c.state == "pending").values(
                    client_seen_at=self.clock.now()))
                return _session(conn, session_id)
        return found

    def owner_of(self, session_id: str) -> str | None:
        """The id of the token that started the session (None: from before owners);
        NotFound when there is no such session."""
        with self.ledger.read() as conn:
            owner = conn.execute(sa.select(sessions.c.owner_token_id).where(
                sessions.c.id == session_id)).first()
        if owner is None:
            raise NotFound("session", session_id, field="session")
        return owner[0]  # type: ignore[no-any-return]

    def expire_pending(self, now: datetime, client_gone_after: timedelta) -> list[str]:
        """Cancel pending sessions whose client has not asked for them (acquire, or a poll
        of the session) for ``client_gone_after``: nobody waits for them any more, and they
        would otherwise count as demand and run unwatched. Returns the sessions cancelled."""
        cutoff = now - client_gone_after
        with self.ledger.write() as conn:
            ids = sorted(conn.execute(sa.select(sessions.c.id).where(
                sessions.c.state == "pending", sessions.c.client_seen_at <= cutoff)).scalars())
            if ids:
                conn.execute(sessions.update().where(
                    sessions.c.id.in_(ids), sessions.c.state == "pending").values(
                    state="cancelled", finished_at=now,
                    error=f"its client stopped waiting (no poll for "
                          f"{int(client_gone_after.total_seconds())}s)"))
            return ids

    def release(self, session_id: str, exit_code: int | None = None, *,
                agent: str | None = None, error: str | None = None) -> Session:
        """End a session and free its slot.

        From its agent (``agent`` given): the command ended with ``exit_code`` (done, or
        cancelled if its client had released it), or could not run (``error``: failed).
        From its client (no ``agent``): a pending session is cancelled at once; a running
        one is marked for its agent to stop, and its slot is freed when the agent says the
        command ended. Releasing a finished session again changes nothing."""
        if exit_code is not None:
            check_count(exit_code, "exitCode", EXIT_CODES.start, EXIT_CODES.stop - 1)
        if agent is not None and exit_code is None and error is None:
            raise InvalidInput("exitCode", None, "an agent releasing a session must give the "
                               "command's exit code, or the error that kept it from running")
        now = self.clock.now()
        with self.ledger.write() as conn:
            found = _session(conn, session_id)
            _lock_pool(conn, found.pool)
            found = _session(conn, session_id)
            if found.state in TERMINAL:
                return found
            if agent is None:
                if found.state == "pending":
                    conn.execute(sessions.update().where(sessions.c.id == session_id).values(
                        state="cancelled", finished_at=now))
                elif found.cancel_requested_at is None:
                    conn.execute(sessions.update().where(sessions.c.id == session_id).values(
                        cancel_requested_at=now))
                return _session(conn, session_id)
            if found.agent_id != agent:
                raise Conflict(f"session {session_id} does not run on agent {agent}",
                               field="agentId", value=agent,
                               rule=f"must be the session's agent ({found.agent_id or 'none'})")
            if found.cancel_requested_at is not None:
                state = "cancelled"  # whatever stopped it, its client asked for that
            elif error is not None:
                state = "failed"
            else:
                state = "done"
            _end_running(conn, found.id, agent, now, state=state, exit_code=exit_code,
                         error=error)
            _assign(conn, found.pool, now)
            return _session(conn, session_id)

    def work(self, agent: str) -> list[Session]:
        """The sessions assigned to the agent that it has not been given yet; each is given
        once."""
        self._live_agent(agent)
        now = self.clock.now()
        with self.ledger.write() as conn:
            todo = list(conn.execute(sa.select(sessions.c.id).where(
                sessions.c.agent_id == agent, sessions.c.state == "running",
                sessions.c.delivered_at.is_(None)).order_by(sessions.c.assigned_at,
                                                            sessions.c.id)).scalars())
            given = []
            for sid in todo:
                if conn.execute(sessions.update().where(
                        sessions.c.id == sid, sessions.c.delivered_at.is_(None),
                        sessions.c.state == "running").values(delivered_at=now)).rowcount:
                    given.append(_session(conn, sid))
            return given

    def append_output(self, session_id: str, agent: str,
                      chunks: Sequence[tuple[str, str]]) -> int:
        """Store output the agent read from the session's command; returns the last id."""
        total = sum(len(data) for _, data in chunks)
        if total > MAX_OUTPUT_CHARS:
            raise InvalidInput("chunks", f"{total} characters",
                               f"must be at most {MAX_OUTPUT_CHARS} characters a post")
        for stream, _ in chunks:
            if stream not in ("stdout", "stderr"):
                raise InvalidInput("stream", stream, "must be stdout or stderr")
        with self.ledger.write() as conn:
            found = _session(conn, session_id)
            if found.agent_id != agent or found.state != "running":
                raise Conflict(f"session {session_id} is not running on agent {agent}",
                               field="agentId", value=agent,
                               rule="output comes from the agent running the session")
            last = 0
            for stream, data in chunks:
                if data:
                    key = conn.execute(session_output.insert().values(
                        session_id=session_id, stream=stream, data=data)).inserted_primary_key
                    last = int(key[0]) if key else last
            return last

    def output(self, session_id: str, after: int = 0, limit: int = 1000) -> Output:
        with self.ledger.read() as conn:
            found = _session(conn, session_id)
            rows = conn.execute(sa.select(session_output).where(
                session_output.c.session_id == session_id, session_output.c.id > after)
                .order_by(session_output.c.id).limit(limit)).mappings().all()
        chunks = [Chunk(id=r["id"], stream=r["stream"], data=r["data"]) for r in rows]
        # Output is stored before the agent releases the session, so once the session read
        # first is finished, a short read is the end of it.
        complete = found.state in TERMINAL and len(rows) < limit
        return Output(session=found, chunks=chunks, next_after=rows[-1]["id"] if rows else after,
                      complete=complete)

    # what the autoscaler and the operator read

    def workers(self, pool: str, now: datetime,
                heartbeat_timeout: timedelta = DEFAULT_HEARTBEAT_TIMEOUT) -> list[Worker]:
        """The pool's registered agents as the autoscaler's ``Worker``s (name: the pod name;
        created_at: when it registered). An agent past ``heartbeat_timeout`` is ``unknown``
        here even before ``expire_unknown`` has run. Pods that never registered are the
        operator's to add as ``starting``."""
        check_pool(pool)
        with self.ledger.read() as conn:
            rows = conn.execute(sa.select(agents).where(
                agents.c.pool == pool, agents.c.state.in_(_LIVE_AGENT))
                .order_by(agents.c.id)).mappings().all()
        out = []
        for r in rows:
            state = _WORKER_STATE[r["state"]]
            unknown_since = r["unknown_since"]
            if state != "unknown" and r["last_heartbeat_at"] <= now - heartbeat_timeout:
                state, unknown_since = "unknown", r["last_heartbeat_at"]
            out.append(Worker(name=r["pod_name"], created_at=r["registered_at"], state=state,
                              slots=r["slots"], busy_slots=r["busy_slots"],
                              idle_since=r["idle_since"] if r["busy_slots"] == 0 else None,
                              unknown_since=unknown_since))
        return out

    def pending_sessions(self, pool: str) -> int:
        check_pool(pool)
        with self.ledger.read() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(sessions).where(
                sessions.c.pool == pool, sessions.c.state == "pending")).scalar_one())

    def newest_pending(self) -> dict[str, datetime]:
        """Pool -> when its newest pending session was asked for (one grouped query): what
        the operator's pending-session watch polls."""
        with self.ledger.read() as conn:
            rows = conn.execute(sa.select(sessions.c.pool, sa.func.max(sessions.c.created_at))
                                .where(sessions.c.state == "pending")
                                .group_by(sessions.c.pool)).all()
        return {str(pool): newest for pool, newest in rows}

    def pool_view(self, pool: str) -> PoolView:
        check_pool(pool)
        with self.ledger.read() as conn:
            rows = conn.execute(sa.select(agents).where(
                agents.c.pool == pool, agents.c.state.in_(_LIVE_AGENT))
                .order_by(agents.c.id)).mappings().all()
            counts: dict[str, int] = dict(conn.execute(
                sa.select(sessions.c.state, sa.func.count()).where(
                    sessions.c.pool == pool, sessions.c.state.in_(("pending", "running")))
                .group_by(sessions.c.state)).all())
        listed = [Agent.model_validate(r) for r in rows]
        ready = [a for a in listed if a.state == "ready"]
        return PoolView(
            pool=pool, agents=listed, ready_agents=len(ready),
            slots=sum(a.slots for a in ready),
            idle_slots=sum(a.slots - a.busy_slots for a in ready),
            busy_slots=sum(a.busy_slots for a in listed),
            pending_sessions=int(counts.get("pending", 0)),
            running_sessions=int(counts.get("running", 0)))

    # helpers

    def pool_of_agent(self, agent: str) -> str:
        """The pool an agent id is (or was last) registered in; NotFound when never."""
        pool: str = self._agent_row(agent)["pool"]
        return pool

    def _agent_row(self, agent: str, conn: Connection | None = None) -> RowMapping:
        if conn is None:
            with self.ledger.read() as c:
                return self._agent_row(agent, c)
        row = conn.execute(sa.select(agents).where(agents.c.id == agent)).mappings().first()
        if row is None:
            raise NotFound("agent", agent, field="agent")
        return row

    def _live_agent(self, agent: str, conn: Connection | None = None) -> RowMapping:
        row = self._agent_row(agent, conn)
        if row["state"] == "retired":
            raise AgentRetired(agent, row["pool"])  # it must not register again
        if row["state"] == "gone":
            raise NotFound("agent", agent, field="agent")  # it must register again
        return row


def _lock_pool(conn: Connection, pool: str) -> list[RowMapping]:
    """Lock the pool's agent rows, in id order (the one lock order of every writer)."""
    return list(conn.execute(sa.select(agents).where(agents.c.pool == pool)
                             .order_by(agents.c.id).with_for_update()).mappings().all())


class _NotRecordedYet(PoolNotFound):
    """No AgentPool of that name in a namespace the operator watches: perhaps not yet."""

    def __init__(self, pool: str, why: str) -> None:
        super().__init__(pool, why)
        self.why = why


def _check_served(conn: Connection, pool: str) -> None:
    """A pool with no live agent must be an open AgentPool, else ``PoolNotFound`` saying why
    (deleted, in a namespace the operator does not watch, or not there at all)."""
    row = conn.execute(sa.select(agent_pools).where(agent_pools.c.pool == pool)
                       ).mappings().first()
    if row is not None and row["state"] == "open":
        return
    namespace = pool.partition("/")[0]
    served = sorted(conn.execute(sa.select(pool_namespaces.c.namespace)).scalars())
    if row is not None:
        why = (f"the AgentPool was deleted at {row['deleted_at']:%Y-%m-%d %H:%M:%S} UTC "
               "and no agent serves it")
    elif served and namespace not in served:
        why = (f"the operator watches namespace(s) {', '.join(served)}, not {namespace}: "
               f"add a kubernetes provisioner for {namespace} to its config, or use a pool "
               "in a watched namespace")
    elif served:
        raise _NotRecordedYet(pool, f"no AgentPool of that name in namespace {namespace} "
                                    f"(`kubectl get agentpools -n {namespace}`) and no agent "
                                    "registered in it")
    else:
        why = ("no operator has recorded any AgentPool and no agent is registered in it: "
               "start agents for it, or run the operator (`anycloud serve "
               "--operator-config`)")
    raise PoolNotFound(pool, why)


def _assign(conn: Connection, pool: str, now: datetime) -> int:
    """Give the pool's oldest pending sessions the free slots of its ready agents (the pool's
    agent rows are locked by the caller); returns how many were given one. Fills the busiest
    agent with room first, so that whole agents stay idle and can be scaled down."""
    free = {r["id"]: [r["busy_slots"], r["slots"]] for r in conn.execute(
        sa.select(agents).where(agents.c.pool == pool, agents.c.state == "ready",
                                agents.c.busy_slots < agents.c.slots)).mappings()}
    room = sum(slots - busy for busy, slots in free.values())
    if room <= 0:
        return 0
    pending = list(conn.execute(sa.select(sessions.c.id).where(
        sessions.c.pool == pool, sessions.c.state == "pending")
        .order_by(sessions.c.created_at, sessions.c.id).limit(room)).scalars())
    assigned = 0
    for sid in pending:
        open_agents = [a for a, (busy, slots) in free.items() if busy < slots]
        if not open_agents:
            break
        agent = min(open_agents, key=lambda a: (-free[a][0], a))
        taken = conn.execute(sessions.update().where(
            sessions.c.id == sid, sessions.c.state == "pending").values(
            state="running", agent_id=agent, assigned_at=now)).rowcount
        if not taken:
            continue  # cancelled meanwhile
        held = conn.execute(agents.update().where(
            agents.c.id == agent, agents.c.busy_slots < agents.c.slots).values(
            busy_slots=agents.c.busy_slots + 1, idle_since=None)).rowcount
        if not held:  # cannot happen with the rows locked; never over-allocate if it does
            raise RuntimeError(f"agent {agent} has no free slot although it was locked")
        free[agent][0] += 1
        assigned += 1
    return assigned


def _end_running(conn: Connection, session_id: str, agent: str, now: datetime, *, state: str,
                 exit_code: int | None = None, error: str | None = None) -> bool:
    ended = conn.execute(sessions.update().where(
        sessions.c.id == session_id, sessions.c.state == "running").values(
        state=state, exit_code=exit_code, error=error, finished_at=now)).rowcount
    if ended:
        conn.execute(agents.update().where(agents.c.id == agent, agents.c.busy_slots > 0)
                     .values(busy_slots=agents.c.busy_slots - 1))
        conn.execute(agents.update().where(agents.c.id == agent, agents.c.busy_slots == 0,
                                           agents.c.idle_since.is_(None))
                     .values(idle_since=now))
    return bool(ended)


def _fail_agent_sessions(conn: Connection, agent: str, now: datetime, error: str) -> int:
    ids = list(conn.execute(sa.select(sessions.c.id).where(
        sessions.c.agent_id == agent, sessions.c.state == "running")).scalars())
    for sid in ids:
        _end_running(conn, sid, agent, now, state="failed", error=error)
    return len(ids)


def _agent(conn: Connection, agent: str) -> Agent:
    row = conn.execute(sa.select(agents).where(agents.c.id == agent)).mappings().one()
    return Agent.model_validate(row)


def _session(conn: Connection, session_id: str) -> Session:
    row = conn.execute(sa.select(sessions).where(sessions.c.id == session_id)).mappings().first()
    if row is None:
        raise NotFound("session", session_id, field="session")
    data: dict[str, Any] = dict(row)
    if row["state"] == "pending":
        data["ahead"] = conn.execute(sa.select(sa.func.count()).select_from(sessions).where(
            sessions.c.pool == row["pool"], sessions.c.state == "pending",
            sa.or_(sessions.c.created_at < row["created_at"],
                   sa.and_(sessions.c.created_at == row["created_at"],
                           sessions.c.id < row["id"])))).scalar_one()
    return Session.model_validate(data)
