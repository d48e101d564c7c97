"""A simulated cloud that plugs in under the mock engine and remembers what it bought.

It answers the mock engine like ``automation.engine.mock.providers.MockProviders`` (ids,
addresses, invokes), and on top keeps what it bought: VMs (with the attempt they carry,
deleted with a latency, booting into the simulated cluster) and every other resource by id,
persisted to a JSON file so that it survives a killed reconciler. Knobs inject provider
errors, capacity errors, uncertain observations and VMs that never boot.

It is no kinder than the clouds: a create is answered as each API answers it, whoever asks.

- AWS ``RunInstances`` (and every other ``Create*`` call) makes a new resource with a new id
  each time it is called; only a repeated ``ClientToken`` would make it idempotent, and the
  providers send a fresh token per call (docs.aws.amazon.com/ec2/latest/devguide/
  ec2-api-idempotency.html). Asking twice buys twice.
- GCP ``instances.insert`` (and ``networks.insert``, ``firewalls.insert`` ...) of a name that
  exists fails ``409 alreadyExists`` (cloud.google.com/compute/docs/reference/rest/v1/
  instances/insert; cloud.google.com/apis/design/errors: ALREADY_EXISTS is HTTP 409).
- Azure ``PUT`` of an existing name updates that resource in place (learn.microsoft.com/
  rest/api/compute/virtual-machines/create-or-update: "create or update"), and is refused
  while it is being deleted.

Only the engine's ``create`` and ``replace`` steps are creates; a resource the engine keeps
(``same``, ``update``) keeps its id and buys nothing. Whether anything is bought twice is up
to the engine's state and anycloud's recovery, never to this simulator.

Releases: AWS ``TerminateInstances`` answers at once and the instance is ``shutting-down``
for a while; the GCP and Azure providers wait for their delete operation, so by the time the
engine's delete step returns the name is free again (a name conflict is only with a VM that
is running).
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from automation.clock import Clock
from automation.crash import crashpoint
from automation.engine.mock.model import NOT_IN_THE_CLOUD, CloudFailure, Step
from automation.engine.mock.providers import MockProviders

if TYPE_CHECKING:
    from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

VM_TYPES = {
    "aws:ec2/instance:Instance": "tags",
    "gcp:compute/instance:Instance": "labels",
    "azure-native:compute:VirtualMachine": "tags",
}
# How each cloud spells the attempt and pool tags (components/naming.py).
_ATTEMPT_KEYS = ("anycloud.sh/attempt", "anycloud-sh_attempt", "anycloud.sh_attempt")
_POOL_KEYS = ("anycloud.sh/node-pool", "anycloud-sh_node-pool", "anycloud.sh_node-pool")
_CLUSTER_KEYS = ("anycloud.sh/cluster", "anycloud-sh_cluster", "anycloud.sh_cluster")


def _cloud_of(type_: str) -> str:
    return type_.split(":", 1)[0].replace("azure-native", "azure")


def _plain(value: Any) -> Any:
    from pulumi.runtime import rpc

    return rpc.unwrap_rpc_secret(value) if rpc.is_rpc_secret(value) else value


def identity(type_: str, name: str, inputs: dict[str, Any]) -> list[Any]:
    """What a lookup finds a resource by: on AWS its tags (anycloud tags everything it makes
    with the pool's ownership tags and a Name), or for a route-table association what it
    joins; on GCP and Azure the name it was created under (and the Azure resource group)."""
    from automation.engine.mock.force_new import rules_for

    cloud = _cloud_of(type_)
    if cloud == "aws":
        if type_ == "aws:ec2/routeTableAssociation:RouteTableAssociation":
            return [type_, "joins", str(_plain(inputs.get("subnetId"))),
                    str(_plain(inputs.get("routeTableId")))]
        tags = _plain(inputs.get("tags")) or {}
        return [type_, "tags", sorted([str(k), str(_plain(v))] for k, v in tags.items())]
    prop = rules_for(type_).name_property or "name"
    named = _plain(inputs.get(prop)) or name
    return [type_, "name", str(named), str(_plain(inputs.get("resourceGroupName")) or "")]


def console_view(value: Any) -> Any:
    """A resource's inputs as the cloud keeps them for its console: every secret value left
    out (the simulator's file never holds one), the rest as given."""
    from pulumi.runtime import rpc

    if isinstance(value, dict):
        return {str(k): console_view(v) for k, v in value.items() if not rpc.is_rpc_secret(v)}
    if isinstance(value, list | tuple):
        return [console_view(v) for v in value if not rpc.is_rpc_secret(v)]
    return value


# Where each cloud's VM keeps its type among its properties (wire names).
VM_TYPE_PROPERTY = {
    "aws:ec2/instance:Instance": ("instanceType",),
    "gcp:compute/instance:Instance": ("machineType",),
    "azure-native:compute:VirtualMachine": ("hardwareProfile", "vmSize"),
}


def _vm_type(inputs: dict[str, Any]) -> str:
    profile = inputs.get("hardwareProfile") or {}
    return str(inputs.get("instanceType") or inputs.get("machineType")
               or (profile.get("vmSize") if isinstance(profile, dict) else "") or "")

Lookup = Literal["running", "absent", "uncertain"]


@dataclass(frozen=True)
class Latency:
    """How long a cloud takes to answer a stack operation, as a discrete-event simulation
    charges it (``benchmarks/bench_many_pools.py``); the simulator itself answers at once.
    A stack's VMs are created (or deleted) in parallel by the engine: one latency per op."""

    create_vm: timedelta
    delete_vm: timedelta
    update: timedelta = timedelta(seconds=5)  # no VM bought or deleted: a few API calls


# Typical times from API call to a running (or gone) VM, the figures issue 9 names.
OPERATION_LATENCY = {
    "aws": Latency(create_vm=timedelta(seconds=60), delete_vm=timedelta(seconds=60)),
    "gcp": Latency(create_vm=timedelta(seconds=40), delete_vm=timedelta(seconds=40)),
    "azure": Latency(create_vm=timedelta(seconds=150), delete_vm=timedelta(seconds=150)),
}


@dataclass
class SimVm:
    id: str
    resource_type: str
    attempt_id: str
    pool_id: str
    public_ip: str
    created_at: str
    vm_type: str = ""
    cluster_id: str = ""
    state: str = "running"  # running | terminating | terminated
    terminate_at: str | None = None
    boots: bool = True


@dataclass
class Faults:
    """What the next calls should run into."""

    create_errors: list[str] = field(default_factory=list)  # consumed one per VM create
    never_boot: list[str] = field(default_factory=list)  # attempt ids whose VM never joins
    never_boot_next: int = 0  # the next N VMs created never boot
    uncertain: list[str] = field(default_factory=list)  # attempt ids whose lookup is unsure


class CloudSimulator(MockProviders):
    def __init__(
        self,
        clock: Clock,
        path: Path | None = None,
        *,
        delete_latency: timedelta = timedelta(seconds=30),
    ) -> None:
        super().__init__()
        self.clock = clock
        self.path = path
        self.delete_latency = delete_latency
        self.vms: dict[str, SimVm] = {}  # by VM id
        # Every other resource bought, by id: {"type", "state": live | deleted, "identity"}.
        self.resources: dict[str, dict[str, Any]] = {}
        # What the cloud's console shows of each resource it holds, by id: its non-secret
        # properties as last created or updated, and as a person changed them since
        # (``console_*``). A drift check compares them with the stack's state.
        self.live: dict[str, dict[str, Any]] = {}
        self.faults = Faults()
        self.journal: list[tuple[str, str]] = []  # (verb, attempt id)
        self.on_vm_created: list[Callable[[SimVm], None]] = []
        self.on_vm_deleted: list[Callable[[SimVm], None]] = []
        self._vm_lock = threading.RLock()
        if path is not None and path.exists():
            self._load(path)

    # -- persistence --------------------------------------------------------------------

    def _load(self, path: Path) -> None:
        raw = json.loads(path.read_text())
        self.vms = {k: SimVm(**v) for k, v in raw["vms"].items()}
        self.resources = raw.get("resources", {})
        self.live = raw.get("live", {})
        self.faults = Faults(**raw["faults"])
        self.journal = [tuple(x) for x in raw.get("journal", [])]  # type: ignore[misc]
        self._ips.update(raw.get("ips", {}))

    def save(self) -> None:
        if self.path is None:
            return
        with self._vm_lock:
            data = {"vms": {k: asdict(v) for k, v in self.vms.items()},
                    "resources": self.resources, "live": self.live,
                    "faults": asdict(self.faults), "journal": self.journal, "ips": self._ips}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".cloud-")
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(data))
        os.replace(tmp, self.path)

    # -- the mock engine's questions ----------------------------------------------------

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if getattr(args, "reading", False) and _cloud_of(args.typ) in ("aws", "gcp", "azure"):
            return self._read(args)
        step = getattr(args, "step", None)
        kept = isinstance(step, Step) and step.op in ("same", "update")
        if kept or not args.custom or args.typ.startswith(NOT_IN_THE_CLOUD):
            rid, extra = super().new_resource(args)  # nothing is created
            if (isinstance(step, Step) and step.op == "update" and rid is not None
                    and args.custom and not args.typ.startswith(NOT_IN_THE_CLOUD)):
                with self._vm_lock:  # updated in place: the console shows the new values
                    self.live[rid] = console_view(dict(args.inputs))
                    self.save()
            return rid, extra
        if args.typ in VM_TYPES:
            return self._create_vm(args)
        return self._create_resource(args)

    def _read(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        """A resource ``get`` by id: the provider reads it; the engine fails the read of
        one that does not exist with ``resource '<id>' does not exist``."""
        rid = str(args.resource_id or "")
        with self._vm_lock:
            vm = self.vms.get(rid)
            held = self.resources.get(rid)
            exists = (vm is not None and vm.state != "terminated") or (
                held is not None and held["state"] == "live")
            if not exists:
                raise CloudFailure(f"reading {args.typ} {args.name}: resource '{rid}' does "
                                   "not exist")
            props = copy.deepcopy(self.live.get(rid, {}))
        _, extra = super().new_resource(args)
        return rid, {**props, **extra}

    def computed_outputs(self, args: MockResourceArgs) -> dict[str, Any]:
        """What a provider's read reports of an existing resource beyond its inputs (ids,
        addresses, links), as its create reported them (``args.step`` names its id)."""
        _, extra = super().new_resource(args)
        return extra

    def _fresh(self, args: MockResourceArgs, taken: Callable[[str], bool]
               ) -> tuple[str | None, dict[str, Any]]:
        """The provider's answer for a create, under an id the cloud never gave before (an
        AWS create makes a new resource each time)."""
        rid, extra = super().new_resource(args)
        saved = getattr(args, "step", None)
        try:
            while rid is not None and taken(rid):
                args.step = Step(op="replace", old_id=rid)  # type: ignore[attr-defined]
                rid, extra = super().new_resource(args)
        finally:
            args.step = saved  # type: ignore[attr-defined]
        return rid, extra

    def _conflict(self, args: MockResourceArgs, rid: str) -> None:
        """A create of a name that exists: GCP refuses it; Azure updates in place (module
        docstring)."""
        if _cloud_of(args.typ) == "gcp":
            raise CloudFailure(f"googleapi: Error 409: The resource '{rid}' already exists, "
                               "alreadyExists")

    def _create_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        aws = _cloud_of(args.typ) == "aws"
        with self._vm_lock:
            if aws:
                rid, extra = self._fresh(args, lambda r: r in self.resources)
            else:
                rid, extra = super().new_resource(args)
                prior = self.resources.get(rid or "")
                if prior is not None and prior["state"] == "live":
                    self._conflict(args, str(rid))
                    self.live[str(rid)] = console_view(dict(args.inputs))
                    self.save()
                    return rid, extra  # Azure: updated in place
            if rid is not None:
                self.live[rid] = console_view(dict(args.inputs))
                self.resources[rid] = {"type": args.typ, "state": "live", "identity": identity(
                    args.typ, args.name, dict(args.inputs))}
                self.save()
        # Made, and the engine has not heard back yet.
        crashpoint("mid-network-create")
        return rid, extra

    def _create_vm(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        tags = dict(args.inputs.get(VM_TYPES[args.typ]) or {})
        attempt = next((tags[k] for k in _ATTEMPT_KEYS if k in tags), None)
        pool = next((tags[k] for k in _POOL_KEYS if k in tags), "")
        cluster = next((tags[k] for k in _CLUSTER_KEYS if k in tags), "")
        if attempt is None:
            raise CloudFailure(f"{args.typ} {args.name} carries no attempt tag")
        with self._vm_lock:
            if self.faults.create_errors:
                message = self.faults.create_errors.pop(0)
                self.save()
                raise CloudFailure(message)
            if _cloud_of(args.typ) == "aws":
                rid, extra = self._fresh(args, lambda r: r in self.vms)
            else:
                rid, extra = super().new_resource(args)
                prior = self.vms.get(str(rid))
                if prior is not None and prior.state == "running":
                    self._conflict(args, str(rid))
                    self.live[str(rid)] = console_view(dict(args.inputs))
                    self.journal.append(("update", attempt))  # Azure: the same VM, updated
                    self.save()
                    return rid, extra
            boots = attempt not in self.faults.never_boot and self.faults.never_boot_next <= 0
            if self.faults.never_boot_next > 0:
                self.faults.never_boot_next -= 1
            ip = str(extra.get("publicIp") or self.public_ip(args.name))
            vm = SimVm(id=str(rid), resource_type=args.typ, attempt_id=attempt, pool_id=pool,
                       public_ip=ip, created_at=self.clock.now().isoformat(), boots=boots,
                       vm_type=_vm_type(dict(args.inputs)), cluster_id=cluster)
            self.vms[vm.id] = vm
            self.live[vm.id] = console_view(dict(args.inputs))
            self.journal.append(("create", attempt))
            self.save()
            for hook in self.on_vm_created:
                hook(vm)
        # Bought, and the engine has not heard back yet.
        crashpoint("mid-vm-create")
        return rid, extra

    def call(self, args: MockCallArgs) -> dict[str, Any]:
        from automation.simulators.vm_lookup import LOOKUP_TOKENS, VmLookupAnswers

        if args.token in LOOKUP_TOKENS:  # the providers' VM lookups, answered from what exists
            return VmLookupAnswers(self).call(args)
        return super().call(args)

    # -- what the runner and the reconciler ask -----------------------------------------

    def find(self, type_: str, name: str, inputs: dict[str, Any]) -> str | None:
        """The id of the live resource a lookup by identity (``identity``) finds for what
        a program registers, None when there is none; ``CloudFailure`` when several match
        (a person must say which one is ours). VMs are looked up by their attempt tag
        through the providers' own lookups instead (``call``)."""
        wanted = identity(type_, name, inputs)
        with self._vm_lock:
            hits = sorted(rid for rid, r in self.resources.items()
                          if r["state"] == "live" and r.get("identity") == wanted)
        if len(hits) > 1:
            raise CloudFailure(f"{len(hits)} live {type_} match {name}: {', '.join(hits)}")
        return hits[0] if hits else None

    def live_vm(self, attempt_id: str) -> SimVm | None:
        self._settle()
        return next((v for v in self.vms.values()
                     if v.attempt_id == attempt_id and v.state == "running"), None)

    def delete_resource(self, resource_type: str, resource_id: str) -> None:
        """Start releasing a VM (other resources need no bookkeeping)."""
        with self._vm_lock:
            other = self.resources.get(resource_id)
            if other is not None and other["state"] == "live":
                other["state"] = "deleted"
                self.save()
            vm = self.vms.get(resource_id)
            if vm is None or vm.state != "running":
                return
            vm.state = "terminating"
            vm.terminate_at = (self.clock.now() + self.delete_latency).isoformat()
            self.journal.append(("delete", vm.attempt_id))
            self.save()
            for hook in self.on_vm_deleted:
                hook(vm)

    def now(self) -> datetime:
        """The world's time: what the engine's policy gate checks expirations against."""
        return self.clock.now()

    def lookup(self, attempt_id: str) -> Lookup:
        """Is there a VM for this attempt? ``uncertain`` while the provider cannot say."""
        self._settle()
        if attempt_id in self.faults.uncertain:
            return "uncertain"
        states = {v.state for v in self.vms.values() if v.attempt_id == attempt_id}
        if "running" in states:
            return "running"
        if "terminating" in states:
            return "uncertain"
        return "absent"

    def vm_exists(self, resource_type: str, resource_id: str) -> bool | None:
        """For ``refresh``: False once a VM is gone, None for resources it does not track."""
        if resource_type not in VM_TYPES:
            return None
        self._settle()
        vm = self.vms.get(resource_id)
        return vm is not None and vm.state != "terminated"

    # -- a person at the cloud's console (out-of-band changes) --------------------------

    def console_change_vm_type(self, attempt_id: str, vm_type: str) -> SimVm:
        """Stop the attempt's running VM, change its type and start it again, as a person
        would in the console: the VM keeps its id; the stack's state does not know."""
        vm = self.live_vm(attempt_id)
        if vm is None:
            raise LookupError(f"no running VM for attempt {attempt_id}")
        with self._vm_lock:
            vm.vm_type = vm_type
            props = self.live.setdefault(vm.id, {})
            *parents, leaf = VM_TYPE_PROPERTY[vm.resource_type]
            for key in parents:
                props = props.setdefault(key, {})
            props[leaf] = vm_type
            self.save()
        return vm

    def console_edit(self, resource_id: str, prop: str, value: Any) -> None:
        """Set one top-level property of a live resource (wire name), as a person would."""
        with self._vm_lock:
            if resource_id not in self.live:
                raise LookupError(f"the cloud holds no resource {resource_id}")
            self.live[resource_id][prop] = value
            self.save()

    def console_add_rule(self, group_id: str, direction: str, rule: dict[str, Any]) -> None:
        """Add a rule to a live security group (``ingress`` or ``egress``) by hand."""
        with self._vm_lock:
            if group_id not in self.live:
                raise LookupError(f"the cloud holds no resource {group_id}")
            rules = list(self.live[group_id].get(direction) or [])
            self.live[group_id][direction] = [*rules, rule]
            self.save()

    def live_properties(self, resource_type: str, resource_id: str) -> dict[str, Any] | None:
        """What the console shows of a resource: None when it is gone (or this cloud never
        held it); its non-secret properties otherwise."""
        self._settle()
        with self._vm_lock:
            if resource_type in VM_TYPES:
                vm = self.vms.get(resource_id)
                if vm is None or vm.state == "terminated":
                    return None
            else:
                held = self.resources.get(resource_id)
                if held is None or held["state"] != "live":
                    return None
            return copy.deepcopy(self.live.get(resource_id, {}))

    def vms_of_pool(self, pool_id: str) -> list[SimVm]:
        self._settle()
        return [v for v in self.vms.values() if v.pool_id == pool_id and v.state != "terminated"]

    def _settle(self) -> None:
        now = self.clock.now()
        with self._vm_lock:
            for vm in self.vms.values():
                if vm.state == "terminating" and vm.terminate_at and (
                    datetime.fromisoformat(vm.terminate_at) <= now
                ):
                    vm.state = "terminated"
