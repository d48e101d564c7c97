"""Azure: VM sizes, zones and subscription restrictions from the Resource SKUs API, read with
the credential's service principal, and Linux on-demand prices from the public Retail Prices
API, one region at a time.

What Resource SKUs says is per subscription: a ``Location`` restriction
(``NotAvailableForSubscription``, ``QuotaId``) means the size cannot be deployed in that
region by this subscription, so it is not offered there; a ``Zone`` restriction removes the
zones it names.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, cast

from automation.catalog.refresh.http import JsonHttp, Transport, next_link, with_query
from automation.catalog.refresh.model import (
    Family,
    FetchedOffering,
    FetchedType,
    RefreshError,
    Snapshot,
)
from automation.models import Credential

LOGIN = "https://login.microsoftonline.com"
MANAGEMENT = "https://management.azure.com"
RETAIL_PRICES = "https://prices.azure.com/api/retail/prices"
SKUS_API_VERSION = "2021-07-01"
CLIENT_SECRET_ENV = "AZURE_CLIENT_SECRET"  # the same variable the stacks read
SOURCES = (f"azure compute:resourceSkus.list (api-version {SKUS_API_VERSION})",
           "azure retail prices:prices.azure.com/api/retail/prices")

# The catalog's series (tools/catalog_generator/sources): general-purpose A, B, D (DC, DS),
# compute-optimised F (FX) and NVIDIA GPU NC, ND, NV. Memory (E, M), storage (L) and HPC (H)
# sizes are left out.
SERIES = frozenset({"A", "B", "D", "DC", "DS", "F", "FX", "NC", "ND", "NV"})

# GPU model by size name, first match wins (Resource SKUs gives the count, not the model).
_GPU_MODELS: tuple[tuple[re.Pattern[str], str | None], ...] = tuple(
    (re.compile(p), m) for p, m in (
        (r"_MI300X_", None),                  # AMD: outside the catalog
        (r"^Standard_NV\d+as_v4$", None),     # AMD MI25
        (r"_A100_", "A100-80GB"),
        (r"^Standard_ND\d+asr_v4$", "A100"),
        (r"_H100_", "H100"),
        (r"_H200_", "H200"),
        (r"_A10_", "A10"),
        (r"_T4_", "T4"),
        (r"^Standard_NC\d+r?s_v3$", "V100"),
        (r"^Standard_ND\d+rs_v2$", "V100-32GB"),
        (r"^Standard_NV\d+s_v3$", "M60"),
    ))
# NVads A10 v5 sizes below 36 vCPUs are partitions of one A10: no whole nvidia.com/gpu.
_A10_PARTITIONS = re.compile(r"^Standard_NV(\d+)ad[m]?s_A10_v5$")


def azure_family(name: str, gpus: int) -> str:
    """The catalog family of an Azure size (also used by tools/catalog_generator/long_csv.py)."""
    if gpus:
        return "gpu"
    return "compute-optimised" if re.match(r"Standard_F", name) else "general-purpose"


def series(name: str) -> str | None:
    m = re.match(r"^Standard_([A-Z]+)\d", name)
    return m.group(1) if m else None


def gpu_model(name: str) -> tuple[bool, str | None]:
    """(known, model): known False for a name no rule covers; model None for AMD GPUs."""
    for pattern, model in _GPU_MODELS:
        if pattern.search(name):
            return True, (f"NVIDIA {model.replace('-', ' ')}" if model else None)
    return False, None


def _arm_by_name(name: str) -> bool:
    # A lowercase "p" among the feature letters after the size number: D2ps_v5, B2pls_v2.
    m = re.match(r"^Standard_[A-Z]+\d+(?:-\d+)?([a-z]*)", name)
    return bool(m and "p" in m.group(1))


# --- Resource SKUs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Size:
    spec: FetchedType
    zones: tuple[str, ...]


def _capabilities(raw: dict[str, Any]) -> dict[str, str]:
    return {str(c.get("name")): str(c.get("value")) for c in raw.get("capabilities") or []}


def _parse_size(raw: dict[str, Any], region: str, warnings: list[str]) -> _Size | None:
    """One Resource SKUs entry in ``region``, or None when it is not offered or not kept."""
    name = raw.get("name")
    if raw.get("resourceType") != "virtualMachines" or not isinstance(name, str):
        return None
    if series(name) not in SERIES:
        return None
    info = next((i for i in raw.get("locationInfo") or []
                 if str(i.get("location", "")).lower() == region), None)
    if info is None:
        return None
    blocked: set[str] = set()
    for r in raw.get("restrictions") or []:
        where = {str(x).lower() for x in
                 ((r.get("restrictionInfo") or {}).get("locations") or r.get("values") or [])}
        if region not in where:
            continue
        if r.get("type") == "Location":
            return None  # NotAvailableForSubscription / QuotaId: this subscription cannot
        if r.get("type") == "Zone":
            blocked.update(str(z) for z in (r.get("restrictionInfo") or {}).get("zones") or [])
    caps = _capabilities(raw)
    try:
        vcpus = int(caps["vCPUs"])
        memory_gib = round(float(caps["MemoryGB"]), 3)
        gpus = int(caps.get("GPUs", "0"))
    except (KeyError, ValueError) as err:
        warnings.append(f"azure {region}: {name} left out: vCPUs/MemoryGB/GPUs unreadable "
                        f"({err})")
        return None
    model = None
    if gpus:
        known, model = gpu_model(name)
        if known and model is None:
            return None  # AMD GPU
        if not known:
            warnings.append(f"azure {region}: {name} has {gpus} GPU(s) of a model no rule "
                            f"names; kept without a model")
        m = _A10_PARTITIONS.match(name)
        if m and vcpus % 36:
            return None  # a fraction of an A10
    cpu = caps.get("CpuArchitectureType", "")
    arm = cpu.lower() == "arm64" if cpu else _arm_by_name(name)
    arch: Literal["x86_64", "arm64"] = "arm64" if arm else "x86_64"
    zones = tuple(sorted(set(map(str, info.get("zones") or [])) - blocked))
    spec = FetchedType(name=name, arch=arch, vcpus=vcpus, memory_gib=memory_gib, gpus=gpus,
                       gpu_model=model, family=cast(Family, azure_family(name, gpus)))
    return _Size(spec, zones)


def parse_sizes(pages: Iterable[dict[str, Any]], region: str
                ) -> tuple[dict[str, _Size], list[str]]:
    sizes: dict[str, _Size] = {}
    warnings: list[str] = []
    for page in pages:
        for raw in page.get("value") or []:
            size = _parse_size(raw, region, warnings)
            if size is not None:
                sizes[size.spec.name] = size
    return sizes, warnings


# --- Retail Prices -----------------------------------------------------------------------------


def _linux_on_demand(item: dict[str, Any], now: datetime) -> bool:
    """A Linux pay-as-you-go VM meter in effect at ``now``: not Windows, not a Cloud Services
    role, not Spot or Low Priority, hourly, in USD."""
    product = str(item.get("productName", ""))
    meter = f"{item.get('skuName', '')} {item.get('meterName', '')}"
    if "Windows" in product or "Cloud Services" in product:
        return False
    if "Spot" in meter or "Low Priority" in meter:
        return False
    if item.get("type") != "Consumption" or item.get("unitOfMeasure") != "1 Hour":
        return False
    if item.get("currencyCode", "USD") != "USD":
        return False
    start, end = _when(item.get("effectiveStartDate")), _when(item.get("effectiveEndDate"))
    at = now if now.tzinfo else now.replace(tzinfo=UTC)
    return not (start and start > at) and not (end and end < at)


def _when(value: Any) -> datetime | None:
    """A Retail Prices date ("2026-08-01T00:00:00Z"); None when absent or unreadable."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_prices(pages: Iterable[dict[str, Any]], now: datetime
                 ) -> dict[str, tuple[float | None, str]]:
    """armSkuName -> (hourly USD price, or None and why)."""
    by_size: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for page in pages:
        for item in page.get("Items") or []:
            if item.get("armSkuName") and _linux_on_demand(item, now):
                by_size[str(item["armSkuName"])].append(item)
    out: dict[str, tuple[float | None, str]] = {}
    for name, items in by_size.items():
        primary = [i for i in items if i.get("isPrimaryMeterRegion", True)] or items
        prices = {float(i["retailPrice"]) for i in primary}
        if len(prices) == 1:
            out[name] = (prices.pop(), "")
        else:
            shown = ", ".join(f"{p:g}" for p in sorted(prices))
            out[name] = (None, f"Linux on-demand meters disagree ({shown})")
    return out


def region_snapshot(size_pages: Iterable[dict[str, Any]],
                    price_pages: Iterable[dict[str, Any]], region: str, now: datetime
                    ) -> tuple[dict[str, FetchedType], list[FetchedOffering], list[str]]:
    """One region's types, offerings and warnings from its recorded or fetched pages."""
    sizes, warnings = parse_sizes(size_pages, region)
    prices = parse_prices(price_pages, now)
    offerings = []
    missing: dict[str, list[str]] = defaultdict(list)
    for name in sorted(sizes):
        price, why = prices.get(name, (None, "no Linux on-demand meter"))
        if price is None:
            missing[why].append(name)
        offerings.append(FetchedOffering(name, region, sizes[name].zones, price))
    for why, names in sorted(missing.items()):
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        warnings.append(f"azure {region}: no price for {shown}: {why}")
    return {n: s.spec for n, s in sizes.items()}, offerings, warnings


def build_snapshot(per_region: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]],
                   now: datetime) -> Snapshot:
    """The snapshot from each region's (Resource SKUs pages, Retail Prices pages)."""
    types: dict[str, FetchedType] = {}
    offerings: list[FetchedOffering] = []
    warnings: list[str] = []
    for region, (size_pages, price_pages) in per_region.items():
        region_types, region_offerings, region_warnings = region_snapshot(
            size_pages, price_pages, region, now)
        for name, spec in region_types.items():
            known = types.setdefault(name, spec)
            if known != spec:
                warnings.append(f"azure {region}: {name} is described as {spec}, kept {known}")
        offerings.extend(region_offerings)
        warnings.extend(region_warnings)
    return Snapshot(
        provider="azure",
        regions=tuple(per_region),
        types=tuple(types[n] for n in sorted(types)),
        offerings=tuple(offerings),
        sources=SOURCES,
        fetched_at=now,
        warnings=tuple(warnings),
    )


# --- the network half -------------------------------------------------------------------------


def access_token(tenant: str, client_id: str, secret: str, http: JsonHttp) -> str:
    """Client-credentials grant for Azure Resource Manager."""
    return http.access_token(
        f"{LOGIN}/{tenant}/oauth2/v2.0/token",
        {"client_id": client_id, "client_secret": secret,
         "scope": f"{MANAGEMENT}/.default", "grant_type": "client_credentials"},
        f"token for client {client_id} in tenant {tenant}")


def skus_url(subscription: str, region: str) -> str:
    return with_query(f"{MANAGEMENT}/subscriptions/{subscription}/providers/Microsoft.Compute/"
                      f"skus", **{"api-version": SKUS_API_VERSION,
                                  "$filter": f"location eq '{region}'"})


def prices_url(region: str) -> str:
    return with_query(RETAIL_PRICES, **{"$filter": (
        f"serviceName eq 'Virtual Machines' and armRegionName eq '{region}' "
        f"and priceType eq 'Consumption'")})


def fetch(credential: Credential, regions: tuple[str, ...], now: datetime, *,
          transport: Transport | None = None,
          environ: dict[str, str] | None = None,
          secret: Mapping[str, str] | None = None) -> Snapshot:
    """Read ``regions`` of Azure with ``credential`` (reference: subscription_id, tenant_id,
    client_id; the client secret its own, ``secret`` opened from its sealed row, else the
    server's AZURE_CLIENT_SECRET)."""
    if not regions:
        raise RefreshError("azure: name at least one region to refresh")
    ref = credential.reference
    subscription, tenant, client = (ref.get("subscription_id"), ref.get("tenant_id"),
                                    ref.get("client_id"))
    if not (subscription and tenant and client):
        raise RefreshError(f"credential {credential.name}: an azure credential needs "
                           f"subscription_id, tenant_id and client_id")
    client_secret = secret["client_secret"] if secret is not None else \
        (os.environ if environ is None else environ).get(CLIENT_SECRET_ENV)
    if not client_secret:
        raise RefreshError(f"credential {credential.name}: {CLIENT_SECRET_ENV} is not set "
                           f"(the credential holds no client secret of its own)")
    token = access_token(tenant, client, client_secret, JsonHttp("azure login", transport))
    auth = {"Authorization": f"Bearer {token}"}
    arm = JsonHttp("azure compute", transport)
    retail = JsonHttp("azure retail prices", transport)
    per_region = {}
    for region in regions:
        size_pages = list(arm.pages(skus_url(subscription, region),
                                    f"resourceSkus.list in {region}", next_link("nextLink"),
                                    auth))
        price_pages = list(retail.pages(prices_url(region), f"Virtual Machines in {region}",
                                        next_link("NextPageLink")))
        per_region[region] = (size_pages, price_pages)
    return build_snapshot(per_region, now)
