"""``cost_by_day``: the lifetimes ``anycloud cost`` sums, split at each UTC midnight of the
last N days, per pool; the same total as ``cost_report`` over the same window."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automation.app import App
from automation.errors import InvalidInput
from automation.ledger import schema
from automation.services.cost_report import cost_by_day, cost_report
from tests.automation.conftest import ok_json
from tests.automation.test_cost import _attempt, _list_price, _pool, world  # noqa: F401

H = timedelta(hours=1)
DAY1 = datetime(2026, 11, 1, tzinfo=UTC)


def _hours_of(usd: float, price: float) -> float:
    return round(usd / price, 3)


def test_a_vm_across_midnights_splits_by_day(world: App) -> None:  # noqa: F811
    pool = _pool(world, "cpu", "aws", "us-west-2", "m5.xlarge")
    _attempt(world, pool, "released", DAY1 + 12 * H, DAY1 + 2 * 24 * H + 6 * H)
    price = _list_price("aws", "m5.xlarge", "us-west-2")
    daily = cost_by_day(world.ledger, DAY1 + 2 * 24 * H + 20 * H, days=3)
    assert daily.days == [date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)]
    assert daily.since == DAY1
    (line,) = daily.pools
    assert (line.pool_id, line.pool, line.cluster) == (pool, "cpu", "prod")
    assert [_hours_of(usd, price) for usd in line.per_day] == [12.0, 24.0, 6.0]
    assert line.per_day == [round(12 * price, 6), round(24 * price, 6), round(6 * price, 6)]
    assert line.total == daily.total_usd == round(42 * price, 6)
    assert daily.per_day == line.per_day


def test_a_live_vm_counts_until_now_and_a_released_one_stops(world: App) -> None:  # noqa: F811
    pool = _pool(world, "cpu", "aws", "us-west-2", "m5.xlarge")
    _attempt(world, pool, "running", DAY1 + 22 * H)  # 2 h on day 1, 10 h today
    _attempt(world, pool, "released", DAY1 + 6 * H, DAY1 + 7 * H)  # 1 h on day 1
    price = _list_price("aws", "m5.xlarge", "us-west-2")
    (line,) = cost_by_day(world.ledger, DAY1 + 34 * H, days=2).pools
    assert [_hours_of(usd, price) for usd in line.per_day] == [3.0, 10.0]


def test_only_the_window_counts_and_empty_days_are_zero(world: App) -> None:  # noqa: F811
    pool = _pool(world, "cpu", "aws", "us-west-2", "m5.xlarge")
    _attempt(world, pool, "released", DAY1 - 5 * 24 * H, DAY1 - 4 * 24 * H)  # before: out
    _attempt(world, pool, "released", DAY1 - 2 * H, DAY1 + 3 * H)  # 3 h in the window
    price = _list_price("aws", "m5.xlarge", "us-west-2")
    now = DAY1 + 4 * 24 * H + H  # day 5, 01:00
    daily = cost_by_day(world.ledger, now, days=5)
    assert daily.days[0] == date(2026, 11, 1) and daily.days[-1] == date(2026, 11, 5)
    (line,) = daily.pools
    assert [_hours_of(usd, price) for usd in line.per_day] == [3.0, 0.0, 0.0, 0.0, 0.0]
    today = cost_by_day(world.ledger, now, days=1)
    assert today.days == [date(2026, 11, 5)] and today.pools == [] and today.total_usd == 0


def test_unpriced_and_simulated_hours_are_kept_apart(world: App) -> None:  # noqa: F811
    unpriced = _pool(world, "east", "aws", "us-east-1", "m5.xlarge", vms=1)
    mock = _pool(world, "sim", "aws", "us-west-2", "m5.xlarge", vms=1)
    _attempt(world, unpriced, "running", DAY1)
    _attempt(world, mock, "running", DAY1, engine="mock")
    daily = cost_by_day(world.ledger, DAY1 + 5 * H, days=1)
    (line,) = daily.pools  # the mock engine's pool bought nothing: no line
    assert (line.pool, line.per_day, line.total, line.unpriced_vm_hours) == (
        "east", [0.0], 0.0, 5.0)
    assert line.hints and "no list price in the catalog for m5.xlarge in us-east-1" in (
        line.hints[0])
    assert (daily.unpriced_vm_hours, daily.simulated_vm_hours) == (5.0, 5.0)


def test_pools_come_largest_first_in_camel_case_json(world: App) -> None:  # noqa: F811
    small = _pool(world, "small", "aws", "us-west-2", "m5.xlarge")
    big = _pool(world, "big", "aws", "us-west-2", "m5.xlarge")
    _attempt(world, small, "running", DAY1 + 10 * H)
    _attempt(world, big, "running", DAY1)
    daily = cost_by_day(world.ledger, DAY1 + 12 * H, days=2)
    assert [p.pool_id for p in daily.pools] == [big, small]
    body = daily.model_dump(mode="json", by_alias=True)
    assert set(body) == {"days", "since", "until", "currency", "pools", "perDay", "totalUsd",
                         "unpricedVmHours", "simulatedVmHours"}
    assert body["currency"] == "USD" and body["days"] == ["2026-10-31", "2026-11-01"]
    assert set(body["pools"][0]) == {"poolId", "pool", "cluster", "perDay", "total",
                                     "unpricedVmHours", "sources", "hints"}


@pytest.mark.parametrize("days", [0, -1, 91])
def test_days_out_of_range_name_field_value_and_rule(world: App, days: int) -> None:  # noqa: F811
    with pytest.raises(InvalidInput) as err:
        cost_by_day(world.ledger, DAY1, days=days)
    assert (err.value.field, err.value.value) == ("--days", days)
    assert "must be between 1 and 90" in str(err.value)


_lifetime = st.tuples(st.integers(-3 * 24 * 3600, 10 * 24 * 3600),  # start, from DAY1
                      st.one_of(st.none(), st.integers(1, 6 * 24 * 3600)),  # length or live
                      st.sampled_from(["cpu", "gpu"]))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lifetimes=st.lists(_lifetime, max_size=6), days=st.integers(1, 12),
       now_offset=st.integers(0, 12 * 24 * 3600))
def test_the_days_add_up_to_the_reports_total_over_the_same_window(
        world: App, lifetimes: list[tuple[int, int | None, str]],  # noqa: F811
        days: int, now_offset: int) -> None:
    pools = {row["name"]: row["id"] for row in world.ledger.query(
        "SELECT id, name FROM node_pools")}
    for name, vm_type in (("cpu", "m5.xlarge"), ("gpu", "m5.2xlarge")):
        if name not in pools:
            pools[name] = _pool(world, name, "aws", "us-west-2", vm_type)
    with world.ledger.write() as conn:
        conn.execute(schema.vm_attempts.delete())
    now = DAY1 + timedelta(seconds=now_offset, microseconds=now_offset % 997)
    for start, length, name in lifetimes:
        begin = DAY1 + timedelta(seconds=start, microseconds=start % 1000)
        if begin > now:
            continue  # not confirmed yet at ``now``
        end = None if length is None else begin + timedelta(seconds=length)
        _attempt(world, pools[name], "running" if end is None else "released", begin, end)
    daily = cost_by_day(world.ledger, now, days=days)
    report = cost_report(world.ledger, now, since=daily.since)
    assert daily.total_usd == report.total_usd
    assert sum(daily.per_day) == pytest.approx(report.total_usd, abs=1e-6 * days)
    by_pool = {line.pool_id: line.usd for line in report.lines}
    for line in daily.pools:
        assert sum(line.per_day) == pytest.approx(by_pool[line.pool_id], abs=1e-6 * days)


# -- the CLI -------------------------------------------------------------------------------


def test_cli_cost_daily(run, world: App, in_each_mode: str) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    pool = _pool(world, "cpu", "aws", "us-west-2", "m5.xlarge")
    # Embedded mode reads the system clock, the API server its app's: make them agree.
    world.clock.advance(datetime.now(UTC) - world.clock.now())  # type: ignore[attr-defined]
    now = world.clock.now()
    _attempt(world, pool, "released", now - 30 * H, now - 6 * H)
    price = _list_price("aws", "m5.xlarge", "us-west-2")
    body = ok_json(run("cost", "--daily", "--days", "3", "--json"))
    assert len(body["days"]) == 3 and body["currency"] == "USD"
    (line,) = body["pools"]
    assert line["poolId"] == pool and line["pool"] == "cpu"
    assert sum(line["perDay"]) == pytest.approx(24 * price, abs=1e-5)
    assert len(ok_json(run("cost", "--daily", "--json"))["days"]) == 30
    human = run("cost", "--daily", "--days", "2")
    assert human.exit_code == 0, human.output
    assert "prod/cpu" in human.stdout and now.date().isoformat() in human.stdout
    assert "total: $" in human.stderr
    for argv, field in ((["--days", "91"], "--days"), (["--since", "2026-11-01"], "--since")):
        bad = run("cost", "--daily", *argv, "--json")
        assert bad.exit_code == 2, bad.output
        assert json.loads(bad.stdout)["error"]["field"] == field
