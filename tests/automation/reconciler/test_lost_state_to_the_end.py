"""Lost state, every path to the end (issue 34): drift that notices, adopt that finds every VM
the ledger says may exist, a delete that finishes with nothing left in the cloud, and no
pass loop that stalls with no error."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from automation.ledger import schema
from automation.reconciler import reconcile
from automation.reconciler.progress import STALL_PASSES
from automation.services import node_pools, pool_status
from automation.services.pool_adopt import CLEARED, adopt_pool
from automation.services.pool_drift import check_pool_drift
from automation.stack_targets import pool_target
from tests.automation.reconciler.conftest import Rig, make_rig
from tests.ledger_templates import LedgerTemplates

M = timedelta(minutes=1)
VM_TYPE = {"aws": "m7i.large", "gcp": "n2-standard-4", "azure": "Standard_D4s_v5"}


class Killed(BaseException):
    """The reconciler killed at a step boundary (a SIGKILL, in process): nothing after it
    runs, and no handler of the pass sees it."""


@contextmanager
def killed_at(boundary: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def crash(name: str) -> None:
        if name == boundary:
            raise Killed(name)

    monkeypatch.setattr(reconcile, "crashpoint", crash)
    with pytest.raises(Killed):
        yield
    monkeypatch.undo()


def lose_state(rig: Rig) -> None:
    shutil.rmtree(rig.app.home / "mock-engine")  # an emptyDir wiped by a pod restart


def status(rig: Rig, pool: str) -> pool_status.NodePoolStatus:
    return pool_status.node_pool_status(rig.app.ledger, pool)


def attempt_states(rig: Rig, pool: str) -> dict[str, str]:
    t = schema.vm_attempts
    with rig.app.ledger.read() as conn:
        return dict(conn.execute(sa.select(t.c.id, t.c.state).where(t.c.pool_id == pool)).all())


def live_networks(rig: Rig) -> list[str]:
    return [rid for rid, r in rig.world.cloud.resources.items() if r["state"] == "live"]


def adopt(rig: Rig, pool: str) -> int:
    return adopt_pool(rig.app, lambda: rig.reconciler.ports.runner, pool).summary.same


def until(rig: Rig, pool: str, state: str, limit: int = 12) -> int:
    """Passes (a minute apart) until the pool is in ``state``; how many it took."""
    for n in range(1, limit + 1):
        rig.passes(1, step=M)
        if status(rig, pool).state == state:
            return n
    s = status(rig, pool)
    raise AssertionError(f"not {state} after {limit} passes: {s.state} [{s.last_error_code}] "
                         f"{s.last_error}")


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_a_deleted_pool_with_a_lost_state_is_adopted_and_deleted_to_the_end(
        rig: Rig, provider: str) -> None:
    pool = rig.pool("cpu", provider=provider, vm_type=VM_TYPE[provider], count=3)
    until(rig, pool, "ready")
    vms = {v.attempt_id for v in rig.world.cloud.vms_of_pool(pool)}
    assert len(vms) == 3
    lose_state(rig)

    # 1. Drift compares with the state, and a lost state is the answer, not "none".
    report = check_pool_drift(rig.app, lambda: rig.reconciler.ports.runner, pool)
    assert report.error_code == "STATE_MISSING" and not report.changes, report

    # 2. Deleting waits, saying why.
    node_pools.delete_node_pool(rig.app, "cpu")
    rig.passes(3, step=M)
    s = status(rig, pool)
    assert (s.state, s.last_error_code) == ("deleting", "STATE_MISSING")
    assert set(attempt_states(rig, pool).values()) == {"releasing"}

    # 3. Adopt finds the VMs of the releasing attempts, not only the network.
    same = adopt(rig, pool)
    held = rig.reconciler.ports.runner.load_state(pool_target(rig.app, pool, planned=False))
    assert vms <= {a for urn in held["resources"] for a in vms if a in urn}
    assert same >= 3 + 1

    # 4. The delete goes on to the end: nothing left in the cloud.
    until(rig, pool, "deleted")
    s = status(rig, pool)
    assert s.last_error_code is None, s.last_error
    assert rig.world.cloud.vms_of_pool(pool) == [] and live_networks(rig) == []
    assert set(attempt_states(rig, pool).values()) == {"released"}


def test_a_state_lost_during_a_replacement_is_adopted_with_the_replaced_vm(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    rig.world.cloud.faults.never_boot_next = 1
    pool = rig.pool("cpu", count=2)
    rig.passes(1)
    rig.world.advance(11 * M)  # the VM that never joined is due for replacement
    with killed_at("after-release-write", monkeypatch):
        rig.passes(1, step=M)
    states = attempt_states(rig, pool)
    (replaced,) = [a for a, s in states.items() if s == "releasing"]
    assert rig.world.cloud.lookup(replaced) == "running"  # released in intent, not in fact
    lose_state(rig)
    rig.passes(2, step=M)
    assert status(rig, pool).last_error_code == "STATE_MISSING"
    bought = len(rig.world.cloud.vms)

    adopt(rig, pool)
    until(rig, pool, "ready")
    assert attempt_states(rig, pool)[replaced] == "released"
    assert rig.world.cloud.lookup(replaced) == "absent"
    live = {v.attempt_id for v in rig.world.cloud.vms_of_pool(pool)}
    running = {a for a, s in attempt_states(rig, pool).items() if s == "running"}
    assert live == running and len(live) == 2
    assert len(rig.world.cloud.vms) == bought + 1  # the successor, bought once


def test_a_state_lost_during_a_scale_down_is_adopted_with_the_surplus(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = rig.pool("cpu", count=3)
    until(rig, pool, "ready")
    with rig.app.ledger.write() as conn:  # what a smaller count leaves: two VMs too many
        conn.execute(schema.node_pools.update().where(schema.node_pools.c.id == pool)
                     .values(min_vms=1, max_vms=1))
    with killed_at("after-release-write", monkeypatch):
        rig.passes(1, step=M)
    surplus = [a for a, s in attempt_states(rig, pool).items() if s == "releasing"]
    assert len(surplus) == 2
    lose_state(rig)
    rig.passes(2, step=M)
    assert status(rig, pool).last_error_code == "STATE_MISSING"

    adopt(rig, pool)
    rig.passes(3, step=M)
    s = status(rig, pool)
    assert (s.state, s.last_error_code) == ("ready", None), s.last_error
    assert {attempt_states(rig, pool)[a] for a in surplus} == {"released"}
    assert len(rig.world.cloud.vms_of_pool(pool)) == 1


def test_a_release_the_state_cannot_make_is_reported_not_repeated_forever(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = rig.pool("cpu", count=2)
    until(rig, pool, "ready")
    node_pools.delete_node_pool(rig.app, "cpu")
    with killed_at("after-release-write", monkeypatch):
        rig.passes(1, step=M)
    # A state restored from a backup older than the pool's VMs: it holds the network only,
    # so no update deletes them (adopting only what a deleting pool's program declares did
    # exactly this).
    lose_state(rig)
    rig.reconciler.ports.runner.adopt(pool_target(rig.app, pool, planned=False))
    rig.passes(STALL_PASSES, step=M)
    s = status(rig, pool)
    assert s.state == "deleting" and s.last_error_code is None  # not yet: a VM takes time
    rig.passes(2, step=M)
    s = status(rig, pool)
    assert (s.state, s.last_error_code) == ("deleting", "NO_PROGRESS")
    releasing = sorted(a for a, st in attempt_states(rig, pool).items() if st == "releasing")
    assert len(releasing) == 2 and all(a in (s.last_error or "") for a in releasing)
    assert f"anycloud node-pool adopt {pool}" in (s.last_error or "")
    assert len(rig.world.cloud.vms_of_pool(pool)) == 2  # still running: hence the error

    adopt(rig, pool)
    assert status(rig, pool).last_error_code is None
    until(rig, pool, "deleted")
    assert rig.world.cloud.vms_of_pool(pool) == [] and live_networks(rig) == []


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_a_crash_after_the_first_update_then_a_lost_state_buys_nothing_twice(
        rig: Rig, provider: str) -> None:
    pool = rig.pool("cpu", provider=provider, vm_type=VM_TYPE[provider], count=2)
    pass_killed_at(rig, "after-stack-up")  # the cloud bought the VMs; the ledger never heard
    assert set(attempt_states(rig, pool).values()) == {"creating"}
    bought, held = len(rig.world.cloud.vms), len(live_networks(rig))
    lose_state(rig)
    # Read as never bought, the next up would buy both VMs (and on AWS the network) again.
    # The ledger saw the update start: the engine rebuilds the state from the cloud first.
    until(rig, pool, "ready")
    assert len(rig.world.cloud.vms) == bought and len(live_networks(rig)) == held
    finish(rig, pool, "ready")


def test_an_update_that_fails_leaves_its_attempts_pending_for_the_retry(rig: Rig) -> None:
    rig.world.cloud.faults.create_errors.append("InsufficientInstanceCapacity")
    pool = rig.pool("cpu", count=1)
    rig.passes(1, step=M)
    s = status(rig, pool)
    assert s.last_error_code is not None and "InsufficientInstanceCapacity" in (s.last_error or "")
    assert set(attempt_states(rig, pool).values()) == {"pending"}
    until(rig, pool, "ready")


# ------------------------------------------------------------------------------- property

BOUNDARIES = ("after-attempt-write", "after-release-write", "after-node-removed",
              "after-stack-up", "after-ledger-sync", "after-destroy")
STEPS = st.one_of(st.sampled_from(["pass", "delete", "lose", "adopt"]),
                  st.sampled_from(BOUNDARIES))


def pass_killed_at(rig: Rig, boundary: str) -> None:
    """One pass, killed at ``boundary`` if it gets there."""
    original = reconcile.crashpoint

    def crash(name: str) -> None:
        if name == boundary:
            raise Killed(name)

    reconcile.crashpoint = crash  # type: ignore[assignment]
    try:
        rig.passes(1, step=M)
    except Killed:
        rig.world.advance(M)
    finally:
        reconcile.crashpoint = original  # type: ignore[assignment]


@example(steps=["after-stack-up", "lose"])  # a crash, then the state lost: a double fault
@example(steps=["pass", "delete", "after-release-write", "lose", "pass"])
@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(STEPS, min_size=1, max_size=8))
def test_any_sequence_ends_with_every_vm_owned_or_gone_and_no_silent_stall(
        steps: list[str], ledger_templates: LedgerTemplates) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'ledger.db'}"
        ledger_templates.seed(url)
        rig = make_rig(Path(tmp), url)
        try:
            pool = rig.pool("cpu", count=2)
            deleted = False
            for step in steps:
                if step == "pass":
                    rig.passes(1, step=M)
                elif step == "delete" and not deleted:
                    node_pools.delete_node_pool(rig.app, pool)
                    deleted = True
                elif step == "lose" and (rig.app.home / "mock-engine").exists():
                    lose_state(rig)
                elif step == "adopt" and status(rig, pool).last_error_code in CLEARED:
                    adopt(rig, pool)
                elif step in BOUNDARIES:
                    pass_killed_at(rig, step)
            finish(rig, pool, "deleted" if deleted else "ready")
        finally:
            rig.app.ledger.dispose()


def finish(rig: Rig, pool: str, wanted: str) -> None:
    """Passes as a person runs them, adopting when the pool asks for it, until the pool is
    ``wanted`` with nothing releasing. No run of passes may change nothing, release
    nothing and show no error for longer than the stall rule allows."""
    quiet, before = 0, None
    for _ in range(4 * STALL_PASSES):
        s = status(rig, pool)
        if s.last_error_code in CLEARED:
            adopt(rig, pool)
        seen = (s.state, tuple(sorted(attempt_states(rig, pool).items())))
        busy = s.state == "deleting" or "releasing" in dict(seen[1]).values()
        quiet = quiet + 1 if (seen == before and busy and s.last_error_code is None) else 0
        assert quiet <= STALL_PASSES + 2, f"silent stall: {seen}"
        before = seen
        if s.state == wanted and not busy and s.last_error_code is None:
            break
        rig.passes(1, step=M)
    s = status(rig, pool)
    assert (s.state, s.last_error_code) == (wanted, None), s.last_error
    states = attempt_states(rig, pool)
    live = {a for a, st_ in states.items() if st_ in ("pending", "creating", "running")}
    running = [v.attempt_id for v in rig.world.cloud.vms_of_pool(pool)]
    assert sorted(running) == sorted(live)  # each VM owned by one live attempt; no orphan
    if wanted == "deleted":
        assert running == [] and live_networks(rig) == []
    else:
        assert len(live) == 2
