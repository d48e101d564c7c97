"""The gate of every route: the caller's token, then the role the route needs.

Each route takes one of ``Reader``, ``Member``, ``Admin`` (or ``Public``), ``FleetReader``
for the whole control plane's views, or for the agent broker ``PoolAgent``, ``SessionClient``,
``PoolAgentOrMember`` and ``PoolReader``, as a parameter; the dependency
it names carries its access, which is how ``route_access`` reads the route table (and a route
with none refuses to start). The gate runs before the request's body is read or validated, so a
refused caller learns nothing about the route's input.

An agent token acts on one AgentPool only. ``PoolReader`` reads the pool from the path; the
agent gates let an agent through to the handler, which checks the pool the request concerns
(in its body, or the agent's or session's pool in the ledger) before it does anything.

The agent broker is the whole control plane's, never one org's (issue 52): AgentPools have
no owning org, and an agent runs any member's command. So every broker gate
(``_broker_gate``: ``PoolAgent``, ``SessionClient``, ``PoolAgentOrMember``, ``PoolReader``)
is a ``fleet`` gate, and a token scoped to an org or a project reaches none of its routes
(403, naming the scope). This is the one place that decides it; a test tries every broker
route with a scoped token."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Request
from fastapi.routing import APIRoute

from automation.auth.roles import Access, Principal, authorize

PUBLIC = "public"
PREFIX = "/v1"
# What a route asks for: one access, any of several (the agent broker's), or nothing.
RouteAccess = Access | frozenset[Access] | str
_WEAKEST_FIRST = (Access.READ, Access.WRITE, Access.ADMIN)


def _gate(access: Access | frozenset[Access], *, pool_in_path: bool = False,
          fleet: bool = False) -> Callable[..., Principal]:
    needs = access if isinstance(access, frozenset) else frozenset({access})
    # Asked of a caller that is not let through as an agent: the weakest role that opens
    # the route (an agent-only route: AGENT, which refuses every other role).
    asked = next((a for a in _WEAKEST_FIRST if a in needs), Access.AGENT)

    def caller(request: Request,
               authorization: Annotated[str | None, Header()] = None) -> Principal:
        # A plain function: FastAPI runs it in a worker thread (it reads the ledger), unless
        # the front door (automation.api.front_door) already resolved the token.
        who: Principal = (getattr(request.state, "authenticated", None)
                          or request.app.state.principal_of(authorization))
        if not (who.role == "agent" and Access.AGENT in needs):
            params = request.path_params
            pool = f"{params['namespace']}/{params['name']}" if pool_in_path else None
            authorize(who, asked, pool=pool, fleet=fleet or Access.AGENT in needs)
        request.state.principal = who
        return who

    caller.access = access  # type: ignore[attr-defined]
    caller.fleet = fleet  # type: ignore[attr-defined]  # read by the broker's auth tests
    return caller


def _broker_gate(access: Access | frozenset[Access], *,
                 pool_in_path: bool = False) -> Callable[..., Principal]:
    """A gate of the agent broker: always ``fleet`` (the module docstring says why)."""
    return _gate(access, pool_in_path=pool_in_path, fleet=True)


def _public() -> None:
    return None


_public.access = PUBLIC  # type: ignore[attr-defined]

Reader = Annotated[Principal, Depends(_gate(Access.READ))]
Member = Annotated[Principal, Depends(_gate(Access.WRITE))]
Admin = Annotated[Principal, Depends(_gate(Access.ADMIN))]
Public = Annotated[None, Depends(_public)]
# The agent broker: the agent of the pool concerned (checked by the handler) ...
PoolAgent = Annotated[Principal, Depends(_broker_gate(Access.AGENT))]
# ... a session's client: an unscoped member or admin (the handler checks the owner) ...
SessionClient = Annotated[Principal, Depends(_broker_gate(Access.WRITE))]
# ... either (an agent releasing a session it ran, a client cancelling its own) ...
PoolAgentOrMember = Annotated[Principal, Depends(_broker_gate(
    frozenset({Access.AGENT, Access.WRITE})))]
# ... and a reader of /v1/pools/{namespace}/{name}: a viewer, or that pool's own agent.
PoolReader = Annotated[Principal, Depends(_broker_gate(Access.READ, pool_in_path=True))]
# A reader of the whole control plane (``/metrics``): not a token scoped to one org.
FleetReader = Annotated[Principal, Depends(_gate(Access.READ, fleet=True))]


def access_of(dependencies: list[Any]) -> RouteAccess | None:
    """The access a route's dependencies ask for (None: the route has no gate)."""
    for dep in dependencies:
        found = getattr(dep.call, "access", None)
        if found is not None:
            return found  # type: ignore[no-any-return]
    return None


def route_access(api: FastAPI) -> dict[tuple[str, str], RouteAccess]:
    """(method, path) -> the access each route's gate asks for; a route without a gate
    refuses to start (closed by default)."""
    table: dict[tuple[str, str], RouteAccess] = {}
    for route in api.routes:
        if not isinstance(route, APIRoute):
            continue
        found = access_of(route.dependant.dependencies)
        if found is None:
            raise RuntimeError(f"route {route.path} has no gate: give it Reader, Member, "
                               "Admin or Public (automation.api.security)")
        for method in route.methods or ():
            table[(method, route.path)] = found
    return table
