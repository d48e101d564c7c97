"""The catalog as ``catalog list`` and ``catalog show`` print it (and the API serves it):
filters checked against the catalog, each type's figures with the sources they come from.

Refusals name the filter as the API's query does (``provider``, ``region``, ``zone``,
``vmType``); the CLI names its flags instead (``automation.cli.catalog``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from automation.errors import InvalidInput
from automation.models import (
    CatalogEntry,
    CatalogOffering,
    CatalogPriceChange,
    CatalogRefresh,
    CatalogRefreshed,
    CatalogRegionRefresh,
    CatalogSource,
    CatalogType,
)

if TYPE_CHECKING:
    from automation.app import App
    from automation.catalog.store import Catalog, ListFilter, Offering, Source, VmType
    from automation.services.catalog_refresh import RefreshResult


def list_types(catalog: Catalog, wanted: ListFilter) -> list[CatalogEntry]:
    """Types matching the filters, cheapest first (unknown prices last)."""
    _check_filters(catalog, wanted.provider, wanted.region, wanted.zone)
    return [CatalogEntry(**_specs(x.provider, x.vm), region=x.region, regions=x.regions,
                         zones=x.zones, price_usd_hour=x.price_usd_hour,
                         price_source=source(x.price_source)
                         if x.price_usd_hour is not None else None)
            for x in catalog.listing(wanted)]


def show_type(catalog: Catalog, vm_type: str, provider: str | None) -> CatalogType:
    """One type: specs, every region offering it with zones and price, and their sources."""
    _check_filters(catalog, provider, None, None)
    found = catalog.find(vm_type, provider)
    if not found:
        near = sorted({n for key in ([provider] if provider else catalog.providers)
                       for n in catalog.providers[key].closest(vm_type)})
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise InvalidInput("vmType", vm_type, f"must be a VM type in the catalog{hint}")
    if len(found) > 1:
        raise InvalidInput("vmType", vm_type,
                           f"exists on {', '.join(k for k, _ in found)}: add the provider")
    key, vm = found[0]
    cloud = catalog.providers[key]
    offerings = cloud.offerings(vm.name)
    spec_source = cloud.spec_source(vm.name)
    used = {s.id: s for o in offerings for s in (o.zones_source, o.price_source) if s}
    if spec_source:
        used[spec_source.id] = spec_source
    return CatalogType(**_specs(key, vm), spec_source_id=spec_source.id if spec_source else None,
                       offerings=[_offering(o) for o in offerings],
                       sources=[s for i in sorted(used, key=str) if (s := source(used[i]))])


def refreshed(result: RefreshResult) -> CatalogRefreshed:
    return CatalogRefreshed(
        id=result.refresh_id, provider=result.provider, credential=result.credential,
        fetched_at=f"{result.fetched_at:%Y-%m-%dT%H:%M:%SZ}", sources=result.sources,
        warnings=result.warnings, regions=[CatalogRegionRefresh(
            region=r.region, types=r.types, offerings=r.offerings, prices=r.prices,
            new_types=r.new_types, gone_offerings=r.gone_offerings,
            price_changes=[CatalogPriceChange(vm_type=c.vm_type, old_usd_hour=c.old_usd_hour,
                                              new_usd_hour=c.new_usd_hour)
                           for c in r.price_changes],
            compared_with=r.before) for r in result.regions])


def refreshes(app: App, org_id: str | None = None) -> list[CatalogRefresh]:
    """Every stored refresh, newest first (the newest of each region is the one in use);
    ``org_id``: those made with that org's credentials only."""
    from automation.services.catalog_refresh import history

    return [CatalogRefresh(id=r["id"], provider=r["provider"], credential=r["credential"],
                           regions=r["regions"], counts=r["counts"],
                           fetched_at=f"{r['fetchedAt']:%Y-%m-%dT%H:%M:%SZ}")
            for r in history(app, org_id)]


def source(found: Source | None) -> CatalogSource | None:
    if found is None:
        return None
    return CatalogSource(id=found.id, name=found.name, url=found.url, licence=found.licence,
                         as_of=found.as_of, stale=found.stale, note=found.note or None)


def _specs(provider: str, vm: VmType) -> dict[str, Any]:
    return {"provider": provider, "vm_type": vm.name, "arch": vm.arch, "vcpus": vm.vcpus,
            "memory_gib": vm.memory_gib, "gpus": vm.gpus, "gpu_model": vm.gpu_model,
            "family": vm.family}


def _offering(o: Offering) -> CatalogOffering:
    return CatalogOffering(region=o.region, zones=o.zones,
                           zones_source_id=o.zones_source.id if o.zones_source else None,
                           price_usd_hour=o.price_usd_hour,
                           price_source_id=o.price_source.id if o.price_source else None)


def _check_filters(catalog: Catalog, provider: str | None, region: str | None,
                   zone: str | None) -> None:
    if provider is not None and provider not in catalog.providers:
        raise InvalidInput("provider", provider,
                           f"must be one of {', '.join(sorted(catalog.providers))}")
    clouds = [catalog.providers[provider]] if provider else list(catalog.providers.values())
    if region is not None and not any(region in c.regions for c in clouds):
        raise InvalidInput("region", region,
                           f"must be a region of {provider or 'a provider'} in the catalog")
    if zone is not None:
        if region is None:
            raise InvalidInput("zone", zone, "needs region (the zone's region)")
        if not any(zone in c.regions.get(region, []) for c in clouds):
            raise InvalidInput("zone", zone, f"must be a zone of region {region}")
