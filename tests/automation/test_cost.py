"""What pools cost: the rate (VMs x list price) in create, list and status, and the sums of
``anycloud cost`` over VM attempt lifetimes, exact, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.catalog.store import CATALOG_FILE, data_dir, load_catalog
from automation.cli.views import describe_cost
from automation.clock import ManualClock
from automation.errors import InvalidInput
from automation.ledger import schema
from automation.services import cost, node_pools, pool_status
from automation.services.cost_report import cost_report, parse_since
from tests.automation.conftest import credential, ok_json, ready_cluster
from tests.automation.reconciler.conftest import Rig, rig  # noqa: F401  (fixture)

H = timedelta(hours=1)
T0 = datetime(2026, 11, 1, tzinfo=UTC)
_ids = count()


def _list_price(provider: str, vm_type: str, region: str) -> float:
    """The oracle: the catalog's own offering (automation.catalog), not the lookup under test."""
    offering = load_catalog().provider(provider).offering(vm_type, region)  # type: ignore[union-attr]
    assert offering is not None and offering.price_usd_hour is not None
    return offering.price_usd_hour


@pytest.fixture
def world(app: App, kubeconfig: Path) -> App:
    ready_cluster(app, kubeconfig)
    for provider in ("aws", "gcp"):
        credential(app, f"team-{provider}", provider)
    return app


def _pool(app: App, name: str, provider: str, region: str, vm_type: str, vms: int = 2) -> str:
    return node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name=name, credentials=f"team-{provider}", region=region, vm_type=vm_type,
        min_vms=vms, max_vms=vms)).id


def _attempt(app: App, pool_id: str, state: str, start: datetime | None,
             end: datetime | None = None, engine: str = "pulumi") -> None:
    """An attempt whose VM the provider confirmed at ``start`` and released at ``end``."""
    with app.ledger.write() as conn:
        conn.execute(schema.vm_attempts.insert().values(
            id=f"at-{next(_ids):06d}", pool_id=pool_id, state=state, token_generation=0,
            created_at=start or T0, updated_at=end or start or T0, vm_created_at=start,
            released_at=end, gpu_ready_seen=False, engine=engine))


# -- the rate -----------------------------------------------------------------------------


def test_rate_is_vms_times_list_price_per_hour_and_30_days() -> None:
    price = _list_price("aws", "m5.xlarge", "us-west-2")
    rate = cost.pool_rate("aws", "m5.xlarge", "us-west-2", 3)
    assert rate.vms == 3 and rate.hourly_usd == pytest.approx(3 * price, abs=1e-6)
    assert rate.monthly_usd == pytest.approx(3 * price * 720, abs=1e-6)
    assert rate.source is not None and rate.source.startswith("apache-libcloud")
    assert (rate.as_of, rate.stale, rate.hint) == ("2025-03-02", True, None)
    assert describe_cost(rate) == (
        f"${3 * price:.4f}/hour, ${3 * price * 720:.2f}/30 days "
        "(3 VMs; apache-libcloud 2025-03-02, stale)")
    assert rate.model_dump(mode="json").keys() == {
        "vms", "hourlyUsd", "monthlyUsd", "source", "asOf", "stale", "hint"}


def test_unknown_price_is_null_with_a_hint_naming_the_source() -> None:
    rate = cost.pool_rate("aws", "m5.xlarge", "us-east-1", 2)
    assert (rate.hourly_usd, rate.monthly_usd) == (None, None)
    assert rate.hint is not None and rate.hint.startswith(
        "no list price in the catalog for m5.xlarge in us-east-1 (apache-libcloud 2025-03-02)")
    assert "anycloud catalog show m5.xlarge" in rate.hint
    assert "anycloud catalog refresh --credentials <name> --region us-east-1" in rate.hint
    assert describe_cost(rate).startswith("price unknown (2 VMs): no list price")
    unoffered = cost.pool_rate("aws", "m5.xlarge", "mars-1", 1)
    assert unoffered.hourly_usd is None and unoffered.source is None
    assert unoffered.hint == "the catalog does not offer aws m5.xlarge in mars-1"


def test_no_pools_reads_no_price(tmp_path: Path) -> None:
    assert cost.lookup_prices([], tmp_path / "absent.sqlite") == {}


def test_prices_come_from_the_catalog_file_the_catalog_opens() -> None:
    # cost finds the file without importing automation.catalog (start-up time): same rule.
    assert cost._catalog_path() == data_dir() / CATALOG_FILE


# -- status and list: the VMs billed now ---------------------------------------------------


def test_status_and_list_count_only_vms_the_provider_confirmed_and_not_released(
        world: App) -> None:
    pool = _pool(world, "cpu", "aws", "us-west-2", "m5.xlarge", vms=4)
    assert pool_status.node_pool_status(world.ledger, pool).cost == cost.pool_rate(
        "aws", "m5.xlarge", "us-west-2", 0)
    _attempt(world, pool, "running", T0)
    _attempt(world, pool, "releasing", T0)  # still billed until the provider confirms it gone
    _attempt(world, pool, "pending", None)  # nothing bought yet
    _attempt(world, pool, "released", T0, T0 + H)
    _attempt(world, pool, "running", T0, engine="mock")  # the mock engine bought nothing
    _attempt(world, pool, "running", T0, engine="standin")  # nor did the stand-in cloud
    price = _list_price("aws", "m5.xlarge", "us-west-2")
    status = pool_status.node_pool_status(world.ledger, pool)
    assert status.cost is not None and status.cost.vms == 2
    assert status.cost.hourly_usd == pytest.approx(2 * price, abs=1e-6)
    (listed,) = pool_status.list_node_pools(world.ledger)
    assert listed.cost == status.cost
    assert json.loads(listed.model_dump_json())["cost"]["hourlyUsd"] == status.cost.hourly_usd


# -- anycloud cost: sums over lifetimes ------------------------------------------------------


def test_cost_sums_are_exact_over_known_lifetimes(world: App) -> None:
    aws = _pool(world, "cpu", "aws", "us-west-2", "m5.xlarge")
    gcp = _pool(world, "gcp", "gcp", "us-central1", "n2-standard-4")
    _attempt(world, aws, "released", T0, T0 + 2 * H)  # 2 h
    _attempt(world, aws, "running", T0 + H)  # 3 h until now
    _attempt(world, aws, "pending", None)  # never bought: nothing
    _attempt(world, gcp, "released", T0 + H / 2, T0 + 3 * H / 2)  # 1 h
    _attempt(world, gcp, "releasing", T0 + 3 * H, None)  # 1 h, not confirmed gone yet
    _attempt(world, gcp, "running", T0 + 2 * H, engine="mock")  # 2 h simulated: bought nothing
    _attempt(world, gcp, "running", T0 + 2 * H, engine="standin")  # 2 h stand-in: nor here
    now = T0 + 4 * H
    p_aws = _list_price("aws", "m5.xlarge", "us-west-2")
    p_gcp = _list_price("gcp", "n2-standard-4", "us-central1")

    by_pool = cost_report(world.ledger, now, by="pool")
    assert [(line.group, line.pool_id, line.vm_hours) for line in by_pool.lines] == [
        ("prod/cpu", aws, 5.0), ("prod/gcp", gcp, 2.0)]
    assert [line.usd for line in by_pool.lines] == [round(5 * p_aws, 6), round(2 * p_gcp, 6)]
    assert by_pool.total_usd == round(5 * p_aws + 2 * p_gcp, 6)
    assert (by_pool.total_vm_hours, by_pool.unpriced_vm_hours) == (7.0, 0.0)
    assert [line.simulated_vm_hours for line in by_pool.lines] == [0.0, 4.0]
    assert by_pool.simulated_vm_hours == 4.0
    assert by_pool.lines[0].sources == ["apache-libcloud 2025-03-02"]

    by_provider = cost_report(world.ledger, now, by="provider")
    assert [(line.group, line.vm_hours) for line in by_provider.lines] == [
        ("aws", 5.0), ("gcp", 2.0)]
    (cluster,) = cost_report(world.ledger, now, by="cluster").lines
    assert (cluster.group, cluster.vm_hours, cluster.usd) == ("prod", 7.0, by_pool.total_usd)

    # Since T0 + 1h30: aws 30 min + 2 h 30, gcp 0 + 1 h (the released-at-1h30 one is out).
    since = cost_report(world.ledger, now, by="pool", since=T0 + 3 * H / 2)
    assert [(line.group, line.vm_hours) for line in since.lines] == [
        ("prod/cpu", 3.0), ("prod/gcp", 1.0)]
    assert since.total_usd == round(3 * p_aws + p_gcp, 6)
    assert cost_report(world.ledger, now, since=now).lines == []


def test_deleted_pools_still_count_and_unpriced_hours_are_kept_apart(world: App) -> None:
    unpriced = _pool(world, "old", "aws", "us-east-1", "m5.xlarge", vms=1)
    _attempt(world, unpriced, "released", T0, T0 + 90 * timedelta(minutes=1))
    node_pools.delete_node_pool(world, unpriced)
    report = cost_report(world.ledger, T0 + 10 * H, by="provider")
    (line,) = report.lines
    assert (line.vm_hours, line.usd, line.unpriced_vm_hours) == (1.5, 0.0, 1.5)
    assert line.hints and "no list price in the catalog for m5.xlarge in us-east-1" in (
        line.hints[0])
    assert report.unpriced_vm_hours == 1.5 and report.total_usd == 0.0


@pytest.mark.parametrize(("text", "rule"), [
    ("yesterday", "must be a date (2026-11-01) or an ISO time"),
    ("2030-01-01", "must not be in the future"),
])
def test_bad_since_names_field_value_and_rule(world: App, text: str, rule: str) -> None:
    with pytest.raises(InvalidInput) as err:
        cost_report(world.ledger, T0, since=parse_since(text))
    assert (err.value.field, err.value.value) == ("--since", text)
    assert rule in str(err.value)


def test_reconciler_records_the_lifetimes_cost_sums(rig: Rig) -> None:  # noqa: F811
    """The real pass (over the mock engine): VMs start when the provider confirms them and
    end when their release is confirmed; the sum is VMs x that lifetime."""
    clock: ManualClock = rig.world.clock
    started = clock.now()
    pool = rig.pool("cpu", count=2)
    rig.passes(6, step=timedelta(minutes=10))  # an hour of passes
    node_pools.delete_node_pool(rig.app, pool)
    released_by = [clock.now()]
    for _ in range(6):
        rig.passes(1, step=timedelta(minutes=10))
        released_by.append(clock.now())
    with rig.app.ledger.read() as conn:
        rows = conn.execute(sa.select(schema.vm_attempts).where(
            schema.vm_attempts.c.pool_id == pool)).mappings().all()
    assert len(rows) == 2 and {r["state"] for r in rows} == {"released"}
    assert {r["vm_created_at"] for r in rows} == {started}
    (released,) = {r["released_at"] for r in rows}
    assert released in released_by[:-1]  # stamped by the pass that confirmed it
    hours = (released - started) / H
    assert {r["engine"] for r in rows} == {"mock"}
    (line,) = cost_report(rig.app.ledger, clock.now() + 5 * H).lines
    # The mock engine bought nothing: its hours are shown apart and cost nothing.
    assert line.simulated_vm_hours == pytest.approx(2 * hours, abs=1e-6)
    assert (line.vm_hours, line.usd) == (0.0, 0.0)


# -- the CLI -------------------------------------------------------------------------------


def test_cli_create_list_status_and_cost(run, world: App, in_each_mode: str) -> None:  # type: ignore[no-untyped-def]
    price = _list_price("aws", "m5.xlarge", "us-west-2")
    created = run("node-pool", "create", "cpu", "--credentials", "team-aws", "--region",
                  "us-west-2", "--vm-type", "m5.xlarge", "--min-vms", "2", "--max-vms", "2",
                  "--json")
    pool = ok_json(created)
    assert pool["cost"]["vms"] == 2 and pool["cost"]["hourlyUsd"] == round(2 * price, 6)
    assert pool["cost"]["asOf"] == "2025-03-02"
    assert f"estimated cost: ${2 * price:.4f}/hour" in created.stderr
    unpriced = run("node-pool", "create", "east", "--credentials", "team-aws", "--region",
                   "us-east-1", "--vm-type", "m5.xlarge", "--min-vms", "1", "--max-vms", "1")
    assert unpriced.exit_code == 0
    assert "estimated cost: price unknown (1 VM): no list price in the catalog" in (
        unpriced.stderr)

    _attempt(world, pool["id"], "running", T0)
    load_catalog.cache_clear()  # list and status price their pools without loading it
    listed = ok_json(run("node-pool", "list", "--json"))
    assert [(p["name"], p["cost"]["vms"]) for p in listed] == [("cpu", 1), ("east", 0)]
    assert listed[0]["cost"]["hourlyUsd"] == round(price, 6)
    assert listed[1]["cost"]["hourlyUsd"] is None
    table = run("node-pool", "list")
    assert "USD/HOUR" in table.stdout and f"{price:.4f}" in table.stdout
    status = ok_json(run("node-pool", "status", "cpu", "--json"))
    assert status["cost"] == listed[0]["cost"]
    assert "Running cost" in run("node-pool", "status", "cpu").stdout
    assert load_catalog.cache_info().currsize == 0

    report = ok_json(run("cost", "--by", "provider", "--since", "2026-11-01", "--json"))
    (line,) = report["lines"]
    assert line["group"] == "aws" and line["vmHours"] > 0 and line["usd"] > 0
    assert set(report) == {"by", "since", "until", "lines", "totalUsd", "totalVmHours",
                           "unpricedVmHours", "simulatedVmHours"}
    human = run("cost", "--by", "cluster")
    assert human.exit_code == 0 and "prod" in human.stdout and "total: $" in human.stderr
    bad = run("cost", "--since", "last-week", "--json")
    assert bad.exit_code == 2
    error = json.loads(bad.stdout)["error"]
    assert (error["field"], error["value"]) == ("--since", "last-week")
