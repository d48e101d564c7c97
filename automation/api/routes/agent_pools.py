"""AgentPools as the ledger holds them, for people and dashboards: per open pool, the
operator's last decision (desired replicas) and Ready reason, its live agents' slots, its
pending and running sessions, and its busy slots over the last hour, a minute at a time
(``automation.services.agent_pool_view``; no Kubernetes call). A reader's. The broker's
``GET /v1/pools/{namespace}/{name}`` is one pool's view with its agents, for that pool's
agents as well."""

from __future__ import annotations

from fastapi import Request

from automation.api.paging import DEFAULT_PAGE_SIZE, Page, PageSize, PageToken, page_of
from automation.api.routers import v1
from automation.api.security import Reader
from automation.models import AgentPoolSummary
from automation.services.agent_pool_view import list_agent_pools
from automation.services.tenancy import is_scoped

router = v1("agent pools")


class AgentPoolPage(Page[AgentPoolSummary]):
    pass


@router.get("/agent-pools")
def list_pools(request: Request, who: Reader, page_size: PageSize = DEFAULT_PAGE_SIZE,
               page_token: PageToken = None) -> AgentPoolPage:
    """Every open AgentPool, by ``<namespace>/<name>``. AgentPools are the cluster's, not an
    org's: a token scoped to an org sees none."""
    ctx = request.app.state.ctx
    items = [] if is_scoped(who) else list_agent_pools(ctx.ledger, ctx.clock.now())
    return page_of(AgentPoolPage, items, lambda p: (p.pool,), page_size=page_size,
                   page_token=page_token, filters={})
