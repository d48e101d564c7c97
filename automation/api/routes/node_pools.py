"""Node pools: create (durable intent), list (paged), status with the ingress view and the
last drift check, history (VM attempts and last events), a drift check now, delete;
the plan and the policy check of a pool's stack (evaluated offline under the mock engine, as
``node-pool plan`` and ``policy check`` do), its preview with the server's engine, and
unlocking its stacks after a killed run."""

from __future__ import annotations

from fastapi import Request, Response

from automation.api import etags
from automation.api.idempotency import once
from automation.api.paging import DEFAULT_PAGE_SIZE, Page, PageSize, PageToken, page_of
from automation.api.routers import v1
from automation.api.security import Admin, Member, Reader
from automation.auth.roles import Principal
from automation.models import (
    DriftReport,
    NewNodePool,
    NodePool,
    NodePoolCreated,
    NodePoolStatus,
    Plan,
    PolicyReport,
    PoolHistory,
    PoolPreview,
    PoolUnlock,
    RunResult,
)
from automation.services import node_pools
from automation.services.ingress_status import pool_status_with_ingress
from automation.services.pool_history import DEFAULT_LIMIT, read_pool_history
from automation.services.pool_status import list_node_pools
from automation.services.stack_engine import stack_runner
from automation.services.tenancy import only_visible, org_wide, resolve, sole, visible_ids

router = v1("node pools")


class NodePoolPage(Page[NodePoolStatus]):
    pass


@router.post("/node-pools", status_code=201, response_model=NodePoolCreated)
def create_node_pool(request: Request, body: NewNodePool, who: Member) -> Response:
    """Store the intent; the control loop provisions the pool. Idempotency-Key: a retry
    with the same key and body answers the first result and creates nothing. A scoped
    token's cluster and credential are its org's (the pool is the cluster's org's)."""
    ctx = request.app.state.ctx
    org_wide(who, "create a node pool")
    cluster = (resolve(ctx, who, "cluster", body.cluster, field="cluster")
               if body.cluster is not None else sole(ctx, who, "cluster", field="cluster"))
    scoped = body.model_copy(update={
        "cluster": cluster,
        "credentials": resolve(ctx, who, "credential", body.credentials, field="credentials")})
    return once(request, who, body, lambda: node_pools.create_node_pool_reported(
        ctx, scoped), status=201)


def _pool(request: Request, who: Principal, ref: str) -> str:
    """The pool ``ref`` names, as the caller may see it (its id for a scoped caller)."""
    return resolve(request.app.state.ctx, who, "node pool", ref, field="ref")


@router.get("/node-pools")
def list_pools(request: Request, who: Reader, cluster: str | None = None,
               page_size: PageSize = DEFAULT_PAGE_SIZE, page_token: PageToken = None,
               ) -> NodePoolPage:
    ctx = request.app.state.ctx
    where = None if cluster is None else resolve(ctx, who, "cluster", cluster, field="cluster")
    items = only_visible(list_node_pools(ctx.ledger, where), visible_ids(ctx, who, "node pool"))
    return page_of(NodePoolPage, items, lambda p: (p.cluster, p.name, p.id),
                   page_size=page_size, page_token=page_token, filters={"cluster": cluster})


@router.get("/node-pools/{ref}")
def pool_status(request: Request, response: Response, ref: str, who: Reader
                ) -> NodePoolStatus:
    """With the pool's ETag (for If-Match on DELETE)."""
    ctx = request.app.state.ctx
    status = pool_status_with_ingress(ctx.ledger, _pool(request, who, ref), ctx.kubeconfig_path)
    etags.tag(response, node_pools.get_node_pool(ctx, status.id))
    return status


@router.get("/node-pools/{ref}/history")
def pool_history(request: Request, ref: str, who: Reader,
                 limit: int = DEFAULT_LIMIT) -> PoolHistory:
    """The pool's VM attempts (released ones included) and its last events, newest first;
    ``limit`` (1 to 500) bounds each."""
    return read_pool_history(request.app.state.ctx.ledger, _pool(request, who, ref), limit)


@router.delete("/node-pools/{ref}", responses=etags.STALE)
def delete_pool(request: Request, response: Response, ref: str, who: Member,
                if_match: etags.IfMatch = None) -> NodePool:
    """Refused (409) while work targets the pool; the control loop releases its VMs."""
    pool = _pool(request, who, ref)  # out of scope: 404 first, as for any record
    org_wide(who, "delete a node pool")
    gone = node_pools.delete_node_pool(request.app.state.ctx, pool,
                                       etags.expectation(if_match, NodePool.model_validate))
    etags.tag(response, gone)
    return gone


@router.get("/node-pools/{ref}/plan")
def pool_plan(request: Request, ref: str, who: Reader) -> Plan:
    """The pool's stack program evaluated under the mock engine (no cloud, no Pulumi CLI):
    its resource tree, secrets shown as ``[secret]``, and what its VMs will cost."""
    from automation.services.rollout import plan_pool

    return plan_pool(request.app.state.ctx, _pool(request, who, ref))


@router.get("/node-pools/{ref}/policy")
def pool_policy(request: Request, ref: str, who: Reader) -> PolicyReport:
    """The policy pack over the pool's stack, offline; ``findings`` names each rule broken
    (a ``mandatory`` one blocks its rollout)."""
    from automation.services.rollout import check_pool_policy

    return check_pool_policy(request.app.state.ctx, _pool(request, who, ref))


@router.get("/node-pools/{ref}/preview")
def pool_preview(request: Request, ref: str, who: Reader, diff: bool = False) -> PoolPreview:
    """The pool's stack previewed with the server's engine (``ANYCLOUD_ENGINE``): what an
    up would change, the policy pack's findings, and the cost once applied. Changes
    nothing; ``diff``: the detailed diff too."""
    from automation.services.rollout import preview_pool

    state = request.app.state
    return preview_pool(state.ctx, lambda: stack_runner(state), _pool(request, who, ref),
                        diff=diff)


@router.post("/node-pools/{ref}/drift-check")
def pool_drift_check(request: Request, ref: str, who: Member) -> DriftReport:
    """Check the pool's stack for drift now, with the server's engine: a refresh previewed
    (nothing is written to the cloud or the stack's state); the result replaces the pool's
    last one, which its status shows as ``drift``. A failed check answers 200 with ``error``
    set: the check failed, not the pool. Member: it records the result."""
    from automation.services.pool_drift import check_pool_drift

    state = request.app.state
    return check_pool_drift(state.ctx, lambda: stack_runner(state), _pool(request, who, ref))


@router.post("/node-pools/{ref}/unlock")
def pool_unlock(request: Request, ref: str, _: Admin) -> PoolUnlock:
    """Clear a lock a killed run left on the pool's stacks (``pulumi cancel``), with the
    server's engine. Admin: cancelling a run that is still alive corrupts its state."""
    from automation.services.rollout import unlock_pool

    state = request.app.state
    return unlock_pool(state.ctx, lambda: stack_runner(state), ref)


@router.post("/node-pools/{ref}/adopt")
def pool_adopt(request: Request, ref: str, _: Admin) -> RunResult:
    """Rebuild the pool's lost engine state (STATE_MISSING) from what the cloud holds, with
    the server's engine: its VMs by their attempt tag, the rest by identity. Buys nothing.
    Admin: it rewrites the stack's state."""
    from automation.services.pool_adopt import adopt_pool

    state = request.app.state
    return adopt_pool(state.ctx, lambda: stack_runner(state), ref)
