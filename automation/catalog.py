"""The VM catalog: providers, regions, zones and VM types, read from ``data/catalog.toml``."""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

ZoneStyle = Literal["suffix", "digit", "none"]


def data_dir() -> Path:
    """``data/`` of a checkout, ``anycloud_data/`` of an installed wheel (one rule, in
    ``stacks.pins``, for the catalog and the pins alike)."""
    from stacks.pins import DATA_DIR

    return DATA_DIR


class VmType(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    arch: Literal["x86_64", "arm64"]
    vcpus: int
    memory_gib: float
    gpus: int = 0
    gpu_model: str | None = None

    @property
    def accelerator(self) -> str | None:
        return "nvidia" if self.gpus else None


class ProviderCatalog(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    name: str
    isolated_networking: bool
    zone_style: ZoneStyle
    regions: dict[str, list[str]]
    vm_types: list[VmType]
    # region -> VM type -> the zones that offer it. A region listed here names every type it
    # offers; a region absent has no offering data, and every zone is assumed to offer
    # every type (the cloud refuses at create time if not).
    offerings: dict[str, dict[str, list[str]]] = {}

    def vm_type(self, name: str) -> VmType | None:
        return next((t for t in self.vm_types if t.name == name), None)

    def zones_offering(self, region: str, vm_type: str) -> list[str]:
        """The zones of ``region`` that offer ``vm_type``, in the region's zone order."""
        zones = self.regions.get(region, [])
        known = self.offerings.get(region)
        if known is None:
            return list(zones)
        offered = set(known.get(vm_type, ()))
        return [z for z in zones if z in offered]


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True)

    providers: dict[str, ProviderCatalog]

    def provider(self, key: str) -> ProviderCatalog | None:
        return self.providers.get(key)

    @property
    def isolated_providers(self) -> list[str]:
        return sorted(k for k, p in self.providers.items() if p.isolated_networking)


def parse_catalog(raw: dict[str, object]) -> Catalog:
    providers = raw.get("providers", {})
    assert isinstance(providers, dict)
    return Catalog(providers={k: ProviderCatalog(key=k, **v) for k, v in providers.items()})


@cache
def load_catalog(path: Path | None = None) -> Catalog:
    with open(path or data_dir() / "catalog.toml", "rb") as fh:
        return parse_catalog(tomllib.load(fh))
