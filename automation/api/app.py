"""The API app: every route under ``/v1``, its OpenAPI document at ``/v1/openapi.json`` (the
contract the SDK is generated from; a reader's token, like every route but the health
probe), Prometheus' ``/metrics`` (``automation.api.metrics``; a reader's token too), the
server's version on every answer (``Anycloud-Version``), and the read-only dashboard
under ``/ui`` (``automation.ui``; not in the OpenAPI document).

Every request passes ``FrontDoor`` before any route reads it: its token is resolved once (the
route's gate reuses it), its rate limit taken (``automation.api.limits``), a caller without a
valid token is refused 401 by a gated route before its body is read, and a body over the
limit is refused 413."""

from __future__ import annotations

import os
import warnings
from typing import Any, Literal

from fastapi import FastAPI
from starlette.middleware.gzip import GZipMiddleware

from automation import __version__
from automation.agentpools.registry import Registry
from automation.api import limits, links, metrics, problems
from automation.api.broker import Broker
from automation.api.front_door import FrontDoor
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

# FastAPI wraps each request body in Annotated[Model, Body(alias=<parameter>)], and pydantic
# >= 2.12 warns (once, on the first request) that the alias does nothing there. Nothing is
# wrong with the schema or the validation; the warning is noise in the server's log.
warnings.filterwarnings("ignore", message="The 'alias' attribute with value",
                        category=UserWarning)


GZIP_ABOVE_BYTES = 1024


def create_api(ctx: App, limiter: Limiter | Literal["env"] | None = "env",
               broker: Broker | None = None,
               max_body: int | Literal["env"] = "env") -> FastAPI:
    """``limiter``: requests per caller (``automation.api.limits``; by default from
    ANYCLOUD_API_RATE; None: unlimited). ``broker``: the agent broker's routes and expiry
    loop, served with the rest (by default over the App's ledger and clock). ``max_body``:
    the largest request body in bytes (by default from ANYCLOUD_API_MAX_BODY)."""
    serving = broker or Broker(Registry(ctx.ledger, ctx.clock))
    api = FastAPI(title="anycloud", version=__version__, openapi_url=None, docs_url=None,
                  redoc_url=None, lifespan=lambda _: serving.running())
    api.state.ctx = ctx
    api.state.principal_of = lambda authorization: token_auth.principal(
        ctx.ledger, authorization, ctx.clock.now())
    bucket = limits.from_env(os.environ) if limiter == "env" else limiter
    largest = limits.max_body_from_env(os.environ) if max_body == "env" else max_body
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
    # front door, so it sees each route's answer whole rather than the door's own.
    api.add_middleware(GZipMiddleware, minimum_size=GZIP_ABOVE_BYTES)
    api.add_middleware(FrontDoor, api=api, bucket=bucket, max_body=largest)
    api.state.route_access = route_access(api)
    return api
