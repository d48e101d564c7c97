"""cost-allocation-tags: every billable resource of a pool names its pool and cluster."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from policies import check_resources
from policies import config as cfg
from policies.cost_allocation import BILLABLE

RULE = cfg.COST_ALLOCATION_TAGS
CANONICAL = {"anycloud.sh/cluster": "c1", "anycloud.sh/node-pool": "pool-1"}
SPELLED = {
    "aws": CANONICAL,
    "gcp": {"anycloud-sh_cluster": "c1", "anycloud-sh_node-pool": "pool-1"},
    "azure": {"anycloud.sh_cluster": "c1", "anycloud.sh_node-pool": "pool-1"},
}


def tagged(rtype: str) -> dict[str, Any]:
    """The smallest inputs of ``rtype`` that carry the tags in every field the rule reads."""
    provider = BILLABLE[rtype][0]
    tags = dict(SPELLED[provider])
    if rtype.endswith(("instance:Instance", "InstanceFromTemplate")) and provider == "gcp":
        return {"labels": tags, "bootDisk": {"initializeParams": {"labels": tags}}}
    if provider == "gcp" and "Template" in rtype:
        return {"labels": tags, "disks": [{"labels": tags}, {"labels": tags}]}
    if rtype.startswith(("aws:ec2/instance", "aws:ec2/spot")):
        return {"tags": tags, "volumeTags": tags}
    if rtype == "aws:ec2/launchTemplate:LaunchTemplate":
        return {"tagSpecifications": [{"resourceType": k, "tags": tags}
                                      for k in ("instance", "volume")]}
    return {"labels": tags} if provider == "gcp" else {"tags": tags}


def found(s: SimpleNamespace, rtype: str, inputs: dict[str, Any]) -> list[Any]:
    return [v for v in check_resources([s.resource(rtype, inputs)], None, clock=lambda: s.NOW)
            if v.policy == RULE]


def test_the_rule_is_mandatory_by_default() -> None:
    assert cfg.DEFAULT_LEVELS[RULE] == cfg.MANDATORY


@pytest.mark.parametrize("rtype", sorted(BILLABLE))
def test_each_billable_type_passes_tagged_and_fails_untagged(
    s: SimpleNamespace, rtype: str
) -> None:
    assert found(s, rtype, tagged(rtype)) == []
    (violation,) = found(s, rtype, {})[:1]
    assert violation.enforcement_level == "mandatory" and violation.verified
    assert rtype in violation.message and "cost-allocation tags" in violation.message


@pytest.mark.parametrize("provider,rtype", [
    ("aws", "aws:ec2/vpc:Vpc"),
    ("gcp", "gcp:compute/disk:Disk"),
    ("azure", "azure-native:network:VirtualNetwork"),
])
def test_the_message_names_the_missing_key_as_the_cloud_spells_it(
    s: SimpleNamespace, provider: str, rtype: str
) -> None:
    field = "labels" if provider == "gcp" else "tags"
    only_cluster = {k: v for k, v in SPELLED[provider].items() if "cluster" in k}
    (v,) = found(s, rtype, {field: only_cluster})
    expected = {"aws": "anycloud.sh/node-pool", "gcp": "anycloud-sh_node-pool",
                "azure": "anycloud.sh/node-pool"}[provider]
    assert expected in v.message and "cluster" not in v.message.split("lacks")[1].split(":")[0]


def test_an_empty_value_does_not_count(s: SimpleNamespace) -> None:
    (v,) = found(s, "aws:ec2/subnet:Subnet", {"tags": CANONICAL | {"anycloud.sh/node-pool": ""}})
    assert "anycloud.sh/node-pool" in v.message


def test_azure_takes_both_spellings(s: SimpleNamespace) -> None:
    rg = "azure-native:resources:ResourceGroup"
    assert found(s, rg, {"tags": CANONICAL}) == []
    assert found(s, rg, {"tags": SPELLED["azure"]}) == []


def test_a_gcp_vm_whose_boot_disk_is_unlabelled_fails_naming_the_disk(s: SimpleNamespace) -> None:
    vm = s.gcp_vm()
    del vm["bootDisk"]
    (v,) = found(s, "gcp:compute/instance:Instance", vm)
    assert "bootDisk.initializeParams.labels lacks" in v.message


def test_aws_volumes_tagged_by_volume_tags_or_the_root_device(s: SimpleNamespace) -> None:
    vm = s.aws_vm()
    volume_tags = vm.pop("volumeTags")
    (v,) = found(s, "aws:ec2/instance:Instance", vm)
    assert "volumeTags (or rootBlockDevice.tags) lacks" in v.message
    assert found(s, "aws:ec2/instance:Instance", vm | {"rootBlockDevice": {"tags": volume_tags}}) \
        == []


def test_aws_default_tags_count_through_tags_all(s: SimpleNamespace) -> None:
    # The provider's default_tags reach a resource's tagsAll, not its tags.
    assert found(s, "aws:ec2/vpc:Vpc", {"tagsAll": CANONICAL}) == []


def test_a_launch_template_tags_its_volumes_too(s: SimpleNamespace) -> None:
    lt = {"tagSpecifications": [{"resourceType": "instance", "tags": CANONICAL}]}
    (v,) = found(s, "aws:ec2/launchTemplate:LaunchTemplate", lt)
    assert "tagSpecifications[resourceType='volume'].tags" in v.message


def test_unknown_tags_are_not_verified_and_do_not_hide_a_known_violation(
    s: SimpleNamespace
) -> None:
    vm = {"labels": "[unknown]", "bootDisk": {"initializeParams": {"labels": {}}}}
    violations = found(s, "gcp:compute/instance:Instance", vm)
    assert sorted((v.verified, v.enforcement_level) for v in violations) == [
        (False, "advisory"), (True, "mandatory")]
    judged = next(v for v in violations if v.verified)
    assert "bootDisk.initializeParams.labels lacks" in judged.message


def test_resources_that_are_not_billed_are_ignored(s: SimpleNamespace) -> None:
    assert found(s, "aws:ec2/routeTableAssociation:RouteTableAssociation", {}) == []
    assert found(s, "gcp:compute/firewall:Firewall", {}) == []
