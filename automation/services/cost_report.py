"""``anycloud cost``: VM hours and their cost at list price over each VM attempt's lifetime,
from when the provider confirmed the VM (``vm_attempts.vm_created_at``) to when its release
was confirmed (``released_at``) or now, grouped by pool, cluster or cloud; ``cost_by_day``
splits the same lifetimes at each UTC midnight (``anycloud cost --daily``, the dashboard)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from automation.errors import InvalidInput
from automation.ledger.db import Ledger
from automation.models import (
    CostLine,
    CostReport,
    DailyCost,
    GroupBy,
    PoolDailyCost,
)
from automation.recorded_engines import SIMULATED_ENGINES
from automation.services.cost import Price, PriceKey, lookup_prices, short_source, usd

# Every attempt whose VM the provider confirmed (vm_created_at) and that was not released
# before ``since``: it was billed from vm_created_at until released_at (or now).
_LIFETIMES_SQL = """
SELECT a.vm_created_at, a.released_at, a.engine, p.id AS pool_id, p.name AS pool, p.provider,
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
    simulated_seconds: Decimal = Decimal(0)

    def add(self, seconds: Decimal, price: Price, simulated: bool) -> None:
        if simulated:  # the mock engine: nothing was bought, nothing is billed
            self.simulated_seconds += seconds
            return
        self.seconds += seconds
        if price.usd_hour is None:
            self.unpriced_seconds += seconds
        else:
            self.usd_seconds += seconds * price.usd_hour


def _hours(seconds: Decimal) -> float:
    return usd(seconds / 3600)


_GROUPS: dict[str, GroupBy] = {"pool": "pool", "cluster": "cluster", "provider": "provider"}


def group_by(text: str) -> GroupBy:
    if text in _GROUPS:
        return _GROUPS[text]
    raise InvalidInput("--by", text, "must be pool, cluster or provider")


def cost_report(ledger: Ledger, now: datetime, by: GroupBy = "pool",
                since: datetime | None = None, path: Path | None = None,
                only: Collection[str] | None = None) -> CostReport:
    """Cost of every VM attempt's lifetime that overlaps [since, now], grouped ``by``
    (``only``: these pools' VMs alone)."""
    by = group_by(by)
    if since is not None and since > now:
        raise InvalidInput("--since", since.date().isoformat(), "must not be in the future")
    rows = _lifetimes(ledger, since, only)
    prices = _prices(ledger, rows, path)
    sums: dict[str, _Sum] = {}
    per_group: dict[str, tuple[set[str], set[str]]] = {}
    for r in rows:
        span = _billed_span(r, since, now)
        if span is None:
            continue
        key, label = _group(r, by)
        line = sums.setdefault(key, _Sum(label, r["pool_id"] if by == "pool" else None))
        price = prices[_price_key(r)]
        line.add(_seconds(span[1] - span[0]), price, r["engine"] in SIMULATED_ENGINES)
        _note(price, *per_group.setdefault(key, (set(), set())))
    lines = [CostLine(group=s.group, pool_id=s.pool_id, vm_hours=_hours(s.seconds),
                      usd=usd(s.usd_seconds / 3600), unpriced_vm_hours=_hours(s.unpriced_seconds),
                      simulated_vm_hours=_hours(s.simulated_seconds),
                      sources=sorted(per_group[k][0]), hints=sorted(per_group[k][1]))
             for k, s in sorted(sums.items(), key=lambda kv: (kv[1].group, kv[0]))]
    return CostReport(
        by=by, since=since, until=now, lines=lines,
        total_usd=usd(sum((s.usd_seconds for s in sums.values()), Decimal(0)) / 3600),
        total_vm_hours=_hours(sum((s.seconds for s in sums.values()), Decimal(0))),
        unpriced_vm_hours=_hours(sum((s.unpriced_seconds for s in sums.values()), Decimal(0))),
        simulated_vm_hours=_hours(sum((s.simulated_seconds for s in sums.values()), Decimal(0))),
    )


# -- what the report and the daily series share --------------------------------------------


def _lifetimes(ledger: Ledger, since: datetime | None, pools: Collection[str] | None
               ) -> list[dict[str, Any]]:
    """Every VM lifetime (of ``pools`` only, when given: a tenant's)."""
    if since is None:
        rows = ledger.query(_LIFETIMES_SQL)
    else:
        rows = ledger.query(_LIFETIMES_SQL + _SINCE, {"since": _ledger_stamp(ledger, since)})
    return rows if pools is None else [r for r in rows if r["pool_id"] in pools]


def _price_key(r: dict[str, Any]) -> PriceKey:
    return (r["provider"], r["vm_type"], r["region"])


def _prices(ledger: Ledger, rows: list[dict[str, Any]], path: Path | None
            ) -> dict[PriceKey, Price]:
    return lookup_prices([_price_key(r) for r in rows], path, ledger=ledger)


def _billed_span(r: dict[str, Any], since: datetime | None,
                 now: datetime) -> tuple[datetime, datetime] | None:
    """The part of the row's lifetime inside [since, now]; None when nothing is."""
    start = _utc(r["vm_created_at"])
    start = start if since is None else max(start, since)
    end = min(_utc(r["released_at"]) if r["released_at"] is not None else now, now)
    return (start, end) if end > start else None


def _seconds(span: timedelta) -> Decimal:
    """Exact (a float's total_seconds would not split into days without a remainder)."""
    return Decimal(span // timedelta(microseconds=1)) / 1_000_000


def _note(price: Price, sources: set[str], hints: set[str]) -> None:
    """Where a group's prices came from, or why one is unknown."""
    if price.usd_hour is not None and price.source:
        sources.add(f"{short_source(price.source)} {price.as_of}")
    if price.hint:
        hints.add(price.hint)


# -- anycloud cost --daily: the same lifetimes, split at each UTC midnight -------------------

MAX_DAYS = 90
_DAY = timedelta(days=1)


def checked_days(days: int) -> int:
    if not 1 <= days <= MAX_DAYS:
        raise InvalidInput("--days", days, f"must be between 1 and {MAX_DAYS}")
    return days


# The sum of every day nothing ran in (shared, never added to: a pool's days start as it).
_NOTHING = _Sum("", None)


@dataclass
class _PoolDays:
    pool_id: str
    pool: str
    cluster: str
    days: list[_Sum]
    sources: set[str] = field(default_factory=set)
    hints: set[str] = field(default_factory=set)
    _usd_seconds: Decimal | None = None

    def usd_seconds(self) -> Decimal:
        """The pool's whole window (summed once: asked by the sort, its line and the total;
        only after every row was added)."""
        if self._usd_seconds is None:
            self._usd_seconds = sum((d.usd_seconds for d in self.days), Decimal(0))
        return self._usd_seconds

    def costed(self) -> list[_Sum]:
        """The days something ran."""
        return [d for d in self.days if d is not _NOTHING]


def cost_by_day(ledger: Ledger, now: datetime, days: int = 30,
                path: Path | None = None, only: Collection[str] | None = None) -> DailyCost:
    """Cost per pool on each of the last ``days`` UTC days, today (until ``now``) last: the
    VM-seconds of each lifetime that fell in that day, priced as ``cost_report`` prices them."""
    days = checked_days(days)
    now = now.astimezone(UTC)
    first = datetime.combine(now.date() - (days - 1) * _DAY, time(), UTC)
    rows = _lifetimes(ledger, first, only)
    prices = _prices(ledger, rows, path)
    pools: dict[str, _PoolDays] = {}
    simulated = _Sum("simulated", None)
    for r in rows:
        span = _billed_span(r, first, now)
        if span is None:
            continue
        price = prices[_price_key(r)]
        if r["engine"] in SIMULATED_ENGINES:  # bought nothing: counted apart, as cost_report does
            simulated.add(_seconds(span[1] - span[0]), price, True)
            continue
        line = pools.get(str(r["pool_id"]))
        if line is None:  # not setdefault: its default, 30 sums, was made for every row
            line = pools[str(r["pool_id"])] = _PoolDays(
                str(r["pool_id"]), str(r["pool"]), str(r["cluster"]), [_NOTHING] * days)
        for index, seconds in _split_at_midnights(*span, first):
            if line.days[index] is _NOTHING:  # a day's own sum, made when it has a cost
                line.days[index] = _Sum(line.pool, line.pool_id)
            line.days[index].add(seconds, price, False)
        _note(price, line.sources, line.hints)
    ordered = sorted(pools.values(), key=lambda p: (-p.usd_seconds(), p.cluster, p.pool,
                                                    p.pool_id))
    return DailyCost(
        days=[(first + i * _DAY).date() for i in range(days)], since=first, until=now,
        pools=[_pool_line(p) for p in ordered],
        per_day=[usd(sum((p.days[i].usd_seconds for p in ordered
                          if p.days[i] is not _NOTHING), Decimal(0)) / 3600)
                 for i in range(days)],
        total_usd=usd(sum((p.usd_seconds() for p in ordered), Decimal(0)) / 3600),
        unpriced_vm_hours=_hours(sum((d.unpriced_seconds for p in ordered for d in p.costed()),
                                     Decimal(0))),
        simulated_vm_hours=_hours(simulated.simulated_seconds))


def _split_at_midnights(start: datetime, end: datetime,
                        first: datetime) -> Iterator[tuple[int, Decimal]]:
    """(day index from ``first``, seconds) of each UTC day the span [start, end) touches."""
    index = (start - first) // _DAY
    while start < end:
        stop = min(end, first + (index + 1) * _DAY)
        yield index, _seconds(stop - start)
        start, index = stop, index + 1


def _pool_line(p: _PoolDays) -> PoolDailyCost:
    return PoolDailyCost(
        pool_id=p.pool_id, pool=p.pool, cluster=p.cluster,
        # Most of a pool's days cost nothing: 0.0 without a Decimal division and rounding.
        per_day=[usd(d.usd_seconds / 3600) if d.usd_seconds else 0.0 for d in p.days],
        total=usd(p.usd_seconds() / 3600),
        unpriced_vm_hours=_hours(sum((d.unpriced_seconds for d in p.costed()), Decimal(0))),
        sources=sorted(p.sources), hints=sorted(p.hints))


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
