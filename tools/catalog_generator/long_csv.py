"""GCP and Azure from the long-form CSVs in ``sources/`` (one row per type and region)."""

from __future__ import annotations

import csv
import gzip
import re
from pathlib import Path

# One copy of the family rules: the live refresh (automation.catalog.refresh) uses them too.
from automation.catalog.refresh.azure import azure_family
from automation.catalog.refresh.gcp import gcp_family
from tools.catalog_generator.rows import Collected, Offering, Region, Source, VmType

SOURCES = Path(__file__).with_name("sources")
_FRACTION = re.compile(r"\d+\.\d*[1-9]")


def _gpu_model(raw: str) -> str | None:
    # "A100-80GB" -> "NVIDIA A100 80GB": one spelling across clouds for --gpu filters.
    return f"NVIDIA {raw.replace('-', ' ')}" if raw else None


def _gpus(raw: str) -> int | None:
    """Whole devices, or None for a partition (0.25 of a GPU: no nvidia.com/gpu count)."""
    if _FRACTION.fullmatch(raw):
        return None
    return int(float(raw))


# Azure's AMD Instinct sizes (MI25, MI300X) are GPU types but not NVIDIA: left out.
_NVIDIA_ONLY = {"MI25", "MI300X"}


def collect(provider: str, file: str, sources: list[Source], zones_source: str | None,
            region_zones: dict[str, tuple[str, ...]] | None = None,
            region_source: str | None = None) -> Collected:
    """Rows of one CSV. ``region_zones`` (from ``region_source``) gives the regions' zones
    when the file has none; otherwise a region's zones are those its rows name."""
    out = Collected(sources=sources)
    spec_source = sources[0].key
    family = gcp_family if provider == "gcp" else azure_family
    seen: dict[str, VmType] = {}
    zones_by_region: dict[str, set[str]] = {}
    with gzip.open(SOURCES / file, "rt", newline="") as fh:
        rows = sorted(csv.DictReader(fh), key=lambda r: (r["name"], r["region"]))
    for row in rows:
        gpus = _gpus(row["gpus"])
        # Left out: GPU partitions, AMD GPUs, and shared-core types (0.25 vCPU: no whole
        # CPU for an agent; the Node advertises whole CPUs).
        if gpus is None or row["gpu_model"] in _NVIDIA_ONLY or "." in row["vcpus"]:
            continue
        vm = VmType(provider, row["name"], row["arch"], int(row["vcpus"]),
                    round(float(row["memory_gib"]), 3), gpus, _gpu_model(row["gpu_model"]),
                    family(row["name"], gpus), spec_source)
        if seen.setdefault(vm.name, vm) != vm:
            raise ValueError(f"{file}: {vm.name} has two different specs: {seen[vm.name]} / {vm}")
        zones = tuple(sorted(z for z in row["zones"].split(";") if z)) or None
        zones_by_region.setdefault(row["region"], set()).update(zones or ())
        price = float(row["price_usd_hour"]) if row["price_usd_hour"] else None
        out.offerings.append(Offering(
            provider, vm.name, row["region"], zones, zones_source if zones else None,
            round(price, 6) if price else None, spec_source if price else None,
        ))
    out.vm_types = [seen[n] for n in sorted(seen)]
    for region in sorted(zones_by_region):
        if region_zones is None:
            zones_of_region = tuple(sorted(zones_by_region[region]))
        else:
            zones_of_region = region_zones.get(region, ())
        out.regions.append(Region(provider, region, zones_of_region,
                                  region_source or zones_source or spec_source))
    return out
