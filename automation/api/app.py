"""The API app: every route under ``/v1``, its OpenAPI document at ``/v1/openapi.json`` (the
contract the SDK is generated from; a reader's token, like every route but the health
probe), Prometheus' ``/metrics`` (``automation.api.metrics``; a reader's token too), the
server's version on every answer (``Anycloud-Version``), and the read-only dashboard
under ``/ui`` (``automation.ui``; not in the OpenAPI document)."""

from __future__ import annotations

import math
import os
import warnings
from typing import Any, Literal

from fastapi import FastAPI, Request, Response
from starlette.middleware.gzip import GZipMiddleware

from automation import __version__
from automation.agentpools.registry import Registry
from automation.api import limits, links, metrics, problems
from automation.api.broker import Broker
from automation.api.limits import Limiter
from automation.api.routes import (
    agent_pools,
    catalog,
    clusters,
    cost,
    credentials,
    deployments,
    identity,
    node_pools,
    projects,
    rollout,
    runtime_tokens,
    secrets_key,
    sudo,
    tokens,
)
from automation.api.security import PREFIX, Reader, route_access
from automation.app import App
from automation.auth import tokens as token_auth
from automation.services import fleet_counts
from automation.ui import pages as ui_pages

VERSION_HEADER = "Anycloud-Version"
# FastAPI wraps each request body in Annotated[Model, Body(alias=<parameter>)], and pydantic
# >= 2.12 warns (once, on the first request) that the alias does nothing there. Nothing is
# wrong with the schema or the validation; the warning is noise in the server's log.
warnings.filterwarnings("ignore", message="The 'alias' attribute with value",
                        category=UserWarning)


GZIP_ABOVE_BYTES = 1024


def create_api(ctx: App, limiter: Limiter | Literal["env"] | None = "env",
               broker: Broker | None = None) -> FastAPI:
    """``limiter``: requests per caller (``automation.api.limits``; by default from
    ANYCLOUD_API_RATE; None: unlimited). ``broker``: the agent broker's routes and expiry
    loop, served with the rest (by default over the App's ledger and clock)."""
    serving = broker or Broker(Registry(ctx.ledger, ctx.clock))
    api = FastAPI(title="anycloud", version=__version__, openapi_url=None, docs_url=None,
                  redoc_url=None, lifespan=lambda _: serving.running())
    api.state.ctx = ctx
    api.state.principal_of = lambda authorization: token_auth.principal(
        ctx.ledger, authorization, ctx.clock.now())
    bucket = limits.from_env(os.environ) if limiter == "env" else limiter
    problems.install(api)
    # The routers' routes are added as they are (each router has the /v1 prefix), not
    # through include_router, which wraps them: one flat table, which route_access reads.
    for module in (identity, tokens, clusters, credentials, node_pools, projects,
                   deployments, runtime_tokens, sudo, cost, rollout, catalog, agent_pools,
                   secrets_key):
        api.router.routes.extend(module.router.routes)
    api.router.routes.extend(serving.routes())
    ui_pages.install(api)  # the read-only dashboard under /ui (automation.ui)
    metrics.install(api, ctx.ledger,  # GET /metrics
                    desired=lambda: fleet_counts.desired_replicas(ctx.ledger))

    plain_openapi = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            api.openapi_schema = links.add_links(problems.as_problem_json(plain_openapi()))
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]

    @api.get(f"{PREFIX}/openapi.json", include_in_schema=False)
    def openapi_document(_: Reader) -> dict[str, Any]:
        return api.openapi()

    # A list of 1,000 pools is ~1 MB of JSON: compressed for a client that accepts gzip
    # (httpx, the SDK, browsers); small answers are not worth the CPU. Added before the
    # middleware below, so it sees each route's answer whole (and its size) rather than
    # that middleware's stream, which it would compress whatever its size.
    api.add_middleware(GZipMiddleware, minimum_size=GZIP_ABOVE_BYTES)

    @api.middleware("http")
    async def _version(request: Request, call_next: Any) -> Response:
        response: Response
        wait = 0.0 if bucket is None else bucket.take(
            limits.caller_of(request.headers, request.client.host if request.client else None))
        if bucket is not None and wait:
            response = problems.problem(
                429, "RESOURCE_EXHAUSTED", f"too many requests: retry in {wait:.1f}s",
                field="rate", value=f"{bucket.rate:g}/s, burst {bucket.burst:g}",
                rule=f"at most {bucket.rate:g} requests a second per token ({limits.ENV})",
                retry_after=math.ceil(wait))
        else:
            response = await call_next(request)
        response.headers[VERSION_HEADER] = __version__
        return response

    api.state.route_access = route_access(api)
    return api
