"""The simulated cloud's answers to the providers' VM lookups, for the mock engine.

``VmLookupAnswers`` wraps a ``CloudSimulator`` and answers the invokes that
``automation.engine.recovery.vm_lookup_program`` makes, from the VMs the simulator bought,
the way each provider answers them:

- ``aws:ec2/getInstances:getInstances``: the ids of instances carrying the tags, in the
  requested states (a VM being released is ``shutting-down``, a released one
  ``terminated``);
- ``gcp:compute/getInstance:getInstance``: the instance by zone and name with its labels, or
  the API's 404 error;
- ``azure-native:compute:getVirtualMachine``: the VM by resource group and name with its
  tags, or ARM's ``ResourceNotFound`` error.

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

LOOKUP_TOKENS = ("aws:ec2/getInstances:getInstances", "gcp:compute/getInstance:getInstance",
                  "azure-native:compute:getVirtualMachine")
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
        return self.cloud.call(args)

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
        states = set(a.get("instanceStateNames") or ["pending", "running", "shutting-down",
                                                     "stopping", "stopped"])
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
