"""The generator's rows, one dataclass per table of ``data/catalog.sqlite``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    key: str  # stable handle while generating; the file refers to sources by id
    name: str
    url: str
    licence: str
    as_of: str  # ISO date the figures were true (or published)
    stale: bool = False
    note: str = ""


@dataclass(frozen=True)
class Provider:
    key: str
    name: str
    isolated_networking: bool
    zone_style: str
    source: str


@dataclass(frozen=True)
class Region:
    provider: str
    region: str
    zones: tuple[str, ...]
    source: str


@dataclass(frozen=True)
class VmType:
    provider: str
    name: str
    arch: str
    vcpus: int
    memory_gib: float
    gpus: int
    gpu_model: str | None
    family: str  # general-purpose | compute-optimised | gpu
    source: str


@dataclass(frozen=True)
class Offering:
    provider: str
    vm_type: str
    region: str
    zones: tuple[str, ...] | None  # None: which zones is unknown
    zones_source: str | None
    price_usd_hour: float | None  # None: unknown
    price_source: str | None


@dataclass(frozen=True)
class OtherType:
    """A real name of the cloud outside the catalog's families (to say so, not 'unknown')."""

    provider: str
    name: str
    family: str
    source: str


@dataclass
class Collected:
    sources: list[Source] = field(default_factory=list)
    providers: list[Provider] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    vm_types: list[VmType] = field(default_factory=list)
    offerings: list[Offering] = field(default_factory=list)
    other_types: list[OtherType] = field(default_factory=list)

    def extend(self, other: Collected) -> None:
        self.sources += other.sources
        self.providers += other.providers
        self.regions += other.regions
        self.vm_types += other.vm_types
        self.offerings += other.offerings
        self.other_types += other.other_types
