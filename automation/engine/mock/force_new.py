"""Which input changes the real providers carry out by replacing the resource.

The mock engine diffs a run against the last applied inputs the way the Pulumi engine
does: a changed property is an in-place ``update`` unless the resource's
``replaceOnChanges`` option or the provider's own schema says it cannot be changed in place
(``force_new`` here; the engine then shows ``replace``). Paths use the engine's wire names
(camelCase) and Pulumi property-path syntax (``bootDisk.initializeParams.image``,
``networkInterfaces[*].nicType``); a path covers everything under it.

Sources, per provider (checked against the provider code, not guessed):

- aws (pulumi-aws bridges terraform-provider-aws): ``ForceNew: true`` in the resource
  schemas ``internal/service/ec2/ec2_instance.go``, ``vpc_subnet.go``,
  ``vpc_security_group.go``, ``vpc_.go``, ``vpc_route_table*.go``; the instance's
  ``CustomizeDiff`` has ``ForceNewIf("user_data", user_data_replace_on_change)``.
  ``instance_type`` is *not* force-new: the provider stops, modifies and starts the instance.
  ``vpc_security_group_ids``, ``metadata_options``, root volume size/type and tags update in
  place.
- gcp (pulumi-gcp bridges terraform-provider-google): ``ForceNew`` in
  ``google/services/compute/resource_compute_instance.go`` (``name``, ``zone``, all of
  ``boot_disk``, ``guest_accelerator``, ``description``, ``project``...), and the network,
  subnetwork and firewall schemas. ``machine_type`` and a network interface's
  ``network``/``subnetwork`` update in place but only with ``allow_stopping_for_update``:
  otherwise the provider fails the update ("Changing the machine_type ... on a started
  instance requires stopping it") -- ``rejected_in_place`` below.
- azure-native: the path parameters of the PUT (resource group, resource name) and the
  properties its metadata marks ``forceNew`` (``provider/pkg/gen/forcenew.go``: ``location``
  on ResourceGroup and VirtualNetwork, nothing on Subnet; ARM's create-only
  ``x-ms-mutability`` for the compute ``location``). azure-native does *not* replace a VM
  whose ``storageProfile.imageReference`` or ``osProfile`` changes: it sends an update that
  Azure rejects (``PropertyChangeNotAllowed``; pulumi-azure-native issues #1117 and #577),
  hence ``rejected_in_place``; the component must ask for a replacement itself
  (``replace_on_changes``).
- kubernetes (pulumi-kubernetes ``provider/pkg/provider/diff.go``): ``.metadata.name`` and
  ``.metadata.namespace`` on every kind; a Secret's ``.type``, ``.stringData`` and ``.data``
  unless the provider sets ``enableSecretMutable`` (ours does not); a DaemonSet's
  ``.spec.selector``.
- random (terraform-provider-random): every argument of ``random_string`` /
  ``random_password`` forces a new value.

Delete-before-replace, as each provider answers it in its ``Diff`` (the resource option
``deleteBeforeReplace`` overrides): pulumi-terraform-bridge asks for it when an autonamed
property (``name``) was given explicitly (``nameRequiresDeleteBeforeReplace``);
azure-native whenever the resource name is not a random autoname; pulumi-kubernetes when
the object is named and keeps its name and namespace.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Inputs = Mapping[str, Any]
# (old inputs as recorded -- secrets redacted -- or None, new inputs) -> more force-new paths
Condition = Callable[[Inputs | None, Inputs], tuple[str, ...]]


@dataclass(frozen=True)
class Rules:
    force_new: tuple[str, ...] = ()
    # Force-new paths that depend on the inputs (a provider's CustomizeDiff).
    force_new_if: Condition | None = None
    # Changes the provider attempts in place and the cloud (or provider) refuses.
    rejected_in_place: tuple[str, ...] = ()
    # When set, ``rejected_in_place`` applies only while this says so.
    rejected_if: Callable[[Inputs], bool] | None = None
    rejected_message: str = ""
    # The property holding the resource's own name, autonamed when absent.
    name_property: str | None = None
    # Named explicitly => the provider asks for delete-before-replace.
    delete_before_replace_when_named: bool = False
    source: str = ""


def _aws_user_data(old: Inputs | None, new: Inputs) -> tuple[str, ...]:
    # customdiff.ForceNewIf("user_data", ... d.Get("user_data_replace_on_change"))
    return ("userData", "userDataBase64") if new.get("userDataReplaceOnChange") else ()


def _gcp_cidr_shrinks(old: Inputs | None, new: Inputs) -> tuple[str, ...]:
    """A subnetwork's range can only grow in place (expandIpCidrRange); anything else is a
    new subnetwork (the provider's IsShrinkageIpCidr CustomizeDiff)."""
    before, after = (old or {}).get("ipCidrRange"), new.get("ipCidrRange")
    try:
        if before is not None and after is not None and ipaddress.ip_network(
                str(before)).subnet_of(ipaddress.ip_network(str(after))):  # type: ignore[arg-type]
            return ()
    except ValueError:
        pass
    return ("ipCidrRange",)


def _gcp_running_without_stop(new: Inputs) -> bool:
    return not new.get("allowStoppingForUpdate")


_TFBRIDGE_AWS = "terraform-provider-aws schema ForceNew (via pulumi-terraform-bridge)"
_TFBRIDGE_GCP = "terraform-provider-google schema ForceNew (via pulumi-terraform-bridge)"
_AZURE = "azure-native: PUT path parameters + forceNew metadata"
_K8S = "pulumi-kubernetes provider/pkg/provider/diff.go forceNew"
_K8S_ALL = ("metadata.name", "metadata.namespace")

RULES: dict[str, Rules] = {
    # ---------------------------------------------------------------- aws
    "aws:ec2/instance:Instance": Rules(
        force_new=(
            "ami", "associatePublicIpAddress", "availabilityZone", "subnetId", "keyName",
            "privateIp", "tenancy", "placementGroup", "placementPartitionNumber", "hostId",
            "ipv6AddressCount", "ipv6Addresses", "securityGroups", "ebsOptimized",
            "hibernation", "launchTemplate", "cpuCoreCount", "cpuThreadsPerCore",
            "cpuOptions.amdSevSnp", "cpuOptions.coreCount", "cpuOptions.threadsPerCore",
            "enclaveOptions.enabled", "ephemeralBlockDevices", "privateDnsNameOptions",
            "rootBlockDevice.encrypted", "rootBlockDevice.kmsKeyId",
            "ebsBlockDevices[*].deleteOnTermination", "ebsBlockDevices[*].deviceName",
            "ebsBlockDevices[*].encrypted", "ebsBlockDevices[*].iops",
            "ebsBlockDevices[*].kmsKeyId", "ebsBlockDevices[*].snapshotId",
            "ebsBlockDevices[*].throughput", "ebsBlockDevices[*].volumeSize",
            "ebsBlockDevices[*].volumeType",
            "networkInterfaces[*].deleteOnTermination", "networkInterfaces[*].deviceIndex",
            "networkInterfaces[*].networkCardIndex", "networkInterfaces[*].networkInterfaceId",
        ),
        force_new_if=_aws_user_data,
        source="terraform-provider-aws internal/service/ec2/ec2_instance.go: ForceNew "
               "attributes; CustomizeDiff ForceNewIf(user_data, user_data_replace_on_change)",
    ),
    "aws:ec2/vpc:Vpc": Rules(
        force_new=("cidrBlock", "ipv4IpamPoolId", "ipv4NetmaskLength"),
        source=_TFBRIDGE_AWS + ": aws_vpc",
    ),
    "aws:ec2/subnet:Subnet": Rules(
        force_new=("vpcId", "cidrBlock", "availabilityZone", "availabilityZoneId",
                   "ipv4IpamPoolId", "ipv4NetmaskLength", "ipv6IpamPoolId", "ipv6Native",
                   "ipv6NetmaskLength", "outpostArn"),
        source="terraform-provider-aws internal/service/ec2/vpc_subnet.go ForceNew",
    ),
    "aws:ec2/securityGroup:SecurityGroup": Rules(
        force_new=("name", "namePrefix", "description", "vpcId"),
        name_property="name",
        delete_before_replace_when_named=True,
        source="terraform-provider-aws vpc_security_group.go ForceNew (name, name_prefix, "
               "description, vpc_id); ingress/egress update in place",
    ),
    "aws:ec2/routeTable:RouteTable": Rules(
        force_new=("vpcId",), source=_TFBRIDGE_AWS + ": aws_route_table",
    ),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": Rules(
        force_new=("subnetId", "gatewayId"),
        source=_TFBRIDGE_AWS + ": aws_route_table_association (route_table_id updates "
               "in place: ReplaceRouteTableAssociation)",
    ),
    # vpc_id updates in place (detach + attach).
    "aws:ec2/internetGateway:InternetGateway": Rules(source=_TFBRIDGE_AWS),
    # ---------------------------------------------------------------- gcp
    "gcp:compute/instance:Instance": Rules(
        force_new=(
            "name", "zone", "project", "description", "bootDisk", "guestAccelerators",
            "metadataStartupScript", "hostname", "scratchDisks", "networkPerformanceConfig",
            "params", "scheduling.preemptible", "scheduling.provisioningModel",
            "networkInterfaces[*].nicType", "networkInterfaces[*].queueCount",
            "networkInterfaces[*].ipv6AccessConfigs[*].externalIpv6",
            "networkInterfaces[*].ipv6AccessConfigs[*].externalIpv6PrefixLength",
            "networkInterfaces[*].ipv6AccessConfigs[*].name",
        ),
        rejected_in_place=(
            "machineType", "minCpuPlatform", "serviceAccount", "enableDisplay",
            "shieldedInstanceConfig", "scheduling.nodeAffinities",
            "networkInterfaces[*].network", "networkInterfaces[*].subnetwork",
            "networkInterfaces[*].subnetworkProject", "advancedMachineFeatures",
        ),
        rejected_if=_gcp_running_without_stop,
        rejected_message=(
            "Changing the machine_type, min_cpu_platform, service_account, enable_display, "
            "shielded_instance_config, scheduling.node_affinities or "
            "network_interface.[#d].(network/subnetwork/subnetwork_project) or "
            "advanced_machine_features on a started instance requires stopping it. To "
            "acknowledge this, please set allow_stopping_for_update = true in your config."
        ),
        name_property="name",
        delete_before_replace_when_named=True,
        source="terraform-provider-google google/services/compute/"
               "resource_compute_instance.go (ForceNew; update error without "
               "allow_stopping_for_update)",
    ),
    "gcp:compute/network:Network": Rules(
        force_new=("name", "autoCreateSubnetworks", "description", "project"),
        name_property="name",
        delete_before_replace_when_named=True,
        source=_TFBRIDGE_GCP + ": google_compute_network",
    ),
    "gcp:compute/subnetwork:Subnetwork": Rules(
        force_new=("name", "network", "region", "project", "description"),
        force_new_if=_gcp_cidr_shrinks,
        name_property="name",
        delete_before_replace_when_named=True,
        source=_TFBRIDGE_GCP + ": google_compute_subnetwork (ip_cidr_range only expands "
               "in place)",
    ),
    "gcp:compute/firewall:Firewall": Rules(
        force_new=("name", "network", "direction", "project"),
        name_property="name",
        delete_before_replace_when_named=True,
        source=_TFBRIDGE_GCP + ": google_compute_firewall",
    ),
    # ---------------------------------------------------------------- azure-native
    "azure-native:resources:ResourceGroup": Rules(
        force_new=("resourceGroupName", "location"),
        name_property="resourceGroupName",
        delete_before_replace_when_named=True,
        source=_AZURE + " (forcenew.go: Resources/ResourceGroup location)",
    ),
    "azure-native:network:VirtualNetwork": Rules(
        force_new=("resourceGroupName", "virtualNetworkName", "location"),
        name_property="virtualNetworkName",
        delete_before_replace_when_named=True,
        source=_AZURE + " (forcenew.go: Network/VirtualNetwork location)",
    ),
    "azure-native:network:Subnet": Rules(
        force_new=("resourceGroupName", "virtualNetworkName", "subnetName"),
        name_property="subnetName",
        delete_before_replace_when_named=True,
        source=_AZURE + " (forcenew.go: Network/Subnet has no force-news)",
    ),
    "azure-native:network:NetworkSecurityGroup": Rules(
        force_new=("resourceGroupName", "networkSecurityGroupName"),
        name_property="networkSecurityGroupName",
        delete_before_replace_when_named=True,
        source=_AZURE,
    ),
    "azure-native:network:PublicIPAddress": Rules(
        force_new=("resourceGroupName", "publicIpAddressName", "location",
                   "publicIPAddressVersion", "publicIPPrefix", "sku"),
        name_property="publicIpAddressName",
        delete_before_replace_when_named=True,
        source=_AZURE + " (forcenew.go: Network/PublicIPAddress)",
    ),
    "azure-native:compute:VirtualMachine": Rules(
        force_new=("resourceGroupName", "vmName", "location"),
        rejected_in_place=(
            "zones", "storageProfile.imageReference", "storageProfile.osDisk.createOption",
            "osProfile.computerName", "osProfile.adminUsername", "osProfile.adminPassword",
            "osProfile.customData",
        ),
        rejected_message="PropertyChangeNotAllowed: Changing property '{path}' is not allowed.",
        name_property="vmName",
        delete_before_replace_when_named=True,
        source=_AZURE + "; compute location is create-only (x-ms-mutability). "
               "imageReference/osProfile: updated, then refused by Azure "
               "(pulumi-azure-native #1117, #577; azure-powershell #7621); zones, admin "
               "credentials and custom data: create-only in Azure (terraform-provider-azurerm "
               "marks them ForceNew on azurerm_linux_virtual_machine)",
    ),
    # ---------------------------------------------------------------- kubernetes
    "kubernetes:core/v1:Secret": Rules(
        force_new=(*_K8S_ALL, "type", "stringData", "data"),
        source=_K8S + " (Secret: .type, .stringData, .data while enableSecretMutable is off)",
    ),
    "kubernetes:apps/v1:DaemonSet": Rules(
        force_new=(*_K8S_ALL, "spec.selector"), source=_K8S + " (DaemonSet: .spec.selector)",
    ),
    "kubernetes:apps/v1:Deployment": Rules(
        force_new=(*_K8S_ALL, "spec.selector"), source=_K8S,
    ),
    "kubernetes:core/v1:ConfigMap": Rules(force_new=_K8S_ALL, source=_K8S),
    "kubernetes:node.k8s.io/v1:RuntimeClass": Rules(force_new=_K8S_ALL, source=_K8S),
    # ---------------------------------------------------------------- random
    "random:index/randomString:RandomString": Rules(
        force_new=("*",), source="terraform-provider-random: every argument RequiresReplace",
    ),
    "random:index/randomPassword:RandomPassword": Rules(
        force_new=("*",), source="terraform-provider-random: every argument RequiresReplace",
    ),
}


def rules_for(type_: str) -> Rules:
    """The rules of a resource type; a Kubernetes kind not listed still replaces on a new
    name or namespace. Unknown types update everything in place."""
    found = RULES.get(type_)
    if found is not None:
        return found
    if type_.startswith("kubernetes:"):
        return Rules(force_new=_K8S_ALL, source=_K8S)
    return Rules()


def kubernetes_named(inputs: Inputs) -> bool:
    metadata = inputs.get("metadata")
    return isinstance(metadata, Mapping) and bool(metadata.get("name"))
