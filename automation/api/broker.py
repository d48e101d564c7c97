"""The agent broker's routes over the registry: agents register, heartbeat and take work;
sessions acquire a slot, stream output and release it. The API serves them (``create_api``),
and so does the broker on its own (``create_app``, ``anycloud broker``): the same routes, gates
and errors either way.

Every body and answer is camelCase JSON; refusals are the API's problem+json
(``automation.api.problems``): 422 for a body or query of the wrong shape, 400 for a rule of
the registry (InvalidInput), 404 for an unknown agent or session, 409 for a state that refuses
the request (Conflict), 410 (code AGENT_RETIRED) for an agent the operator retired: its pod
is being deleted, or its pool was, and it may not register again under that id.

Every endpoint but ``/v1/healthz`` takes ``Authorization: Bearer <token>`` (issue 20): 401
(code UNAUTHENTICATED) with no token or one that is malformed, unknown, revoked or expired;
403 (PERMISSION_DENIED) for a role the route does not take, or a token scoped to an org or a
project (the broker is the whole control plane's: ``automation.api.security``). The agent
endpoints take only the agent token of the pool concerned (the operator mints one per
AgentPool into a Secret its pods read), so an agent of one pool can neither register in, take
work from, post output to nor read another; an agent or session id of another pool is
answered 404, exactly as a missing one (issue 52: its existence and pool are not told).
Sessions need a member token (or admin), and a session is its starter's: only the token that
started it, or an admin, reads it, reads its output or cancels it; anyone else is told 404, as
for a missing session. The pool view takes a viewer's token, or the pool's own agent's. Each
route's gate (``automation.api.security``) says which.

Long polls (``?wait=S``, at most 60 s): the handler re-reads the ledger when this process
changed something and at least every ``poll_interval`` seconds (another replica, or another
process, may have), and answers as soon as there is news or the wait is over. Registry
calls are blocking (SQLAlchemy): they run in worker threads, never on the event loop.

Endpoints:
- ``POST /v1/agents`` {pool, agentId, pod, slots}: register (again), ready with free slots.
  410: retired, never again under this id.
- ``POST /v1/agents/{id}/heartbeat`` {busySlots, running, draining}: alive; the answer lists
  sessions the agent must stop (``cancel``). 404: register again. 410: retired, stop.
- ``GET /v1/agents/{id}/work?wait=S``: sessions assigned to the agent, each given once.
- ``DELETE /v1/agents/{id}``: the agent leaves (its running sessions fail).
- ``POST /v1/sessions?wait=S`` {pool, command}: acquire; waits up to S while pending.
- ``GET /v1/sessions/{id}?wait=S``: the session; waits up to S while it is pending. The
  waiting client's polls keep a pending session wanted: one whose client has not asked for
  ``client_gone_after`` (90 s) is cancelled.
- ``POST /v1/sessions/{id}/output`` {agentId, chunks: [{stream, data}]}: the agent's output.
- ``GET /v1/sessions/{id}/output?after=N&wait=S``: output after chunk N; waits for news.
- ``POST /v1/sessions/{id}/release`` {agentId?, exitCode?, error?}: from the agent, the
  command ended (or could not run); from the client (no agentId), cancel.
- ``GET /v1/pools/{namespace}/{name}``: agents, idle/busy slots, pending sessions.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Annotated, Any, Literal, TypeVar

from fastapi import FastAPI, Query
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.concurrency import run_in_threadpool
from starlette.routing import BaseRoute

from automation import serving
from automation.agentpools.registry import DEFAULT_HEARTBEAT_TIMEOUT, Registry
from automation.agentpools.wire import (
    MAX_SLOTS,
    Agent,
    HeartbeatReply,
    Output,
    PoolView,
    Session,
)
from automation.api import limits, problems
from automation.api.front_door import FrontDoor
from automation.api.limits import Limiter
from automation.api.routers import v1
from automation.api.security import (
    PREFIX,
    PoolAgent,
    PoolAgentOrMember,
    PoolReader,
    Public,
    SessionClient,
    route_access,
)
from automation.auth import tokens
from automation.auth.roles import Access, Principal, authorize
from automation.errors import NotFound

T = TypeVar("T")
MAX_WAIT = 60.0
INT32 = 2**31 - 1  # what the ledger's integer columns hold: larger is a 422, not a 500
Wait = Annotated[float, Query(ge=0, le=MAX_WAIT, description="Seconds to wait for news.")]


class _Body(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True,
                              validate_by_alias=True, extra="forbid")


class RegisterBody(_Body):
    pool: str
    agent_id: str
    pod: str | None = None  # default: the agent id (agents are named after their pods)
    slots: int = Field(1, ge=1, le=MAX_SLOTS)


class HeartbeatBody(_Body):
    busy_slots: int = Field(ge=0, le=MAX_SLOTS)
    running: list[str] = []
    draining: bool = False


class AcquireBody(_Body):
    pool: str
    command: list[str] = Field(min_length=1)


class ChunkBody(_Body):
    stream: Literal["stdout", "stderr"]
    data: str


class OutputBody(_Body):
    agent_id: str
    chunks: list[ChunkBody]


class ReleaseBody(_Body):
    agent_id: str | None = None
    exit_code: int | None = Field(default=None, ge=-INT32 - 1, le=INT32)
    error: str | None = None


class Work(BaseModel):
    """The sessions newly assigned to an agent (each given once)."""

    sessions: list[Session]


class Appended(BaseModel):
    """The number of the session's last output chunk, after the agent's were appended."""

    last: int


class _Changes:
    """Wakes this process's long polls when one of its own requests changed something."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def bump(self) -> None:
        self.event.set()
        self.event = asyncio.Event()


class Broker:
    """The broker's routes over ``registry``, and its expiry loop (``running``): every
    ``expire_every`` seconds (None: never, for tests that call ``expire_unknown`` themselves),
    agents silent for ``heartbeat_timeout`` become unknown, the sessions of agents unknown
    for ``give_up_after`` are failed, and pending sessions whose client has not polled for
    ``client_gone_after`` (above the longest ``wait``, 60 s) are cancelled."""

    def __init__(self, registry: Registry, *,
                 heartbeat_timeout: timedelta = DEFAULT_HEARTBEAT_TIMEOUT,
                 give_up_after: timedelta | None = timedelta(minutes=5),
                 client_gone_after: timedelta = timedelta(seconds=90),
                 expire_every: float | None = 5.0, poll_interval: float = 0.5) -> None:
        self.registry = registry
        self.heartbeat_timeout = heartbeat_timeout
        self.give_up_after = give_up_after
        self.client_gone_after = client_gone_after
        self.expire_every = expire_every
        self.poll_interval = poll_interval
        self._changes: _Changes | None = None

    def principal_of(self, authorization: str | None) -> Principal:
        """The caller a request's Authorization header names (``Unauthenticated`` if none)."""
        return tokens.principal(self.registry.ledger, authorization, self.registry.clock.now())

    @property
    def changes(self) -> _Changes:
        # Made on first use: an asyncio.Event belongs to the loop that runs the app.
        if self._changes is None:
            self._changes = _Changes()
        return self._changes

    async def _expire_loop(self, every: float) -> None:
        registry = self.registry
        while True:
            await asyncio.sleep(every)
            try:
                now = registry.clock.now()
                became = await run_in_threadpool(
                    registry.expire_unknown, now, self.heartbeat_timeout, self.give_up_after)
                dropped = await run_in_threadpool(registry.expire_pending, now,
                                                  self.client_gone_after)
            except Exception:  # the ledger blinked: the next round tries again
                continue
            if became or dropped:
                self.changes.bump()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The expiry loop, for the lifespan of the app that serves the routes."""
        every = self.expire_every
        task = asyncio.create_task(self._expire_loop(every)) if every else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def routes(self) -> list[BaseRoute]:
        registry = self.registry
        router = v1("agent broker")

        async def call(fn: Callable[..., T], *args: Any, changed: bool = False, **kw: Any) -> T:
            result = await run_in_threadpool(fn, *args, **kw)
            if changed:
                self.changes.bump()
            return result

        async def until(read: Callable[[], T], done: Callable[[T], bool], wait: float) -> T:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait
            while True:
                event = self.changes.event  # taken before the read: a change after it wakes us
                result = await run_in_threadpool(read)
                left = deadline - loop.time()
                if done(result) or left <= 0:
                    return result
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), timeout=min(self.poll_interval, left))

        # Out of its pool an agent is told 404, as for an id that does not exist: a 403
        # would tell it that the agent or session is there, and in which pool.

        def agents_only(who: Principal) -> None:
            if who.role != "agent":  # refused before anything is read, naming its role
                authorize(who, Access.AGENT)

        async def agent_of_agent(who: Principal, agent_id: str) -> None:
            """The caller is the agent token of the pool ``agent_id`` is registered in."""
            agents_only(who)
            if await call(registry.pool_of_agent, agent_id) != who.scope:
                raise NotFound("agent", agent_id, field="agent")

        async def agent_of_session(who: Principal, session_id: str) -> None:
            """The caller is the agent token of the session's pool."""
            agents_only(who)
            found: Session = await call(registry.session, session_id)
            if found.pool != who.scope:
                raise NotFound("session", session_id, field="session")

        async def client_of_session(who: Principal, session_id: str) -> None:
            """The caller started the session, or is an admin; anyone else is told 404, as
            for a session that does not exist (sessions from before owners: admins only)."""
            authorize(who, Access.WRITE)
            owner = await call(registry.owner_of, session_id)
            if who.role != "admin" and (owner is None or owner != who.token_id):
                raise NotFound("session", session_id, field="session")

        @router.post("/agents", response_model=Agent)
        async def register(body: RegisterBody, who: PoolAgent) -> Agent:
            authorize(who, Access.AGENT, pool=body.pool)
            return await call(registry.register, body.pool, body.agent_id,
                              body.pod or body.agent_id, body.slots, changed=True)

        @router.post("/agents/{agent_id}/heartbeat", response_model=HeartbeatReply)
        async def heartbeat(agent_id: str, body: HeartbeatBody,
                            who: PoolAgent) -> HeartbeatReply:
            await agent_of_agent(who, agent_id)
            reply = await call(registry.heartbeat, agent_id, body.busy_slots, body.running,
                               body.draining)
            if reply.assigned:  # heartbeats come often: wake the waiters only for news
                self.changes.bump()
            return reply

        @router.get("/agents/{agent_id}/work", response_model=Work)
        async def work(agent_id: str, who: PoolAgent, wait: Wait = 0) -> Work:
            await agent_of_agent(who, agent_id)
            return Work(sessions=await until(lambda: registry.work(agent_id), bool, wait))

        @router.delete("/agents/{agent_id}", response_model=Agent)
        async def deregister(agent_id: str, who: PoolAgent) -> Agent:
            await agent_of_agent(who, agent_id)
            return await call(registry.deregister, agent_id, changed=True)

        @router.post("/sessions", response_model=Session, status_code=201)
        async def acquire(body: AcquireBody, who: SessionClient, wait: Wait = 0) -> Session:
            session = await call(registry.acquire, body.pool, body.command,
                                 owner=who.token_id, changed=True)
            if session.state == "pending" and wait:
                session = await until(lambda: registry.session(session.id),
                                      lambda s: s.state != "pending", wait)
            return session

        @router.get("/sessions/{session_id}", response_model=Session)
        async def get_session(session_id: str, who: SessionClient,
                              wait: Wait = 0) -> Session:
            await client_of_session(who, session_id)
            # Its client asking keeps a pending session wanted (once a request, not per poll).
            session: Session = await call(registry.session, session_id, seen=True)
            if session.state == "pending" and wait:
                session = await until(lambda: registry.session(session_id),
                                      lambda s: s.state != "pending", wait)
            return session

        @router.post("/sessions/{session_id}/output", response_model=Appended)
        async def post_output(session_id: str, body: OutputBody,
                              who: PoolAgent) -> Appended:
            await agent_of_session(who, session_id)
            last = await call(registry.append_output, session_id, body.agent_id,
                              [(c.stream, c.data) for c in body.chunks], changed=True)
            return Appended(last=last)

        @router.get("/sessions/{session_id}/output", response_model=Output)
        async def get_output(session_id: str, who: SessionClient,
                             after: Annotated[int, Query(ge=0, le=INT32)] = 0,
                             wait: Wait = 0) -> Output:
            await client_of_session(who, session_id)
            return await until(lambda: registry.output(session_id, after),
                               lambda o: bool(o.chunks) or o.complete, wait)

        @router.post("/sessions/{session_id}/release", response_model=Session)
        async def release(session_id: str, who: PoolAgentOrMember,
                          body: ReleaseBody | None = None) -> Session:
            """From the agent that ran it (agentId), the command ended; from its client (no
            agentId: the token that started it, or an admin), cancel."""
            body = body or ReleaseBody()
            if body.agent_id is not None:
                await agent_of_session(who, session_id)
            else:
                await client_of_session(who, session_id)
            return await call(registry.release, session_id, body.exit_code,
                              agent=body.agent_id, error=body.error, changed=True)

        @router.get("/pools/{namespace}/{name}", response_model=PoolView)
        async def pool(namespace: str, name: str, _: PoolReader) -> PoolView:
            return await call(registry.pool_view, f"{namespace}/{name}")

        return list(router.routes)


def create_app(registry: Registry, limiter: Limiter | Literal["env"] | None = "env",
               **settings: Any) -> FastAPI:
    """The broker on its own (``anycloud broker``): its routes and the health probe, no OpenAPI
    page (every route but the probe is closed), behind the API's front door (its rate and
    body limits, ANYCLOUD_API_RATE and ANYCLOUD_API_MAX_BODY; ``limiter`` as
    ``create_api``'s). ``settings``: ``Broker``'s."""
    broker = Broker(registry, **settings)
    app = FastAPI(title="anycloud broker", version="1", openapi_url=None, docs_url=None,
                  redoc_url=None, lifespan=lambda _: broker.running())
    problems.install(app)
    app.state.principal_of = broker.principal_of

    @app.get(f"{PREFIX}/healthz")
    async def healthz(_: Public) -> dict[str, bool]:
        return {"ok": True}

    app.router.routes.extend(broker.routes())
    app.add_middleware(FrontDoor, api=app,
                       bucket=limits.from_env(os.environ) if limiter == "env" else limiter,
                       max_body=limits.max_body_from_env(os.environ))
    app.state.route_access = route_access(app)
    return app


def serve(app: FastAPI, listen: str, on_ready: Callable[[str], None]) -> None:
    """Run the broker until SIGINT or SIGTERM (``automation.serving``)."""
    serving.serve_foreground(app, listen, on_ready)


class BrokerThread(serving.ServerThread):
    """The broker served from a thread of another command (``anycloud serve`` beside the
    operator, over the same registry)."""


parse_listen = serving.parse_listen
