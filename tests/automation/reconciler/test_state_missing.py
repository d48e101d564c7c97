"""Never act on vanished state: a pool whose engine state is lost is refused with
STATE_MISSING, and nothing is bought twice or silently orphaned."""

from __future__ import annotations

import shutil
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from automation.clock import ManualClock
from automation.engine.errors import EngineFailed
from automation.engine.expectation import StateMissing
from automation.engine.mock.runner import MockEngineRunner
from automation.engine.runner import Expected
from automation.services import node_pools, pool_status
from automation.services.pool_adopt import adopt_pool
from automation.simulators.cloud import CloudSimulator
from automation.stack_targets import pool_target
from tests.automation.engine.test_mock_runner import with_attempts
from tests.automation.engine.test_pulumi_driver import pool_target as bare_target
from tests.automation.reconciler.conftest import Rig
from tests.automation.reconciler.test_reconcile import attempts

M = timedelta(minutes=1)


def creates(cloud: CloudSimulator) -> Counter[str]:
    return Counter(a for verb, a in cloud.journal if verb == "create")


@pytest.fixture
def cloud(tmp_path: Path) -> CloudSimulator:
    """For the engine-level tests: a simulated cloud and no ledger."""
    return CloudSimulator(ManualClock(), tmp_path / "cloud.json")


def ready_pool(rig: Rig, count: int = 2) -> str:
    pool = rig.pool("cpu", count=count)
    rig.passes(6, step=M)
    assert pool_status.node_pool_status(rig.app.ledger, pool).state == "ready"
    return pool


def test_the_target_carries_what_the_ledger_saw(rig: Rig) -> None:
    pool = rig.pool("cpu", count=2)
    assert pool_target(rig.app, pool, planned=False).expect == Expected()  # nothing applied
    rig.passes(1)
    expect = pool_target(rig.app, pool, planned=False).expect
    assert expect.applied
    assert sorted(expect.attempts) == sorted(r["id"] for r in attempts(rig, pool))


def test_a_lost_state_buys_nothing_and_says_where_it_lives(rig: Rig) -> None:
    rig.world.cloud.faults.never_boot_next = 1  # one VM will need replacing
    pool = rig.pool("cpu", count=2)
    rig.passes(1)
    bought = creates(rig.world.cloud)
    shutil.rmtree(rig.app.home / "mock-engine")  # an emptyDir wiped by a pod restart
    rig.world.advance(11 * M)  # the VM that never joined is due for replacement
    rig.passes(3, step=M)
    assert creates(rig.world.cloud) == bought  # nothing bought again, not even the replacement
    s = pool_status.node_pool_status(rig.app.ledger, pool)
    assert s.last_error_code == "STATE_MISSING"
    assert "mock-engine" in (s.last_error or "") and "holds nothing" in (s.last_error or "")
    assert f"anycloud node-pool adopt {pool}" in (s.last_error or "")
    assert len(rig.world.cloud.vms_of_pool(pool)) == 2


def test_a_delete_with_a_lost_state_keeps_the_pool_and_says_why(rig: Rig) -> None:
    pool = ready_pool(rig)
    shutil.rmtree(rig.app.home / "mock-engine")
    node_pools.delete_node_pool(rig.app, "cpu")
    rig.passes(5, step=M)
    s = pool_status.node_pool_status(rig.app.ledger, pool)
    # Not "deleted" with two VMs still running and nobody owning them: the pool waits, saying
    # what is missing, with its VMs still counted against it.
    assert s.state == "deleting" and s.last_error_code == "STATE_MISSING"
    assert len(rig.world.cloud.vms_of_pool(pool)) == 2


def test_an_older_state_that_lacks_a_running_vm_is_refused(cloud: CloudSimulator,
                                                           tmp_path: Path) -> None:
    runner = MockEngineRunner(tmp_path / "home", cloud)
    target = with_attempts(bare_target(), "at-1")
    runner.up(target)
    bought = creates(cloud)
    # The ledger saw at-2 running too, but this state (restored from an older backup) has
    # only at-1.
    stale = target.model_copy(update={"expect": Expected(applied=True,
                                                         attempts=("at-1", "at-2"))})
    with pytest.raises(StateMissing, match=r"does not record the VM.* at-2") as err:
        runner.up(with_attempts(stale, "at-1", "at-2"))
    assert err.value.code == "STATE_MISSING"
    with pytest.raises(StateMissing):
        runner.destroy(stale)
    assert creates(cloud) == bought and cloud.lookup("at-1") == "running"


# ---------------------------------------------------------------------------------- adopt


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_adopt_rebuilds_the_state_from_the_cloud_and_buys_nothing(
        cloud: CloudSimulator, tmp_path: Path, provider: str) -> None:
    runner = MockEngineRunner(tmp_path / "home", cloud)
    target = with_attempts(bare_target(provider), "at-1", "at-2")
    first = runner.up(target)
    state = runner.load_state(target)["resources"]
    recorded = {u: r["id"] for u, r in state.items()}
    in_the_cloud = [u for u, r in state.items() if r["custom"] and not r["type"].startswith(
        ("pulumi:providers:", "random:", "kubernetes:"))]
    bought, held = creates(cloud), dict(cloud.resources)
    (tmp_path / "home" / "mock-engine" / f"{target.stack_name}.json").unlink()
    adopted = runner.adopt(target)
    assert adopted.operation == "adopt" and adopted.summary.create == 0
    assert adopted.summary.same == len(in_the_cloud)
    # The same ids as before the loss, and the next up changes nothing and buys nothing.
    rebuilt = {u: r["id"] for u, r in runner.load_state(target)["resources"].items()}
    assert rebuilt == recorded
    again = runner.up(target)
    assert again.summary.changes == 0 and again.summary.same == first.summary.create
    assert creates(cloud) == bought and cloud.resources == held


def test_adopt_refuses_when_two_resources_claim_one_identity(cloud: CloudSimulator,
                                                             tmp_path: Path) -> None:
    runner = MockEngineRunner(tmp_path / "home", cloud)
    target = with_attempts(bare_target(), "at-1")
    runner.up(target)
    state_file = tmp_path / "home" / "mock-engine" / f"{target.stack_name}.json"
    state_file.unlink()
    runner.up(target.model_copy(update={"config": target.config.model_copy(
        update={"attempts": ()})}))  # an engine that forgot: a second VPC (AWS buys again)
    before = state_file.read_text()
    with pytest.raises(EngineFailed, match=r"2 live aws:ec2/vpc:Vpc match") as err:
        runner.adopt(target)
    assert err.value.code == "ADOPT_FAILED" and state_file.read_text() == before


def test_adopt_then_the_pool_goes_on(rig: Rig) -> None:
    rig.world.cloud.faults.never_boot_next = 1
    pool = rig.pool("cpu", count=2)
    rig.passes(1)
    shutil.rmtree(rig.app.home / "mock-engine")
    rig.world.advance(11 * M)
    rig.passes(1, step=M)
    assert pool_status.node_pool_status(rig.app.ledger, pool).last_error_code == "STATE_MISSING"
    before = creates(rig.world.cloud)
    result = adopt_pool(rig.app, lambda: rig.reconciler.ports.runner, "cpu")
    assert result.summary.same > 0
    assert pool_status.node_pool_status(rig.app.ledger, pool).last_error_code is None
    rig.passes(6, step=M)
    s = pool_status.node_pool_status(rig.app.ledger, pool)
    assert s.state == "ready", (s.state, s.last_error)
    # One VM more: the replacement, bought once; nothing bought twice.
    after = creates(rig.world.cloud)
    assert sum(after.values()) == sum(before.values()) + 1 and set(after.values()) == {1}
