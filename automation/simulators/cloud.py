"""A simulated cloud that plugs in under the mock engine and remembers what it bought.

It answers the mock engine like ``automation.engine.mock.providers.MockProviders`` (ids,
addresses, invokes), and on top keeps the VMs: one per attempt tag, idempotent (a VM whose
attempt already has one is looked up, not bought again — what importing by tag does after a
crash), deleted with
a latency, persisted to a JSON file so that it survives a killed reconciler. Knobs inject
provider errors, capacity errors, uncertain observations and VMs that never boot.
"""

from __future__ import annotations

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
from automation.engine.mock.model import CloudFailure
from automation.engine.mock.providers import MockProviders

if TYPE_CHECKING:
    from pulumi.runtime.mocks import MockResourceArgs

VM_TYPES = {
    "aws:ec2/instance:Instance": "tags",
    "gcp:compute/instance:Instance": "labels",
    "azure-native:compute:VirtualMachine": "tags",
}
# How each cloud spells the attempt and pool tags (components/naming.py).
_ATTEMPT_KEYS = ("anycloud.sh/attempt", "anycloud-sh_attempt", "anycloud.sh_attempt")
_POOL_KEYS = ("anycloud.sh/node-pool", "anycloud-sh_node-pool", "anycloud.sh_node-pool")
_CLUSTER_KEYS = ("anycloud.sh/cluster", "anycloud-sh_cluster", "anycloud.sh_cluster")


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
        self.faults = Faults(**raw["faults"])
        self.journal = [tuple(x) for x in raw.get("journal", [])]  # type: ignore[misc]
        self._ips.update(raw.get("ips", {}))

    def save(self) -> None:
        if self.path is None:
            return
        with self._vm_lock:
            data = {"vms": {k: asdict(v) for k, v in self.vms.items()},
                    "faults": asdict(self.faults), "journal": self.journal, "ips": self._ips}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".cloud-")
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh)
        os.replace(tmp, self.path)

    # -- the mock engine's questions ----------------------------------------------------

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ not in VM_TYPES:
            return super().new_resource(args)
        tags = dict(args.inputs.get(VM_TYPES[args.typ]) or {})
        attempt = next((tags[k] for k in _ATTEMPT_KEYS if k in tags), None)
        pool = next((tags[k] for k in _POOL_KEYS if k in tags), "")
        cluster = next((tags[k] for k in _CLUSTER_KEYS if k in tags), "")
        if attempt is None:
            raise CloudFailure(f"{args.typ} {args.name} carries no attempt tag")
        rid, extra = super().new_resource(args)
        with self._vm_lock:
            existing = self.live_vm(attempt)
            if existing is None:
                if self.faults.create_errors:
                    message = self.faults.create_errors.pop(0)
                    self.save()
                    raise CloudFailure(message)
                boots = attempt not in self.faults.never_boot and self.faults.never_boot_next <= 0
                if self.faults.never_boot_next > 0:
                    self.faults.never_boot_next -= 1
                ip = self.public_ip(args.name)
                vm = SimVm(id=str(rid), resource_type=args.typ, attempt_id=attempt, pool_id=pool,
                           public_ip=ip, created_at=self.clock.now().isoformat(), boots=boots,
                           vm_type=_vm_type(dict(args.inputs)), cluster_id=cluster)
                self.vms[vm.id] = vm
                self.journal.append(("create", attempt))
                self.save()
                for hook in self.on_vm_created:
                    hook(vm)
        return rid, extra

    # -- what the runner and the reconciler ask -----------------------------------------

    def live_vm(self, attempt_id: str) -> SimVm | None:
        self._settle()
        return next((v for v in self.vms.values()
                     if v.attempt_id == attempt_id and v.state == "running"), None)

    def delete_resource(self, resource_type: str, resource_id: str) -> None:
        """Start releasing a VM (other resources need no bookkeeping)."""
        with self._vm_lock:
            vm = self.vms.get(resource_id)
            if vm is None or vm.state != "running":
                return
            vm.state = "terminating"
            vm.terminate_at = (self.clock.now() + self.delete_latency).isoformat()
            self.journal.append(("delete", vm.attempt_id))
            self.save()
            for hook in self.on_vm_deleted:
                hook(vm)

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
