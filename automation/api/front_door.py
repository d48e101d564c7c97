"""The front door: every request passes it before any route reads it.

Its token is resolved once (the route's gate reuses it from ``request.state.authenticated``),
its rate limit is taken (``automation.api.limits``: per token id, or per client address
without a valid token), a gated route refuses a caller without a valid token (401) before its
body is read, a NUL in the URL is refused before a route asks the ledger about it, and a body
over the limit is refused (413): by its Content-Length, or counted as it streams. Every
answer names the server's version (``Anycloud-Version``)."""

from __future__ import annotations

import math
from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from automation import __version__
from automation.api import limits, problems
from automation.api.limits import Limiter
from automation.api.security import PUBLIC, RouteAccess, access_of
from automation.auth.roles import Principal
from automation.errors import AnycloudError, http_status

VERSION_HEADER = "Anycloud-Version"
UI_PREFIX = "/ui"  # the dashboard's pages: their own gate reads the session cookie


class FrontDoor:
    """Every request before any route reads it: who calls (an ``Authorization`` header is
    resolved once, here, and left on ``request.state.authenticated`` for the route's gate),
    the caller's rate limit, 401 from a gated route to a caller without a valid token before
    its body is read (``security``'s gates would say the same, but only after FastAPI has
    read and parsed the body), and the body's size limit."""

    def __init__(self, app: ASGIApp, *, api: FastAPI, bucket: Limiter | None,
                 max_body: int) -> None:
        self.app, self.api, self.bucket, self.max_body = app, api, bucket, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        who: Principal | None = None
        refused: AnycloudError | None = None
        try:
            who = await self._caller(headers.get("authorization"))
        except AnycloudError as exc:  # no valid token (or the ledger is unavailable)
            refused = exc
        client = scope.get("client")
        limit = self.max_body if who is not None else limits.ANONYMOUS_MAX_BODY
        refusal = (self._over_rate(limits.caller_of(who, client[0] if client else None))
                   or self._refused_caller(scope, headers, refused)
                   or _nul_in_url(scope)
                   or _announced_too_large(headers, limit, who))
        if refusal is not None:
            await _answer(refusal, scope, receive, send, headers)
            return
        if who is not None:
            scope.setdefault("state", {})["authenticated"] = who
        await self._let_in(scope, receive, send, limit, who)

    async def _caller(self, authorization: str | None) -> Principal:
        """The caller's principal; Unauthenticated (no token: at once, with no ledger read)."""
        principal_of = self.api.state.principal_of
        if not authorization:
            return principal_of(None)  # type: ignore[no-any-return]
        # A ledger read: in a worker thread, as FastAPI runs the gates.
        return await run_in_threadpool(principal_of, authorization)  # type: ignore[no-any-return]

    def _over_rate(self, caller: str) -> JSONResponse | None:
        bucket = self.bucket
        wait = 0.0 if bucket is None else bucket.take(caller)
        if bucket is None or not wait:
            return None
        return problems.problem(
            429, "RESOURCE_EXHAUSTED", f"too many requests: retry in {wait:.1f}s",
            field="rate", value=f"{bucket.rate:g}/s, burst {bucket.burst:g}",
            rule=f"at most {bucket.rate:g} requests a second per token, or per client address "
                 f"without a valid one ({limits.ENV})",
            retry_after=math.ceil(wait))

    def _refused_caller(self, scope: Scope, headers: Headers,
                        refused: AnycloudError | None) -> JSONResponse | None:
        """401 from a gated route to a caller without a valid token. Without any token, the
        dashboard's pages are let through: their gate reads the session cookie (and sends a
        browser to the log-in page); none of them takes a body."""
        if refused is None:
            return None
        access = _access_of_route(self.api, scope)
        if access is None or access == PUBLIC:
            return None
        if "authorization" not in headers and scope["path"].startswith(UI_PREFIX + "/"):
            return None
        return _problem_of(refused)

    async def _let_in(self, scope: Scope, receive: Receive, send: Send, limit: int,
                      who: Principal | None) -> None:
        """The app, with the body counted as it streams: past ``limit`` whatever the app
        answers (FastAPI makes the error a 400) is replaced by the 413."""
        over = started = False

        def went_over() -> None:
            nonlocal over
            over = True

        async def send_versioned(message: Message) -> None:
            nonlocal started
            if over:
                return
            if message["type"] == "http.response.start":
                started = True
                MutableHeaders(scope=message)[VERSION_HEADER] = __version__
            await send(message)

        try:
            await self.app(scope, limits.counted(receive, limit, went_over), send_versioned)
        except Exception:
            if not over or started:
                raise
        if over and not started:
            await _answer(_too_large(limit, who), scope, receive, send, None)


def _access_of_route(api: FastAPI, scope: Scope) -> RouteAccess | None:
    """The access the route the request goes to asks for (None: no route of the API's; the
    router answers 404 or 405 without reading the body)."""
    for route in api.router.routes:
        if route.matches(scope)[0] is Match.FULL:
            if isinstance(route, APIRoute):
                return access_of(route.dependant.dependencies)
            return None
    return None


def _nul_in_url(scope: Scope) -> JSONResponse | None:
    """A NUL in the path or a query parameter, refused before a route asks the ledger about
    it (PostgreSQL's text cannot hold one: the query would fail). No record's name or id
    holds one: such a path names nothing (404, as ``records.could_name`` answers), and
    such a filter is refused by name (400)."""
    if "\x00" in scope["path"]:
        return problems.problem(404, "NOT_FOUND", "no record's name or id holds a NUL",
                                field="path", value=scope["path"].replace("\x00", "\\0"),
                                rule="must not hold a NUL character")
    query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
    for field, value in query:
        if "\x00" in field + value:
            return problems.problem(400, "INVALID_ARGUMENT", f"{field} holds a NUL",
                                    field=field, value=value.replace("\x00", "\\0"),
                                    rule="must not hold a NUL character")
    return None


def _announced_too_large(headers: Headers, limit: int,
                         who: Principal | None) -> JSONResponse | None:
    length = headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        return _too_large(limit, who)
    return None


def _too_large(limit: int, who: Principal | None) -> JSONResponse:
    shown = limits.size_text(limit)
    rule = (f"must be at most {shown} ({limits.MAX_BODY_ENV})" if who is not None else
            f"must be at most {shown} without a valid token")
    return problems.problem(413, "PAYLOAD_TOO_LARGE", f"the request body is over {shown}",
                            field="body", value=f"over {shown}", rule=rule)


def _problem_of(err: AnycloudError) -> JSONResponse:
    return problems.problem(http_status(err), err.code, err.message, field=err.field,
                            value=err.value, rule=err.rule)


async def _answer(response: JSONResponse, scope: Scope, receive: Receive, send: Send,
                  headers: Headers | None) -> None:
    """The door's own answer. A body the request announced is left unread: the connection
    is closed after the answer instead of reading the rest (``headers`` None: some of the
    body was read, the rest was not)."""
    response.headers[VERSION_HEADER] = __version__
    if headers is None or headers.get("content-length", "0") != "0" or \
            "transfer-encoding" in headers:
        response.headers["Connection"] = "close"
    await response(scope, receive, send)
