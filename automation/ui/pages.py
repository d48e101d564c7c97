"""The dashboard's routes under ``/ui``: a log-in page, the overview of every node pool with
the cost of the last 30 days, a pool's page (status, ingress, history) and its preview, the
AgentPools and the deployments, the fragments the pages poll to refresh themselves (and
the overview's cost chart, fetched once after its load), and their script and style.

Read-only: its only POSTs are log in and log out. Every page and fragment asks for the viewer
role, from a session cookie (``automation.ui.sessions``) or an ``Authorization: Bearer``
header, and reads through the same service functions as the ``/v1`` routes that give the
same data (``GET /v1/node-pools``, ``/v1/node-pools/{ref}``, ``…/history``, ``…/preview``,
``/v1/cost/daily``, ``/v1/agent-pools``, ``/v1/deployments``): it shows a token nothing the
API would not give it: a token scoped to an org sees that org's pools, their cost and its
deployments, no AgentPool, and a pool of another org is "not found" (``services.tenancy``,
as the API). An anonymous page request is sent to the log-in page; an anonymous fragment
request gets 401 and no data.

The routes are left out of the OpenAPI document (they are HTML, not the API's contract), and
each carries its gate like every API route (``automation.api.security.route_access``)."""

from __future__ import annotations

import hashlib
import re
import threading
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Depends, FastAPI, Header, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from automation.auth import tokens as token_auth
from automation.auth.roles import Access, Principal, authorize
from automation.errors import AnycloudError, NotFound, Unauthenticated
from automation.models import NodePoolStatus, PoolState, ProjectDeployment
from automation.services import deployment_ops, projects
from automation.services.agent_pool_view import list_agent_pools
from automation.services.cost_report import cost_by_day
from automation.services.ingress_status import pool_status_with_ingress
from automation.services.pool_history import read_pool_history
from automation.services.pool_status import list_node_pools
from automation.services.tenancy import is_scoped, only_visible, resolve, visible_ids
from automation.ui.charts import bands, busy_slots_svg, cost_per_day_svg, slots_text
from automation.ui.sessions import (
    COOKIE_PATH,
    LOGIN_CSRF_COOKIE,
    MAX_AGE,
    SESSION_COOKIE,
    Sessions,
    login_csrf_ok,
    new_login_csrf,
)

PREFIX = "/ui"
STATIC = Path(__file__).with_name("static")
_TYPES = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
# No inline script or style, no frames, nothing sent elsewhere.
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self'; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_templates = Environment(loader=PackageLoader("automation.ui", "templates"),
                         autoescape=select_autoescape(default=True, default_for_string=True),
                         trim_blocks=True, lstrip_blocks=True)

router = APIRouter(prefix=PREFIX, include_in_schema=False)
_MAKING = threading.Lock()


def sessions(request: Request) -> Sessions:
    """The app's sessions, made on first use (under the server's secrets key, if any)."""
    state = request.app.state
    with _MAKING:  # once: two keys of a process's own would end each other's sessions
        if getattr(state, "ui_sessions", None) is None:
            ctx = state.ctx
            state.ui_sessions = Sessions(lambda: ctx.sealing)
    return state.ui_sessions  # type: ignore[no-any-return]


def _viewer(request: Request,
            authorization: Annotated[str | None, Header()] = None) -> Principal | None:
    """The caller, from a Bearer header (refused as the API refuses it) or from the session
    cookie (None when there is none, or its token no longer authenticates); a caller below
    the viewer role is refused (403)."""
    ctx = request.app.state.ctx
    now = ctx.clock.now()
    if authorization:
        # The front door (automation.api.front_door) has resolved it already.
        who = (getattr(request.state, "authenticated", None)
               or token_auth.principal(ctx.ledger, authorization, now))
    else:
        token = sessions(request).open(request.cookies.get(SESSION_COOKIE), now)
        if token is None:
            return None
        try:
            who = token_auth.authenticate(ctx.ledger, token, now)
        except Unauthenticated:
            return None  # revoked or expired since: the session is over
    authorize(who, Access.READ)
    request.state.principal = who
    return who


def _public() -> None:
    return None


_viewer.access = Access.READ  # type: ignore[attr-defined]
_public.access = "public"  # type: ignore[attr-defined]
Viewer = Annotated[Principal | None, Depends(_viewer)]
Public = Annotated[None, Depends(_public)]


_AS_OF = re.compile(r' data-as-of="[^"]*"')
LIVE_VERSION = "X-Live-Version"


def live_version(html: str) -> str:
    """What a live part shows, less the time its data was read: the page and each refresh
    of its fragment carry it, and app.js swaps the part in only when it changed (a swap
    would take the keyboard focus away)."""
    return hashlib.sha256(_AS_OF.sub("", str(html)).strip().encode()).hexdigest()[:16]


_templates.filters["live_version"] = live_version


def _page(name: str, status: int = 200, **values: Any) -> HTMLResponse:
    html = _templates.get_template(name).render(prefix=PREFIX, **values)
    headers = dict(_HEADERS)
    if name.startswith("_"):  # a fragment a page polls
        headers[LIVE_VERSION] = live_version(html)
    return HTMLResponse(html, status_code=status, headers=headers)


def _to_login(request: Request) -> RedirectResponse:
    out = RedirectResponse(f"{PREFIX}/login", status_code=303, headers=_HEADERS)
    if SESSION_COOKIE in request.cookies:
        _forget(out)
    return out


def _forget(response: Response) -> None:
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, secure=True, httponly=True,
                           samesite="strict")


def _cookie(response: Response, name: str, value: str, max_age: int | None = None) -> None:
    response.set_cookie(name, value, max_age=max_age, path=COOKIE_PATH, secure=True,
                        httponly=True, samesite="strict")


def _shown_at(now: datetime) -> str:
    return f"{now:%Y-%m-%d %H:%M:%S} UTC"


# The overview's table shows a page of pools: 1,000 rows took the browser 0.4-0.7 s to lay
# out (benchmarks/bench_dashboard.py), the goal is a page in under 300 ms.
PAGE_SIZE = 100
# What ``?state=`` filters on: the states the counts at the top show.
SHOWN_STATES = tuple(state.value for state in PoolState if state is not PoolState.DELETED)


class BadQuery(ValueError):
    """A ``page`` or ``state`` the overview cannot show: said as a 400, never a 500."""


def _pools_query(request: Request) -> tuple[int, str | None]:
    """The overview's ``?page=`` (a whole number from 1; a page past the last shows the last,
    as pools can be deleted while someone is on it) and ``?state=`` (one of SHOWN_STATES, or
    none or ``all`` for every pool)."""
    page_text = request.query_params.get("page", "1")
    if not page_text.isascii() or not page_text.isdigit() or not page_text.strip("0"):
        raise BadQuery(f"page={page_text!r}: a page is a whole number from 1")
    state = request.query_params.get("state") or None
    if state == "all":
        state = None
    if state is not None and state not in SHOWN_STATES:
        raise BadQuery(f"state={state!r}: a state is all or one of {', '.join(SHOWN_STATES)}")
    # Past the last page anyway; and int() refuses over 4,300 digits.
    return (int(page_text) if len(page_text) <= 9 else 10**9), state


def _pools_url(path: str, page: int, state: str | None) -> str:
    """``path`` with the page and the state filter, leaving out what is the default."""
    query = urlencode([(k, v) for k, v in (("page", page), ("state", state))
                       if v is not None and v != 1])
    return f"{PREFIX}{path}?{query}" if query else f"{PREFIX}{path}"


def _overview_values(request: Request, who: Principal) -> dict[str, Any]:
    """One page of the pools the caller sees (the state filter applied) and the counts by
    state over all of them, with the links to the other pages and to each state's pools."""
    page, state = _pools_query(request)
    ctx = request.app.state.ctx
    pools = only_visible(list_node_pools(ctx.ledger), visible_ids(ctx, who, "node pool"))
    counts = Counter(p.state.value for p in pools)
    shown = [p for p in pools if state is None or p.state.value == state]
    last_page = max(1, -(-len(shown) // PAGE_SIZE))
    page = min(page, last_page)
    first = (page - 1) * PAGE_SIZE
    return {"pools": shown[first:first + PAGE_SIZE], "as_of": _shown_at(ctx.clock.now()),
            "counts": [(name, counts.get(name, 0)) for name in SHOWN_STATES],
            "total": len(pools), "matching": len(shown), "state_filter": state, "page": page,
            "first": first + 1, "last": min(first + PAGE_SIZE, len(shown)),
            "previous_url": _pools_url("/", page - 1, state) if page > 1 else None,
            "next_url": _pools_url("/", page + 1, state) if page < last_page else None,
            "all_url": _pools_url("/", 1, None),
            "state_urls": {name: _pools_url("/", 1, name) for name in SHOWN_STATES},
            "fragment_url": _pools_url("/fragments/pools", page, state)}


def _cost_values(request: Request, who: Principal) -> dict[str, Any]:
    """The overview's cost chart: what ``GET /v1/cost/daily`` gives the caller (not polled:
    it moves slowly)."""
    ctx = request.app.state.ctx
    daily = cost_by_day(ctx.ledger, ctx.clock.now(), only=visible_ids(ctx, who, "node pool"))
    return {"cost": daily, "cost_chart": cost_per_day_svg(daily), "cost_bands": bands(daily)}


def _pool_values(request: Request, who: Principal, ref: str) -> dict[str, Any]:
    """One pool the caller sees (NotFound out of its scope, as for a missing one)."""
    ctx = request.app.state.ctx
    pool_id = resolve(ctx, who, "node pool", ref, field="ref")
    pool: NodePoolStatus = pool_status_with_ingress(ctx.ledger, pool_id, ctx.kubeconfig_path)
    # GET /v1/node-pools/{ref}/history's; in the polled fragment, so it refreshes too.
    history = read_pool_history(ctx.ledger, pool.id)
    return {"pool": pool, "history": history, "as_of": _shown_at(ctx.clock.now())}


def _session_values(request: Request, who: Principal) -> dict[str, Any]:
    cookie = request.cookies.get(SESSION_COOKIE)
    # Logging out is for a session; a script with a Bearer header has none.
    return {"who": who, "csrf": sessions(request).csrf(cookie) if cookie else None}


@router.get("/login")
def login_page(request: Request, _: Public) -> Response:
    return _login_form(request)


def _login_form(request: Request, error: str | None = None, status: int = 200) -> Response:
    csrf = new_login_csrf()
    out = _page("login.html", status, csrf=csrf, error=error)
    _cookie(out, LOGIN_CSRF_COOKIE, csrf, max_age=3600)
    return out


async def _form(request: Request) -> dict[str, str]:
    body = (await request.body())[:16384].decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


@router.post("/login")
async def login(request: Request, _: Public) -> Response:
    """The token of the form, checked as the API checks it (and for the viewer role); a
    session cookie that holds it sealed. The form's CSRF token must match its cookie. A
    token scoped to an org logs in too: every page reads through ``services.tenancy``, so
    it sees its org's pools and deployments alone, as the API would show it."""
    form = await _form(request)
    if not login_csrf_ok(request.cookies.get(LOGIN_CSRF_COOKIE), form.get("csrf")):
        return PlainTextResponse("CSRF check failed: reload the log-in page", 403,
                                 headers=_HEADERS)
    ctx = request.app.state.ctx
    now = ctx.clock.now()
    token = form.get("token", "").strip()
    try:
        who = token_auth.authenticate(ctx.ledger, token, now)
        authorize(who, Access.READ)  # what every page asks of a session's token
    except AnycloudError as exc:
        return _login_form(request, f"token refused: {exc}", status=401)
    out = RedirectResponse(f"{PREFIX}/", status_code=303, headers=_HEADERS)
    _cookie(out, SESSION_COOKIE, sessions(request).seal(token, now),
            max_age=int(MAX_AGE.total_seconds()))
    out.delete_cookie(LOGIN_CSRF_COOKIE, path=COOKIE_PATH, secure=True, httponly=True,
                      samesite="strict")
    return out


@router.post("/logout")
async def logout(request: Request, _: Public) -> Response:
    form = await _form(request)
    if not sessions(request).csrf_ok(request.cookies.get(SESSION_COOKIE), form.get("csrf")):
        return PlainTextResponse("CSRF check failed", 403, headers=_HEADERS)
    out = RedirectResponse(f"{PREFIX}/login", status_code=303, headers=_HEADERS)
    _forget(out)
    return out


@router.get("/")
def overview(request: Request, who: Viewer) -> Response:
    if who is None:
        return _to_login(request)
    try:
        values = _overview_values(request, who)
    except BadQuery as exc:  # a page that says what was wrong, and a way back
        return _page("bad_query.html", 400, problem=str(exc), **_session_values(request, who))
    return _page("overview.html", **values, **_session_values(request, who))


@router.get("/pools/{ref}")
def pool_page(request: Request, ref: str, who: Viewer) -> Response:
    if who is None:
        return _to_login(request)
    try:
        values = _pool_values(request, who, ref)
    except NotFound:  # a page, not the API's problem+json: the ref asked, a way back
        return _page("pool_missing.html", 404, ref=ref, **_session_values(request, who))
    return _page("pool.html", **values, **_session_values(request, who))


@router.get("/pools/{ref}/preview")
def pool_preview_page(request: Request, ref: str, who: Viewer) -> Response:
    """What ``GET /v1/node-pools/{ref}/preview?diff=true`` gives: the pool's stack previewed
    with the server's engine (it changes nothing), its policy findings and the cost once
    applied. Run when asked for, never polled: a real engine's preview takes seconds."""
    if who is None:
        return _to_login(request)
    from automation.services.rollout import preview_pool
    from automation.services.stack_engine import stack_runner

    state = request.app.state
    try:
        pool_id = resolve(state.ctx, who, "node pool", ref, field="ref")
    except NotFound:
        return _page("pool_missing.html", 404, ref=ref, **_session_values(request, who))
    preview = preview_pool(state.ctx, lambda: stack_runner(state), pool_id, diff=True)
    return _page("pool_preview.html", preview=preview, ref=ref,
                 as_of=_shown_at(state.ctx.clock.now()), **_session_values(request, who))


# -- AgentPools and deployments (issue 24): GET /v1/agent-pools' and GET /v1/deployments' --


def _agent_pools_values(request: Request, who: Principal) -> dict[str, Any]:
    """The AgentPools: the whole control plane's, so none for a caller scoped to an org
    (as ``GET /v1/agent-pools`` answers it)."""
    ctx = request.app.state.ctx
    now = ctx.clock.now()
    pools = [] if is_scoped(who) else list_agent_pools(ctx.ledger, now)
    return {"as_of": _shown_at(now), "agent_pools": [
        (p, busy_slots_svg(p), slots_text(max(p.busy_slots_per_minute, default=0.0)))
        for p in pools]}


def _deployments_values(request: Request, who: Principal) -> dict[str, Any]:
    """What ``GET /v1/deployments`` gives the caller (no project filter), with the project
    and org names ``GET /v1/projects`` and ``GET /v1/orgs`` give it."""
    ctx = request.app.state.ctx
    found = only_visible(deployment_ops.list_all(ctx), visible_ids(ctx, who, "deployment"))
    orgs = {o.id: o.name for o in only_visible(projects.list_orgs(ctx),
                                               visible_ids(ctx, who, "org"))}
    owners = {p.id: (p.name, orgs.get(p.org_id, p.org_id)) for p in only_visible(
        projects.list_projects(ctx), visible_ids(ctx, who, "project"))}
    return {"as_of": _shown_at(ctx.clock.now()), "owners": owners,
            "deployments": [d for d in found if isinstance(d, ProjectDeployment)],
            "placements": [d for d in found if not isinstance(d, ProjectDeployment)]}


@router.get("/agent-pools")
def agent_pools_page(request: Request, who: Viewer) -> Response:
    if who is None:
        return _to_login(request)
    return _page("agent_pools.html", **_agent_pools_values(request, who),
                 **_session_values(request, who))


@router.get("/deployments")
def deployments_page(request: Request, who: Viewer) -> Response:
    if who is None:
        return _to_login(request)
    return _page("deployments.html", **_deployments_values(request, who),
                 **_session_values(request, who))


@router.get("/fragments/agent-pools")
def agent_pools_fragment(request: Request, who: Viewer) -> Response:
    if who is None:
        return _logged_out()
    return _page("_agent_pools.html", **_agent_pools_values(request, who))


@router.get("/fragments/deployments")
def deployments_fragment(request: Request, who: Viewer) -> Response:
    if who is None:
        return _logged_out()
    return _page("_deployments.html", **_deployments_values(request, who))


def _logged_out() -> Response:
    return PlainTextResponse("logged out", 401, headers=_HEADERS)


@router.get("/fragments/pools")
def pools_fragment(request: Request, who: Viewer) -> Response:
    """The overview's live part (counts, a page of the table), polled by app.js with the
    page's own ``page`` and ``state``."""
    if who is None:
        return _logged_out()
    try:
        return _page("_pools.html", **_overview_values(request, who))
    except BadQuery as exc:
        return PlainTextResponse(str(exc), 400, headers=_HEADERS)


@router.get("/fragments/cost")
def cost_fragment(request: Request, who: Viewer) -> Response:
    """The overview's cost chart, fetched once by app.js after the page's load: computing
    it took a third of the page's server time with 1,000 pools (not polled)."""
    if who is None:
        return _logged_out()
    return _page("_cost.html", **_cost_values(request, who))


@router.get("/fragments/pools/{ref}")
def pool_fragment(request: Request, ref: str, who: Viewer) -> Response:
    if who is None:
        return _logged_out()
    try:
        values = _pool_values(request, who, ref)
    except NotFound:
        return PlainTextResponse("node pool not found", 404, headers=_HEADERS)
    return _page("_pool.html", **values)


@router.get("/static/{name}")
def static(name: str, _: Public) -> Response:
    if name not in _TYPES:
        return PlainTextResponse("not found", 404)
    return Response((STATIC / name).read_bytes(), media_type=_TYPES[name],
                    headers={**_HEADERS, "Cache-Control": "max-age=300"})


def install(api: FastAPI) -> None:
    """Add the dashboard's routes to the API app (flat, like the API's own: route_access
    reads their gates)."""
    api.router.routes.extend(router.routes)
