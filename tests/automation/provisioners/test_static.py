"""The static provisioner: least-used runtime with room, idempotent per id, released exactly
once, warnings at 80 %, and never over-allocated by processes racing (SQLite, PostgreSQL)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from automation.clock import ManualClock
from automation.errors import Conflict
from automation.ledger import open_ledger, schema
from automation.ledger.db import Ledger
from automation.provisioners.base import ProvisionRequest
from automation.provisioners.provisioner_set import StaticSpec
from automation.provisioners.static import StaticProvisioner


def spec(**slots: int) -> StaticSpec:
    return StaticSpec.model_validate({"runtimes": [
        {"host": f"http://{h}:8081", "slots": n, "data_dir": f"/data/{h}",
         "audience_url": f"http://{h}:8081"} for h, n in slots.items()]})


@pytest.fixture
def ledger(ledger_url: str) -> Iterator[Ledger]:
    ledger = open_ledger(ledger_url)
    yield ledger
    ledger.dispose()


def test_least_used_runtime_with_room_and_idempotent(ledger: Ledger) -> None:
    p = StaticProvisioner("fleet", spec(a=2, b=4), ledger, ManualClock())
    first = p.provision("r1", ProvisionRequest())
    assert first.host == "http://a:8081" and first.data_dir == "/data/a"
    assert p.provision("r1", ProvisionRequest()) == first  # idempotent: nothing more held
    assert p.provision("r2", ProvisionRequest()).host == "http://b:8081"  # a is 50 %, b 0 %
    assert [(u.host, u.used) for u in p.usage()] == [("http://a:8081", 1), ("http://b:8081", 1)]
    big = p.provision("r3", ProvisionRequest(slots=3))
    assert big.host == "http://b:8081"  # a has 1 free slot, b has 3


def test_no_capacity_is_refused_naming_the_use(ledger: Ledger) -> None:
    p = StaticProvisioner("fleet", spec(a=1), ledger, ManualClock())
    p.provision("r1", ProvisionRequest())
    with pytest.raises(Conflict) as err:
        p.provision("r2", ProvisionRequest())
    assert err.value.code == "NO_CAPACITY" and "http://a:8081 1/1" in err.value.message
    with ledger.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(
            schema.static_allocations)).scalar() == 1


def test_warnings_at_80_percent_per_runtime_and_for_the_set(ledger: Ledger) -> None:
    p = StaticProvisioner("fleet", spec(a=5, b=5), ledger, ManualClock())
    seen = [p.provision(f"r{i}", ProvisionRequest()).warnings for i in range(8)]
    assert seen[5] == ()  # 3/5 each: 60 %
    assert seen[6] == ("runtime http://a:8081 of fleet is 80 % used (4/5 slots)",)  # set 70 %
    assert seen[7] == ("runtime http://a:8081 of fleet is 80 % used (4/5 slots)",
                       "runtime http://b:8081 of fleet is 80 % used (4/5 slots)",
                       "static provisioner fleet is 80 % used (8/10 slots)")


def test_released_exactly_once_and_only_by_its_provisioner(ledger: Ledger) -> None:
    p = StaticProvisioner("fleet", spec(a=1), ledger, ManualClock())
    other = StaticProvisioner("other", spec(z=1), ledger, ManualClock())
    p.provision("r1", ProvisionRequest())
    with pytest.raises(Conflict, match="r1 holds slots of provisioner 'fleet'") as err:
        other.provision("r1", ProvisionRequest())
    assert err.value.rule == "deprovision it with its own provisioner first"
    assert other.deprovision("r1") is False
    assert p.deprovision("r1") is True
    assert p.deprovision("r1") is False
    assert p.provision("r2", ProvisionRequest()).host == "http://a:8081"  # the slot is free


def test_check_reports_a_runtime_removed_or_shrunk_in_the_set(ledger: Ledger) -> None:
    clock = ManualClock()
    StaticProvisioner("fleet", spec(a=2, b=2), ledger, clock).provision("r1", ProvisionRequest())
    StaticProvisioner("fleet", spec(a=2, b=2), ledger, clock).provision("r2", ProvisionRequest())
    assert StaticProvisioner("fleet", spec(a=2, b=2), ledger, clock).check("r1").ok
    moved = StaticProvisioner("fleet", spec(b=2), ledger, clock).check("r1")
    assert not moved.ok and "was removed from the set" in moved.detail
    StaticProvisioner("fleet", spec(a=2, b=2), ledger, clock).provision("r3", ProvisionRequest())
    shrunk = StaticProvisioner("fleet", spec(a=1, b=2), ledger, clock).check("r1")
    assert not shrunk.ok and "holds 2 slots of 1" in shrunk.detail
    assert not StaticProvisioner("fleet", spec(a=2), ledger, clock).check("nope").ok


PROCS, EACH = 4, 15
RACE = {"a": 7, "b": 11, "c": 5}  # 23 slots for 60 requests


def _race(url: str, proc: int, start: Any, out: Any) -> None:
    ledger = open_ledger(url)
    p = StaticProvisioner("fleet", spec(**RACE), ledger, ManualClock())
    start.wait()
    won = 0
    for i in range(EACH):
        try:
            p.provision(f"p{proc}-{i}", ProvisionRequest())
            won += 1
        except Conflict:
            pass
    ledger.dispose()
    out.put(won)


@pytest.mark.slow
def test_processes_racing_never_over_allocate(ledger: Ledger, ledger_url: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(ledger_url, n, start, out)) for n in range(PROCS)]
    for proc in procs:
        proc.start()
    start.set()
    won = sum(out.get(timeout=120) for _ in procs)
    for proc in procs:
        proc.join(timeout=30)
        assert proc.exitcode == 0
    usage = StaticProvisioner("fleet", spec(**RACE), ledger, ManualClock()).usage()
    assert won == sum(RACE.values())  # every slot handed out, to exactly one request
    assert all(u.used == u.slots for u in usage), usage
