"""The VM catalog: providers, regions, zones, VM types, offerings and prices.

Read from ``data/catalog.sqlite``, built by ``python -m tools.catalog_generator.generate``
from public data (see ``tools/catalog_generator/README.md``). Opening it reads only the
providers and regions (a few hundred rows); a VM type, an offering or a price is one indexed
lookup, on demand.

A catalog may carry an overlay (``with_overlay``): the newest live refresh of each region
(``automation.catalog.refresh``), read from the ledger. For a region a refresh read, that
refresh is the whole truth (types, zones, prices) unless the shipped data is newer; a type
known only to a refresh is a real type. The overlay answers one cheap query first and
nothing more when no refresh was ever stored.
"""

from __future__ import annotations

import difflib
import os
import re
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache, cached_property
from pathlib import Path
from typing import Literal, Protocol, cast

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

    id: int | str  # int: the shipped catalog's sources table; str: a live refresh's
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


@dataclass(frozen=True)
class RegionRefresh:
    """The newest refresh that read a region: the whole truth there as of ``fetched_at``."""

    provider: str
    region: str
    refresh_id: str
    fetched_at: datetime
    zones: tuple[str, ...]  # those offering any type, as the refresh saw them
    credential: str  # the credential's name
    zones_api: str  # "aws EC2 DescribeInstanceTypeOfferings"
    price_api: str  # "aws Price List API"

    @property
    def as_of(self) -> str:
        return self.fetched_at.strftime("%Y-%m-%dT%H:%M:%SZ")

    def source(self, api: str, kind: str) -> Source:
        """``kind`` (zones, prices, specs) keeps the refresh's sources apart by id."""
        return Source(id=f"{self.refresh_id}/{kind}",
                      name=f"{api} via credential {self.credential}", url="", licence="",
                      as_of=self.as_of, stale=False,
                      note=f"anycloud catalog refresh {self.refresh_id}")

    @property
    def zones_source(self) -> Source:
        return self.source(self.zones_api, "zones")

    @property
    def price_source(self) -> Source:
        return self.source(self.price_api, "prices")

    @property
    def note(self) -> str:
        return f"per the {self.provider} refresh of {self.as_of} via credential {self.credential}"


@dataclass(frozen=True)
class OverlayOffering:
    """One offering row of a refresh."""

    refresh_id: str
    region: str
    vm_type: str
    zones: tuple[str, ...] | None
    price_usd_hour: float | None


class CatalogOverlay(Protocol):
    """Newer data over the shipped catalog (``catalog_refresh.overlay.LedgerOverlay``)."""

    def coverage(self) -> dict[tuple[str, str], RegionRefresh]:
        """(provider, region) -> its newest refresh; one query, remembered."""
        ...

    def vm_type(self, provider: str, name: str) -> tuple[VmType, Source] | None:
        """The newest refreshed specs of a type (one indexed query)."""
        ...

    def offering(self, refresh: RegionRefresh, vm_type: str) -> OverlayOffering | None:
        """The type in the refresh's region (one primary-key lookup)."""
        ...

    def offerings(self, provider: str, vm_type: str) -> list[OverlayOffering]:
        """Every refreshed offering row of the type, in any refresh (one indexed query)."""
        ...

    def region_listing(
        self, refreshes: list[RegionRefresh]
    ) -> list[tuple[VmType, OverlayOffering]]:
        """Every offering of these refreshed regions with its type's specs."""
        ...


class _Db:
    """Read-only, immutable connections: one per thread and process (never shared across a
    fork or between threads, as SQLite asks)."""

    def __init__(self, path: Path) -> None:
        if not path.exists():
            raise FileNotFoundError(
                f"{path}: no VM catalog; build it with python -m tools.catalog_generator.generate"
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
                 zone_style: ZoneStyle, regions: dict[str, list[str]],
                 region_dates: dict[str, str] | None = None) -> None:
        self._catalog = catalog
        self._db = catalog._db
        self.key = key
        self.name = name
        self.isolated_networking = isolated_networking
        self.zone_style: ZoneStyle = zone_style
        self._shipped_regions = regions
        self._region_dates = region_dates or {}  # region -> the shipped data's as_of
        self._types: dict[str, VmType | None] = {}

    @cached_property
    def refreshed(self) -> dict[str, RegionRefresh]:
        """Regions whose newest data is a live refresh (newer than the shipped data)."""
        overlay = self._catalog.overlay
        if overlay is None:
            return {}
        return {region: r for (provider, region), r in overlay.coverage().items()
                if provider == self.key
                and r.fetched_at.date().isoformat() >= self._region_dates.get(region, "")}

    @cached_property
    def regions(self) -> dict[str, list[str]]:
        """Every region with its zones: the shipped ones, as a refresh last saw them."""
        if not self.refreshed:
            return self._shipped_regions
        merged = dict(self._shipped_regions)
        for region, r in self.refreshed.items():
            merged[region] = list(r.zones) or merged.get(region, [])
        return dict(sorted(merged.items()))

    def region_note(self, region: str) -> str | None:
        """Where a refreshed region's data comes from ("per the aws refresh of ...")."""
        r = self.refreshed.get(region)
        return r.note if r else None

    def _overlay_type(self, name: str) -> tuple[VmType, Source] | None:
        overlay = self._catalog.overlay
        if overlay is None or not self.refreshed:
            return None
        return overlay.vm_type(self.key, name)

    def vm_type(self, name: str) -> VmType | None:
        """One indexed lookup (then remembered); a refresh's specs win over the shipped."""
        if name not in self._types:
            refreshed = self._overlay_type(name)
            if refreshed is not None:
                self._types[name] = refreshed[0]
                return refreshed[0]
            rows = self._db.rows(
                f"SELECT {_TYPE_COLUMNS} FROM vm_types WHERE provider = ? AND name = ?",
                (self.key, name),
            )
            self._types[name] = _vm(rows[0]) if rows else None
        return self._types[name]

    @cached_property
    def vm_types(self) -> list[VmType]:
        """Every type of the provider, by name (for listings; ``vm_type`` for one)."""
        types = {vm.name: vm for vm in (_vm(r) for r in self._db.rows(
            f"SELECT {_TYPE_COLUMNS} FROM vm_types WHERE provider = ? ORDER BY name", (self.key,)
        ))}
        overlay = self._catalog.overlay
        if overlay is not None and self.refreshed:
            for vm, _ in overlay.region_listing(list(self.refreshed.values())):
                types[vm.name] = vm
        return sorted(types.values(), key=lambda vm: vm.name)

    def spec_source(self, vm_type: str) -> Source | None:
        """Where the type's specs (arch, vCPUs, memory, GPUs) come from."""
        refreshed = self._overlay_type(vm_type)
        if refreshed is not None:
            return refreshed[1]
        rows = self._db.rows(
            "SELECT source_id FROM vm_types WHERE provider = ? AND name = ?", (self.key, vm_type)
        )
        return self._catalog.source(rows[0][0]) if rows else None

    def _refreshed_offering(self, row: OverlayOffering, r: RegionRefresh) -> Offering:
        return Offering(
            provider=self.key, vm_type=row.vm_type, region=row.region,
            zones=None if row.zones is None else list(row.zones),
            zones_source=r.zones_source, price_usd_hour=row.price_usd_hour,
            price_source=r.price_source if row.price_usd_hour is not None else None,
        )

    def offering(self, vm_type: str, region: str) -> Offering | None:
        """``vm_type`` in ``region``, or None when the region does not offer it."""
        r = self.refreshed.get(region)
        if r is not None:
            assert self._catalog.overlay is not None
            row = self._catalog.overlay.offering(r, vm_type)
            return None if row is None else self._refreshed_offering(row, r)
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
            zones=_mask_zones(self._shipped_regions.get(region, []), mask),
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
        found = [Offering(
            provider=self.key, vm_type=vm_type, region=str(region),
            zones=_mask_zones(self._shipped_regions.get(str(region), []), mask),
            zones_source=self._catalog.source(zs),
            price_usd_hour=price if isinstance(price, float) else None,
            price_source=self._catalog.source(ps),
        ) for region, mask, zs, price, ps in rows if str(region) not in self.refreshed]
        overlay = self._catalog.overlay
        if overlay is not None and self.refreshed:
            for row in overlay.offerings(self.key, vm_type):
                r = self.refreshed.get(row.region)
                if r is not None and r.refresh_id == row.refresh_id:
                    found.append(self._refreshed_offering(row, r))
        return sorted(found, key=lambda o: o.region)

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
        overlay = self._catalog.overlay
        if region is not None and region in self.refreshed and overlay is not None:
            names = sorted(vm.name for vm, _ in
                           overlay.region_listing([self.refreshed[region]]))
            return difflib.get_close_matches(name, names, n=n, cutoff=0.6)
        if region in self._shipped_regions:
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


# Catalog.listing's answers, newest use last: (content_key, filter) -> the listing.
_LISTINGS: OrderedDict[tuple[object, ...], tuple[Listed, ...]] = OrderedDict()
_LISTINGS_LOCK = threading.Lock()
_LISTINGS_KEPT = 16  # a full listing is ~2,000 types: ~1 MB each


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
    """The whole catalog over one read-only file (and an optional overlay of live data)."""

    def __init__(self, path: Path, overlay: CatalogOverlay | None = None) -> None:
        self._db = _Db(path)
        self.path = path
        self.overlay = overlay
        regions: dict[str, dict[str, list[str]]] = {}
        dates: dict[str, dict[str, int]] = {}
        for provider, region, zones, source_id in self._db.rows(
            "SELECT provider, region, zones, source_id FROM regions ORDER BY provider, region"
        ):
            regions.setdefault(str(provider), {})[str(region)] = str(zones).split()
            dates.setdefault(str(provider), {})[str(region)] = cast(int, source_id)
        self._regions = regions
        self._region_sources = dates
        self._provider_rows = [
            (str(key), str(name), bool(isolated), cast(ZoneStyle, zone_style))
            for key, name, isolated, zone_style in self._db.rows(
                "SELECT key, name, isolated_networking, zone_style FROM providers ORDER BY key"
            )
        ]
        self.providers: dict[str, ProviderCatalog] = self._build_providers()

    def _build_providers(self) -> dict[str, ProviderCatalog]:
        return {
            key: ProviderCatalog(self, key, name, isolated, zone_style,
                                 self._regions.get(key, {}), self._region_dates(key))
            for key, name, isolated, zone_style in self._provider_rows
        }

    def _region_dates(self, provider: str) -> dict[str, str] | None:
        """The shipped data's date per region (read only when an overlay needs comparing)."""
        if self.overlay is None:
            return None
        sources = self._region_sources.get(provider, {})
        return {region: source.as_of for region, sid in sources.items()
                if (source := self.source(sid)) is not None}

    def with_overlay(self, overlay: CatalogOverlay) -> Catalog:
        """The same file with ``overlay`` over it (this catalog is left as it is)."""
        twin = object.__new__(Catalog)
        twin.__dict__.update({k: v for k, v in self.__dict__.items() if k != "providers"})
        twin.overlay = overlay
        twin.providers = twin._build_providers()
        return twin

    def __reduce__(self) -> tuple[object, tuple[Path, CatalogOverlay | None]]:
        # Pickled as its path and overlay (connections are per process): a worker reopens it.
        return (_reopen, (self.path, self.overlay))

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
        if isinstance(source_id, Source):
            return source_id
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

    def _refreshed_rows(
        self, f: ListFilter
    ) -> tuple[set[tuple[str, str]], list[tuple[object, ...]]]:
        """The refreshed (provider, region) pairs the filter covers, and their offerings as
        rows shaped like the shipped listing's (the source column holds a Source)."""
        if self.overlay is None:
            return set(), []
        refreshes = [r for key, cloud in self.providers.items()
                     if f.provider in (None, key)
                     for region, r in cloud.refreshed.items() if f.region in (None, region)]
        covered = {(key, region) for key, cloud in self.providers.items()
                   for region in cloud.refreshed}
        if not refreshes:
            return covered, []
        by_id = {(r.refresh_id, r.region): r for r in refreshes}
        rows: list[tuple[object, ...]] = []
        for vm, o in self.overlay.region_listing(refreshes):
            r = by_id[(o.refresh_id, o.region)]
            if not _keeps(f, vm, o.price_usd_hour):
                continue
            zones = o.zones
            rows.append((r.provider, vm.name, vm.arch, vm.vcpus, vm.memory_gib, vm.gpus,
                         vm.gpu_model, vm.family, o.region,
                         " ".join(zones) if zones is not None else "",
                         None if zones is None else (1 << len(zones)) - 1,
                         o.price_usd_hour,
                         r.price_source if o.price_usd_hour is not None else None))
        return covered, rows

    def content_key(self) -> tuple[object, ...]:
        """What this catalog's answers depend on: its file and the newest refresh of each
        region over it (a stored refresh never changes; a newer one changes the coverage,
        and so the key)."""
        refreshed = () if self.overlay is None else tuple(
            r for _, r in sorted(self.overlay.coverage().items()))
        return (str(self.path), refreshed)

    def listing(self, f: ListFilter) -> list[Listed]:
        """Types matching ``f``, cheapest first, unknown prices last. Remembered per
        ``content_key`` and filter (``_LISTINGS``): the API and the dashboard ask the same
        listing again and again, ~0.3 s of queries and sorting each time, while what it
        depends on changes only with a refresh."""
        key = (self.content_key(), f)
        with _LISTINGS_LOCK:
            found = _LISTINGS.get(key)
            if found is not None:
                _LISTINGS.move_to_end(key)
                return list(found)
        listed = self._listing(f)
        with _LISTINGS_LOCK:
            _LISTINGS[key] = tuple(listed)
            while len(_LISTINGS) > _LISTINGS_KEPT:
                _LISTINGS.popitem(last=False)
        return listed

    def _listing(self, f: ListFilter) -> list[Listed]:
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
        covered, refreshed = self._refreshed_rows(f)
        if covered:  # a refreshed region's shipped rows give way to the refresh's
            rows = [row for row in rows if (row[0], row[8]) not in covered] + refreshed
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


def _keeps(f: ListFilter, vm: VmType, price: float | None) -> bool:
    """The listing's SQL filters, for a refreshed row (GPU words and zones are checked later
    for every row alike)."""
    return ((f.arch is None or vm.arch == f.arch)
            and (f.min_gpus is None or vm.gpus >= f.min_gpus)
            and (f.min_vcpus is None or vm.vcpus >= f.min_vcpus)
            and (f.min_memory_gib is None or vm.memory_gib >= f.min_memory_gib)
            and (f.max_price is None or (price is not None and price <= f.max_price))
            and (not f.gpu or (vm.gpus > 0 and f.gpu.strip().lower()
                               in (vm.gpu_model or "").lower())))


def _reopen(path: Path, overlay: CatalogOverlay | None) -> Catalog:
    catalog = Catalog(path)
    return catalog if overlay is None else catalog.with_overlay(overlay)


@cache
def load_catalog(path: Path | None = None) -> Catalog:
    return Catalog(path or data_dir() / CATALOG_FILE)
