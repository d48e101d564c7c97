"""``anycloud catalog list|show|refresh|refreshes``: the VM types, where they are offered,
their prices, and live refreshes of them from the clouds' own APIs.

The catalog module is imported on use: ``--help`` and the other commands never open it.
``list`` and ``show`` read the shipped catalog under the ledger's newest refreshes (when a
ledger exists; they never create one); in remote mode, the server's (``automation.cli.backend``).
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
    from automation.models import CatalogEntry, CatalogSource


# The service names each filter as the API's query does; the CLI names its own flags.
_FLAGS = {"provider": "--provider", "region": "--region", "zone": "--zone",
          "vmType": "VM_TYPE", "credentials": "--credentials"}


def _as_flags(run: Any) -> Any:
    """``run()``, a refusal naming the flag the user typed (the same in both modes: here it
    comes from the service, or from the API as its problem)."""
    from automation.errors import AnycloudError, InvalidInput

    try:
        return run()
    except AnycloudError as err:
        if err.field not in _FLAGS or err.rule is None:
            raise
        raise InvalidInput(_FLAGS[err.field], err.value, err.rule, code=err.code) from None


def _price_text(price: float | None, source: CatalogSource | None) -> str:
    if price is None:
        return "unknown"
    dated = f" ({source.as_of}{', stale' if source.stale else ''})" if source else ""
    return f"{price:.4f}{dated}"


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
    from automation.cli.backend import backend_from

    listed = _as_flags(lambda: backend_from(ctx).catalog_list(dict(
        provider=provider, region=region, zone=zone, gpu=gpu, min_gpus=min_gpus,
        min_vcpus=min_vcpus, min_memory_gib=min_memory, arch=arch, max_price=max_price)))
    if as_json:
        print_json(listed)
        return
    print_table(None, ["PROVIDER", "VM TYPE", "ARCH", "VCPUS", "MEMORY GIB", "GPUS",
                       "REGION" if region else "CHEAPEST REGION", "ZONES" if region else "REGIONS",
                       "USD/HOUR"], [_listed_row(x, bool(region)) for x in listed])


def _listed_row(x: CatalogEntry, in_region: bool) -> tuple[object, ...]:
    gpus = f"{x.gpus} x {x.gpu_model}" if x.gpus else "0"
    where = (" ".join(x.zones) if x.zones is not None else "unknown") if in_region else x.regions
    return (x.provider, x.vm_type, x.arch, x.vcpus, f"{x.memory_gib:g}", gpus,
            x.region, where, _price_text(x.price_usd_hour, x.price_source))


@catalog.command()
@click.argument("vm_type")
@click.option("--provider", help="The cloud, when the name exists on several.")
@json_option
@handle_errors
@click.pass_context
def show(ctx: click.Context, vm_type: str, provider: str | None, as_json: bool) -> None:
    """One type: specs, every region offering it with zones and price, and their sources."""
    from automation.cli.backend import backend_from

    vm = _as_flags(lambda: backend_from(ctx).catalog_show(vm_type, provider))
    if as_json:
        print_json(vm)
        return
    sources = {s.id: s for s in vm.sources}
    gpus = f"{vm.gpus} x {vm.gpu_model}" if vm.gpus else "0"
    print_fields(f"{vm.vm_type} ({vm.provider})", [
        ("arch", vm.arch), ("vCPUs", vm.vcpus), ("memory GiB", f"{vm.memory_gib:g}"),
        ("GPUs", gpus), ("family", vm.family),
        ("specs from", _ref(vm.spec_source_id) if vm.spec_source_id is not None else None),
        ("node pools", "accepted" if vm.arch == "x86_64" else
         "refused: the agent runs on x86_64 only"),
    ])
    print_table("Regions", ["REGION", "ZONES", "USD/HOUR", "SOURCES"], [
        (o.region, " ".join(o.zones) if o.zones is not None else "unknown",
         _price_text(o.price_usd_hour, sources.get(o.price_source_id)
                     if o.price_source_id is not None else None),
         " ".join(_ref(i) for i in (o.zones_source_id, o.price_source_id) if i is not None))
        for o in vm.offerings])
    print_table("Sources", ["ID", "SOURCE", "AS OF", "URL"], [
        (_ref(s.id), s.name + (f" ({s.note})" if s.note else ""),
         s.as_of + (" (stale)" if s.stale else ""), s.url or s.note)
        for s in vm.sources])


def _ref(source_id: int | str) -> str:
    """``[5]`` or ``[refresh-…/prices]``, escaped: rich would take the latter for markup."""
    return rf"\[{source_id}]"


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
    from automation.cli.backend import backend_from

    result = _as_flags(lambda: backend_from(ctx).catalog_refresh(credentials, list(regions)))
    if as_json:
        print_json(result)
        return
    for warning in result.warnings:
        info(f"warning: {warning}")
    info(f"refresh {result.id}: {result.provider} via credential {result.credential}, "
         f"{result.fetched_at} ({', '.join(result.sources)})")
    print_table(None, ["REGION", "TYPES", "OFFERINGS", "PRICES", "NEW TYPES",
                       "GONE OFFERINGS", "PRICE CHANGES", "COMPARED WITH"], [
        (r.region, r.types, r.offerings, r.prices, _few(r.new_types), _few(r.gone_offerings),
         _few([f"{c.vm_type} {_usd(c.old_usd_hour)}->{_usd(c.new_usd_hour)}"
               for c in r.price_changes]), r.compared_with)
        for r in result.regions])


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.4f}"


def _few(names: list[str], limit: int = 5) -> str:
    if not names:
        return "-"
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} (+{len(names) - limit})"


@catalog.command()
@json_option
@handle_errors
@click.pass_context
def refreshes(ctx: click.Context, as_json: bool) -> None:
    """Every stored refresh, newest first (the newest of each region is the one in use)."""
    from automation.cli.backend import backend_from

    rows = backend_from(ctx).catalog_refreshes()
    if as_json:
        print_json(rows)
        return
    print_table(None, ["ID", "PROVIDER", "CREDENTIAL", "FETCHED AT", "REGIONS"], [
        (r.id, r.provider, r.credential, r.fetched_at, _few(r.regions)) for r in rows])
