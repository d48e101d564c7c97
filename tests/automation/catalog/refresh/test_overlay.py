"""The ledger overlay over the shipped catalog: newest refresh per region wins, a refreshed
region is the whole truth there, validation and prices follow, a failed write stores nothing
(SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.catalog.overlay import LedgerOverlay, coverage
from automation.catalog.refresh import store
from automation.catalog.refresh.model import FetchedOffering, FetchedType, Snapshot
from automation.catalog.store import Catalog, ListFilter, load_catalog
from automation.errors import InvalidInput
from automation.ledger import schema
from automation.services import credentials
from automation.services.cost import lookup_prices, pool_rate
from automation.validation import check_placement
from tests.automation.conftest import snapshot

T1 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
T2 = T1 + timedelta(days=3)
M5 = FetchedType(name="m5.xlarge", arch="x86_64", vcpus=4, memory_gib=16.0)
NEW = FetchedType(name="m9z.xlarge", arch="x86_64", vcpus=4, memory_gib=32.0)


def snap(at: datetime, regions: tuple[str, ...], offerings: list[FetchedOffering],
         types: tuple[FetchedType, ...] = (M5,)) -> Snapshot:
    return Snapshot(provider="aws", regions=regions, types=types, offerings=tuple(offerings),
                    sources=("aws ec2:DescribeInstanceTypes",), fetched_at=at)


def offer(vm_type: str, region: str, price: float | None,
          zones: tuple[str, ...] | None = None) -> FetchedOffering:
    return FetchedOffering(vm_type=vm_type, region=region,
                           zones=zones if zones is not None else (f"{region}b", f"{region}c"),
                           price_usd_hour=price)


@pytest.fixture
def cred_id(app: App) -> str:
    return credentials.new_credential(app, credentials.NewCredential(
        "team-aws", "aws", {"profile": "team"})).id


def fresh(app: App) -> App:
    """A new App over the same ledger (App.catalog and the overlay remember what they read)."""
    return App(ledger=app.ledger, clock=app.clock, probe=app.probe)


def test_no_refresh_changes_nothing(app: App) -> None:
    shipped = load_catalog().provider("aws")
    cloud = app.catalog.provider("aws")
    assert shipped is not None and cloud is not None
    assert coverage(app.ledger) == {} and cloud.refreshed == {}
    assert cloud.offering("m5.xlarge", "us-east-1") == shipped.offering("m5.xlarge", "us-east-1")
    assert cloud.regions == shipped.regions
    key = ("aws", "m5.xlarge", "us-east-1")
    assert lookup_prices([key], ledger=app.ledger) == lookup_prices([key])


def test_the_newest_refresh_of_a_region_wins_and_only_there(app: App, cred_id: str) -> None:
    store.write_snapshot(app.ledger, snap(T1, ("us-east-1",), [
        offer("m5.xlarge", "us-east-1", 0.5)]), cred_id)
    store.write_snapshot(app.ledger, snap(T2, ("us-east-1",), [
        offer("m5.xlarge", "us-east-1", 0.25, ("us-east-1d",))]), cred_id)
    store.write_snapshot(app.ledger, snap(T1, ("eu-west-1",), [
        offer("m5.xlarge", "eu-west-1", 0.3)]), cred_id)
    cloud = app.catalog.provider("aws")
    shipped = load_catalog().provider("aws")
    assert cloud is not None and shipped is not None
    o = cloud.offering("m5.xlarge", "us-east-1")
    assert o is not None and o.price_usd_hour == 0.25 and o.zones == ["us-east-1d"]
    assert o.price_source is not None and o.price_source.as_of == "2026-11-23T08:00:00Z"
    assert o.price_source.name == "aws Price List API via credential team-aws"
    eu = cloud.offering("m5.xlarge", "eu-west-1")
    assert eu is not None and eu.price_usd_hour == 0.3
    # A region no refresh read keeps the shipped data.
    assert cloud.offering("m5.xlarge", "us-west-2") == shipped.offering("m5.xlarge", "us-west-2")
    assert cloud.zones_offering("us-east-1", "m5.xlarge") == ["us-east-1d"]
    assert cloud.regions["us-east-1"] == ["us-east-1d"]  # the zones the refresh saw
    by_region = {x.region: x for x in cloud.offerings("m5.xlarge")}
    assert by_region["us-east-1"].price_usd_hour == 0.25
    assert by_region["us-west-2"] == shipped.offering("m5.xlarge", "us-west-2")


def test_a_type_only_a_refresh_knows_is_valid(app: App, cred_id: str) -> None:
    store.write_snapshot(app.ledger, snap(T1, ("us-east-1",), [
        offer("m5.xlarge", "us-east-1", 0.2), offer("m9z.xlarge", "us-east-1", 0.4)],
        types=(M5, NEW)), cred_id)
    assert load_catalog().provider("aws").vm_type("m9z.xlarge") is None  # type: ignore[union-attr]
    placed = check_placement(app.catalog, "aws", "us-east-1", None, "m9z.xlarge")
    assert placed.vm_type.memory_gib == 32.0 and placed.zone == "us-east-1b"
    listed = {x.vm.name: x for x in app.catalog.listing(ListFilter(provider="aws",
                                                                   region="us-east-1"))}
    assert listed["m9z.xlarge"].price_usd_hour == 0.4
    assert set(listed) == {"m5.xlarge", "m9z.xlarge"}  # the refreshed region's whole truth
    # Elsewhere the new type is not offered (no refresh read another region).
    with pytest.raises(InvalidInput, match="offered in us-east-1"):
        check_placement(app.catalog, "aws", "us-west-2", None, "m9z.xlarge")


def test_a_refreshed_region_that_dropped_a_type_refuses_it_naming_the_refresh(
        app: App, cred_id: str) -> None:
    check_placement(app.catalog, "aws", "us-east-1", None, "m5.xlarge")  # shipped: offered
    store.write_snapshot(app.ledger, snap(T2, ("us-east-1",), [
        offer("m9z.xlarge", "us-east-1", 0.4)], types=(NEW,)), cred_id)
    with pytest.raises(InvalidInput) as err:
        check_placement(fresh(app).catalog, "aws", "us-east-1", None, "m5.xlarge")
    assert "2026-11-23T08:00:00Z" in str(err.value) and "team-aws" in str(err.value)
    assert err.value.field == "--vm-type"


def test_prices_use_the_newest_refresh_with_its_source_and_date(app: App,
                                                                cred_id: str) -> None:
    keys = [("aws", "m5.xlarge", "us-east-1"), ("aws", "m5.xlarge", "us-west-2"),
            ("aws", "c5.large", "us-east-1")]
    shipped = lookup_prices(keys)
    store.write_snapshot(app.ledger, snap(T1, ("us-east-1",), [
        offer("m5.xlarge", "us-east-1", 0.5)]), cred_id)
    store.write_snapshot(app.ledger, snap(T2, ("us-east-1",), [
        offer("m5.xlarge", "us-east-1", 0.211)]), cred_id)
    prices = lookup_prices(keys, ledger=app.ledger)
    m5 = prices[keys[0]]
    assert m5.usd_hour == Decimal("0.211") and not m5.stale
    assert m5.source == "aws Price List API via credential team-aws"
    assert m5.as_of == "2026-11-23T08:00:00Z"
    assert prices[keys[1]] == shipped[keys[1]]  # a region no refresh read
    gone = prices[keys[2]]  # the refresh of us-east-1 found no c5.large there
    assert gone.usd_hour is None and "does not offer c5.large" in (gone.hint or "")
    cost = pool_rate("aws", "m5.xlarge", "us-east-1", 2, ledger=app.ledger)
    assert cost.hourly_usd == 0.422 and cost.as_of == "2026-11-23T08:00:00Z"
    assert pool_rate("aws", "m5.xlarge", "us-east-1", 2) != cost  # callable as before


def test_shipped_data_newer_than_a_refresh_wins(app: App, cred_id: str) -> None:
    old = datetime(2020, 1, 1, tzinfo=UTC)  # before every date of the shipped catalog
    store.write_snapshot(app.ledger, snap(old, ("us-east-1",), [
        offer("m5.xlarge", "us-east-1", 9.0)]), cred_id)
    key = ("aws", "m5.xlarge", "us-east-1")
    assert lookup_prices([key], ledger=app.ledger) == lookup_prices([key])
    cloud = app.catalog.provider("aws")
    assert cloud is not None and cloud.refreshed == {}
    assert cloud.offering("m5.xlarge", "us-east-1") == load_catalog().offering(
        "m5.xlarge", "us-east-1")


def test_a_failed_write_stores_nothing(app: App, cred_id: str,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(app)
    bad = snap(T1, ("us-east-1",), [offer("m5.xlarge", "us-east-1", 0.2),
                                    offer("m5.xlarge", "us-east-1", 0.3)])
    with pytest.raises(ValueError, match="twice"):
        store.write_snapshot(app.ledger, bad, cred_id)
    # Past the checks, the database itself refuses the second row: the whole refresh (its
    # row, regions and types, already inserted) is rolled back.
    monkeypatch.setattr(store, "_check", lambda s: None)
    with pytest.raises(sa.exc.IntegrityError):
        store.write_snapshot(app.ledger, bad, cred_id)
    assert snapshot(app) == before
    with app.ledger.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(
            schema.catalog_refreshes)).scalar() == 0


def test_overlay_reads_are_single_queries(app: App, cred_id: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = type(app.ledger).query

    def counting(self, sql, params=None):  # type: ignore[no-untyped-def]
        calls.append(sql)
        return real(self, sql, params)

    monkeypatch.setattr(type(app.ledger), "query", counting)
    overlay = LedgerOverlay(app.ledger)
    catalog = load_catalog().with_overlay(overlay)
    check_placement(catalog, "aws", "us-east-1", None, "m5.xlarge")
    assert len(calls) == 1  # nothing refreshed: the one cheap coverage query, then nothing
    store.write_snapshot(app.ledger, snap(T1, ("us-east-1",), [
        offer("m5.xlarge", "us-east-1", 0.2)]), cred_id)
    calls.clear()
    catalog = load_catalog().with_overlay(LedgerOverlay(app.ledger))
    check_placement(catalog, "aws", "us-east-1", None, "m5.xlarge")
    assert len(calls) == 3  # coverage, the type, the offering (each one indexed statement)


def test_a_catalog_with_its_overlay_survives_pickling(app: App, cred_id: str) -> None:
    import pickle

    store.write_snapshot(app.ledger, snap(T1, ("us-east-1",), [
        offer("m5.xlarge", "us-east-1", 0.2)]), cred_id)
    copy = pickle.loads(pickle.dumps(app.catalog))  # a worker process reopens both
    o = copy.offering("m5.xlarge", "us-east-1")
    assert o is not None and o.price_usd_hour == 0.2


def test_a_remembered_listing_gives_way_to_a_new_refresh(app: App, cred_id: str,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """``Catalog.listing`` is remembered per content: asked again over the same refreshes it
    runs none of its queries; once a refresh is stored, or a newer one of the same region,
    the same filter is answered afresh."""
    wanted = ListFilter(provider="aws", region="us-east-1", min_vcpus=4)

    def m5() -> float | None:
        catalog = load_catalog().with_overlay(LedgerOverlay(app.ledger))  # as a request reads it
        return next(x.price_usd_hour for x in catalog.listing(wanted) if x.vm.name == "m5.xlarge")

    shipped = m5()
    runs: list[ListFilter] = []
    real = Catalog._listing
    monkeypatch.setattr(Catalog, "_listing", lambda self, f: runs.append(f) or real(self, f))
    assert m5() == shipped and runs == []  # remembered
    store.write_snapshot(app.ledger, snap(T1, ("us-east-1",), [
        offer("m5.xlarge", "us-east-1", 0.123)]), cred_id)
    assert m5() == 0.123 and runs == [wanted]  # the refresh is in the answer
    assert m5() == 0.123 and runs == [wanted]
    store.write_snapshot(app.ledger, snap(T2, ("us-east-1",), [
        offer("m5.xlarge", "us-east-1", 0.321)]), cred_id)
    assert m5() == 0.321 and len(runs) == 2  # a newer refresh of the region
