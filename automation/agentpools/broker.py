"""The broker's HTTP API (FastAPI) over the registry: agents register, heartbeat and take
work; sessions acquire a slot, stream output and release it.

Every body and answer is camelCase JSON. Refusals: ``{"error": {code, message, field,
value, rule}}`` with 422 for a body or query of the wrong shape, 400 for a rule of the
registry (InvalidInput), 404 for an unknown agent or session, 409 for a state that refuses
the request (Conflict), 410 (code AGENT_RETIRED) for an agent the operator retired: its pod
is being deleted, or its pool was, and it may not register again under that id.

Every endpoint but ``/v1/healthz`` takes ``Authorization: Bearer <token>`` (issue 20): 401
(code UNAUTHENTICATED) with no token or one that is malformed, unknown, revoked or expired;
403 (PERMISSION_DENIED) for a role the route does not take. The agent endpoints take only the
agent token of the pool concerned (the operator mints one per AgentPool into a Secret its pods
read), so an agent of one pool can neither register in, take work from, post output to nor
read another; sessions need a member token (or admin); the pool view a viewer's, or the
pool's own agent's. ``ROUTE_ACCESS`` says which, route by route.

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
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.concurrency import run_in_threadpool

from automation import serving
from automation.agentpools.registry import DEFAULT_HEARTBEAT_TIMEOUT, Registry
from automation.agentpools.wire import MAX_SLOTS, Session
from automation.auth import tokens
from automation.auth.roles import Access, Principal, authorize
from automation.errors import AnycloudError, http_status

T = TypeVar("T")
MAX_WAIT = 60.0
# Who may call each route: (method, path) -> the accesses that open it. The pool a request
# concerns is checked in the handler (from the body, the agent or the session). A route
# missing here is refused by the auth-matrix test.
ROUTE_ACCESS: dict[tuple[str, str], frozenset[Access]] = {
    ("GET", "/v1/healthz"): frozenset(),  # open: a liveness probe, it answers {"ok": true}
    ("POST", "/v1/agents"): frozenset({Access.AGENT}),
    ("POST", "/v1/agents/{agent_id}/heartbeat"): frozenset({Access.AGENT}),
    ("GET", "/v1/agents/{agent_id}/work"): frozenset({Access.AGENT}),
    ("DELETE", "/v1/agents/{agent_id}"): frozenset({Access.AGENT}),
    ("POST", "/v1/sessions"): frozenset({Access.WRITE}),
    ("GET", "/v1/sessions/{session_id}"): frozenset({Access.WRITE}),
    ("POST", "/v1/sessions/{session_id}/output"): frozenset({Access.AGENT}),
    ("GET", "/v1/sessions/{session_id}/output"): frozenset({Access.WRITE}),
    # The agent that ran it (agentId in the body), or a member cancelling it (no agentId).
    ("POST", "/v1/sessions/{session_id}/release"): frozenset({Access.AGENT, Access.WRITE}),
    ("GET", "/v1/pools/{namespace}/{name}"): frozenset({Access.READ}),
}
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
    busy_slots: int = Field(ge=0)
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
    exit_code: int | None = None
    error: str | None = None


def _caller(request: Request,
            authorization: Annotated[str | None, Header()] = None) -> Principal:
    # A plain function: FastAPI runs it in a worker thread (it reads the ledger).
    registry: Registry = request.app.state.registry
    return tokens.principal(registry.ledger, authorization, registry.clock.now())


Caller = Annotated[Principal, Depends(_caller)]


class _Changes:
    """Wakes this process's long polls when one of its own requests changed something."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def bump(self) -> None:
        self.event.set()
        self.event = asyncio.Event()


def _json(model: BaseModel | dict[str, Any], status: int = 200) -> JSONResponse:
    content = model if isinstance(model, dict) else model.model_dump(mode="json")
    return JSONResponse(content, status_code=status)


def create_app(registry: Registry, *, heartbeat_timeout: timedelta = DEFAULT_HEARTBEAT_TIMEOUT,
               give_up_after: timedelta | None = timedelta(minutes=5),
               client_gone_after: timedelta = timedelta(seconds=90),
               expire_every: float | None = 5.0, poll_interval: float = 0.5) -> FastAPI:
    """The broker app over ``registry``. ``expire_every`` seconds (None: never, for tests
    that call ``expire_unknown`` themselves), agents silent for ``heartbeat_timeout`` become
    unknown, the sessions of agents unknown for ``give_up_after`` are failed, and pending
    sessions whose client has not polled for ``client_gone_after`` (above the longest
    ``wait``, 60 s) are cancelled."""
    changes: dict[str, _Changes] = {}

    def _changes() -> _Changes:
        # Made on first use: an asyncio.Event belongs to the loop that runs the app.
        if "c" not in changes:
            changes["c"] = _Changes()
        return changes["c"]

    async def expire_loop() -> None:
        assert expire_every is not None
        while True:
            await asyncio.sleep(expire_every)
            try:
                now = registry.clock.now()
                became = await run_in_threadpool(
                    registry.expire_unknown, now, heartbeat_timeout, give_up_after)
                dropped = await run_in_threadpool(registry.expire_pending, now,
                                                  client_gone_after)
            except Exception:  # the ledger blinked: the next round tries again
                continue
            if became or dropped:
                _changes().bump()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(expire_loop()) if expire_every else None
        try:
            yield
        finally:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # No OpenAPI page or docs: every route but the health probe is closed.
    app = FastAPI(title="anycloud broker", version="1", lifespan=lifespan, openapi_url=None,
                  docs_url=None, redoc_url=None)

    @app.exception_handler(AnycloudError)
    async def _domain_error(_: Request, err: AnycloudError) -> JSONResponse:
        status = http_status(err)
        headers = {"WWW-Authenticate": 'Bearer realm="anycloud"'} if status == 401 else None
        return JSONResponse({"error": err.to_dict()}, status_code=status, headers=headers)

    async def as_agent_of_agent(who: Principal, agent_id: str) -> None:
        """The caller is the agent token of the pool ``agent_id`` is registered in."""
        if who.role != "agent":
            authorize(who, Access.AGENT)  # refused before anything is looked up
        authorize(who, Access.AGENT, pool=await call(registry.pool_of_agent, agent_id))

    async def as_agent_of_session(who: Principal, session_id: str) -> None:
        if who.role != "agent":
            authorize(who, Access.AGENT)
        found: Session = await call(registry.session, session_id)
        authorize(who, Access.AGENT, pool=found.pool)

    @app.exception_handler(RequestValidationError)
    async def _shape_error(_: Request, err: RequestValidationError) -> JSONResponse:
        problems = []
        for e in err.errors():
            loc = [str(p) for p in e.get("loc", ()) if p not in ("body", "query", "path")]
            field = ".".join(loc) or "body"
            value = e.get("input")
            problems.append({"code": "INVALID_ARGUMENT", "field": field,
                             "value": value if _plain(value) else None, "rule": e["msg"],
                             "message": f"{field}: {e['msg']}"})
        return JSONResponse({"error": problems[0], "problems": problems}, status_code=422)

    async def call(fn: Callable[..., T], *args: Any, changed: bool = False, **kw: Any) -> T:
        result = await run_in_threadpool(fn, *args, **kw)
        if changed:
            _changes().bump()
        return result

    async def until(read: Callable[[], T], done: Callable[[T], bool], wait: float) -> T:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            event = _changes().event  # taken before the read: a change after it wakes us
            result = await run_in_threadpool(read)
            left = deadline - loop.time()
            if done(result) or left <= 0:
                return result
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=min(poll_interval, left))

    @app.get("/v1/healthz")
    async def healthz() -> dict[str, bool]:
        return {"ok": True}

    @app.post("/v1/agents")
    async def register(body: RegisterBody, who: Caller) -> JSONResponse:
        authorize(who, Access.AGENT, pool=body.pool)
        agent = await call(registry.register, body.pool, body.agent_id,
                           body.pod or body.agent_id, body.slots, changed=True)
        return _json(agent)

    @app.post("/v1/agents/{agent_id}/heartbeat")
    async def heartbeat(agent_id: str, body: HeartbeatBody, who: Caller) -> JSONResponse:
        await as_agent_of_agent(who, agent_id)
        reply = await call(registry.heartbeat, agent_id, body.busy_slots, body.running,
                           body.draining)
        if reply.assigned:  # heartbeats come often: wake the waiters only for news
            _changes().bump()
        return _json(reply)

    @app.get("/v1/agents/{agent_id}/work")
    async def work(agent_id: str, who: Caller, wait: Wait = 0) -> JSONResponse:
        await as_agent_of_agent(who, agent_id)
        given = await until(lambda: registry.work(agent_id), bool, wait)
        return _json({"sessions": [s.model_dump(mode="json") for s in given]})

    @app.delete("/v1/agents/{agent_id}")
    async def deregister(agent_id: str, who: Caller) -> JSONResponse:
        await as_agent_of_agent(who, agent_id)
        return _json(await call(registry.deregister, agent_id, changed=True))

    @app.post("/v1/sessions")
    async def acquire(body: AcquireBody, who: Caller, wait: Wait = 0) -> JSONResponse:
        authorize(who, Access.WRITE)
        session = await call(registry.acquire, body.pool, body.command, changed=True)
        if session.state == "pending" and wait:
            session = await until(lambda: registry.session(session.id),
                                  lambda s: s.state != "pending", wait)
        return _json(session, 201)

    @app.get("/v1/sessions/{session_id}")
    async def get_session(session_id: str, who: Caller, wait: Wait = 0) -> JSONResponse:
        authorize(who, Access.WRITE)
        # Its client asking keeps a pending session wanted (once a request, not per poll).
        session: Session = await call(registry.session, session_id, seen=True)
        if session.state == "pending" and wait:
            session = await until(lambda: registry.session(session_id),
                                  lambda s: s.state != "pending", wait)
        return _json(session)

    @app.post("/v1/sessions/{session_id}/output")
    async def post_output(session_id: str, body: OutputBody, who: Caller) -> JSONResponse:
        await as_agent_of_session(who, session_id)
        last = await call(registry.append_output, session_id, body.agent_id,
                          [(c.stream, c.data) for c in body.chunks], changed=True)
        return _json({"last": last})

    @app.get("/v1/sessions/{session_id}/output")
    async def get_output(session_id: str, who: Caller,
                         after: Annotated[int, Query(ge=0)] = 0,
                         wait: Wait = 0) -> JSONResponse:
        authorize(who, Access.WRITE)
        out = await until(lambda: registry.output(session_id, after),
                          lambda o: bool(o.chunks) or o.complete, wait)
        return _json(out)

    @app.post("/v1/sessions/{session_id}/release")
    async def release(session_id: str, who: Caller,
                      body: ReleaseBody | None = None) -> JSONResponse:
        body = body or ReleaseBody()
        if body.agent_id is not None:
            await as_agent_of_session(who, session_id)
        else:
            authorize(who, Access.WRITE)
        session = await call(registry.release, session_id, body.exit_code,
                             agent=body.agent_id, error=body.error, changed=True)
        return _json(session)

    @app.get("/v1/pools/{namespace}/{name}")
    async def pool(namespace: str, name: str, who: Caller) -> JSONResponse:
        authorize(who, Access.READ, pool=f"{namespace}/{name}")
        return _json(await call(registry.pool_view, f"{namespace}/{name}"))

    app.state.registry = registry
    return app


def serve(app: FastAPI, listen: str, on_ready: Callable[[str], None]) -> None:
    """Run the broker until SIGINT or SIGTERM (``automation.serving``)."""
    serving.serve_foreground(app, listen, on_ready)


class BrokerThread(serving.ServerThread):
    """The broker served from a thread of another command (``anycloud serve`` beside the
    operator, over the same registry)."""


parse_listen = serving.parse_listen


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, list, dict))
