"""What a node pool costs per hour and per 30 days: its VMs x the catalog's hourly list price
(the cost over recorded VM lifetimes is ``services.cost_report``).

Prices are read from ``data/catalog.sqlite`` one offering row per (cloud, type, region), on
demand, without loading the catalog: ``node-pool list`` and ``status`` show a cost column
and must stay as fast as before (benchmarks/bench_cost.py). Given the ledger, a region's
newest live refresh (``anycloud catalog refresh``) wins over the shipped price when it is
newer; with no refresh ever stored that costs one cheap query.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from automation.models import Cost

if TYPE_CHECKING:
    from automation.ledger.db import Ledger

HOURS_PER_MONTH = 30 * 24  # "per month" is 30 days, as the issue asks
_MICRO = Decimal("0.000001")  # dollars and hours are kept to a millionth

# (provider, vm type, region): what a price is looked up by.
PriceKey = tuple[str, str, str]


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


# Every wanted key in one statement (a thousand single lookups cost ~10 ms more): a key the
# catalog does not offer comes back with no offering (NULL o.type_id).
_PRICES_SQL = """
WITH k(provider, name, region) AS (VALUES {values})
SELECT k.provider, k.name, k.region, o.type_id, o.price_usd_hour, s.name, s.as_of, s.stale,
       rs.as_of
FROM k
LEFT JOIN vm_types t ON t.provider = k.provider AND t.name = k.name
LEFT JOIN regions r ON r.provider = k.provider AND r.region = k.region
LEFT JOIN offerings o ON o.type_id = t.id AND o.region_id = r.id
LEFT JOIN sources s ON s.id = o.price_source_id
LEFT JOIN sources rs ON rs.id = r.source_id
"""
_KEYS_PER_STATEMENT = 300  # 900 bound values, well under SQLite's limit
_ANY_REFRESH_SQL = "SELECT 1 AS refreshed FROM catalog_refresh_regions LIMIT 1"


def _catalog_path() -> Path:
    """The catalog file, found without building the Catalog (``node-pool list`` start-up)."""
    from stacks.data_dir import DATA_DIR

    return DATA_DIR / "catalog.sqlite"


def lookup_prices(keys: Iterable[PriceKey], path: Path | None = None, *,
                  ledger: Ledger | None = None) -> dict[PriceKey, Price]:
    """The price of each distinct key; no keys opens nothing. With ``ledger``, a region's
    newest live refresh wins when it is newer than the shipped data of that region."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    path = path or _catalog_path()
    found: dict[PriceKey, tuple[Any, ...]] = {}
    region_dates: dict[PriceKey, str | None] = {}
    con = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        for at in range(0, len(wanted), _KEYS_PER_STATEMENT):
            chunk = wanted[at:at + _KEYS_PER_STATEMENT]
            sql = _PRICES_SQL.format(values=", ".join(["(?, ?, ?)"] * len(chunk)))
            for row in con.execute(sql, [v for key in chunk for v in key]):
                key = (row[0], row[1], row[2])
                region_dates[key] = row[8]
                if row[3] is not None:  # offered in that region
                    found[key] = row[4:8]
    finally:
        con.close()
    prices = {key: _price(key, found.get(key)) for key in wanted}
    if ledger is not None:
        prices.update(_refreshed(ledger, wanted, region_dates))
    return prices


def _refreshed(ledger: Ledger, keys: list[PriceKey],
               shipped_dates: dict[PriceKey, str | None]) -> dict[PriceKey, Price]:
    """Prices of the keys whose region a refresh read after the shipped data's date."""
    if not ledger.query(_ANY_REFRESH_SQL):
        return {}  # never refreshed: one cheap query, and no overlay code imported (~10 ms)
    from automation.catalog.overlay import refreshed_prices

    out: dict[PriceKey, Price] = {}
    for key, (refresh, row) in refreshed_prices(ledger, keys).items():
        if refresh.fetched_at.date().isoformat() < (shipped_dates.get(key) or ""):
            continue  # the shipped catalog is newer than this refresh
        provider, vm_type, region = key
        source = f"{refresh.price_api} via credential {refresh.credential}"
        if row is None:
            out[key] = Price(None, None, None, False,
                             f"{provider} {region} does not offer {vm_type} {refresh.note}")
        elif row.price_usd_hour is None:
            out[key] = Price(None, source, refresh.as_of, False,
                             f"no list price for {vm_type} in {region} {refresh.note}; "
                             f"`anycloud catalog refresh --credentials {refresh.credential}` "
                             "reads it again")
        else:
            out[key] = Price(Decimal(str(row.price_usd_hour)), source, refresh.as_of, False,
                             None)
    return out


def _price(key: PriceKey, row: tuple[Any, ...] | None) -> Price:
    provider, vm_type, region = key
    if row is None:
        return Price(None, None, None, False,
                     f"the catalog does not offer {provider} {vm_type} in {region}")
    price, source, as_of, stale = row
    if price is None:
        where = f" ({short_source(source)} {as_of})" if source else ""
        return Price(None, source, as_of, bool(stale),
                     f"no list price in the catalog for {vm_type} in {region}{where}; "
                     f"`anycloud catalog refresh --credentials <name> --region {region}` "
                     f"reads the current one, `anycloud catalog show {vm_type}` lists the "
                     "regions that have one")
    return Price(Decimal(str(price)), source, as_of, bool(stale), None)


def usd(value: Decimal) -> float:
    """Dollars (or hours) to a millionth, rounded half up."""
    return float(value.quantize(_MICRO, rounding=ROUND_HALF_UP))


def rate(price: Price, vms: int) -> Cost:
    """``vms`` VMs at ``price``, per hour and per 30 days."""
    if price.usd_hour is None:
        return Cost(vms=vms, hourly_usd=None, monthly_usd=None, source=price.source,
                    as_of=price.as_of, stale=price.stale, hint=price.hint)
    hourly = price.usd_hour * vms
    return Cost(vms=vms, hourly_usd=usd(hourly), monthly_usd=usd(hourly * HOURS_PER_MONTH),
                source=price.source, as_of=price.as_of, stale=price.stale)


def pool_rate(provider: str, vm_type: str, region: str, vms: int, *,
              ledger: Ledger | None = None) -> Cost:
    """One pool's rate (``node-pool create``: its VMs as asked); with ``ledger``, at the
    newest refreshed price."""
    key = (provider, vm_type, region)
    return rate(lookup_prices([key], ledger=ledger)[key], vms)
