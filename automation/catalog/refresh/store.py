"""Writing one refresh to the ledger: the whole snapshot in one transaction, or nothing."""

from __future__ import annotations

from typing import Any

from automation import ids
from automation.catalog.refresh.model import Snapshot
from automation.ledger.db import Ledger


def counts(snapshot: Snapshot) -> dict[str, dict[str, int]]:
    """Per region read: the types offered there, the offerings and the prices found."""
    out = {r: {"types": 0, "offerings": 0, "prices": 0} for r in snapshot.regions}
    for o in snapshot.offerings:
        row = out.setdefault(o.region, {"types": 0, "offerings": 0, "prices": 0})
        row["offerings"] += 1
        row["prices"] += o.price_usd_hour is not None
    for region, row in out.items():
        row["types"] = len({o.vm_type for o in snapshot.offerings if o.region == region})
    return out


def region_zones(snapshot: Snapshot) -> dict[str, list[str]]:
    """Each region's zones as the refresh saw them: every zone offering some type, sorted."""
    zones: dict[str, set[str]] = {r: set() for r in snapshot.regions}
    for o in snapshot.offerings:
        zones.setdefault(o.region, set()).update(o.zones or ())
    return {r: sorted(z) for r, z in zones.items()}


def _check(snapshot: Snapshot) -> None:
    """A snapshot that contradicts itself is refused before anything is written."""
    names = {t.name for t in snapshot.types}
    if len(names) != len(snapshot.types):
        raise ValueError(f"{snapshot.provider} refresh lists a type twice")
    keys = [(o.region, o.vm_type) for o in snapshot.offerings]
    if len(set(keys)) != len(keys):
        raise ValueError(f"{snapshot.provider} refresh lists an offering twice")
    for o in snapshot.offerings:
        if o.region not in snapshot.regions or o.vm_type not in names:
            raise ValueError(f"{snapshot.provider} offering {o.vm_type} in {o.region}: "
                             "its region was not read or its type is not listed")
    if snapshot.fetched_at.tzinfo is None:
        raise ValueError("a refresh's fetched_at must be an aware UTC time")


def write_snapshot(ledger: Ledger, snapshot: Snapshot, credential_id: str) -> str:
    """Store ``snapshot`` read with ``credential_id``; returns the refresh id. One
    transaction: a failure anywhere writes nothing."""
    from automation.ledger import schema

    _check(snapshot)
    refresh_id = ids.new_id("refresh")
    at = snapshot.fetched_at
    provider = snapshot.provider
    zones = region_zones(snapshot)
    regions: list[dict[str, Any]] = [
        {"refresh_id": refresh_id, "provider": provider, "region": r, "fetched_at": at,
         "zones": " ".join(zones[r])} for r in snapshot.regions]
    types: list[dict[str, Any]] = [
        {"refresh_id": refresh_id, "provider": provider, "name": t.name, "arch": t.arch,
         "vcpus": t.vcpus, "memory_gib": t.memory_gib, "gpus": t.gpus,
         "gpu_model": t.gpu_model, "family": t.family, "fetched_at": at}
        for t in snapshot.types]
    offerings: list[dict[str, Any]] = [
        {"refresh_id": refresh_id, "provider": provider, "region": o.region,
         "vm_type": o.vm_type, "zones": None if o.zones is None else " ".join(o.zones),
         "price_usd_hour": o.price_usd_hour}
        for o in snapshot.offerings]
    with ledger.write() as conn:
        conn.execute(schema.catalog_refreshes.insert().values(
            id=refresh_id, provider=provider, credential_id=credential_id,
            regions=list(snapshot.regions), sources=list(snapshot.sources), fetched_at=at,
            counts=counts(snapshot), warnings=list(snapshot.warnings),
        ))
        if regions:
            conn.execute(schema.catalog_refresh_regions.insert(), regions)
        if types:
            conn.execute(schema.catalog_overlay_types.insert(), types)
        if offerings:
            conn.execute(schema.catalog_overlay_offerings.insert(), offerings)
    return refresh_id
