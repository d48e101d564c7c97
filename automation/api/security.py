"""The gate of every route: the caller's token, then the role the route needs.

Each route takes one of ``Reader``, ``Member``, ``Admin`` (or ``Public``) as a parameter; the
dependency it names carries its ``Access``, which is how ``app.route_access`` reads the route
table (and a route with none refuses to start). The gate runs before the request's body is
read or validated, so a refused caller learns nothing about the route's input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Header, Request

from automation.auth import tokens
from automation.auth.roles import Access, Principal, authorize

PUBLIC = "public"
PREFIX = "/v1"


def _gate(access: Access) -> Callable[..., Principal]:
    def caller(request: Request,
               authorization: Annotated[str | None, Header()] = None) -> Principal:
        # A plain function: FastAPI runs it in a worker thread (it reads the ledger).
        ctx = request.app.state.ctx
        who = tokens.principal(ctx.ledger, authorization, ctx.clock.now())
        authorize(who, access)
        request.state.principal = who
        return who

    caller.access = access  # type: ignore[attr-defined]
    return caller


def _public() -> None:
    return None


_public.access = PUBLIC  # type: ignore[attr-defined]

Reader = Annotated[Principal, Depends(_gate(Access.READ))]
Member = Annotated[Principal, Depends(_gate(Access.WRITE))]
Admin = Annotated[Principal, Depends(_gate(Access.ADMIN))]
Public = Annotated[None, Depends(_public)]


def access_of(dependencies: list[Any]) -> Access | str | None:
    """The access a route's dependencies ask for (None: the route has no gate)."""
    for dep in dependencies:
        found = getattr(dep.call, "access", None)
        if found is not None:
            return found  # type: ignore[no-any-return]
    return None
