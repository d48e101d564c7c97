"""The catalog: VM types with their specs, regions, zones and on-demand prices, and the
sources of each figure (any reader); live refreshes from a cloud's own APIs with a stored
credential (admin: it reads the cloud with that credential's secret)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Query, Request, Response

from automation.api.idempotency import once
from automation.api.routers import v1
from automation.api.security import Admin, Reader
from automation.models import (
    CatalogEntry,
    CatalogRefresh,
    CatalogRefreshed,
    CatalogType,
    RefreshCatalog,
)
from automation.services import catalog_view

router = v1("catalog")


def _catalog(request: Request) -> Any:
    """Read afresh for each request: a refresh made since (here, or by another process over
    the ledger) is in the answer."""
    return request.app.state.ctx.read_catalog()


@router.get("/catalog")
def list_types(request: Request, _: Reader, provider: str | None = None,
               region: str | None = None,
               zone: Annotated[str | None, Query(description="Needs region.")] = None,
               gpu: Annotated[str | None, Query(description="An NVIDIA GPU model (H100).")]
               = None,
               min_gpus: Annotated[int | None, Query(alias="minGpus", ge=1)] = None,
               min_vcpus: Annotated[int | None, Query(alias="minVcpus", ge=1)] = None,
               min_memory_gib: Annotated[float | None, Query(alias="minMemoryGib", gt=0)]
               = None,
               arch: Literal["x86_64", "arm64"] | None = None,
               max_price: Annotated[float | None, Query(alias="maxPriceUsdHour", gt=0)] = None,
               ) -> list[CatalogEntry]:
    """Types matching the filters, cheapest first (unknown prices last): one per type,
    priced in its cheapest region with a known price, or in ``region`` when given."""
    from automation.catalog.store import ListFilter

    return catalog_view.list_types(_catalog(request), ListFilter(
        provider=provider, region=region, zone=zone, gpu=gpu, min_gpus=min_gpus,
        min_vcpus=min_vcpus, min_memory_gib=min_memory_gib, arch=arch, max_price=max_price))


@router.get("/catalog/refreshes")
def list_refreshes(request: Request, who: Reader) -> list[CatalogRefresh]:
    """Every stored refresh, newest first (the newest of each region is the one in use); a
    token scoped to an org sees those made with its org's credentials only."""
    return catalog_view.refreshes(request.app.state.ctx, who.org_id)


@router.post("/catalog/refreshes", status_code=201, response_model=CatalogRefreshed)
def refresh(request: Request, body: RefreshCatalog, who: Admin) -> Response:
    """Read current VM types, zone offerings and prices from the credential's cloud and
    store them, dated; a refresh that fails stores nothing (503 naming the API and the
    region)."""
    from automation.services import catalog_refresh

    ctx = request.app.state.ctx
    return once(request, who, body, lambda: catalog_view.refreshed(catalog_refresh.refresh(
        ctx, body.credentials, tuple(body.regions))), status=201)


@router.get("/catalog/{vm_type}")
def show_type(request: Request, vm_type: str, _: Reader,
              provider: str | None = None) -> CatalogType:
    """One type: specs, every region offering it with zones and price, and the sources."""
    return catalog_view.show_type(_catalog(request), vm_type, provider)
