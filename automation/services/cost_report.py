"""``anycloud cost``: VM hours and their cost at list price over each VM attempt's lifetime,
from when the provider confirmed the VM (``vm_attempts.vm_created_at``) to when its release
was confirmed (``released_at``) or now, grouped by pool, cluster or cloud."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from automation.errors import InvalidInput
from automation.ledger.db import Ledger
from automation.models import CostLine, CostReport, GroupBy
from automation.services.cost import Price, lookup_prices, short_source, usd

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
                since: datetime | None = None, path: Path | None = None) -> CostReport:
    """Cost of every VM attempt's lifetime that overlaps [since, now], grouped ``by``."""
    by = group_by(by)
    if since is not None and since > now:
        raise InvalidInput("--since", since.date().isoformat(), "must not be in the future")
    rows = (ledger.query(_LIFETIMES_SQL) if since is None else
            ledger.query(_LIFETIMES_SQL + _SINCE, {"since": _ledger_stamp(ledger, since)}))
    prices = lookup_prices([(r["provider"], r["vm_type"], r["region"]) for r in rows], path,
                           ledger=ledger)
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
        line.add(Decimal((end - start).total_seconds()), price, r["engine"] == "mock")
        sources, hints = per_group.setdefault(key, (set(), set()))
        if price.usd_hour is not None and price.source:
            sources.add(f"{short_source(price.source)} {price.as_of}")
        if price.hint:
            hints.add(price.hint)
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
