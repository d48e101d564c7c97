"""The node-pool stacks tag every billable resource for cost allocation (policy
cost-allocation-tags), on all three clouds, and existing GCP VMs are not replaced for it."""

from __future__ import annotations

from typing import Any

import pytest

from automation.engine.mock.program import run_program
from policies import check_resources
from policies import config as cfg
from policies.cost_allocation import BILLABLE
from stacks import node_pool
from stacks.config import AttemptSpec

# What each cloud's pool stack creates and is billed for (or holds the bill, like the
# Azure resource group); the test fails if one of them is not checked by the rule.
EXPECTED_BILLABLE = {
    "aws": {"aws:ec2/instance:Instance", "aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet",
            "aws:ec2/internetGateway:InternetGateway", "aws:ec2/routeTable:RouteTable",
            "aws:ec2/securityGroup:SecurityGroup"},
    "gcp": {"gcp:compute/instance:Instance"},
    "azure": {"azure-native:resources:ResourceGroup", "azure-native:compute:VirtualMachine",
              "azure-native:network:VirtualNetwork", "azure-native:network:NetworkSecurityGroup"},
}


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_every_billable_resource_of_a_pool_stack_is_tagged(config_for: Any, provider: str) -> None:
    run = run_program(node_pool.build_program(config_for(provider)), reveal_secrets=True)
    records = [r.to_dict() for r in run.resources if r.custom]
    checked = {r["type"] for r in records if r["type"] in BILLABLE}
    assert checked == EXPECTED_BILLABLE[provider]
    violations = [v for v in check_resources(records, None) if v.policy == cfg.COST_ALLOCATION_TAGS]
    assert violations == []


def test_a_stack_with_an_untagged_disk_is_refused(
    config_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import components.vm.aws as aws_vm

    original = aws_vm.aws.ec2.Instance

    def no_volume_tags(*args: Any, **kwargs: Any) -> Any:
        kwargs.pop("volume_tags", None)
        return original(*args, **kwargs)

    monkeypatch.setattr(aws_vm.aws.ec2, "Instance", no_volume_tags)
    run = run_program(node_pool.build_program(config_for("aws")), reveal_secrets=True)
    violations = [v for v in check_resources([r.to_dict() for r in run.resources if r.custom])
                  if v.policy == cfg.COST_ALLOCATION_TAGS]
    assert len(violations) == 2  # one per VM
    assert all("volumeTags" in v.message and v.enforcement_level == "mandatory"
               for v in violations)


def test_gcp_boot_disks_are_labelled_and_existing_vms_keep_theirs(config_for: Any) -> None:
    recorded = AttemptSpec(id="at-old", needs_token=False,
                           image="projects/ubuntu-os-cloud/global/images/ubuntu-2404-v1")
    config = config_for("gcp")
    config = config.model_copy(update={"attempts": (recorded, *config.attempts)})
    run = run_program(node_pool.build_program(config), reveal_secrets=True)
    vms = {r.name: r for r in run.of_type("gcp:compute/instance:Instance")}
    for name, vm in vms.items():
        labels = vm.inputs["bootDisk"]["initializeParams"]["labels"]
        assert labels["anycloud-sh_node-pool"] == "np-1", name
        assert labels["anycloud-sh_cluster"] == "cl-1", name
        # Any change under bootDisk replaces a GCP instance: the labels added to an existing
        # VM's disk are ignored, so upgrading anycloud replaces no running VM.
        kept = "bootDisk.initializeParams.labels" in vm.options.get("ignoreChanges", [])
        assert kept == ("at-old" in name), name
