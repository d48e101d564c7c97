"""The simulated cloud's answers to the providers' lookups, for the mock engine.

``VmLookupAnswers`` wraps a ``CloudSimulator`` and answers the invokes that
``automation.engine.recovery.cloud_lookup_program`` makes, from what the simulator bought,
the way each provider answers them. VMs:

- ``aws:ec2/getInstances:getInstances``: the ids of instances carrying the tags, in the
  requested states (``running`` when none are asked for; a VM being released is
  ``shutting-down``, a released one ``terminated``);
- ``gcp:compute/getInstance:getInstance``: the instance by zone and name with its labels, or
  the API's 404 error;
- ``azure-native:compute:getVirtualMachine``: the VM by resource group and name with its
  tags, or ARM's ``ResourceNotFound`` error.

A pool's network (``NETWORK_TOKENS``):

- AWS ``ec2.getVpcs``, ``getSubnets``, ``getRouteTables``, ``getSecurityGroups``: the ids
  of the live resources of that kind carrying every tag asked for (DescribeVpcs and the
  others filter by ``tag:<key>``; no match is an empty list, never an error);
- AWS ``ec2.getInternetGateway`` (by tags) and ``ec2.getRouteTable`` (by the subnet an
  association joins): one result, or the provider's ``no matching EC2 ... found`` /
  ``multiple EC2 ... matched`` errors (tfresource.SingularDataSourceFindError);
- Azure ``getResourceGroup``, ``network.getVirtualNetwork``, ``getSubnet``,
  ``getNetworkSecurityGroup``: the resource by its ARM id, or ``ResourceNotFound`` (or
  ``ResourceGroupNotFound`` when the group is gone as well).

An attempt listed in ``faults.uncertain`` makes the provider fail without an answer (a
throttled or unreachable API). Everything else goes to the wrapped simulator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from automation.simulators.cloud import CloudSimulator, SimVm
from components import naming

if TYPE_CHECKING:
    from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

# The AWS list invokes, by the resource type they list.
_AWS_LISTS = {
    "aws:ec2/getVpcs:getVpcs": "aws:ec2/vpc:Vpc",
    "aws:ec2/getSubnets:getSubnets": "aws:ec2/subnet:Subnet",
    "aws:ec2/getRouteTables:getRouteTables": "aws:ec2/routeTable:RouteTable",
    "aws:ec2/getSecurityGroups:getSecurityGroups": "aws:ec2/securityGroup:SecurityGroup",
}
# The Azure invokes, by the resource type they get and the ARM id they name.
_AZURE_GETS = {
    "azure-native:resources:getResourceGroup": "azure-native:resources:ResourceGroup",
    "azure-native:network:getVirtualNetwork": "azure-native:network:VirtualNetwork",
    "azure-native:network:getSubnet": "azure-native:network:Subnet",
    "azure-native:network:getNetworkSecurityGroup": "azure-native:network:NetworkSecurityGroup",
}
NETWORK_TOKENS = (*_AWS_LISTS, *_AZURE_GETS, "aws:ec2/getInternetGateway:getInternetGateway",
                  "aws:ec2/getRouteTable:getRouteTable")
LOOKUP_TOKENS = ("aws:ec2/getInstances:getInstances", "gcp:compute/getInstance:getInstance",
                 "azure-native:compute:getVirtualMachine", *NETWORK_TOKENS)
_AWS_STATE = {"running": "running", "terminating": "shutting-down", "terminated": "terminated"}


class ProviderError(grpc.RpcError):
    """A provider's failed invoke as the engine hands it to the program: a gRPC status
    whose details are the provider's message (the SDK raises it where the program calls
    the function, so the program can read it)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNKNOWN

    def details(self) -> str:
        return self.message


def _tags(vm: SimVm, cloud: str) -> dict[str, str]:
    """The VM's ownership tags as its cloud spells them (the components tag with these)."""
    tags = naming.ownership_tags(cluster_id=vm.cluster_id, pool_id=vm.pool_id,
                                 attempt_id=vm.attempt_id)
    return {"aws": tags, "gcp": naming.gcp_labels(tags), "azure": naming.azure_tags(tags)}[cloud]


class VmLookupAnswers:
    def __init__(self, cloud: CloudSimulator) -> None:
        self.cloud = cloud
        self.asked: list[tuple[str, dict[str, Any]]] = []  # (token, args) of each lookup

    def check(self, args: MockResourceArgs) -> dict[str, Any]:
        return self.cloud.check(args)

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        return self.cloud.new_resource(args)

    def call(self, args: MockCallArgs) -> dict[str, Any]:
        if args.token in LOOKUP_TOKENS:
            self.asked.append((args.token, dict(args.args)))
        if args.token == "aws:ec2/getInstances:getInstances":
            return self._aws(dict(args.args))
        if args.token == "gcp:compute/getInstance:getInstance":
            return self._gcp(dict(args.args))
        if args.token == "azure-native:compute:getVirtualMachine":
            return self._azure(dict(args.args))
        if args.token in NETWORK_TOKENS:
            return self._network(args.token, dict(args.args))
        return self.cloud.call(args)

    # -- a pool's network ---------------------------------------------------------------

    def _live(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """The live resources of one type the cloud holds, by id, with their properties."""
        return {rid: self.cloud.live.get(rid, {}) for rid, r in self.cloud.resources.items()
                if r["type"] == resource_type and r["state"] == "live"}

    def _network(self, token: str, a: dict[str, Any]) -> dict[str, Any]:
        if token in _AWS_LISTS:
            return {"id": "sim-region", "ids": sorted(self._tagged(_AWS_LISTS[token], a)),
                    "tags": a.get("tags")}
        if token == "aws:ec2/getInternetGateway:getInternetGateway":
            rid = self._single(self._tagged("aws:ec2/internetGateway:InternetGateway", a),
                               "EC2 Internet Gateway")
            return {"id": rid, "internetGatewayId": rid, "tags": a.get("tags")}
        if token == "aws:ec2/getRouteTable:getRouteTable":
            return self._route_table(a)
        return self._azure_network(_AZURE_GETS[token], a)

    def _tagged(self, resource_type: str, a: dict[str, Any]) -> list[str]:
        wanted = {str(k): str(v) for k, v in (a.get("tags") or {}).items()}
        return [rid for rid, props in self._live(resource_type).items()
                if wanted.items() <= {str(k): str(v) for k, v in
                                      (props.get("tags") or {}).items()}.items()]

    @staticmethod
    def _single(ids: list[str], what: str) -> str:
        if not ids:
            raise ProviderError(f"reading {what}: no matching {what} found")
        if len(ids) > 1:
            raise ProviderError(f"multiple {what}s matched; use additional constraints to "
                                f"reduce matches to a single {what}")
        return ids[0]

    def _route_table(self, a: dict[str, Any]) -> dict[str, Any]:
        """``getRouteTable(subnetId=...)``: the table explicitly associated with the
        subnet, with its associations (the filter is ``association.subnet-id``)."""
        subnet = str(a.get("subnetId") or "")
        joins = [(rid, props) for rid, props in self._live(
            "aws:ec2/routeTableAssociation:RouteTableAssociation").items()
            if str(props.get("subnetId")) == subnet]
        table = self._single(sorted({str(p.get("routeTableId")) for _, p in joins}),
                             "EC2 Route Table")
        return {"id": table, "routeTableId": table, "subnetId": subnet, "associations": [
            {"routeTableAssociationId": rid, "routeTableId": table, "subnetId": subnet,
             "gatewayId": "", "main": False} for rid, _ in joins]}

    def _azure_network(self, resource_type: str, a: dict[str, Any]) -> dict[str, Any]:
        group = a.get("resourceGroupName")
        path = {"azure-native:resources:ResourceGroup": "",
                "azure-native:network:VirtualNetwork":
                    f"/providers/Microsoft.Network/virtualNetworks/{a.get('virtualNetworkName')}",
                "azure-native:network:Subnet":
                    f"/providers/Microsoft.Network/virtualNetworks/{a.get('virtualNetworkName')}"
                    f"/subnets/{a.get('subnetName')}",
                "azure-native:network:NetworkSecurityGroup":
                    "/providers/Microsoft.Network/networkSecurityGroups/"
                    f"{a.get('networkSecurityGroupName')}"}[resource_type]
        suffix = f"/resourceGroups/{group}{path}"
        hit = next((rid for rid in self._live(resource_type) if rid.endswith(suffix)), None)
        if hit is None:
            groups = self._live("azure-native:resources:ResourceGroup")
            if not any(rid.endswith(f"/resourceGroups/{group}") for rid in groups):
                raise ProviderError(f"(ResourceGroupNotFound) Resource group '{group}' could "
                                    "not be found.")
            raise ProviderError(f"(ResourceNotFound) The Resource '{suffix}' was not found.")
        found: dict[str, Any] = {"id": hit, "name": hit.rsplit("/", 1)[-1]}
        # Each result type as ARM shapes it: a group's state sits under its properties, a
        # subnet has no location of its own.
        if resource_type == "azure-native:resources:ResourceGroup":
            return {**found, "location": "sim",
                    "properties": {"provisioningState": "Succeeded"}}
        if resource_type != "azure-native:network:Subnet":
            found["location"] = "sim"
        return {**found, "provisioningState": "Succeeded"}

    def _vms(self, resource_type: str) -> list[SimVm]:
        self.cloud.vms_of_pool("")  # settles releases whose latency has passed
        return [v for v in self.cloud.vms.values() if v.resource_type == resource_type]

    def _refuse_if_uncertain(self, vm: SimVm | None, wanted: str | None = None) -> None:
        attempt = vm.attempt_id if vm is not None else wanted
        if attempt is not None and attempt in self.cloud.faults.uncertain:
            raise ProviderError(f"simulated: the provider did not answer for attempt {attempt} "
                               "(RequestLimitExceeded)")

    def _aws(self, a: dict[str, Any]) -> dict[str, Any]:
        wanted = dict(a.get("instanceTags") or {})
        # Without states the provider asks for running instances only (pulumi-aws
        # GetInstancesArgs.instanceStateNames: "The default value is running").
        states = set(a.get("instanceStateNames") or ["running"])
        self._refuse_if_uncertain(None, wanted.get(naming.ATTEMPT))
        hits = [v for v in self._vms("aws:ec2/instance:Instance")
                if wanted.items() <= _tags(v, "aws").items()
                and _AWS_STATE.get(v.state, v.state) in states]
        return {"id": "sim-region", "ids": [v.id for v in hits],
                "publicIps": [v.public_ip for v in hits], "privateIps": [],
                "ipv6Addresses": [], "instanceTags": wanted,
                "instanceStateNames": sorted(states)}

    def _gcp(self, a: dict[str, Any]) -> dict[str, Any]:
        suffix = f"/zones/{a.get('zone')}/instances/{a.get('name')}"
        vm = next((v for v in self._vms("gcp:compute/instance:Instance")
                   if v.id.endswith(suffix) and v.state != "terminated"), None)
        self._refuse_if_uncertain(vm)
        if vm is None:
            raise ProviderError(f"googleapi: Error 404: The resource 'projects/sim{suffix}' "
                               "was not found, notFound")
        status = "RUNNING" if vm.state == "running" else "STOPPING"
        return {"id": vm.id, "name": a.get("name"), "zone": a.get("zone"),
                "labels": _tags(vm, "gcp"), "currentStatus": status,
                "selfLink": f"https://www.googleapis.com/compute/v1/{vm.id}"}

    def _azure(self, a: dict[str, Any]) -> dict[str, Any]:
        group, name = a.get("resourceGroupName"), a.get("vmName")
        suffix = f"/resourceGroups/{group}/providers/Microsoft.Compute/virtualMachines/{name}"
        vm = next((v for v in self._vms("azure-native:compute:VirtualMachine")
                   if v.id.endswith(suffix) and v.state != "terminated"), None)
        self._refuse_if_uncertain(vm)
        if vm is None:
            raise ProviderError(f"(ResourceNotFound) The Resource 'Microsoft.Compute/"
                               f"virtualMachines/{name}' under resource group '{group}' was "
                               "not found.")
        state = "Succeeded" if vm.state == "running" else "Deleting"
        return {"id": vm.id, "name": name, "location": "sim", "tags": _tags(vm, "azure"),
                "provisioningState": state}
