"""``anycloud catalog refresh``: read one cloud with a stored credential, say what changed
against the data in use before, and store the snapshot (all of it, or nothing on failure).

Regions, when none are named: those of the credential's cloud where live node pools run;
with no live pool there, every region of that cloud the catalog knows.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from automation.app import App
from automation.catalog.refresh.model import RefreshError, Snapshot
from automation.catalog.refresh.store import counts, write_snapshot
from automation.catalog.store import Catalog, ListFilter
from automation.errors import AnycloudError, InvalidInput
from automation.models import Credential

FETCHERS = ("aws", "gcp", "azure")  # automation.catalog.refresh.<provider>.fetch


@dataclass(frozen=True)
class PriceChange:
    vm_type: str
    old_usd_hour: float | None
    new_usd_hour: float | None


@dataclass(frozen=True)
class RegionChanges:
    """One region read: what the refresh counted and how it differs from the data before."""

    region: str
    types: int
    offerings: int
    prices: int
    new_types: list[str] = field(default_factory=list)
    gone_offerings: list[str] = field(default_factory=list)
    price_changes: list[PriceChange] = field(default_factory=list)
    before: str = ""  # where the data in use before came from ("shipped catalog", a refresh)


@dataclass(frozen=True)
class RefreshResult:
    refresh_id: str
    provider: str
    credential: str
    fetched_at: datetime
    sources: list[str]
    regions: list[RegionChanges]
    warnings: list[str]


class RefreshFailed(AnycloudError):
    """A cloud API failed: exit 1, one line naming the API, the region and the answer."""

    default_code = "CATALOG_REFRESH_FAILED"
    http_status = 503  # the API: a cloud's API failed, not the request; retry later


def credential(app: App, ref: str) -> Credential:
    from automation.ledger import schema
    from automation.ledger.records import find_live

    with app.ledger.read() as conn:
        row = find_live(conn, schema.credentials, ref, live=schema.credentials.c.state == "active",
                        kind="credential", field="--credentials")
    return Credential.model_validate(dict(row))


def secret_of(app: App, cred: Credential) -> dict[str, str] | None:
    """The credential's own secret, opened from its sealed row (the fields as
    ``credential_secrets`` names them); None for a reference, whose secret is where it
    points (a profile, a key file, a variable). A sealed secret is what the credential is:
    the refresh reads the cloud with it, never with the server's own identity."""
    import json

    from automation.sealing import SealingKeyMissing, owner
    from automation.services.sealed import sealed_blob

    whose = owner("credential", cred.id)
    with app.ledger.read() as conn:
        blob = sealed_blob(conn, whose)
    if blob is None:
        return None
    if app.sealing is None:
        raise SealingKeyMissing(f"a catalog refresh with credential {cred.name!r}")
    opened: dict[str, str] = json.loads(app.sealing.open(blob, whose))
    return opened


def default_regions(app: App, provider: str) -> tuple[str, ...]:
    """The cloud's regions with live pools; else every region of the cloud in the catalog."""
    rows = app.ledger.query(
        "SELECT DISTINCT region FROM node_pools WHERE provider = :provider "
        "AND state <> 'deleted' ORDER BY region", {"provider": provider})
    if rows:
        return tuple(r["region"] for r in rows)
    cloud = app.catalog.provider(provider)
    return tuple(sorted(cloud.regions)) if cloud else ()


def _check_regions(catalog: Catalog, provider: str, regions: tuple[str, ...]) -> None:
    cloud = catalog.provider(provider)
    known = cloud.regions if cloud else {}
    for region in regions:
        if region not in known:
            raise InvalidInput("--region", region,
                               f"must be a {provider} region of the catalog "
                               f"(`anycloud catalog list --provider {provider}`)")


def changes(catalog: Catalog, snapshot: Snapshot) -> list[RegionChanges]:
    """Per region read: counts, and new types, gone offerings and price changes against what
    ``catalog`` (the data in use before) says of that region."""
    cloud = catalog.provider(snapshot.provider)
    counted = counts(snapshot)
    out = []
    for region in snapshot.regions:
        before = {x.vm.name: x.price_usd_hour for x in catalog.listing(
            ListFilter(provider=snapshot.provider, region=region))}
        now = {o.vm_type: o.price_usd_hour for o in snapshot.offerings if o.region == region}
        note = cloud.region_note(region) if cloud else None
        out.append(RegionChanges(
            region=region, **counted[region],
            new_types=sorted(set(now) - set(before)),
            gone_offerings=sorted(set(before) - set(now)),
            price_changes=[PriceChange(name, before[name], now[name])
                           for name in sorted(set(now) & set(before))
                           if before[name] != now[name] and now[name] is not None],
            before=note.removeprefix("per ") if note else "the shipped catalog",
        ))
    return out


def refresh(app: App, credentials: str, regions: tuple[str, ...] = ()) -> RefreshResult:
    """Read, compare, store. A failure of any API stores nothing (RefreshFailed)."""
    cred = credential(app, credentials)
    if cred.provider not in FETCHERS:
        raise InvalidInput("--credentials", credentials,
                           f"must be a credential of {', '.join(FETCHERS)} "
                           f"(this one is {cred.provider}): no API to refresh from")
    catalog = app.catalog
    chosen = tuple(dict.fromkeys(regions)) or default_regions(app, cred.provider)
    _check_regions(catalog, cred.provider, chosen)
    if not chosen:
        raise InvalidInput("--region", None, f"no {cred.provider} region to refresh")
    try:
        fetcher = importlib.import_module(f"automation.catalog.refresh.{cred.provider}")
    except ModuleNotFoundError as exc:  # the cloud's SDK (or fetcher) is not installed
        raise RefreshFailed(f"catalog refresh stored nothing: cannot read {cred.provider}: "
                            f"{exc}") from exc
    try:
        snapshot: Snapshot = fetcher.fetch(cred, chosen, app.clock.now(),
                                           secret=secret_of(app, cred))
    except RefreshError as exc:
        raise RefreshFailed(f"catalog refresh stored nothing: {exc}") from exc
    if snapshot.provider != cred.provider or set(snapshot.regions) != set(chosen):
        raise RefreshFailed(f"catalog refresh stored nothing: the {cred.provider} fetcher "
                            f"answered for {snapshot.provider} {list(snapshot.regions)}")
    regions_changed = changes(catalog, snapshot)
    refresh_id = write_snapshot(app.ledger, snapshot, cred.id)
    app.catalog_changed()  # this process (a server's API and control loop) reads it next
    return RefreshResult(
        refresh_id=refresh_id, provider=cred.provider, credential=cred.name,
        fetched_at=snapshot.fetched_at, sources=list(snapshot.sources),
        regions=regions_changed, warnings=list(snapshot.warnings),
    )


def history(app: App, org_id: str | None = None) -> list[dict[str, Any]]:
    """Every stored refresh, newest first (``anycloud catalog refreshes``); ``org_id``: only
    those read with a credential of that org (a scoped caller sees no other org's credential
    names or regions)."""
    from automation.catalog.overlay import sources_of, utc

    in_org = "" if org_id is None else "WHERE c.org_id = :org "
    rows = app.ledger.query(
        "SELECT r.id, r.provider, c.name AS credential, r.regions, r.fetched_at, r.counts "
        "FROM catalog_refreshes r JOIN credentials c ON c.id = r.credential_id "
        f"{in_org}ORDER BY r.fetched_at DESC, r.id DESC",
        {} if org_id is None else {"org": org_id})
    return [{"id": r["id"], "provider": r["provider"], "credential": r["credential"],
             "regions": sources_of(r["regions"]), "fetchedAt": utc(r["fetched_at"]),
             "counts": _json(r["counts"])} for r in rows]


def _json(value: Any) -> Any:
    """A JSON column through the bare driver: text on SQLite, parsed on PostgreSQL."""
    import json

    return json.loads(value) if isinstance(value, str) else value
