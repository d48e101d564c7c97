"""GCP: machine types from Compute ``machineTypes.aggregatedList`` and on-demand prices from
the Cloud Billing Catalog (service ``6F81-5844-456A``, Compute Engine), read with the
credential's service-account key.

Google prices a VM by its parts: per vCPU and per GiB of RAM of its family in its region
("N2 Instance Core running in Americas"), plus per attached GPU ("Nvidia Tesla A100 GPU
running in Americas"). price = vCPUs x core + GiB x RAM (+ GPUs x GPU). A type whose parts
cannot be told apart from the SKU list (no SKU, two different prices, another currency, a
price that bundles local SSD) gets no price and a warning: never a guess.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from automation.catalog.refresh import gcp_auth
from automation.catalog.refresh.http import JsonHttp, Transport, page_token_link, with_query
from automation.catalog.refresh.model import (
    Family,
    FetchedOffering,
    FetchedType,
    RefreshError,
    Snapshot,
)
from automation.models import Credential

COMPUTE = "https://compute.googleapis.com/compute/v1"
BILLING = "https://cloudbilling.googleapis.com/v1"
COMPUTE_ENGINE_SERVICE = "6F81-5844-456A"
SOURCES = ("gcp compute:machineTypes.aggregatedList",
           f"gcp cloudbilling:services/{COMPUTE_ENGINE_SERVICE}/skus")

# The catalog's families (general-purpose, compute-optimised, accelerator-optimised with
# NVIDIA GPUs), as in tools/catalog_generator/sources: memory-optimised (m*, x4), storage (z3)
# and TPU hosts (ct*) are left out.
FAMILIES = frozenset({
    "a2", "a3", "a4", "a4x", "c2", "c2d", "c3", "c3d", "c4", "c4a", "c4d", "c4n", "e2", "f1",
    "g1", "g2", "g4", "h3", "n1", "n2", "n2d", "n4", "n4a", "n4d", "t2a", "t2d",
})
ARM_FAMILIES = frozenset({"t2a", "c4a", "n4a", "a4x"})  # when the API omits "architecture"

# Compute acceleratorType -> the catalog's model spelling (shown as "NVIDIA <model>").
ACCELERATORS = {
    "nvidia-tesla-k80": "K80",
    "nvidia-tesla-p4": "P4",
    "nvidia-tesla-p100": "P100",
    "nvidia-tesla-t4": "T4",
    "nvidia-tesla-v100": "V100",
    "nvidia-tesla-a100": "A100",
    "nvidia-a100-80gb": "A100-80GB",
    "nvidia-l4": "L4",
    "nvidia-h100-80gb": "H100",
    "nvidia-h100-mega-80gb": "H100-MEGA",
    "nvidia-h200-141gb": "H200",
    "nvidia-b200": "B200",
    "nvidia-gb200": "GB200",
    "nvidia-rtx-pro-6000": "RTXPRO6000",
}


def gcp_family(name: str, gpus: int) -> str:
    """The catalog family of a GCP type (also used by tools/catalog_generator/long_csv.py)."""
    if gpus:
        return "gpu"
    return "compute-optimised" if re.match(r"(c\d|h\d)", name) else "general-purpose"


def gpu_model(accelerator_type: str) -> str | None:
    raw = ACCELERATORS.get(accelerator_type)
    return f"NVIDIA {raw.replace('-', ' ')}" if raw else None


# --- machine types ---------------------------------------------------------------------


@dataclass(frozen=True)
class _MachineType:
    spec: FetchedType
    accelerator: str | None  # the acceleratorType, to find its GPU SKU
    bundles_local_ssd: bool


def _region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def _parse_machine_type(raw: dict[str, Any], zone: str) -> _MachineType | None:
    """One machineTypes entry as the catalog sees it, or None when it is not kept."""
    name = raw.get("name")
    if not isinstance(name, str) or name.split("-")[0] not in FAMILIES:
        return None
    if raw.get("deprecated"):
        return None  # not offered for new VMs
    # Shared-core types (e2-medium, f1-micro, g1-small) are kept: the shipped catalog lists
    # them, and a refreshed region must not read as no longer offering them.
    try:
        vcpus = int(raw["guestCpus"])
        memory_gib = round(int(raw["memoryMb"]) / 1024, 3)
    except (KeyError, TypeError, ValueError) as err:
        raise RefreshError(f"gcp compute machineTypes.aggregatedList: {name} in {zone} has no "
                           f"usable guestCpus/memoryMb ({err})") from err
    accelerators = raw.get("accelerators") or []
    gpus, model, accelerator = 0, None, None
    for acc in accelerators:
        kind = str(acc.get("guestAcceleratorType", ""))
        if not kind.startswith("nvidia-"):
            return None  # TPUs and other accelerators are outside the catalog
        gpus += int(acc.get("guestAcceleratorCount", 0))
        accelerator, model = kind, gpu_model(kind)
    architecture = str(raw.get("architecture") or "").upper()
    arm = architecture == "ARM64" if architecture else name.split("-")[0] in ARM_FAMILIES
    arch: Literal["x86_64", "arm64"] = "arm64" if arm else "x86_64"
    family = cast(Family, gcp_family(name, gpus))
    spec = FetchedType(name=name, arch=arch, vcpus=vcpus, memory_gib=memory_gib, gpus=gpus,
                       gpu_model=model, family=family)
    bundles = bool(raw.get("bundledLocalSsds")) or name.endswith("-lssd")
    return _MachineType(spec, accelerator, bundles)


def parse_machine_types(pages: Iterable[dict[str, Any]], regions: tuple[str, ...]
                        ) -> tuple[dict[str, _MachineType], dict[tuple[str, str], set[str]],
                                   list[str]]:
    """Types kept, the zones offering each (type, region), and warnings."""
    types: dict[str, _MachineType] = {}
    zones: dict[tuple[str, str], set[str]] = defaultdict(set)
    warnings: list[str] = []
    for page in pages:
        items = page.get("items") or {}
        if not isinstance(items, dict):
            raise RefreshError("gcp compute machineTypes.aggregatedList: 'items' is not an "
                               "object")
        for scope, body in items.items():
            for raw in (body or {}).get("machineTypes") or []:
                zone = str(raw.get("zone") or scope.removeprefix("zones/")).rsplit("/", 1)[-1]
                region = _region_of(zone)
                if region not in regions:
                    continue
                parsed = _parse_machine_type(raw, zone)
                if parsed is None:
                    continue
                known = types.setdefault(parsed.spec.name, parsed)
                if known.spec != parsed.spec:
                    warnings.append(f"{parsed.spec.name}: zone {zone} describes it as "
                                    f"{parsed.spec}, kept {known.spec}")
                zones[(parsed.spec.name, region)].add(zone)
    return types, zones, warnings


# --- prices --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sku:
    description: str
    regions: frozenset[str]
    unit: str
    currency: str
    price: float | None  # None: more than one tier (a volume price is no hourly list price)


def _sku(raw: dict[str, Any]) -> _Sku | None:
    """An on-demand Compute SKU with its current unit price, or None for any other SKU."""
    category = raw.get("category") or {}
    if category.get("resourceFamily") != "Compute" or category.get("usageType") != "OnDemand":
        return None
    infos = raw.get("pricingInfo") or []
    if not infos:
        return None
    expression = infos[-1].get("pricingExpression") or {}
    rates = expression.get("tieredRates") or []
    price = None
    currency = ""
    if rates:
        unit_price = rates[0].get("unitPrice") or {}
        currency = str(unit_price.get("currencyCode", ""))
        if len(rates) == 1:
            price = int(unit_price.get("units") or 0) + int(unit_price.get("nanos") or 0) / 1e9
    return _Sku(str(raw.get("description", "")), frozenset(raw.get("serviceRegions") or ()),
                str(expression.get("usageUnit", "")), currency, price)


def _part_pattern(family: str) -> re.Pattern[str]:
    """Descriptions of a family's per-vCPU and per-GiB SKUs ("N2D AMD Instance Core running in
    Americas"); custom, sole-tenancy, spot and commitment SKUs do not match."""
    if family == "c2":
        return re.compile(r"^Compute optimized (Core|Ram) running in ")
    fam = re.escape(family.upper())
    return re.compile(rf"^{fam}(?: AMD| Arm| Intel)?(?: Predefined)? Instance (Core|Ram) "
                      r"running in ")


def _gpu_tokens(text: str) -> frozenset[str]:
    return frozenset(t for t in re.split(r"[\s-]+", text.lower())
                     if t and t not in {"nvidia", "tesla"})


_GPU_DESCRIPTION = re.compile(r"^Nvidia (.+) GPU running in ")


class _PriceBook:
    """The on-demand SKUs, asked for one part (core, RAM or a GPU) in one region."""

    def __init__(self, skus: list[_Sku]) -> None:
        self.skus = skus

    def _one(self, matches: list[_Sku], what: str, unit: str) -> tuple[float | None, str]:
        if not matches:
            return None, f"no on-demand {what} SKU"
        usd = [s for s in matches if s.currency == "USD"]
        if not usd:
            currencies = ", ".join(sorted({s.currency for s in matches}))
            return None, f"the {what} SKU is priced in {currencies}, not USD"
        prices = {s.price for s in usd if s.unit == unit and s.price is not None}
        if len(prices) != 1:
            shown = ", ".join(f"{p:g}" for p in sorted(prices)) or "none in " + unit
            return None, f"{what} SKUs disagree or are tiered ({shown})"
        return prices.pop(), ""

    def part(self, family: str, kind: str, region: str) -> tuple[float | None, str]:
        pattern = _part_pattern(family)
        matches = [s for s in self.skus if region in s.regions
                   and (m := pattern.match(s.description)) and m.group(1) == kind]
        unit = "h" if kind == "Core" else "GiBy.h"
        return self._one(matches, f"{family.upper()} {kind.lower()}", unit)

    def gpu(self, accelerator: str, region: str) -> tuple[float | None, str]:
        wanted = _gpu_tokens(accelerator)
        matches = [s for s in self.skus if region in s.regions
                   and (m := _GPU_DESCRIPTION.match(s.description))
                   and _gpu_tokens(m.group(1)) == wanted]
        return self._one(matches, f"{accelerator} GPU", "h")


def price_of(mt: _MachineType, region: str, book: _PriceBook) -> tuple[float | None, str]:
    """The hourly on-demand price of one type in one region, or None and why."""
    if mt.bundles_local_ssd:
        return None, "the price includes local SSD, which is not read"
    family = mt.spec.name.split("-")[0]
    core, why = book.part(family, "Core", region)
    if core is None:
        return None, why
    ram, why = book.part(family, "Ram", region)
    if ram is None:
        return None, why
    total = mt.spec.vcpus * core + mt.spec.memory_gib * ram
    if mt.spec.gpus:
        if mt.accelerator is None:
            return None, "no accelerator type"
        gpu, why = book.gpu(mt.accelerator, region)
        if gpu is None:
            return None, why
        total += mt.spec.gpus * gpu
    return round(total, 6), ""


def _grouped(missing: dict[tuple[str, str], list[str]]) -> list[str]:
    """One warning per (region, reason), naming the first few types."""
    out = []
    for (region, reason), names in sorted(missing.items()):
        names = sorted(names)
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        out.append(f"gcp {region}: no price for {shown}: {reason}")
    return out


def build_snapshot(type_pages: Iterable[dict[str, Any]], sku_pages: Iterable[dict[str, Any]],
                   regions: tuple[str, ...], now: datetime) -> Snapshot:
    """The snapshot from the two APIs' pages (the network-free half of :func:`fetch`)."""
    types, zones, warnings = parse_machine_types(type_pages, regions)
    skus = [s for page in sku_pages for raw in page.get("skus") or []
            if (s := _sku(raw)) is not None]
    book = _PriceBook(skus)
    offerings = []
    missing: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (name, region), zone_set in sorted(zones.items()):
        price, why = price_of(types[name], region, book)
        if price is None:
            missing[(region, why)].append(name)
        offerings.append(FetchedOffering(name, region, tuple(sorted(zone_set)), price))
    return Snapshot(
        provider="gcp",
        regions=regions,
        types=tuple(types[n].spec for n in sorted(types)),
        offerings=tuple(offerings),
        sources=SOURCES,
        fetched_at=now,
        warnings=tuple(warnings + _grouped(missing)),
    )


def fetch(credential: Credential, regions: tuple[str, ...], now: datetime, *,
          transport: Transport | None = None,
          secret: Mapping[str, str] | None = None) -> Snapshot:
    """Read ``regions`` of GCP with ``credential`` (reference: project, and key_file unless
    ``secret``, its sealed service-account key opened, carries the key itself)."""
    if not regions:
        raise RefreshError("gcp: name at least one region to refresh")
    project = credential.reference.get("project")
    key_file = credential.reference.get("key_file")
    if not project or not (key_file or secret):
        raise RefreshError(f"credential {credential.name}: a gcp credential needs project and "
                           f"key_file")
    key = gcp_auth.parse_key(secret["service_account_json"],
                             f"credential {credential.name}'s sealed key") \
        if secret is not None else gcp_auth.load_key(str(key_file))
    token = gcp_auth.access_token(key, now, JsonHttp("gcp oauth2", transport))
    auth = {"Authorization": f"Bearer {token}"}
    compute = JsonHttp("gcp compute", transport)
    billing = JsonHttp("gcp cloudbilling", transport)
    # Lists are materialised here: a failure on any page raises before anything is built.
    type_pages = list(compute.pages(
        with_query(f"{COMPUTE}/projects/{project}/aggregated/machineTypes", maxResults="500"),
        f"machineTypes.aggregatedList (project {project}, for {', '.join(regions)})",
        page_token_link(), auth))
    sku_pages = list(billing.pages(
        with_query(f"{BILLING}/services/{COMPUTE_ENGINE_SERVICE}/skus", pageSize="5000",
                   currencyCode="USD"),
        f"services/{COMPUTE_ENGINE_SERVICE}/skus (for {', '.join(regions)})",
        page_token_link(), auth))
    return build_snapshot(type_pages, sku_pages, regions, now)
