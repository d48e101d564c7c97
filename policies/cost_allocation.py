"""Rule: every billable resource of a pool carries the pool's cost-allocation tags.

A cloud bill can be split by pool only if each billed resource names its pool and cluster:
``anycloud.sh/node-pool`` and ``anycloud.sh/cluster``, spelled as each cloud allows
(``policies.naming``). The rule checks every tag or label field of a resource that the cloud
bills for, not only the VM's own: a VM's disks are tagged separately on AWS and GCP.

What no resource field can carry, and where its cost is attributed instead (README, "Cost"):

- AWS: an instance's primary network interface and auto-assigned public IPv4 address take
  no tags from the instance; both belong to the pool's tagged VPC and subnet.
- GCP: networks, subnetworks and firewall rules take no labels (and are not billed); an
  ephemeral external address is billed with its instance.
- Azure: the NIC, public IP and OS disk declared on the VM take no tags of their own; they live
  in the pool's own resource group, which carries the tags (Cost Management groups by
  resource group, or copies the group's tags with tag inheritance).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies import naming
from policies.wire import as_list, get, run_checks, show

REQUIRED = (naming.CLUSTER, naming.NODE_POOL)

# (field shown in the message, a reader of the mapping found there): read inside each check,
# so one unknown field (preview) does not hide a violation another field shows.
Fields = Callable[[Any], Iterator[tuple[str, Callable[[], Any]]]]


def _reader(node: Any, *path: str) -> Callable[[], Any]:
    return lambda: get(node, *path)


def _at(*path: str) -> Fields:
    def fields(props: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
        yield ".".join(path), _reader(props, *path)

    return fields


def _aws_tags(props: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    # Tags set by the provider's default_tags appear only in tagsAll.
    def tags() -> Any:
        found = get(props, "tags")
        return found if found is not None else get(props, "tagsAll")

    yield "tags (or tagsAll)", tags


def _aws_instance(props: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    yield from _aws_tags(props)

    def volume_tags() -> Any:
        found = get(props, "volumeTags")
        return found if found is not None else get(props, "rootBlockDevice", "tags")

    yield "volumeTags (or rootBlockDevice.tags)", volume_tags


def _aws_launch_template(props: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    specs = as_list(get(props, "tagSpecifications"))
    for kind in ("instance", "volume"):
        found = [(i, s) for i, s in enumerate(specs) if get(s, "resourceType") == kind]
        if not found:
            yield f"tagSpecifications[resourceType='{kind}'].tags", lambda: None
        for i, spec in found:
            yield f"tagSpecifications[{i}].tags", _reader(spec, "tags")


def _gcp_instance(props: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    yield "labels", lambda: get(props, "labels")
    yield ("bootDisk.initializeParams.labels",
           lambda: get(props, "bootDisk", "initializeParams", "labels"))


def _gcp_template(props: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    yield "labels", lambda: get(props, "labels")
    for i, disk in enumerate(as_list(get(props, "disks"))):
        yield f"disks[{i}].labels", _reader(disk, "labels")


_TAGS, _LABELS = _at("tags"), _at("labels")

# Billable resource types and where their tags or labels are.
BILLABLE: dict[str, tuple[str, Fields]] = {
    "aws:ec2/instance:Instance": ("aws", _aws_instance),
    "aws:ec2/spotInstanceRequest:SpotInstanceRequest": ("aws", _aws_instance),
    "aws:ec2/launchTemplate:LaunchTemplate": ("aws", _aws_launch_template),
    "aws:ebs/volume:Volume": ("aws", _aws_tags),
    "aws:ec2/eip:Eip": ("aws", _aws_tags),
    "aws:ec2/networkInterface:NetworkInterface": ("aws", _aws_tags),
    "aws:ec2/natGateway:NatGateway": ("aws", _aws_tags),
    "aws:ec2/vpc:Vpc": ("aws", _aws_tags),
    "aws:ec2/subnet:Subnet": ("aws", _aws_tags),
    "aws:ec2/internetGateway:InternetGateway": ("aws", _aws_tags),
    "aws:ec2/routeTable:RouteTable": ("aws", _aws_tags),
    "aws:ec2/securityGroup:SecurityGroup": ("aws", _aws_tags),
    "gcp:compute/instance:Instance": ("gcp", _gcp_instance),
    "gcp:compute/instanceFromTemplate:InstanceFromTemplate": ("gcp", _gcp_instance),
    "gcp:compute/instanceTemplate:InstanceTemplate": ("gcp", _gcp_template),
    "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate": ("gcp", _gcp_template),
    "gcp:compute/disk:Disk": ("gcp", _LABELS),
    "gcp:compute/address:Address": ("gcp", _LABELS),
    "azure-native:resources:ResourceGroup": ("azure", _TAGS),
    "azure-native:compute:VirtualMachine": ("azure", _TAGS),
    "azure-native:compute:VirtualMachineScaleSet": ("azure", _TAGS),
    "azure-native:compute:Disk": ("azure", _TAGS),
    "azure-native:network:VirtualNetwork": ("azure", _TAGS),
    "azure-native:network:NetworkSecurityGroup": ("azure", _TAGS),
    "azure-native:network:NetworkInterface": ("azure", _TAGS),
    "azure-native:network:PublicIPAddress": ("azure", _TAGS),
}


def missing_keys(provider: str, tags: Any) -> list[str]:
    """The required keys (in the cloud's spelling) that ``tags`` lacks or leaves empty."""
    missing = []
    for key in REQUIRED:
        spellings = naming.accepted_keys(provider, key)
        if not any(isinstance(v, str) and v for v in (get(tags, s) for s in spellings)):
            missing.append(spellings[0])
    return missing


def cost_allocation_tags(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    billable = BILLABLE.get(args.resource_type)
    if billable is None:
        return
    provider, fields = billable

    def check(field: str, read: Callable[[], Any]) -> Callable[[], None]:
        def run() -> None:
            lacking = missing_keys(provider, read())
            if lacking:
                report_violation(
                    f"{args.resource_type} {field} lacks {show(lacking)}: every billable "
                    "resource of a pool carries the pool's cost-allocation tags "
                    "(anycloud.sh/cluster, anycloud.sh/node-pool), so its cost is "
                    "attributed to the pool",
                    args.urn,
                )

        return run

    run_checks([check(field, read) for field, read in fields(args.props)])
