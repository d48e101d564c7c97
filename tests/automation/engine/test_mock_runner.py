"""The mock-engine StackRunner: state, diffs, deletes, the policy gate, the simulated cloud."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from automation.clock import ManualClock
from automation.engine.errors import EngineFailed
from automation.engine.mock.runner import MockEngineRunner
from automation.engine.runner import ProgressEvent, StackTarget
from automation.simulators.cloud import CloudSimulator
from stacks.config import AttemptSpec
from tests.automation.engine.test_pulumi_driver import pool_target

ISSUED = datetime(2026, 6, 1, tzinfo=UTC)


def with_attempts(target: StackTarget, *ids: str) -> StackTarget:
    # The ledger stamps token_issued_at when it writes the attempt: the token is stable.
    attempts = tuple(AttemptSpec(id=i, token_issued_at=ISSUED) for i in ids)
    config = target.config.model_copy(update={"attempts": attempts})
    return target.model_copy(update={"config": config})


@pytest.fixture
def cloud(tmp_path: Path) -> CloudSimulator:
    return CloudSimulator(ManualClock(), tmp_path / "cloud.json")


def test_up_creates_then_is_a_no_op(tmp_path: Path, cloud: CloudSimulator) -> None:
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(), "at-1", "at-2")
    events: list[ProgressEvent] = []
    first = runner.up(target, on_progress=events.append)
    assert first.engine == "mock" and first.summary.create > 0 and first.summary.same == 0
    assert sorted(v.attempt_id for v in cloud.vms_of_pool("np-1")) == ["at-1", "at-2"]
    assert set(first.outputs["attempts"]) == {"at-1", "at-2"}
    assert {e.state for e in events} == {"started", "done"}
    second = runner.up(target)
    assert second.summary.changes == 0 and second.summary.same == first.summary.create
    assert len(cloud.vms) == 2  # nothing bought twice


def test_dropping_an_attempt_releases_its_vm(tmp_path: Path, cloud: CloudSimulator) -> None:
    runner = MockEngineRunner(tmp_path, cloud)
    runner.up(with_attempts(pool_target(), "at-1", "at-2"))
    result = runner.up(with_attempts(pool_target(), "at-2"))
    assert result.summary.delete >= 2  # the VM, its token and their components
    assert cloud.lookup("at-1") == "uncertain"  # terminating: the provider has not confirmed
    cloud.clock.advance(cloud.delete_latency)  # type: ignore[attr-defined]
    assert cloud.lookup("at-1") == "absent" and cloud.lookup("at-2") == "running"


def test_state_survives_a_new_runner_and_cloud(tmp_path: Path, cloud: CloudSimulator) -> None:
    MockEngineRunner(tmp_path, cloud).up(with_attempts(pool_target(), "at-1"))
    reborn = CloudSimulator(ManualClock(), tmp_path / "cloud.json")
    again = MockEngineRunner(tmp_path, reborn).up(with_attempts(pool_target(), "at-1"))
    assert again.summary.changes == 0 and len(reborn.vms) == 1


def test_an_engine_that_lost_its_state_buys_again(tmp_path: Path, cloud: CloudSimulator) -> None:
    # The engine alone cannot tell a lost state from a new stack, and the simulated cloud
    # answers a second RunInstances as AWS does: a second VM. Guarding against this is the
    # ledger's job (STATE_MISSING), not the stand-in's.
    runner = MockEngineRunner(tmp_path, cloud)
    runner.up(with_attempts(pool_target(), "at-1"))
    (tmp_path / "mock-engine" / "node-pool-np-1.json").unlink()
    runner.up(with_attempts(pool_target(), "at-1"))
    assert cloud.journal.count(("create", "at-1")) == 2
    assert len({v.id for v in cloud.vms.values() if v.attempt_id == "at-1"}) == 2


def test_a_refused_create_is_not_recorded_and_not_left_in_flight(
    tmp_path: Path, cloud: CloudSimulator
) -> None:
    cloud.faults.create_errors.append("InsufficientInstanceCapacity: no g5 capacity")
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(), "at-1")
    with pytest.raises(EngineFailed, match="InsufficientInstanceCapacity") as err:
        runner.up(target)
    assert err.value.code == "PROVIDER_ERROR"
    state = runner.load_state(target)
    # As the engine keeps them: what was made before the failure stays recorded; the
    # refused VM is neither recorded nor in flight (the cloud answered).
    assert state["resources"] and not state.get("pending_operations")
    assert not any(r["type"] == "aws:ec2/instance:Instance" for r in state["resources"].values())
    again = runner.up(target)
    assert again.summary.create > 0 and cloud.journal.count(("create", "at-1")) == 1
    # Nothing made twice: every resource the cloud holds is one the state records.
    recorded = {r["id"] for r in runner.load_state(target)["resources"].values()}
    assert set(cloud.resources) <= recorded


def test_destroy_releases_everything(tmp_path: Path, cloud: CloudSimulator) -> None:
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(), "at-1")
    created = runner.up(target).summary.create
    gone = runner.destroy(target)
    assert gone.summary.delete == created and cloud.lookup("at-1") == "uncertain"
    assert runner.load_state(target)["resources"] == {}


def test_refresh_drops_vms_the_cloud_lost(tmp_path: Path, cloud: CloudSimulator) -> None:
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(), "at-1")
    runner.up(target)
    vm = next(iter(cloud.vms.values()))
    vm.state = "terminated"  # deleted behind our back
    assert runner.refresh(target).summary.delete == 1
    assert runner.up(target).summary.create == 1 and cloud.lookup("at-1") == "running"


def test_up_is_gated_by_the_policy_pack(tmp_path: Path, cloud: CloudSimulator,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import components.network.aws as aws_network

    original = aws_network.aws.ec2.SecurityGroup

    def open_ssh(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["ingress"] = [{"protocol": "tcp", "from_port": 22, "to_port": 22,
                              "cidr_blocks": ["0.0.0.0/0"]}]
        return original(*args, **kwargs)

    monkeypatch.setattr(aws_network.aws.ec2, "SecurityGroup", open_ssh)
    runner = MockEngineRunner(tmp_path, cloud)
    result = runner.up(with_attempts(pool_target(), "at-1"))
    assert [f.policy for f in result.mandatory_violations] == ["no-public-ingress"]
    assert cloud.vms == {}  # nothing was bought
