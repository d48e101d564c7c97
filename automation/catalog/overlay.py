"""Reading stored refreshes back: the newest data per (cloud, region), over the shipped catalog.

The newest refresh that read a region is the whole truth for it (``RegionRefresh``); older
refreshes of that region are history. Every read is one statement through the bare driver
(``Ledger.query``: no SQLAlchemy import on the hot paths), the first one (``coverage``) also
says whether any refresh exists: when none does, nothing else is ever asked.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from automation.catalog.store import OverlayOffering, RegionRefresh, Source, VmType
from automation.ledger.db import Ledger

# What each cloud's fetcher read, as people know the APIs (the stored sources name the calls).
ZONES_APIS = {
    "aws": "aws EC2 DescribeInstanceTypeOfferings",
    "gcp": "gcp Compute Engine machineTypes",
    "azure": "azure Resource SKUs API",
}
PRICE_APIS = {
    "aws": "aws Price List API",
    "gcp": "gcp Cloud Billing Catalog API",
    "azure": "azure Retail Prices API",
}

# The newest refresh of each (cloud, region): no newer row for the same region exists (ties
# broken by the time-ordered id). Indexed by (provider, region, fetched_at).
COVERAGE_SQL = """
SELECT g.provider, g.region, g.refresh_id, g.fetched_at, g.zones, c.name AS credential
FROM catalog_refresh_regions g
JOIN catalog_refreshes r ON r.id = g.refresh_id
JOIN credentials c ON c.id = r.credential_id
WHERE NOT EXISTS (
    SELECT 1 FROM catalog_refresh_regions n
    WHERE n.provider = g.provider AND n.region = g.region
      AND (n.fetched_at > g.fetched_at
           OR (n.fetched_at = g.fetched_at AND n.refresh_id > g.refresh_id)))
"""
_TYPE_COLUMNS = "t.name, t.arch, t.vcpus, t.memory_gib, t.gpus, t.gpu_model, t.family"


def utc(value: Any) -> datetime:
    """SQLite gives text, PostgreSQL a naive datetime; both are UTC (schema.UTCDateTime)."""
    stamp = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return stamp.replace(tzinfo=UTC)


def _zones(text: Any) -> tuple[str, ...] | None:
    return None if text is None else tuple(str(text).split())


def _vm(row: dict[str, Any]) -> VmType:
    return VmType(name=row["name"], arch=row["arch"], vcpus=int(row["vcpus"]),
                  memory_gib=float(row["memory_gib"]), gpus=int(row["gpus"]),
                  gpu_model=row["gpu_model"], family=row["family"])


def _offering(row: dict[str, Any]) -> OverlayOffering:
    price = row["price_usd_hour"]
    return OverlayOffering(refresh_id=row["refresh_id"], region=row["region"],
                           vm_type=row["vm_type"], zones=_zones(row["zones"]),
                           price_usd_hour=None if price is None else float(price))


def _in(prefix: str, values: Iterable[str]) -> tuple[str, dict[str, str]]:
    """``(:p0, :p1, ...)`` and its parameters (plain SQL for both dialects)."""
    params = {f"{prefix}{i}": v for i, v in enumerate(values)}
    return "(" + ", ".join(f":{k}" for k in params) + ")", params


def coverage(ledger: Ledger) -> dict[tuple[str, str], RegionRefresh]:
    """(provider, region) -> the newest refresh that read it. One statement."""
    return {(row["provider"], row["region"]): RegionRefresh(
        provider=row["provider"], region=row["region"], refresh_id=row["refresh_id"],
        fetched_at=utc(row["fetched_at"]), zones=tuple(str(row["zones"]).split()),
        credential=row["credential"],
        zones_api=ZONES_APIS.get(row["provider"], f"{row['provider']} APIs"),
        price_api=PRICE_APIS.get(row["provider"], f"{row['provider']} APIs"),
    ) for row in ledger.query(COVERAGE_SQL)}


class LedgerOverlay:
    """The ledger's refreshes as a ``catalog.CatalogOverlay``."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._coverage: dict[tuple[str, str], RegionRefresh] | None = None

    def __reduce__(self) -> tuple[type[LedgerOverlay], tuple[Ledger]]:
        return (LedgerOverlay, (Ledger(self.ledger.url),))

    def coverage(self) -> dict[tuple[str, str], RegionRefresh]:
        if self._coverage is None:
            self._coverage = coverage(self.ledger)
        return self._coverage

    def vm_type(self, provider: str, name: str) -> tuple[VmType, Source] | None:
        if not self.coverage():
            return None
        rows = self.ledger.query(
            f"SELECT {_TYPE_COLUMNS}, t.refresh_id FROM catalog_overlay_types t "
            "WHERE t.provider = :provider AND t.name = :name "
            "ORDER BY t.fetched_at DESC, t.refresh_id DESC LIMIT 1",
            {"provider": provider, "name": name},
        )
        if not rows:
            return None
        refresh = next((r for r in self.coverage().values()
                        if r.refresh_id == rows[0]["refresh_id"]), None)
        source = (refresh.source(f"{provider} instance type specs", "specs")
                  if refresh is not None else self._old_source(provider, rows[0]["refresh_id"]))
        return _vm(rows[0]), source

    def _old_source(self, provider: str, refresh_id: str) -> Source:
        """The source of specs from a refresh that is no longer the newest of any region."""
        rows = self.ledger.query(
            "SELECT r.fetched_at, c.name FROM catalog_refreshes r "
            "JOIN credentials c ON c.id = r.credential_id WHERE r.id = :id", {"id": refresh_id})
        at = utc(rows[0]["fetched_at"]).strftime("%Y-%m-%dT%H:%M:%SZ") if rows else "?"
        who = rows[0]["name"] if rows else "?"
        return Source(id=f"{refresh_id}/specs",
                      name=f"{provider} instance type specs via credential {who}",
                      url="", licence="", as_of=at, stale=False,
                      note=f"anycloud catalog refresh {refresh_id}")

    def offering(self, refresh: RegionRefresh, vm_type: str) -> OverlayOffering | None:
        rows = self.ledger.query(
            "SELECT refresh_id, region, vm_type, zones, price_usd_hour "
            "FROM catalog_overlay_offerings "
            "WHERE refresh_id = :refresh AND region = :region AND vm_type = :vm_type",
            {"refresh": refresh.refresh_id, "region": refresh.region, "vm_type": vm_type},
        )
        return _offering(rows[0]) if rows else None

    def offerings(self, provider: str, vm_type: str) -> list[OverlayOffering]:
        if not self.coverage():
            return []
        return [_offering(row) for row in self.ledger.query(
            "SELECT refresh_id, region, vm_type, zones, price_usd_hour "
            "FROM catalog_overlay_offerings WHERE provider = :provider AND vm_type = :vm_type",
            {"provider": provider, "vm_type": vm_type},
        )]

    def region_listing(
        self, refreshes: list[RegionRefresh]
    ) -> list[tuple[VmType, OverlayOffering]]:
        if not refreshes:
            return []
        out: list[tuple[VmType, OverlayOffering]] = []
        by_refresh: dict[str, list[str]] = {}
        for r in refreshes:
            by_refresh.setdefault(r.refresh_id, []).append(r.region)
        for refresh_id, regions in sorted(by_refresh.items()):
            in_regions, params = _in("r", regions)
            for row in self.ledger.query(
                f"SELECT {_TYPE_COLUMNS}, o.refresh_id, o.region, o.vm_type, o.zones, "
                "o.price_usd_hour FROM catalog_overlay_offerings o "
                "JOIN catalog_overlay_types t ON t.refresh_id = o.refresh_id "
                "AND t.name = o.vm_type "
                f"WHERE o.refresh_id = :refresh AND o.region IN {in_regions}",
                {"refresh": refresh_id, **params},
            ):
                out.append((_vm(row), _offering(row)))
        return out


# -- prices for services.cost: (provider, vm type, region) keys, no catalog load -----------

PriceKey = tuple[str, str, str]


def refreshed_prices(
    ledger: Ledger, keys: list[PriceKey]
) -> dict[PriceKey, tuple[RegionRefresh, OverlayOffering | None]]:
    """For each key whose region a refresh read: that region's newest refresh and the key's
    offering row in it (None: the refresh found the type not offered there). One cheap
    statement when nothing was ever refreshed, two otherwise."""
    covered = coverage(ledger)
    if not covered:
        return {}
    wanted = [k for k in keys if (k[0], k[2]) in covered]
    if not wanted:
        return {}
    found: dict[tuple[str, str, str], OverlayOffering] = {}
    refresh_ids = sorted({covered[(p, r)].refresh_id for p, _, r in wanted})
    names = sorted({name for _, name, _ in wanted})
    for at in range(0, len(names), 300):  # bounded statements, whatever the pool count
        in_ids, id_params = _in("r", refresh_ids)
        in_names, name_params = _in("t", names[at:at + 300])
        for row in ledger.query(
            "SELECT refresh_id, region, vm_type, zones, price_usd_hour "
            f"FROM catalog_overlay_offerings WHERE refresh_id IN {in_ids} "
            f"AND vm_type IN {in_names}", {**id_params, **name_params},
        ):
            found[(row["refresh_id"], row["region"], row["vm_type"])] = _offering(row)
    out: dict[PriceKey, tuple[RegionRefresh, OverlayOffering | None]] = {}
    for key in wanted:
        refresh = covered[(key[0], key[2])]
        out[key] = (refresh, found.get((refresh.refresh_id, key[2], key[1])))
    return out


def sources_of(value: Any) -> list[str]:
    """A JSON column as read through the bare driver (SQLite: text; PostgreSQL: parsed)."""
    return list(json.loads(value) if isinstance(value, str) else value or [])
