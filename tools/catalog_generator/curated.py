"""The hand-kept inputs (``curated.toml``): providers, Azure's zone-enabled regions, Lambda."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from tools.catalog_generator.rows import Collected, Offering, Provider, Region, Source, VmType

CURATED = Path(__file__).with_name("curated.toml")


def load() -> dict[str, Any]:
    with CURATED.open("rb") as fh:
        return tomllib.load(fh)


def collect(raw: dict[str, Any]) -> Collected:
    out = Collected(sources=[Source(**s) for s in raw["sources"]])
    for key, spec in sorted(raw["providers"].items()):
        out.providers.append(Provider(key, spec["name"], spec["isolated_networking"],
                                      spec["zone_style"], "curated-providers"))
    lam = raw["providers"]["lambda"]
    for region in lam["regions"]:
        out.regions.append(Region("lambda", region, (), "lambda-types"))
    for t in lam["vm_types"]:
        out.vm_types.append(VmType(provider="lambda", source="lambda-types", **t))
        for region in lam["regions"]:
            out.offerings.append(Offering("lambda", t["name"], region, None, None, None, None))
    return out


def azure_region_zones(raw: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    return {r: ("1", "2", "3") for r in raw["providers"]["azure"]["zone_enabled_regions"]}
