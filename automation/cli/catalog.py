"""``anycloud catalog list|show|refresh|refreshes``: the VM types, where they are offered,
their prices, and live refreshes of them from the clouds' own APIs.

The catalog module is imported on use: ``--help`` and the other commands never open it.
``list`` and ``show`` read the shipped catalog under the ledger's newest refreshes (when a
ledger exists; they never create one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from automation.cli.output import (
    handle_errors,
    info,
    json_option,
    print_fields,
    print_json,
    print_table,
)

if TYPE_CHECKING:
    from automation.catalog.store import Catalog, Listed, Offering, Source, VmType
    from automation.services.catalog_refresh import RefreshResult


def _catalog(ctx: click.Context) -> Catalog:
    """The catalog with the ledger's refreshes over it; the bare shipped one when there is no
    ledger yet (no refresh can exist, and a read-only command creates none)."""
    import os

    from automation.catalog.overlay import LedgerOverlay
    from automation.catalog.store import load_catalog
    from automation.cli.context import ledger_from
    from automation.ledger.db import _sqlite_path
    from automation.settings import Settings

    url = Settings.from_env(ctx.find_root().obj.get("home")).database_url
    path = _sqlite_path(url) if url.startswith("sqlite") else None
    if url.startswith("sqlite") and (path is None or not os.path.exists(path)):
        return load_catalog()
    # The overlay App.catalog has, without the App (its cluster probe costs ~15 ms to import).
    return load_catalog().with_overlay(LedgerOverlay(ledger_from(ctx)))


def _source_json(source: Source | None) -> dict[str, Any] | None:
    if source is None:
        return None
    return {"id": source.id, "name": source.name, "url": source.url, "licence": source.licence,
            "asOf": source.as_of, "stale": source.stale, "note": source.note or None}


def _specs_json(provider: str, vm: VmType) -> dict[str, Any]:
    return {"provider": provider, "vmType": vm.name, "arch": vm.arch, "vcpus": vm.vcpus,
            "memoryGib": vm.memory_gib, "gpus": vm.gpus, "gpuModel": vm.gpu_model,
            "family": vm.family}


def _price_text(price: float | None, source: Source | None) -> str:
    if price is None:
        return "unknown"
    dated = f" ({source.as_of}{', stale' if source.stale else ''})" if source else ""
    return f"{price:.4f}{dated}"


def _check_filters(catalog: Catalog, provider: str | None, region: str | None,
                   zone: str | None) -> None:
    from automation.errors import InvalidInput

    if provider is not None and provider not in catalog.providers:
        raise InvalidInput("--provider", provider,
                           f"must be one of {', '.join(sorted(catalog.providers))}")
    clouds = [catalog.providers[provider]] if provider else list(catalog.providers.values())
    if region is not None and not any(region in c.regions for c in clouds):
        raise InvalidInput("--region", region,
                           f"must be a region of {provider or 'a provider'} in the catalog")
    if zone is not None:
        if region is None:
            raise InvalidInput("--zone", zone, "needs --region (the zone's region)")
        if not any(zone in c.regions.get(region, []) for c in clouds):
            raise InvalidInput("--zone", zone, f"must be a zone of --region {region}")


@click.group()
def catalog() -> None:
    """VM types of every cloud: specs, regions, zones and on-demand prices (with sources)."""


@catalog.command("list")
@click.option("--provider", help="aws, gcp, azure or lambda.")
@click.option("--region", help="Only types offered in this region (one row per type there).")
@click.option("--zone", help="Only types offered in this zone (needs --region).")
@click.option("--gpu", "gpu", metavar="MODEL", help="Only NVIDIA GPU types of this model (H100).")
@click.option("--min-gpus", type=click.IntRange(min=1), help="At least this many GPUs per VM.")
@click.option("--min-vcpus", type=click.IntRange(min=1), help="At least this many vCPUs.")
@click.option("--min-memory", type=click.FloatRange(min=0, min_open=True),
              help="At least this much memory, GiB.")
@click.option("--arch", type=click.Choice(["x86_64", "arm64"]),
              help="Architecture (node pools take x86_64 only).")
@click.option("--max-price", type=click.FloatRange(min=0, min_open=True),
              help="At most this on-demand USD per hour (types without a known price are "
                   "left out).")
@json_option
@handle_errors
@click.pass_context
def list_(ctx: click.Context, provider: str | None, region: str | None, zone: str | None,
          gpu: str | None, min_gpus: int | None, min_vcpus: int | None, min_memory: float | None,
          arch: str | None, max_price: float | None, as_json: bool) -> None:
    """Types matching the filters, cheapest first (unknown prices last). Without --region,
    one row per type, priced in its cheapest region with a known price."""
    from automation.catalog.store import ListFilter

    cat = _catalog(ctx)
    _check_filters(cat, provider, region, zone)
    listed = cat.listing(ListFilter(
        provider=provider, region=region, zone=zone, gpu=gpu, min_gpus=min_gpus,
        min_vcpus=min_vcpus, min_memory_gib=min_memory, arch=arch, max_price=max_price,
    ))
    if as_json:
        print_json([_listed_json(x) for x in listed])
        return
    print_table(None, ["PROVIDER", "VM TYPE", "ARCH", "VCPUS", "MEMORY GIB", "GPUS",
                       "REGION" if region else "CHEAPEST REGION", "ZONES" if region else "REGIONS",
                       "USD/HOUR"], [_listed_row(x, bool(region)) for x in listed])


def _listed_json(x: Listed) -> dict[str, Any]:
    return {**_specs_json(x.provider, x.vm), "region": x.region, "regions": x.regions,
            "zones": x.zones, "priceUsdHour": x.price_usd_hour,
            "priceSource": _source_json(x.price_source) if x.price_usd_hour is not None else None}


def _listed_row(x: Listed, in_region: bool) -> tuple[object, ...]:
    gpus = f"{x.vm.gpus} x {x.vm.gpu_model}" if x.vm.gpus else "0"
    where = (" ".join(x.zones) if x.zones is not None else "unknown") if in_region else x.regions
    return (x.provider, x.vm.name, x.vm.arch, x.vm.vcpus, f"{x.vm.memory_gib:g}", gpus,
            x.region, where, _price_text(x.price_usd_hour, x.price_source))


@catalog.command()
@click.argument("vm_type")
@click.option("--provider", help="The cloud, when the name exists on several.")
@json_option
@handle_errors
@click.pass_context
def show(ctx: click.Context, vm_type: str, provider: str | None, as_json: bool) -> None:
    """One type: specs, every region offering it with zones and price, and their sources."""
    from automation.errors import InvalidInput

    cat = _catalog(ctx)
    _check_filters(cat, provider, None, None)
    found = cat.find(vm_type, provider)
    if not found:
        near = sorted({n for key in ([provider] if provider else cat.providers)
                       for n in cat.providers[key].closest(vm_type)})
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise InvalidInput("VM_TYPE", vm_type, f"must be a VM type in the catalog{hint}")
    if len(found) > 1:
        raise InvalidInput("VM_TYPE", vm_type,
                           f"exists on {', '.join(k for k, _ in found)}: add --provider")
    key, vm = found[0]
    cloud = cat.providers[key]
    offerings = cloud.offerings(vm.name)
    spec_source = cloud.spec_source(vm.name)
    used = {s.id: s for o in offerings for s in (o.zones_source, o.price_source) if s}
    if spec_source:
        used[spec_source.id] = spec_source
    if as_json:
        print_json({**_specs_json(key, vm), "specSourceId": spec_source and spec_source.id,
                    "offerings": [_offering_json(o) for o in offerings],
                    "sources": [_source_json(used[i]) for i in sorted(used, key=str)]})
        return
    gpus = f"{vm.gpus} x {vm.gpu_model}" if vm.gpus else "0"
    print_fields(f"{vm.name} ({cloud.name})", [
        ("arch", vm.arch), ("vCPUs", vm.vcpus), ("memory GiB", f"{vm.memory_gib:g}"),
        ("GPUs", gpus), ("family", vm.family),
        ("specs from", _ref(spec_source.id) if spec_source else None),
        ("node pools", "accepted" if vm.arch == "x86_64" else
         "refused: the agent runs on x86_64 only"),
    ])
    print_table("Regions", ["REGION", "ZONES", "USD/HOUR", "SOURCES"], [
        (o.region, " ".join(o.zones) if o.zones is not None else "unknown",
         _price_text(o.price_usd_hour, o.price_source),
         " ".join(_ref(s.id) for s in (o.zones_source, o.price_source) if s))
        for o in offerings])
    print_table("Sources", ["ID", "SOURCE", "AS OF", "URL"], [
        (_ref(s.id), s.name + (f" ({s.note})" if s.note else ""),
         s.as_of + (" (stale)" if s.stale else ""), s.url or s.note)
        for _, s in sorted(used.items(), key=lambda kv: str(kv[0]))])


def _ref(source_id: int | str) -> str:
    """``[5]`` or ``[refresh-…/prices]``, escaped: rich would take the latter for markup."""
    return rf"\[{source_id}]"


def _offering_json(o: Offering) -> dict[str, Any]:
    return {"region": o.region, "zones": o.zones,
            "zonesSourceId": o.zones_source.id if o.zones_source else None,
            "priceUsdHour": o.price_usd_hour,
            "priceSourceId": o.price_source.id if o.price_source else None}


@catalog.command()
@click.option("--credentials", required=True,
              help="The stored credential (name or id) to read the cloud with; fixes the cloud.")
@click.option("--region", "regions", multiple=True,
              help="A region to read (repeat for several). Default: the cloud's regions that "
                   "have live node pools; with none, every region of that cloud in the "
                   "catalog.")
@json_option
@handle_errors
@click.pass_context
def refresh(ctx: click.Context, credentials: str, regions: tuple[str, ...],
            as_json: bool) -> None:
    """Read current VM types, zone offerings and on-demand prices from the cloud's own APIs
    (AWS: EC2 DescribeInstanceTypes, DescribeInstanceTypeOfferings and the Price List API;
    GCP: Compute Engine machineTypes and the Cloud Billing Catalog; Azure: Resource SKUs and
    the Retail Prices API) and store them in the ledger, dated: validation and prices use the
    newest data of each region from then on. A refresh that fails stores nothing and says
    which API and region failed and why (exit 1)."""
    from automation.cli.context import app_from
    from automation.services import catalog_refresh

    app = app_from(ctx)
    result = catalog_refresh.refresh(app, credentials, regions)
    if as_json:
        print_json(_refresh_json(result))
        return
    for warning in result.warnings:
        info(f"warning: {warning}")
    info(f"refresh {result.refresh_id}: {result.provider} via credential {result.credential}, "
         f"{result.fetched_at:%Y-%m-%dT%H:%M:%SZ} ({', '.join(result.sources)})")
    print_table(None, ["REGION", "TYPES", "OFFERINGS", "PRICES", "NEW TYPES",
                       "GONE OFFERINGS", "PRICE CHANGES", "COMPARED WITH"], [
        (r.region, r.types, r.offerings, r.prices, _few(r.new_types), _few(r.gone_offerings),
         _few([f"{c.vm_type} {_usd(c.old_usd_hour)}->{_usd(c.new_usd_hour)}"
               for c in r.price_changes]), r.before)
        for r in result.regions])


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.4f}"


def _few(names: list[str], limit: int = 5) -> str:
    if not names:
        return "-"
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} (+{len(names) - limit})"


def _refresh_json(result: RefreshResult) -> dict[str, Any]:
    return {
        "id": result.refresh_id, "provider": result.provider, "credential": result.credential,
        "fetchedAt": result.fetched_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sources": result.sources, "warnings": result.warnings,
        "regions": [{
            "region": r.region, "types": r.types, "offerings": r.offerings, "prices": r.prices,
            "newTypes": r.new_types, "goneOfferings": r.gone_offerings,
            "priceChanges": [{"vmType": c.vm_type, "oldUsdHour": c.old_usd_hour,
                              "newUsdHour": c.new_usd_hour} for c in r.price_changes],
            "comparedWith": r.before,
        } for r in result.regions],
    }


@catalog.command()
@json_option
@handle_errors
@click.pass_context
def refreshes(ctx: click.Context, as_json: bool) -> None:
    """Every stored refresh, newest first (the newest of each region is the one in use)."""
    from automation.cli.context import app_from
    from automation.services import catalog_refresh

    rows = catalog_refresh.history(app_from(ctx))
    if as_json:
        print_json([{**r, "fetchedAt": f"{r['fetchedAt']:%Y-%m-%dT%H:%M:%SZ}"} for r in rows])
        return
    print_table(None, ["ID", "PROVIDER", "CREDENTIAL", "FETCHED AT", "REGIONS"], [
        (r["id"], r["provider"], r["credential"], f"{r['fetchedAt']:%Y-%m-%dT%H:%M:%SZ}",
         _few(list(r["regions"]))) for r in rows])
