"""The VM catalog: providers, regions, zones, VM types, offerings and prices.

Read from ``data/catalog.sqlite``, built by ``python -m tools.catalog.generate`` from public
data (see ``tools/catalog/README.md``). Opening it reads only the providers and regions (a few
hundred rows); a VM type, an offering or a price is one indexed lookup, on demand.
"""

from __future__ import annotations

import difflib
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Literal, cast

from pydantic import BaseModel, ConfigDict

ZoneStyle = Literal["suffix", "digit", "none"]
CATALOG_FILE = "catalog.sqlite"


def data_dir() -> Path:
    """``data/`` of a checkout, ``anycloud_data/`` of an installed wheel (one rule, in
    ``stacks.data_dir``, for the catalog and the pins alike)."""
    from stacks.data_dir import DATA_DIR

    return DATA_DIR


class VmType(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    arch: Literal["x86_64", "arm64"]
    vcpus: int
    memory_gib: float
    gpus: int = 0  # whole NVIDIA devices: the nvidia.com/gpu count the Node must advertise
    gpu_model: str | None = None
    family: str = "general-purpose"  # general-purpose | compute-optimised | gpu

    @property
    def accelerator(self) -> str | None:
        return "nvidia" if self.gpus else None


class Source(BaseModel):
    """Where a figure comes from and the date it was true."""

    model_config = ConfigDict(frozen=True)

    id: int
    name: str
    url: str
    licence: str
    as_of: str
    stale: bool
    note: str


class Offering(BaseModel):
    """A VM type in one region: its zones (None = unknown) and on-demand price (None = unknown)."""

    model_config = ConfigDict(frozen=True)

    provider: str
    vm_type: str
    region: str
    zones: list[str] | None
    zones_source: Source | None
    price_usd_hour: float | None
    price_source: Source | None


class _Db:
    """Read-only, immutable connections: one per thread and process (never shared across a
    fork or between threads, as SQLite asks)."""

    def __init__(self, path: Path) -> None:
        if not path.exists():
            raise FileNotFoundError(
                f"{path}: no VM catalog; build it with python -m tools.catalog.generate"
            )
        self.path = path
        self._local = threading.local()

    def conn(self) -> sqlite3.Connection:
        pid_conn: tuple[int, sqlite3.Connection] | None = getattr(self._local, "conn", None)
        if pid_conn is None or pid_conn[0] != os.getpid():
            con = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True)
            pid_conn = (os.getpid(), con)
            self._local.conn = pid_conn
        return pid_conn[1]

    def rows(self, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        return self.conn().execute(sql, params).fetchall()


def _mask_zones(zones: list[str], mask: object) -> list[str] | None:
    if mask is None:
        return None
    assert isinstance(mask, int)
    return [z for i, z in enumerate(zones) if mask >> i & 1]


_TYPE_COLUMNS = "name, arch, vcpus, memory_gib, gpus, gpu_model, family"


def _vm(row: tuple[object, ...]) -> VmType:
    return VmType.model_validate(dict(zip(_TYPE_COLUMNS.split(", "), row, strict=True)))


class ProviderCatalog:
    """One cloud: its regions (with zones, in order) and, on demand, its VM types."""

    def __init__(self, catalog: Catalog, key: str, name: str, isolated_networking: bool,
                 zone_style: ZoneStyle, regions: dict[str, list[str]]) -> None:
        self._catalog = catalog
        self._db = catalog._db
        self.key = key
        self.name = name
        self.isolated_networking = isolated_networking
        self.zone_style: ZoneStyle = zone_style
        self.regions = regions
        self._types: dict[str, VmType | None] = {}

    def vm_type(self, name: str) -> VmType | None:
        """One indexed lookup (then remembered)."""
        if name not in self._types:
            rows = self._db.rows(
                f"SELECT {_TYPE_COLUMNS} FROM vm_types WHERE provider = ? AND name = ?",
                (self.key, name),
            )
            self._types[name] = _vm(rows[0]) if rows else None
        return self._types[name]

    @cached_property
    def vm_types(self) -> list[VmType]:
        """Every type of the provider, by name (for listings; ``vm_type`` for one)."""
        return [_vm(r) for r in self._db.rows(
            f"SELECT {_TYPE_COLUMNS} FROM vm_types WHERE provider = ? ORDER BY name", (self.key,)
        )]

    def spec_source(self, vm_type: str) -> Source | None:
        """Where the type's specs (arch, vCPUs, memory, GPUs) come from."""
        rows = self._db.rows(
            "SELECT source_id FROM vm_types WHERE provider = ? AND name = ?", (self.key, vm_type)
        )
        return self._catalog.source(rows[0][0]) if rows else None

    def offering(self, vm_type: str, region: str) -> Offering | None:
        """``vm_type`` in ``region``, or None when the region does not offer it."""
        rows = self._db.rows(
            "SELECT o.zones_mask, o.zones_source_id, o.price_usd_hour, o.price_source_id "
            "FROM vm_types t JOIN regions r ON r.provider = t.provider AND r.region = ? "
            "JOIN offerings o ON o.type_id = t.id AND o.region_id = r.id "
            "WHERE t.provider = ? AND t.name = ?",
            (region, self.key, vm_type),
        )
        if not rows:
            return None
        mask, zones_source, price, price_source = rows[0]
        return Offering(
            provider=self.key, vm_type=vm_type, region=region,
            zones=_mask_zones(self.regions.get(region, []), mask),
            zones_source=self._catalog.source(zones_source),
            price_usd_hour=price if isinstance(price, float) else None,
            price_source=self._catalog.source(price_source),
        )

    def offerings(self, vm_type: str) -> list[Offering]:
        """Every region offering ``vm_type``, by region name."""
        rows = self._db.rows(
            "SELECT r.region, o.zones_mask, o.zones_source_id, o.price_usd_hour, "
            "o.price_source_id FROM vm_types t JOIN offerings o ON o.type_id = t.id "
            "JOIN regions r ON r.id = o.region_id WHERE t.provider = ? AND t.name = ? "
            "ORDER BY r.region",
            (self.key, vm_type),
        )
        return [Offering(
            provider=self.key, vm_type=vm_type, region=str(region),
            zones=_mask_zones(self.regions.get(str(region), []), mask),
            zones_source=self._catalog.source(zs),
            price_usd_hour=price if isinstance(price, float) else None,
            price_source=self._catalog.source(ps),
        ) for region, mask, zs, price, ps in rows]

    def regions_offering(self, vm_type: str) -> list[str]:
        return [o.region for o in self.offerings(vm_type)]

    def zones_offering(self, region: str, vm_type: str) -> list[str]:
        """The zones of ``region`` that offer ``vm_type``, in the region's zone order: none if
        the region does not offer it, every zone of the region if which ones is unknown."""
        offering = self.offering(vm_type, region)
        if offering is None:
            return []
        return list(self.regions.get(region, [])) if offering.zones is None else offering.zones

    def closest(self, name: str, region: str | None = None, n: int = 2) -> list[str]:
        """Real type names nearest to ``name`` (those offered in ``region`` when given)."""
        if region in self.regions:
            rows = self._db.rows(
                "SELECT t.name FROM regions r JOIN offerings o ON o.region_id = r.id "
                "JOIN vm_types t ON t.id = o.type_id WHERE r.provider = ? AND r.region = ?",
                (self.key, region),
            )
        else:
            rows = self._db.rows("SELECT name FROM vm_types WHERE provider = ?", (self.key,))
        names = sorted(str(r[0]) for r in rows)
        return difflib.get_close_matches(name, names, n=n, cutoff=0.6)

    def outside_families(self, name: str) -> str | None:
        """For a real name of the cloud the catalog leaves out: its family (why it is out)."""
        rows = self._db.rows(
            "SELECT family FROM other_types WHERE provider = ? AND name = ?", (self.key, name)
        )
        return str(rows[0][0]) if rows else None


@dataclass(frozen=True)
class ListFilter:
    provider: str | None = None
    region: str | None = None
    zone: str | None = None
    gpu: str | None = None
    min_gpus: int | None = None
    min_vcpus: int | None = None
    min_memory_gib: float | None = None
    arch: str | None = None
    max_price: float | None = None


@dataclass(frozen=True)
class Listed:
    """A type in one region (``--region`` given) or its cheapest known region (not given)."""

    provider: str
    vm: VmType
    region: str
    regions: int  # how many regions offer the type (within the filter)
    zones: list[str] | None
    price_usd_hour: float | None
    price_source: Source | None


def _gpu_words(text: str) -> str:
    return " " + re.sub(r"[-_\s]+", " ", text.lower()).strip() + " "


class Catalog:
    """The whole catalog over one read-only file."""

    def __init__(self, path: Path) -> None:
        self._db = _Db(path)
        self.path = path
        regions: dict[str, dict[str, list[str]]] = {}
        for provider, region, zones in self._db.rows(
            "SELECT provider, region, zones FROM regions ORDER BY provider, region"
        ):
            regions.setdefault(str(provider), {})[str(region)] = str(zones).split()
        self.providers: dict[str, ProviderCatalog] = {
            str(key): ProviderCatalog(self, str(key), str(name), bool(isolated),
                                      cast(ZoneStyle, zone_style), regions.get(str(key), {}))
            for key, name, isolated, zone_style in self._db.rows(
                "SELECT key, name, isolated_networking, zone_style FROM providers ORDER BY key"
            )
        }

    def __reduce__(self) -> tuple[type[Catalog], tuple[Path]]:
        # Pickled as its path (connections are per process): a worker process reopens it.
        return (Catalog, (self.path,))

    def provider(self, key: str) -> ProviderCatalog | None:
        return self.providers.get(key)

    @property
    def isolated_providers(self) -> list[str]:
        return sorted(k for k, p in self.providers.items() if p.isolated_networking)

    @cached_property
    def sources(self) -> dict[int, Source]:
        cols = ("id", "name", "url", "licence", "as_of", "stale", "note")
        rows = self._db.rows(f"SELECT {', '.join(cols)} FROM sources")
        return {cast(int, r[0]): Source.model_validate(dict(zip(cols, r, strict=True)))
                for r in rows}

    def source(self, source_id: object) -> Source | None:
        return self.sources.get(source_id) if isinstance(source_id, int) else None

    def find(self, vm_type: str, provider: str | None = None) -> list[tuple[str, VmType]]:
        """(provider, type) pairs named ``vm_type`` (type names rarely clash across clouds)."""
        keys = [provider] if provider else sorted(self.providers)
        return [(k, vm) for k in keys if k in self.providers
                for vm in [self.providers[k].vm_type(vm_type)] if vm is not None]

    def offering(self, vm_type: str, region: str, provider: str | None = None) -> Offering | None:
        for key, _ in self.find(vm_type, provider):
            if (found := self.providers[key].offering(vm_type, region)) is not None:
                return found
        return None

    def regions_offering(self, vm_type: str, provider: str | None = None) -> list[str]:
        return [r for key, _ in self.find(vm_type, provider)
                for r in self.providers[key].regions_offering(vm_type)]

    def listing(self, f: ListFilter) -> list[Listed]:
        """Types matching ``f``, cheapest first, unknown prices last."""
        where: list[str] = ["1 = 1"]
        params: list[object] = []
        for clause, value in (
            ("t.provider = ?", f.provider), ("r.region = ?", f.region), ("t.arch = ?", f.arch),
            ("t.gpus >= ?", f.min_gpus), ("t.vcpus >= ?", f.min_vcpus),
            ("t.memory_gib >= ?", f.min_memory_gib), ("o.price_usd_hour <= ?", f.max_price),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        if f.gpu:  # narrowed here, matched on whole words below
            where.append("t.gpus > 0 AND t.gpu_model LIKE ?")
            params.append(f"%{f.gpu.strip()}%")
        rows = self._db.rows(  # columns: provider, the type (1-7), region, zones, mask, price
            f"SELECT t.provider, {', '.join('t.' + c for c in _TYPE_COLUMNS.split(', '))}, "
            "r.region, r.zones, o.zones_mask, o.price_usd_hour, o.price_source_id "
            "FROM vm_types t JOIN offerings o ON o.type_id = t.id "
            f"JOIN regions r ON r.id = o.region_id WHERE {' AND '.join(where)}",
            tuple(params),
        )
        wanted_gpu = _gpu_words(f.gpu) if f.gpu else None
        # Per type: how many regions match, and the row with the cheapest known price (the
        # first matching row when no price is known). Models are built once per kept type.
        best: dict[tuple[str, str], tuple[int, tuple[object, ...]]] = {}
        for row in rows:
            if wanted_gpu and wanted_gpu not in _gpu_words(str(row[6])):
                continue
            zones_text, mask, price = row[9], row[10], row[11]
            if f.zone is not None:
                order = str(zones_text).split()
                zones = _mask_zones(order, mask)
                if f.zone not in (order if zones is None else zones):
                    continue
            key = (str(row[0]), str(row[1]))
            seen = best.get(key)
            if seen is None:
                best[key] = (1, row)
                continue
            old_price = seen[1][11]
            cheaper = isinstance(price, float) and (
                not isinstance(old_price, float) or price < old_price)
            best[key] = (seen[0] + 1, row if cheaper else seen[1])
        listed = [
            Listed(str(row[0]), _vm(row[1:8]), str(row[8]), count,
                   _mask_zones(str(row[9]).split(), row[10]),
                   row[11] if isinstance(row[11], float) else None, self.source(row[12]))
            for count, row in best.values()
        ]
        return sorted(listed, key=lambda x: (
            x.price_usd_hour is None, x.price_usd_hour or 0.0, x.provider, x.vm.name))

    def __iter__(self) -> Iterator[ProviderCatalog]:
        return iter(self.providers.values())


@cache
def load_catalog(path: Path | None = None) -> Catalog:
    return Catalog(path or data_dir() / CATALOG_FILE)
