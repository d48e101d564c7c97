"""Cost: what the pools' VMs cost at list price over their recorded lifetimes (any reader)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request

from automation.api.routers import v1
from automation.api.security import Reader
from automation.models import CostReport, DailyCost, GroupBy
from automation.services.cost_report import MAX_DAYS, cost_by_day, cost_report, parse_since
from automation.services.tenancy import visible_ids

router = v1("cost")


@router.get("/cost")
def cost(request: Request, who: Reader,
         by: Annotated[GroupBy, Query(description="Sum per node pool, cluster or cloud.")]
         = "pool",
         since: Annotated[str | None, Query(
             description="Only time from this date or ISO time on (UTC unless zoned).",
             json_schema_extra={"anyOf": [{"type": "string", "format": "date"},
                                          {"type": "string", "format": "date-time"}]})]
         = None,
         ) -> CostReport:
    ctx = request.app.state.ctx
    return cost_report(ctx.ledger, ctx.clock.now(), by=by,
                       since=parse_since(since) if since is not None else None,
                       only=visible_ids(ctx, who, "node pool"))


@router.get("/cost/daily")
def cost_daily(request: Request, who: Reader,
               days: Annotated[int, Query(ge=1, le=MAX_DAYS,
                                          description="How many UTC days, today last.")] = 30,
               ) -> DailyCost:
    """Cost per UTC day and node pool at list price, days with no cost as zeros."""
    ctx = request.app.state.ctx
    return cost_by_day(ctx.ledger, ctx.clock.now(), days=days,
                       only=visible_ids(ctx, who, "node pool"))
