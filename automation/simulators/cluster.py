"""SimulatedCluster: the cluster port in memory, on an injected clock.

What a real cluster does on its own is scheduled as timed events and applied, in (time,
sequence) order, whenever the simulator is next asked anything: a VM that was announced
joins as a Node after a delay, becomes Ready, advertises its GPUs, maybe drops them later;
a Node deleted while its VM still runs registers again (the kubelet recreates it). Tests
set the world up directly (foreign Nodes, namespaces, add-on objects, RBAC denials, an
unreachable switch) and read what the reconciler did from ``journal`` (every write request)
and ``reads``.

Deterministic: no randomness and no wall clock; ids come from counters. ``save`` writes JSON
atomically (temp file, fsync, ``os.replace``) so a SIGKILLed process leaves either the old
state or the new one; with ``path`` set (or after ``load``) every change is saved at once.
One process writes the file at a time; within it, public methods hold one re-entrant lock
(the mock engine announces VMs from its own threads).
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Concatenate, NamedTuple, ParamSpec, Protocol, TypeVar

from automation.atomic import replace_file
from automation.kube.port import (
    ACCELERATOR_LABEL,
    ADDON_KINDS,
    ATTEMPT_LABEL,
    CLUSTER_LABEL,
    DAEMONSET_NAME,
    DAEMONSET_NAMESPACE,
    HELM_NAMESPACE,
    INGRESS_ENTRY_LABEL,
    JOB_NAME_LABEL,
    MANAGED_BY,
    MANAGER,
    POOL_LABEL,
    PROVIDER_LABEL,
    RUNTIME_CLASS_NAME,
    TOKEN_NAMESPACE,
    AddonKind,
    AddonObservation,
    ClusterForbidden,
    ClusterPort,
    ClusterUnavailable,
    IngressObjects,
    NamespaceOwner,
    ObservedNode,
    ingress_release_name,
    token_secret_name,
)

FORMAT_VERSION = 1
ADDON_RESOURCE: dict[AddonKind, str] = {"runtimeclass": "runtimeclasses",
                                        "daemonset": "daemonsets"}
ADDON_NAME: dict[AddonKind, str] = {"runtimeclass": RUNTIME_CLASS_NAME,
                                    "daemonset": f"{DAEMONSET_NAMESPACE}/{DAEMONSET_NAME}"}
NAMESPACED = {"secrets": TOKEN_NAMESPACE, "daemonsets": DAEMONSET_NAMESPACE}


class Clock(Protocol):
    def now(self) -> datetime: ...


class Access(NamedTuple):
    """One request the port made: compares equal to a plain (verb, resource, name) tuple."""

    verb: str
    resource: str
    name: str


@dataclass(frozen=True)
class NodeBehaviour:
    """How a VM's Node turns up. Delays count from the previous step."""

    join_after: timedelta | None = timedelta(minutes=2)  # None: the Node never appears
    ready_after: timedelta | None = timedelta(seconds=30)  # after joining; None: stays NotReady
    devices_after: timedelta = timedelta(0)  # after Ready, the GPUs appear (0 until then)
    advertised_gpus: int | None = None  # None: the VM's real count; else a wrong count
    drop_devices_after: timedelta | None = None  # after the devices appear, back to 0
    reregister_after: timedelta | None = timedelta(seconds=30)  # deleted Node, VM still up

    def to_json(self) -> dict[str, Any]:
        return {k: _td_out(v) if isinstance(v, timedelta) or v is None else v
                for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NodeBehaviour:
        return cls(
            join_after=_td_in(data["join_after"]),
            ready_after=_td_in(data["ready_after"]),
            devices_after=_td_in(data["devices_after"]) or timedelta(0),
            advertised_gpus=data["advertised_gpus"],
            drop_devices_after=_td_in(data["drop_devices_after"]),
            reregister_after=_td_in(data["reregister_after"]),
        )


@dataclass
class _Vm:
    attempt_id: str
    pool_id: str
    cluster_id: str
    node_name: str
    gpus: int
    accelerator: str | None
    provider: str
    behaviour: NodeBehaviour
    live: bool = True


@dataclass
class _Node:
    name: str
    labels: dict[str, str]
    ready: bool
    gpus: int
    unschedulable: bool
    created_at: datetime
    attempt_id: str | None = None  # None: a Node no VM of ours backs


@dataclass(order=True)
class _Event:
    at: datetime
    seq: int
    kind: str = field(compare=False)  # join | ready | gpus
    attempt_id: str = field(compare=False)
    value: int = field(default=0, compare=False)


P = ParamSpec("P")
R = TypeVar("R")


def _locked(
    method: Callable[Concatenate[SimulatedCluster, P], R],
) -> Callable[Concatenate[SimulatedCluster, P], R]:
    """One caller at a time: the mock engine's threads announce VMs while the reconciler
    reads (the lock is re-entrant, so public methods may call each other)."""

    @functools.wraps(method)
    def wrapper(self: SimulatedCluster, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


def _td_out(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


def _td_in(value: Any) -> timedelta | None:
    return None if value is None else timedelta(seconds=float(value))


class SimulatedCluster(ClusterPort):
    def __init__(self, clock: Clock, *, path: Path | None = None,
                 kube_system_uid: str = "6c3a4b0e-2f1d-4e8a-9b7c-1d2e3f4a5b6c") -> None:
        self._lock = threading.RLock()
        self.clock = clock
        self.path = path
        self.kube_system_uid = kube_system_uid
        self.default_behaviour = NodeBehaviour()
        self.namespace_delete_delay = timedelta(0)  # how long a namespace stays Terminating
        self.unreachable = False
        self.denied: set[tuple[str, str]] = set()  # (verb, resource)
        self.tokens: set[str] = set()  # bootstrap token ids whose Secret exists
        self.token_attempts: dict[str, str] = {}  # token id -> its anycloud.sh/attempt label
        self.namespaces: dict[str, dict[str, str]] = {}  # name -> labels
        self.terminating: dict[str, datetime] = {}  # namespace -> when it is gone
        self.addons: dict[AddonKind, dict[str, Any] | None] = dict.fromkeys(ADDON_KINDS)
        # pool id -> {"chart", "job": object or None, "pods", "daemon_sets": lists}
        self.helm: dict[str, dict[str, Any]] = {}
        self.kube_events: dict[str, list[dict[str, Any]]] = {}  # namespace -> Event objects
        self.journal: list[Access] = []  # every write request that reached the cluster
        self.reads: list[Access] = []
        self._vms: dict[str, _Vm] = {}
        self._nodes: dict[str, _Node] = {}
        self._events: list[_Event] = []
        self._seq = 0
        self._uid = 0

    # -- the world: set-up and inspection (not journaled) ---------------------------------

    @_locked
    def announce_vm(self, attempt_id: str, pool_id: str, cluster_id: str, node_name: str,
                    gpus: int, accelerator: str | None, *, provider: str = "aws",
                    behaviour: NodeBehaviour | None = None) -> None:
        """A VM booted: its agent will register ``node_name`` as ``behaviour`` says.

        ``accelerator=None`` on a GPU VM is an agent that joins without the accelerator label.
        Announcing an attempt again (the VM was rebuilt) restarts its schedule.
        """
        self._advance()
        vm = _Vm(attempt_id, pool_id, cluster_id, node_name, gpus, accelerator, provider,
                 behaviour or self.default_behaviour)
        self._vms[attempt_id] = vm
        self._cancel(attempt_id)
        if vm.behaviour.join_after is not None:
            self._schedule(vm.behaviour.join_after, "join", attempt_id)
        self._changed()

    @_locked
    def release_vm(self, attempt_id: str) -> None:
        """The VM is gone: nothing more happens for it; its Node (if any) goes NotReady.

        An attempt whose VM never booted has nothing to release.
        """
        self._advance()
        vm = self._vms.get(attempt_id)
        if vm is None:
            return
        vm.live = False
        self._cancel(attempt_id)
        node = self._nodes.get(vm.node_name)
        if node is not None and node.attempt_id == attempt_id:
            node.ready = False
        self._changed()

    @_locked
    def vm_live(self, attempt_id: str) -> bool:
        vm = self._vms.get(attempt_id)
        return vm is not None and vm.live

    @_locked
    def add_foreign_node(self, name: str, labels: dict[str, str] | None = None, *,
                         ready: bool = True, gpus: int = 0) -> None:
        """A Node that no VM we announced backs (it may claim a pool by label or name)."""
        self._advance()
        self._nodes[name] = _Node(name, dict(labels or {}), ready, gpus, False,
                                  self.clock.now())
        self._changed()

    @_locked
    def set_node_ready(self, name: str, ready: bool) -> None:
        self._advance()
        self._node(name).ready = ready
        self._changed()

    @_locked
    def set_node_gpus(self, name: str, gpus: int) -> None:
        self._advance()
        self._node(name).gpus = gpus
        self._changed()

    @_locked
    def node(self, name: str) -> ObservedNode | None:
        self._advance()
        found = self._nodes.get(name)
        return self._observe(found) if found else None

    @_locked
    def node_names(self) -> list[str]:
        self._advance()
        return sorted(self._nodes)

    @_locked
    def add_token(self, token_id: str, attempt_id: str | None = None) -> None:
        """A bootstrap-token Secret, labelled with its attempt when given (as the node-pool
        stack labels the Secrets it writes)."""
        self.tokens.add(token_id)
        if attempt_id is not None:
            self.token_attempts[token_id] = attempt_id
        self._changed()

    @_locked
    def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.namespaces[name] = dict(labels or {})
        self._changed()

    @_locked
    def add_owned_namespace(self, name: str, pool_id: str) -> None:
        self.add_namespace(name, {MANAGED_BY: MANAGER, POOL_LABEL: pool_id})

    @_locked
    def set_addon(self, kind: AddonKind, obj: dict[str, Any] | None) -> None:
        """Put an object under the add-on name as someone else did (or remove it)."""
        self.addons[kind] = self._stored(kind, obj) if obj is not None else None
        self._changed()

    @_locked
    def add_k3s_runtime_class(self) -> None:
        """The RuntimeClass K3s's deploy controller writes when it finds the NVIDIA runtime."""
        self.set_addon("runtimeclass", {
            "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": RUNTIME_CLASS_NAME,
                         "labels": {"objectset.rio.cattle.io/hash": "b4a5ee1c0d4b9f0e"},
                         "annotations": {"objectset.rio.cattle.io/owner-name": "runtimes"}},
            "handler": "nvidia",
        })

    @_locked
    def add_foreign_addon(self, kind: AddonKind, labels: dict[str, str] | None = None) -> None:
        """An object of someone else's under the add-on name (Helm-managed by default)."""
        meta: dict[str, Any] = {"name": RUNTIME_CLASS_NAME if kind == "runtimeclass"
                                else DAEMONSET_NAME,
                                "labels": {MANAGED_BY: "Helm"} if labels is None else labels}
        if kind == "runtimeclass":
            self.set_addon(kind, {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                                  "metadata": meta, "handler": "nvidia"})
        else:
            meta["namespace"] = DAEMONSET_NAMESPACE
            self.set_addon(kind, {"apiVersion": "apps/v1", "kind": "DaemonSet",
                                  "metadata": meta, "spec": {
                                      "selector": {"matchLabels": {"name": "nvidia-dp"}},
                                      "template": {"metadata": {"labels": {"name": "nvidia-dp"}},
                                                   "spec": {"containers": []}}}})

    @_locked
    def edit_addon(self, kind: AddonKind, edit: Callable[[dict[str, Any]], None]) -> None:
        """Someone else edits the stored object in place."""
        obj = self.addons[kind]
        if obj is None:
            raise KeyError(f"no {ADDON_NAME[kind]} to edit")
        edit(obj)
        self._bump(obj)
        self._changed()

    @_locked
    def apply_addon(self, kind: AddonKind, obj: dict[str, Any]) -> None:
        """Our add-on stack writes the object (create or update); journaled like a port write."""
        verb = "create" if self.addons[kind] is None else "patch"
        self._write(verb, ADDON_RESOURCE[kind], ADDON_NAME[kind])
        self.addons[kind] = self._stored(kind, obj)
        self._changed()

    @_locked
    def set_helm_chart(self, pool_id: str, obj: dict[str, Any] | None) -> None:
        """The pool's ingress HelmChart (None: deleted, with the release's objects)."""
        if obj is None:
            self.helm.pop(pool_id, None)
        else:
            self._helm(pool_id)["chart"] = self._copy(obj)
        self._changed()

    @_locked
    def set_helm_job(self, pool_id: str, obj: dict[str, Any] | None) -> None:
        """The helm-controller's install Job for the pool's HelmChart (None: not created)."""
        self._helm(pool_id)["job"] = self._copy(obj) if obj is not None else None
        self._changed()

    @_locked
    def set_helm_pods(self, pool_id: str, pods: list[dict[str, Any]]) -> None:
        """The install Job's Pods (labelled with its name when listed)."""
        self._helm(pool_id)["pods"] = [self._copy(p) for p in pods]
        self._changed()

    @_locked
    def set_ingress_daemon_set(self, pool_id: str, obj: dict[str, Any] | None) -> None:
        """The DaemonSet Helm created in the release namespace (None: not yet / removed)."""
        self._helm(pool_id)["daemon_sets"] = [self._copy(obj)] if obj is not None else []
        self._changed()

    @_locked
    def add_kube_event(self, namespace: str, event: dict[str, Any]) -> None:
        """An Event object recorded in ``namespace`` (listed in the order added)."""
        self.kube_events.setdefault(namespace, []).append(self._copy(event))
        self._changed()

    @_locked
    def deny(self, verb: str, resource: str) -> None:
        """RBAC refuses this verb on this resource from now on."""
        self.denied.add((verb, resource))
        self._changed()

    @_locked
    def allow(self, verb: str, resource: str) -> None:
        self.denied.discard((verb, resource))
        self._changed()

    @_locked
    def set_unreachable(self, unreachable: bool) -> None:
        self.unreachable = unreachable
        self._changed()

    @_locked
    def writes_to(self, resource: str) -> list[Access]:
        return [w for w in self.journal if w.resource == resource]

    # -- the port ---------------------------------------------------------------------------

    @_locked
    def nodes_claiming(self, pool_id: str, issued_names: set[str]) -> list[ObservedNode]:
        self._read("list", "nodes", f"{POOL_LABEL}={pool_id}")
        found = {n.name for n in self._nodes.values() if n.labels.get(POOL_LABEL) == pool_id}
        for name in sorted(issued_names - found):
            self._read("get", "nodes", name)
            if name in self._nodes:
                found.add(name)
        self._changed()
        return [self._observe(self._nodes[n]) for n in sorted(found)]

    @_locked
    def cordon_node(self, name: str) -> None:
        self._write("patch", "nodes", name)
        node = self._nodes.get(name)
        if node is not None:
            node.unschedulable = True
        self._changed()

    @_locked
    def label_node(self, name: str, key: str, value: str | None) -> None:
        self._write("patch", "nodes", name)
        node = self._nodes.get(name)
        if node is not None:
            if value is None:
                node.labels.pop(key, None)
            else:
                node.labels[key] = value
        self._changed()

    @_locked
    def delete_node(self, name: str) -> None:
        self._write("delete", "nodes", name)
        node = self._nodes.pop(name, None)
        vm = self._vms.get(node.attempt_id) if node and node.attempt_id else None
        if vm is not None and vm.live:
            # The kubelet of a running VM registers its Node again.
            self._cancel(vm.attempt_id)
            if vm.behaviour.reregister_after is not None:
                self._schedule(vm.behaviour.reregister_after, "join", vm.attempt_id)
        self._changed()

    @_locked
    def delete_bootstrap_token(self, token_id: str) -> None:
        self._write("delete", "secrets", token_secret_name(token_id))
        self.tokens.discard(token_id)
        self.token_attempts.pop(token_id, None)
        self._changed()

    @_locked
    def delete_attempt_tokens(self, attempt_id: str) -> int:
        self._gate("list", "secrets")
        found = sorted(t for t, a in self.token_attempts.items()
                       if a == attempt_id and t in self.tokens)
        for token_id in found:
            self._write("delete", "secrets", token_secret_name(token_id))
            self.tokens.discard(token_id)
            del self.token_attempts[token_id]
        self._changed()
        return len(found)

    @_locked
    def namespace_owner(self, name: str, pool_id: str) -> NamespaceOwner:
        self._read("get", "namespaces", name)
        self._changed()
        if name not in self.namespaces:
            return "absent"
        labels = self.namespaces[name]
        if labels.get(MANAGED_BY) == MANAGER and labels.get(POOL_LABEL) == pool_id:
            return "ours"
        return "foreign"

    @_locked
    def delete_namespace(self, name: str) -> None:
        self._write("delete", "namespaces", name)
        if name in self.namespaces and name not in self.terminating:
            self.terminating[name] = self.clock.now() + self.namespace_delete_delay
        self._advance()  # with no delay it is gone at once
        self._changed()

    @_locked
    def service_objects_removed(self, namespace: str) -> bool:
        self._read("get", "namespaces", namespace)
        self._changed()
        return namespace not in self.namespaces

    @_locked
    def addon_objects(self, cluster_id: str) -> AddonObservation:
        self._read("get", "runtimeclasses", ADDON_NAME["runtimeclass"])
        self._read("get", "daemonsets", ADDON_NAME["daemonset"])
        self._changed()
        return AddonObservation(cluster_id=cluster_id,
                                runtime_class=copy.deepcopy(self.addons["runtimeclass"]),
                                daemonset=copy.deepcopy(self.addons["daemonset"]))

    @_locked
    def write_addon_labels(self, cluster_id: str, kinds: Collection[AddonKind]) -> None:
        for kind in ADDON_KINDS:
            if kind not in kinds:
                continue
            self._write("patch", ADDON_RESOURCE[kind], ADDON_NAME[kind])
            obj = self.addons[kind]
            if obj is not None:
                labels = obj.setdefault("metadata", {}).setdefault("labels", {})
                labels.update({MANAGED_BY: MANAGER, CLUSTER_LABEL: cluster_id})
                self._bump(obj)
            self._changed()

    @_locked
    def delete_addon_object(self, kind: AddonKind) -> None:
        self._write("delete", ADDON_RESOURCE[kind], ADDON_NAME[kind])
        self.addons[kind] = None
        self._changed()

    @_locked
    def ingress_helm_chart(self, pool_id: str) -> dict[str, Any] | None:
        self._read("get", "helmcharts", f"{HELM_NAMESPACE}/{ingress_release_name(pool_id)}")
        chart = (self.helm.get(pool_id) or {}).get("chart")
        return copy.deepcopy(chart) if chart is not None else None

    @_locked
    def delete_ingress_helm_chart(self, pool_id: str) -> None:
        self._write("delete", "helmcharts", f"{HELM_NAMESPACE}/{ingress_release_name(pool_id)}")
        self.helm.pop(pool_id, None)
        self._changed()

    @_locked
    def apply_helm_chart(self, pool_id: str, obj: dict[str, Any] | None) -> None:
        """The ingress release stack writes (None: deletes) the pool's HelmChart; journaled
        like a port write, and refused like one by RBAC."""
        name = f"{HELM_NAMESPACE}/{ingress_release_name(pool_id)}"
        exists = (self.helm.get(pool_id) or {}).get("chart") is not None
        if obj is None:
            if exists:
                self._write("delete", "helmcharts", name)
            self.helm.pop(pool_id, None)
        else:
            self._write("patch" if exists else "create", "helmcharts", name)
            self._helm(pool_id)["chart"] = self._copy(obj)
        self._changed()

    @_locked
    def ingress_objects(self, pool_id: str) -> IngressObjects:
        from automation.kube.ingress import job_name

        release = ingress_release_name(pool_id)
        self._read("get", "helmcharts", f"{HELM_NAMESPACE}/{release}")
        self._changed()
        stored = self.helm.get(pool_id)
        if stored is None or stored.get("chart") is None:
            return IngressObjects(pool_id=pool_id, release=release)
        found = IngressObjects(pool_id=pool_id, release=release,
                               helm_chart=copy.deepcopy(stored["chart"]))
        job = job_name(found)
        self._read("get", "jobs", f"{HELM_NAMESPACE}/{job}")
        self._read("list", "pods", f"{HELM_NAMESPACE}/{JOB_NAME_LABEL}={job}")
        self._read("list", "daemonsets", release)
        daemon_sets = tuple(copy.deepcopy(stored.get("daemon_sets") or []))
        entry: tuple[ObservedNode, ...] = ()
        if daemon_sets:
            self._read("list", "nodes", f"{INGRESS_ENTRY_LABEL}={pool_id}")
            entry = tuple(self._observe(n) for _, n in sorted(self._nodes.items())
                          if n.labels.get(INGRESS_ENTRY_LABEL) == pool_id)
        where = release if daemon_sets else HELM_NAMESPACE
        self._read("list", "events", where)
        self._changed()
        return IngressObjects(
            pool_id=pool_id, release=release, helm_chart=found.helm_chart,
            job=copy.deepcopy(stored.get("job")),
            pods=tuple(copy.deepcopy(stored.get("pods") or [])), daemon_sets=daemon_sets,
            entry_nodes=entry, events=tuple(copy.deepcopy(self.kube_events.get(where, []))))

    # -- internals --------------------------------------------------------------------------

    def _helm(self, pool_id: str) -> dict[str, Any]:
        return self.helm.setdefault(pool_id, {"chart": None, "job": None, "pods": [],
                                              "daemon_sets": []})

    def _copy(self, obj: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(obj)
        self._bump(stored)
        return stored

    def _gate(self, verb: str, resource: str) -> None:
        self._advance()  # the world moved on since the last request
        if self.unreachable:
            raise ClusterUnavailable(
                f"cannot reach the simulated cluster ({verb} {resource}): connection refused")
        if (verb, resource) in self.denied:
            raise ClusterForbidden(verb, resource, NAMESPACED.get(resource))

    def _read(self, verb: str, resource: str, name: str) -> None:
        self._gate(verb, resource)
        self.reads.append(Access(verb, resource, name))

    def _write(self, verb: str, resource: str, name: str) -> None:
        self._gate(verb, resource)
        self.journal.append(Access(verb, resource, name))

    def _node(self, name: str) -> _Node:
        self._advance()
        if name not in self._nodes:
            raise KeyError(f"no Node {name} in the simulated cluster")
        return self._nodes[name]

    def _observe(self, node: _Node) -> ObservedNode:
        return ObservedNode(name=node.name, labels=dict(node.labels), ready=node.ready,
                            gpu_allocatable=node.gpus, unschedulable=node.unschedulable,
                            created_at=node.created_at)

    def _stored(self, kind: AddonKind, obj: dict[str, Any]) -> dict[str, Any]:
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        self._uid += 1
        meta.setdefault("uid", f"00000000-0000-4000-9000-{self._uid:012d}")
        self._bump(stored)
        return stored

    def _bump(self, obj: dict[str, Any]) -> None:
        self._seq += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._seq)

    def _schedule(self, after: timedelta, kind: str, attempt_id: str, value: int = 0) -> None:
        self._seq += 1
        self._events.append(_Event(self.clock.now() + after, self._seq, kind, attempt_id, value))

    def _schedule_at(self, at: datetime, kind: str, attempt_id: str, value: int = 0) -> None:
        self._seq += 1
        self._events.append(_Event(at, self._seq, kind, attempt_id, value))

    def _cancel(self, attempt_id: str) -> None:
        self._events = [e for e in self._events if e.attempt_id != attempt_id]

    def _advance(self) -> None:
        """Apply every event due by now, in (time, sequence) order."""
        now = self.clock.now()
        for name, gone in sorted(self.terminating.items()):
            if gone <= now:
                self.namespaces.pop(name, None)
                del self.terminating[name]
        while True:
            due = [e for e in self._events if e.at <= now]
            if not due:
                return
            event = min(due)
            self._events.remove(event)
            self._apply(event)

    def _apply(self, event: _Event) -> None:
        vm = self._vms.get(event.attempt_id)
        if vm is None or not vm.live:
            return
        b = vm.behaviour
        if event.kind == "join":
            labels = {CLUSTER_LABEL: vm.cluster_id, POOL_LABEL: vm.pool_id,
                      PROVIDER_LABEL: vm.provider, ATTEMPT_LABEL: vm.attempt_id}
            if vm.accelerator:
                labels[ACCELERATOR_LABEL] = vm.accelerator
            self._nodes[vm.node_name] = _Node(vm.node_name, labels, False, 0, False, event.at,
                                              vm.attempt_id)
            if b.ready_after is not None:
                self._schedule_at(event.at + b.ready_after, "ready", vm.attempt_id)
            return
        node = self._nodes.get(vm.node_name)
        if node is None or node.attempt_id != vm.attempt_id:
            return  # the Node was removed meanwhile
        if event.kind == "ready":
            node.ready = True
            if vm.gpus:
                shown = vm.gpus if b.advertised_gpus is None else b.advertised_gpus
                devices_at = event.at + b.devices_after
                self._schedule_at(devices_at, "gpus", vm.attempt_id, shown)
                if b.drop_devices_after is not None:
                    self._schedule_at(devices_at + b.drop_devices_after, "gpus", vm.attempt_id, 0)
        elif event.kind == "gpus":
            node.gpus = event.value

    # -- persistence ------------------------------------------------------------------------

    def _changed(self) -> None:
        if self.path is not None:
            self.save(self.path)

    @_locked
    def to_json(self) -> dict[str, Any]:
        def node(n: _Node) -> dict[str, Any]:
            return {**asdict(n), "created_at": n.created_at.isoformat()}

        def vm(v: _Vm) -> dict[str, Any]:
            return {**asdict(v), "behaviour": v.behaviour.to_json()}

        return {
            "version": FORMAT_VERSION,
            "kube_system_uid": self.kube_system_uid,
            "default_behaviour": self.default_behaviour.to_json(),
            "namespace_delete_delay": _td_out(self.namespace_delete_delay),
            "unreachable": self.unreachable,
            "denied": sorted(self.denied),
            "tokens": sorted(self.tokens),
            "token_attempts": dict(sorted(self.token_attempts.items())),
            "namespaces": self.namespaces,
            "terminating": {k: v.isoformat() for k, v in sorted(self.terminating.items())},
            "addons": self.addons,
            "helm": self.helm,
            "kube_events": self.kube_events,
            "journal": [list(a) for a in self.journal],
            "reads": [list(a) for a in self.reads],
            "vms": [vm(v) for v in self._vms.values()],
            "nodes": [node(n) for n in self._nodes.values()],
            "events": [{"at": e.at.isoformat(), "seq": e.seq, "kind": e.kind,
                        "attempt_id": e.attempt_id, "value": e.value} for e in self._events],
            "seq": self._seq,
            "uid": self._uid,
        }

    @_locked
    def save(self, path: Path) -> None:
        """Write the whole state atomically: a reader sees the old file or the new one."""
        data = json.dumps(self.to_json(), indent=1, sort_keys=True).encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_file(path, data)

    @classmethod
    def load(cls, path: Path, clock: Clock) -> SimulatedCluster:
        """Restore a saved cluster; later changes are saved back to the same file."""
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot load the simulated cluster from {path}: {exc}") from exc
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"{path}: simulated cluster format {data.get('version')!r}, "
                             f"expected {FORMAT_VERSION}")
        sim = cls(clock, kube_system_uid=data["kube_system_uid"])
        sim.default_behaviour = NodeBehaviour.from_json(data["default_behaviour"])
        sim.namespace_delete_delay = _td_in(data["namespace_delete_delay"]) or timedelta(0)
        sim.unreachable = data["unreachable"]
        sim.denied = {(v, r) for v, r in data["denied"]}
        sim.tokens = set(data["tokens"])
        sim.token_attempts = dict(data.get("token_attempts") or {})
        sim.namespaces = {k: dict(v) for k, v in data["namespaces"].items()}
        sim.terminating = {k: datetime.fromisoformat(v) for k, v in data["terminating"].items()}
        sim.addons = {kind: data["addons"].get(kind) for kind in ADDON_KINDS}
        sim.helm = dict(data.get("helm") or {})
        sim.kube_events = {k: list(v) for k, v in (data.get("kube_events") or {}).items()}
        sim.journal = [Access(*a) for a in data["journal"]]
        sim.reads = [Access(*a) for a in data["reads"]]
        for v in data["vms"]:
            sim._vms[v["attempt_id"]] = _Vm(**{**v, "behaviour":
                                                NodeBehaviour.from_json(v["behaviour"])})
        for n in data["nodes"]:
            sim._nodes[n["name"]] = _Node(**{**n, "created_at":
                                              datetime.fromisoformat(n["created_at"])})
        sim._events = [_Event(datetime.fromisoformat(e["at"]), e["seq"], e["kind"],
                              e["attempt_id"], e["value"]) for e in data["events"]]
        sim._seq = data["seq"]
        sim._uid = data["uid"]
        sim.path = path
        return sim
