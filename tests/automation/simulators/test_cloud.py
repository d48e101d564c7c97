"""The simulated cloud answers creates as each cloud's API does, whoever asks: AWS buys
again, GCP refuses a name that exists, Azure updates in place. A resource the engine keeps
is not created again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from automation.clock import ManualClock
from automation.engine.mock.model import CloudFailure, Step
from automation.simulators.cloud import CloudSimulator

VM = {"aws": "aws:ec2/instance:Instance", "gcp": "gcp:compute/instance:Instance",
      "azure": "azure-native:compute:VirtualMachine"}
TAGS = {"aws": "tags", "gcp": "labels", "azure": "tags"}
ATTEMPT = {"aws": "anycloud.sh/attempt", "gcp": "anycloud-sh_attempt",
           "azure": "anycloud.sh_attempt"}


class Args:
    """What the mock engine hands the cloud for one registration."""

    def __init__(self, typ: str, name: str, inputs: dict[str, Any],
                 step: Step | None = None) -> None:
        self.typ, self.name, self.inputs, self.step = typ, name, inputs, step
        self.provider = None
        self.resource_id = None
        self.custom = True


def vm_args(cloud: str, attempt: str = "at-1", step: Step | None = None) -> Args:
    inputs: dict[str, Any] = {TAGS[cloud]: {ATTEMPT[cloud]: attempt}}
    if cloud == "gcp":
        inputs.update(name=f"vm-{attempt}", zone="us-central1-a")
    if cloud == "azure":
        inputs.update(vmName=f"vm-{attempt}", resourceGroupName="rg")
    return Args(VM[cloud], f"vm-{attempt}", inputs, step)


@pytest.fixture
def cloud(tmp_path: Path) -> CloudSimulator:
    return CloudSimulator(ManualClock(), tmp_path / "cloud.json")


def test_aws_buys_a_second_instance_when_asked_twice(cloud: CloudSimulator) -> None:
    first, _ = cloud.new_resource(vm_args("aws"))  # type: ignore[arg-type]
    second, _ = cloud.new_resource(vm_args("aws"))  # type: ignore[arg-type]
    assert first != second and cloud.journal == [("create", "at-1")] * 2
    assert len({v.public_ip for v in cloud.vms.values()}) == 2  # two machines, two addresses


def test_gcp_refuses_an_instance_name_that_exists(cloud: CloudSimulator) -> None:
    cloud.new_resource(vm_args("gcp"))  # type: ignore[arg-type]
    with pytest.raises(CloudFailure, match=r"googleapi: Error 409: .* already exists, "
                                           "alreadyExists"):
        cloud.new_resource(vm_args("gcp"))  # type: ignore[arg-type]
    assert cloud.journal == [("create", "at-1")] and len(cloud.vms) == 1


def test_azure_updates_the_vm_of_that_name_in_place(cloud: CloudSimulator) -> None:
    first, _ = cloud.new_resource(vm_args("azure"))  # type: ignore[arg-type]
    second, _ = cloud.new_resource(vm_args("azure"))  # type: ignore[arg-type]
    assert first == second and len(cloud.vms) == 1
    assert cloud.journal == [("create", "at-1"), ("update", "at-1")]


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
@pytest.mark.parametrize("op", ["same", "update"])
def test_a_kept_resource_is_not_created_again(cloud: CloudSimulator, provider: str,
                                              op: str) -> None:
    rid, _ = cloud.new_resource(vm_args(provider))  # type: ignore[arg-type]
    kept, _ = cloud.new_resource(vm_args(provider, step=Step(op=op, old_id=rid)))  # type: ignore[arg-type]
    assert kept == rid and cloud.journal == [("create", "at-1")]


@pytest.mark.parametrize("provider", ["gcp", "azure"])
def test_a_name_freed_by_a_delete_can_be_used_again(cloud: CloudSimulator,
                                                    provider: str) -> None:
    rid, _ = cloud.new_resource(vm_args(provider))  # type: ignore[arg-type]
    cloud.delete_resource(VM[provider], str(rid))  # the provider waits for the delete
    again, _ = cloud.new_resource(vm_args(provider))  # type: ignore[arg-type]
    assert again == rid and cloud.journal.count(("create", "at-1")) == 2


def test_other_resources_follow_the_same_rules(cloud: CloudSimulator) -> None:
    vpc = Args("aws:ec2/vpc:Vpc", "net", {"tags": {"anycloud.sh/node-pool": "np-1"}})
    a, _ = cloud.new_resource(vpc)  # type: ignore[arg-type]
    b, _ = cloud.new_resource(vpc)  # type: ignore[arg-type]
    assert a != b and {cloud.resources[str(a)]["state"], cloud.resources[str(b)]["state"]} == {
        "live"}
    with pytest.raises(CloudFailure, match="2 live aws:ec2/vpc:Vpc"):
        cloud.find(vpc.typ, vpc.name, vpc.inputs)
    network = Args("gcp:compute/network:Network", "net", {"name": "anycloud-np-1"})
    cloud.new_resource(network)  # type: ignore[arg-type]
    with pytest.raises(CloudFailure, match="409"):
        cloud.new_resource(network)  # type: ignore[arg-type]
    group = Args("azure-native:resources:ResourceGroup", "rg",
                 {"resourceGroupName": "anycloud-np-1"})
    g1, _ = cloud.new_resource(group)  # type: ignore[arg-type]
    g2, _ = cloud.new_resource(group)  # type: ignore[arg-type]
    assert g1 == g2


def test_what_it_bought_survives_a_new_process(cloud: CloudSimulator, tmp_path: Path) -> None:
    vpc = Args("aws:ec2/vpc:Vpc", "net", {"tags": {"anycloud.sh/node-pool": "np-1"}})
    rid, _ = cloud.new_resource(vpc)  # type: ignore[arg-type]
    cloud.new_resource(vm_args("aws"))  # type: ignore[arg-type]
    reborn = CloudSimulator(ManualClock(), tmp_path / "cloud.json")
    assert reborn.find(vpc.typ, vpc.name, vpc.inputs) == rid
    again, _ = reborn.new_resource(vpc)  # type: ignore[arg-type]
    assert again != rid and reborn.journal == [("create", "at-1")]
