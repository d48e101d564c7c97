"""What CI runs before a rollout, over every live pool: ``preview --all`` (the server's
engine) and ``policy check --all`` (offline, with the add-on stacks of GPU clusters). Any
reader: neither changes anything."""

from __future__ import annotations

from fastapi import Request

from automation.api.routers import v1
from automation.api.security import Reader
from automation.models import PolicyReport, PoolPreview
from automation.services.stack_engine import stack_runner
from automation.services.tenancy import visible_ids

router = v1("rollout")


@router.get("/preview")
def preview_every_pool(request: Request, who: Reader, diff: bool = False) -> list[PoolPreview]:
    from automation.services.rollout import preview_all

    state = request.app.state
    return preview_all(state.ctx, lambda: stack_runner(state), diff=diff,
                       pools=visible_ids(state.ctx, who, "node pool"))


@router.get("/policy")
def check_every_stack(request: Request, who: Reader) -> list[PolicyReport]:
    from automation.services.rollout import check_all

    ctx = request.app.state.ctx
    return check_all(ctx, visible_ids(ctx, who, "node pool"), visible_ids(ctx, who, "cluster"))
