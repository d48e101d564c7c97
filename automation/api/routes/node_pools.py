"""Node pools: create (durable intent), list (paged), status with the ingress view, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import Header, Query, Request, Response

from automation.api import etags
from automation.api.idempotency import once
from automation.api.paging import DEFAULT_PAGE_SIZE, Page, page_of
from automation.api.problems import Problem
from automation.api.routers import v1
from automation.api.security import Member, Reader
from automation.models import NewNodePool, NodePool, NodePoolCreated, NodePoolStatus
from automation.services import node_pools
from automation.services.ingress_status import pool_status_with_ingress
from automation.services.pool_status import list_node_pools

router = v1("node pools")


class NodePoolPage(Page[NodePoolStatus]):
    pass


@router.post("/node-pools", status_code=201, response_model=NodePoolCreated)
def create_node_pool(request: Request, body: NewNodePool, who: Member) -> Response:
    """Store the intent; the control loop provisions the pool. Idempotency-Key: a retry
    with the same key and body answers the first result and creates nothing."""
    return once(request, who, body, lambda: node_pools.create_node_pool_reported(
        request.app.state.ctx, body), status=201)


@router.get("/node-pools")
def list_pools(request: Request, _: Reader, cluster: str | None = None,
               page_size: Annotated[int, Query(alias="pageSize")] = DEFAULT_PAGE_SIZE,
               page_token: Annotated[str | None, Query(alias="pageToken")] = None,
               ) -> NodePoolPage:
    items = list_node_pools(request.app.state.ctx.ledger, cluster)
    page = page_of(items, lambda p: (p.cluster, p.name, p.id), page_size=page_size,
                   page_token=page_token, filters={"cluster": cluster})
    return NodePoolPage(items=page.items, next_page_token=page.next_page_token)


@router.get("/node-pools/{ref}")
def pool_status(request: Request, response: Response, ref: str, _: Reader) -> NodePoolStatus:
    """With the pool's ETag (for If-Match on DELETE)."""
    ctx = request.app.state.ctx
    status = pool_status_with_ingress(ctx.ledger, ref, ctx.kubeconfig_path)
    etags.tag(response, node_pools.get_node_pool(ctx, status.id))
    return status


@router.delete("/node-pools/{ref}", responses={412: {"model": Problem, "description":
                                                      "If-Match names an older version"}})
def delete_pool(request: Request, response: Response, ref: str, _: Member,
                if_match: Annotated[str | None, Header(
                    description="Delete only if the pool is still at this ETag.")] = None,
                ) -> NodePool:
    """Refused (409) while work targets the pool; the control loop releases its VMs."""
    gone = node_pools.delete_node_pool(request.app.state.ctx, ref,
                                       etags.expectation(if_match, NodePool.model_validate))
    etags.tag(response, gone)
    return gone
