"""Every invoke anycloud calls, answered by the simulated cloud (through the socket the
stand-in plugins use) in the shape of the installed provider SDK's result type: no property
the SDK does not declare (the real engine hands the answer to the SDK's typed result; an
unknown key is a shape the real provider never sends), and the ones anycloud reads present.
The result types' wire names are read from the SDKs themselves (``pulumi.getter(name=…)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from automation.clock import ManualClock
from automation.simulators import cloud_api
from automation.simulators.cloud import CloudSimulator
from automation.simulators.cloud_api import CloudService

TAGS = {"anycloud.sh/attempt": "at-1", "anycloud.sh/node-pool": "np-1",
        "anycloud.sh/cluster": "cl-1"}
CONFIG = {"aws": {"region": "us-east-1"}, "gcp": {"project": "p-1"},
          "azure-native": {"subscriptionId": "s-1"}}


def wire_names(result_type: type) -> set[str]:
    return {p.fget._pulumi_name for p in vars(result_type).values()  # type: ignore[union-attr]
            if isinstance(p, property) and hasattr(p.fget, "_pulumi_name")}


@pytest.fixture(scope="module")
def ask() -> Iterator[Any]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        cloud = CloudSimulator(ManualClock(datetime(2026, 12, 1, tzinfo=UTC)),
                               Path(tmp) / "cloud.json")
        with CloudService(cloud) as service:
            path = service.env[cloud_api.ENV]

            def call(package: str, op: str, **fields: Any) -> Any:
                return cloud_api.call(path, {"op": op, "package": package,
                                             "config": CONFIG[package], **fields})

            _populate(call)
            yield call


def _populate(call: Any) -> None:
    """One pool's network and VM on each cloud, as the stacks make them."""
    def made(package: str, type_: str, name: str, inputs: dict[str, Any]) -> str:
        return str(call(package, "create", type=type_, name=name, inputs=inputs)["id"])

    owned = {k: v for k, v in TAGS.items() if k != "anycloud.sh/attempt"}
    vpc = made("aws", "aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": "10.0.0.0/16", "tags": owned})
    subnet = made("aws", "aws:ec2/subnet:Subnet", "subnet",
                  {"vpcId": vpc, "cidrBlock": "10.0.1.0/24", "tags": owned})
    made("aws", "aws:ec2/internetGateway:InternetGateway", "igw", {"vpcId": vpc, "tags": owned})
    table = made("aws", "aws:ec2/routeTable:RouteTable", "rt", {"vpcId": vpc, "tags": owned})
    made("aws", "aws:ec2/routeTableAssociation:RouteTableAssociation", "rta",
         {"subnetId": subnet, "routeTableId": table})
    made("aws", "aws:ec2/securityGroup:SecurityGroup", "sg", {"vpcId": vpc, "tags": owned})
    made("aws", "aws:ec2/instance:Instance", "vm",
         {"ami": "ami-1", "instanceType": "m7i.large", "subnetId": subnet, "tags": TAGS})
    made("gcp", "gcp:compute/instance:Instance", "vm",
         {"name": "vm-1", "zone": "us-central1-a", "machineType": "n2-standard-4",
          "labels": {"anycloud-sh_attempt": "at-2"}})
    group = {"resourceGroupName": "rg-1"}
    made("azure-native", "azure-native:resources:ResourceGroup", "rg", group)
    made("azure-native", "azure-native:network:VirtualNetwork", "vnet",
         {**group, "virtualNetworkName": "vnet-1"})
    made("azure-native", "azure-native:network:Subnet", "subnet",
         {**group, "virtualNetworkName": "vnet-1", "subnetName": "subnet-1"})
    made("azure-native", "azure-native:network:NetworkSecurityGroup", "nsg",
         {**group, "networkSecurityGroupName": "nsg-1"})
    made("azure-native", "azure-native:compute:VirtualMachine", "vm",
         {**group, "vmName": "vm-3", "tags": {"anycloud.sh_attempt": "at-3"},
          "networkProfile": {"networkInterfaceConfigurations": [{"ipConfigurations": [
              {"publicIPAddressConfiguration": {"name": "vm-3-ip"}}]}]}})


def _sdk(path: str) -> type:
    import importlib

    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


# token, the SDK's result type, the arguments anycloud's code passes, what it reads
INVOKES: list[tuple[str, str, dict[str, Any], set[str]]] = [
    ("aws:ec2/getInstances:getInstances", "pulumi_aws.ec2.GetInstancesResult",
     {"instanceTags": {"anycloud.sh/attempt": "at-1"},
      "instanceStateNames": ["pending", "running"]}, {"ids"}),
    ("aws:ec2/getVpcs:getVpcs", "pulumi_aws.ec2.GetVpcsResult",
     {"tags": {"anycloud.sh/node-pool": "np-1"}}, {"ids"}),
    ("aws:ec2/getSubnets:getSubnets", "pulumi_aws.ec2.GetSubnetsResult",
     {"tags": {"anycloud.sh/node-pool": "np-1"}}, {"ids"}),
    ("aws:ec2/getRouteTables:getRouteTables", "pulumi_aws.ec2.GetRouteTablesResult",
     {"tags": {"anycloud.sh/node-pool": "np-1"}}, {"ids"}),
    ("aws:ec2/getSecurityGroups:getSecurityGroups", "pulumi_aws.ec2.GetSecurityGroupsResult",
     {"tags": {"anycloud.sh/node-pool": "np-1"}}, {"ids"}),
    ("aws:ec2/getInternetGateway:getInternetGateway",
     "pulumi_aws.ec2.GetInternetGatewayResult", {"tags": {"anycloud.sh/node-pool": "np-1"}},
     {"id"}),
    ("aws:ec2/getAmi:getAmi", "pulumi_aws.ec2.GetAmiResult",
     {"mostRecent": True, "owners": ["099720109477"],
      "filters": [{"name": "name", "values": ["ubuntu-*"]}]}, {"id", "imageId"}),
    ("gcp:compute/getInstance:getInstance", "pulumi_gcp.compute.GetInstanceResult",
     {"name": "vm-1", "zone": "us-central1-a"}, {"id", "labels"}),
    ("gcp:compute/getImage:getImage", "pulumi_gcp.compute.GetImageResult",
     {"family": "ubuntu-2404-lts-amd64", "project": "ubuntu-os-cloud"}, {"selfLink"}),
    ("azure-native:compute:getVirtualMachine",
     "pulumi_azure_native.compute.GetVirtualMachineResult",
     {"resourceGroupName": "rg-1", "vmName": "vm-3"}, {"id", "tags"}),
    ("azure-native:network:getPublicIPAddress",
     "pulumi_azure_native.network.GetPublicIPAddressResult",
     {"resourceGroupName": "rg-1", "publicIpAddressName": "vm-3-ip"}, {"ipAddress"}),
    ("azure-native:resources:getResourceGroup",
     "pulumi_azure_native.resources.GetResourceGroupResult",
     {"resourceGroupName": "rg-1"}, {"id"}),
    ("azure-native:network:getVirtualNetwork",
     "pulumi_azure_native.network.GetVirtualNetworkResult",
     {"resourceGroupName": "rg-1", "virtualNetworkName": "vnet-1"}, {"id"}),
    ("azure-native:network:getSubnet", "pulumi_azure_native.network.GetSubnetResult",
     {"resourceGroupName": "rg-1", "virtualNetworkName": "vnet-1", "subnetName": "subnet-1"},
     {"id"}),
    ("azure-native:network:getNetworkSecurityGroup",
     "pulumi_azure_native.network.GetNetworkSecurityGroupResult",
     {"resourceGroupName": "rg-1", "networkSecurityGroupName": "nsg-1"}, {"id"}),
]


@pytest.mark.parametrize(("token", "result", "args", "read"), INVOKES,
                         ids=[i[0].rsplit(":", 1)[-1] for i in INVOKES])
def test_an_invoke_answers_in_the_sdks_result_shape(
        ask: Any, token: str, result: str, args: dict[str, Any], read: set[str]) -> None:
    package = token.split(":", 1)[0]
    answer = ask(package, "invoke", token=token, args=args)
    declared = wire_names(_sdk(result))
    assert set(answer) <= declared, f"{token} answers keys its SDK does not declare: " \
        f"{sorted(set(answer) - declared)}"
    assert read <= {k for k, v in answer.items() if v not in (None, "", [], {})}, answer


def test_the_route_table_lookup_answers_its_associations_in_their_shape(ask: Any) -> None:
    """``recovery`` reads each association's subnet, table and id."""
    subnets = ask("aws", "invoke", token="aws:ec2/getSubnets:getSubnets",
                  args={"tags": {"anycloud.sh/node-pool": "np-1"}})["ids"]
    answer = ask("aws", "invoke", token="aws:ec2/getRouteTable:getRouteTable",
                 args={"subnetId": subnets[0]})
    assert set(answer) <= wire_names(_sdk("pulumi_aws.ec2.GetRouteTableResult"))
    association = _sdk("pulumi_aws.ec2.outputs.GetRouteTableAssociationResult")
    (joined,) = answer["associations"]
    assert set(joined) <= wire_names(association)
    assert joined["subnetId"] == subnets[0] and joined["routeTableAssociationId"]
