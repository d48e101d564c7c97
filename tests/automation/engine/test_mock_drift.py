"""Drift under the mock engine: a person changes a resource at the simulated cloud's console
(a VM's type, a security-group rule), and the drift check compares what the cloud shows with
the stack's state, as ``pulumi refresh --preview-only`` does with a real provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from automation.clock import ManualClock
from automation.engine.errors import EngineFailed
from automation.engine.mock.runner import MockEngineRunner
from automation.simulators.cloud import CloudSimulator
from tests.automation.engine.test_mock_runner import with_attempts
from tests.automation.engine.test_pulumi_driver import pool_target

VM_TYPE_PROP = {"aws": "instanceType", "gcp": "machineType", "azure": "hardwareProfile"}


@pytest.fixture
def cloud(tmp_path: Path) -> CloudSimulator:
    return CloudSimulator(ManualClock(), tmp_path / "cloud.json")


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_a_vm_type_changed_in_the_console_is_drift(tmp_path: Path, cloud: CloudSimulator,
                                                   provider: str) -> None:
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target(provider), "at-1", "at-2")
    runner.up(target)
    assert runner.check_drift(target) == []  # just applied: nothing differs

    vm = cloud.console_change_vm_type("at-2", "x9.huge")
    changes = runner.check_drift(target)
    assert [(c.op, c.properties) for c in changes] == [("update", [VM_TYPE_PROP[provider]])]
    assert vm.id in json.dumps(runner.load_state(target)["resources"][changes[0].urn]["id"])
    assert changes[0].type.endswith(("Instance", "VirtualMachine"))
    # A check writes nothing: the state still records the old type, the check repeats.
    assert runner.check_drift(target) == changes
    assert runner.preview(target).summary.changes == 0  # a plain preview does not see it


def test_a_security_group_rule_added_by_hand_is_drift(tmp_path: Path,
                                                      cloud: CloudSimulator) -> None:
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target("aws"), "at-1")
    runner.up(target)
    group = next(r for r in runner.load_state(target)["resources"].values()
                 if r["type"] == "aws:ec2/securityGroup:SecurityGroup")
    cloud.console_add_rule(group["id"], "ingress", {"protocol": "tcp", "fromPort": 22,
                                                    "toPort": 22, "cidrBlocks": ["0.0.0.0/0"]})
    changes = runner.check_drift(target)
    assert [(c.type, c.op, c.properties) for c in changes] == [
        ("aws:ec2/securityGroup:SecurityGroup", "update", ["ingress"])]


def test_a_vm_deleted_outside_anycloud_is_reported_gone(tmp_path: Path,
                                                         cloud: CloudSimulator) -> None:
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target("gcp"), "at-1")
    runner.up(target)
    vm = cloud.live_vm("at-1")
    assert vm is not None
    cloud.delete_resource(vm.resource_type, vm.id)
    cloud.clock.advance(cloud.delete_latency)  # type: ignore[attr-defined]
    changes = runner.check_drift(target)
    assert [(c.type, c.op) for c in changes] == [("gcp:compute/instance:Instance", "delete")]


def test_an_update_by_anycloud_is_not_drift(tmp_path: Path, cloud: CloudSimulator) -> None:
    """The cloud shows what the engine last applied, updates included."""
    runner = MockEngineRunner(tmp_path, cloud)
    runner.up(with_attempts(pool_target("aws"), "at-1"))
    cloud.console_change_vm_type("at-1", "x9.huge")
    target = with_attempts(pool_target("aws"), "at-1", "at-2")
    runner.up(target)  # a new VM: the changed one is kept as the state has it
    assert [c.properties for c in runner.check_drift(target)] == [["instanceType"]]


def test_no_secret_reaches_the_simulator_or_the_report(tmp_path: Path,
                                                       cloud: CloudSimulator) -> None:
    runner = MockEngineRunner(tmp_path, cloud)
    target = with_attempts(pool_target("aws"), "at-1")
    runner.up(target)
    vm = cloud.live_vm("at-1")
    assert vm is not None
    assert "userData" not in cloud.live[vm.id]  # it carries the join token: a secret
    assert "\"userData\"" not in (tmp_path / "cloud.json").read_text()


def test_a_cloud_that_keeps_nothing_refuses_rather_than_says_none(tmp_path: Path) -> None:
    runner = MockEngineRunner(tmp_path)  # the plain mock providers: nothing is kept
    target = with_attempts(pool_target("aws"), "at-1")
    runner.up(target)
    with pytest.raises(EngineFailed) as err:
        runner.check_drift(target)
    assert err.value.code == "DRIFT_UNSUPPORTED"
