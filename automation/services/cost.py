"""What node pools cost: a pool's rate (VMs x the catalog's hourly list price) and the cost
over VM attempt lifetimes recorded in the ledger (``anycloud cost``).

Prices are read from ``data/catalog.sqlite`` one offering row per (cloud, type, region), on
demand, without loading the catalog: ``node-pool list`` and ``status`` show a cost column
and must stay as fast as before (benchmarks/bench_cost.py).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict

from automation.errors import InvalidInput
from automation.ledger.db import Ledger
from automation.models import CamelModel, Cost

HOURS_PER_MONTH = 30 * 24  # "per month" is 30 days, as the issue asks
_MICRO = Decimal("0.000001")  # dollars and hours are kept to a millionth

# (provider, vm type, region): what a price is looked up by.
PriceKey = tuple[str, str, str]
GroupBy = Literal["pool", "cluster", "provider"]


def describe(cost: Cost) -> str:
    """``$0.3840/hour, $276.48/30 days (2 VMs; apache-libcloud 2025-03-02, stale)``"""
    vms = f"{cost.vms} VM" + ("" if cost.vms == 1 else "s")
    if cost.hourly_usd is None or cost.monthly_usd is None:
        return f"price unknown ({vms}): {cost.hint}"
    stale = ", stale" if cost.stale else ""
    return (f"${cost.hourly_usd:.4f}/hour, ${cost.monthly_usd:.2f}/30 days "
            f"({vms}; {short_source(cost.source)} {cost.as_of}{stale})")


@dataclass(frozen=True)
class Price:
    """One offering's hourly list price, or why there is none."""

    usd_hour: Decimal | None
    source: str | None
    as_of: str | None
    stale: bool
    hint: str | None


def short_source(name: str | None) -> str:
    """``apache-libcloud: EC2 Linux ...`` -> ``apache-libcloud`` (the full name is in JSON)."""
    return (name or "unknown source").split(":")[0].split(" (")[0]


_PRICE_SQL = (
    "SELECT o.price_usd_hour, s.name, s.as_of, s.stale FROM vm_types t "
    "JOIN regions r ON r.provider = t.provider AND r.region = ? "
    "JOIN offerings o ON o.type_id = t.id AND o.region_id = r.id "
    "LEFT JOIN sources s ON s.id = o.price_source_id WHERE t.provider = ? AND t.name = ?"
)


def _catalog_path() -> Path:
    from automation.catalog import CATALOG_FILE, data_dir

    return data_dir() / CATALOG_FILE


def lookup_prices(keys: Iterable[PriceKey], path: Path | None = None) -> dict[PriceKey, Price]:
    """The price of each distinct key, one indexed lookup each; no keys opens nothing."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    path = path or _catalog_path()
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return {key: _price(key, con.execute(_PRICE_SQL, (key[2], key[0], key[1])).fetchall())
                for key in wanted}
    finally:
        con.close()


def _price(key: PriceKey, rows: list[Any]) -> Price:
    provider, vm_type, region = key
    if not rows:
        return Price(None, None, None, False,
                     f"the catalog does not offer {provider} {vm_type} in {region}")
    price, source, as_of, stale = rows[0]
    if price is None:
        where = f" ({short_source(source)} {as_of})" if source else ""
        return Price(None, source, as_of, bool(stale),
                     f"no list price in the catalog for {vm_type} in {region}{where}; "
                     f"`anycloud catalog show {vm_type}` lists the regions that have one")
    return Price(Decimal(str(price)), source, as_of, bool(stale), None)


def _usd(value: Decimal) -> float:
    return float(value.quantize(_MICRO, rounding=ROUND_HALF_UP))


def rate(price: Price, vms: int) -> Cost:
    """``vms`` VMs at ``price``, per hour and per 30 days."""
    if price.usd_hour is None:
        return Cost(vms=vms, hourly_usd=None, monthly_usd=None, source=price.source,
                    as_of=price.as_of, stale=price.stale, hint=price.hint)
    hourly = price.usd_hour * vms
    return Cost(vms=vms, hourly_usd=_usd(hourly), monthly_usd=_usd(hourly * HOURS_PER_MONTH),
                source=price.source, as_of=price.as_of, stale=price.stale)


def pool_rate(provider: str, vm_type: str, region: str, vms: int) -> Cost:
    """One pool's rate (``node-pool create``: its VMs as asked)."""
    key = (provider, vm_type, region)
    return rate(lookup_prices([key])[key], vms)


# -- cost over attempt lifetimes ----------------------------------------------------------


class CostLine(CamelModel):
    """One group's cost since ``since``: VM hours billed and what they cost at list price.
    ``unpriced_vm_hours``: hours of VMs the catalog has no price for (not in ``usd``)."""

    model_config = ConfigDict(frozen=True)

    group: str
    pool_id: str | None = None  # --by pool: names repeat across clusters and after deletes
    vm_hours: float
    usd: float
    unpriced_vm_hours: float
    sources: list[str]
    hints: list[str]


class CostReport(CamelModel):
    model_config = ConfigDict(frozen=True)

    by: GroupBy
    since: datetime | None
    until: datetime
    lines: list[CostLine]
    total_usd: float
    total_vm_hours: float
    unpriced_vm_hours: float


# Every attempt whose VM the provider confirmed (vm_created_at) and that was not released
# before ``since``: it was billed from vm_created_at until released_at (or now).
_LIFETIMES_SQL = """
SELECT a.vm_created_at, a.released_at, p.id AS pool_id, p.name AS pool, p.provider,
       p.region, p.vm_type, c.name AS cluster
FROM vm_attempts a
JOIN node_pools p ON p.id = a.pool_id
JOIN clusters c ON c.id = p.cluster_id
WHERE a.vm_created_at IS NOT NULL
"""
_SINCE = " AND (a.released_at IS NULL OR a.released_at > :since)"


def _utc(value: Any) -> datetime:
    """SQLite gives text, PostgreSQL a naive datetime; both are UTC (see schema.UTCDateTime)."""
    stamp = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return stamp.replace(tzinfo=UTC)


@dataclass
class _Sum:
    group: str
    pool_id: str | None
    seconds: Decimal = Decimal(0)
    unpriced_seconds: Decimal = Decimal(0)
    usd_seconds: Decimal = Decimal(0)  # sum of seconds x hourly price (divide by 3600 once)

    def add(self, seconds: Decimal, price: Price) -> None:
        self.seconds += seconds
        if price.usd_hour is None:
            self.unpriced_seconds += seconds
        else:
            self.usd_seconds += seconds * price.usd_hour


def _hours(seconds: Decimal) -> float:
    return _usd(seconds / 3600)


_GROUPS: dict[str, GroupBy] = {"pool": "pool", "cluster": "cluster", "provider": "provider"}


def group_by(text: str) -> GroupBy:
    if text in _GROUPS:
        return _GROUPS[text]
    raise InvalidInput("--by", text, "must be pool, cluster or provider")


def cost_report(ledger: Ledger, now: datetime, by: GroupBy = "pool",
                since: datetime | None = None, path: Path | None = None) -> CostReport:
    """Cost of every VM attempt's lifetime that overlaps [since, now], grouped ``by``."""
    by = group_by(by)
    if since is not None and since > now:
        raise InvalidInput("--since", since.date().isoformat(), "must not be in the future")
    rows = (ledger.query(_LIFETIMES_SQL) if since is None else
            ledger.query(_LIFETIMES_SQL + _SINCE, {"since": _ledger_stamp(ledger, since)}))
    prices = lookup_prices([(r["provider"], r["vm_type"], r["region"]) for r in rows], path)
    sums: dict[str, _Sum] = {}
    per_group: dict[str, tuple[set[str], set[str]]] = {}
    for r in rows:
        start = _utc(r["vm_created_at"])
        start = start if since is None else max(start, since)
        end = min(_utc(r["released_at"]) if r["released_at"] is not None else now, now)
        if end <= start:
            continue
        key, label = _group(r, by)
        line = sums.setdefault(key, _Sum(label, r["pool_id"] if by == "pool" else None))
        price = prices[(r["provider"], r["vm_type"], r["region"])]
        line.add(Decimal((end - start).total_seconds()), price)
        sources, hints = per_group.setdefault(key, (set(), set()))
        if price.usd_hour is not None and price.source:
            sources.add(f"{short_source(price.source)} {price.as_of}")
        if price.hint:
            hints.add(price.hint)
    lines = [CostLine(group=s.group, pool_id=s.pool_id, vm_hours=_hours(s.seconds),
                      usd=_usd(s.usd_seconds / 3600), unpriced_vm_hours=_hours(s.unpriced_seconds),
                      sources=sorted(per_group[k][0]), hints=sorted(per_group[k][1]))
             for k, s in sorted(sums.items(), key=lambda kv: (kv[1].group, kv[0]))]
    return CostReport(
        by=by, since=since, until=now, lines=lines,
        total_usd=_usd(sum((s.usd_seconds for s in sums.values()), Decimal(0)) / 3600),
        total_vm_hours=_hours(sum((s.seconds for s in sums.values()), Decimal(0))),
        unpriced_vm_hours=_hours(sum((s.unpriced_seconds for s in sums.values()), Decimal(0))),
    )


def _group(r: dict[str, Any], by: GroupBy) -> tuple[str, str]:
    """(key, label) of the row's group."""
    if by == "pool":
        return str(r["pool_id"]), f"{r['cluster']}/{r['pool']}"
    if by == "cluster":
        return str(r["cluster"]), str(r["cluster"])
    return str(r["provider"]), str(r["provider"])


def _ledger_stamp(ledger: Ledger, stamp: datetime) -> Any:
    """A bound parameter compared with stored timestamps: naive UTC (schema.UTCDateTime),
    on SQLite as the text SQLAlchemy stores (``2026-11-01 00:00:00.000000``)."""
    naive = stamp.astimezone(UTC).replace(tzinfo=None)
    return naive.strftime("%Y-%m-%d %H:%M:%S.%f") if ledger.dialect == "sqlite" else naive


def parse_since(text: str) -> datetime:
    """``2026-11-01`` (midnight UTC) or an ISO time (UTC unless it names its zone)."""
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            "--since", text, "must be a date (2026-11-01) or an ISO time (2026-11-01T08:00Z)"
        ) from None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)
