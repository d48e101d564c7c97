"""The kubelets of a simulated cloud's VMs, on a real API server.

``anycloud demo --cluster local`` keeps the cloud simulated (``CloudSimulator`` under the
mock engine) and makes the cluster real (``control_plane.start``). ``Kubelets`` joins the
two, hooked on ``CloudSimulator.on_vm_created`` and ``on_vm_deleted``:

* a VM that boots has its K3s agent join ``BOOT_DELAY`` later on the simulated clock (the
  simulated cluster's default): the Node is registered as the agent's config file says
  (``components.join_script.agent_config``: node name, labels, taint), with the VM type's
  CPU and memory and its public address, annotated so that kwok plays its kubelet (kwok
  makes it Ready). A VM that never boots registers nothing.
* a GPU Node advertises ``nvidia.com/gpu`` once the device plugin runs on it, as a real
  kubelet does: when a Pod of the add-on DaemonSet (kube-system/
  anycloud-nvidia-device-plugin) bound to the Node is Running, its status gets the VM
  type's GPU count. No device plugin on the Node, no GPUs.
* a released VM's Node is deleted (if the reconciler has not removed it already).

The reconciler's clock is simulated and accelerated; kwok, the scheduler and the DaemonSet
controller work in real time. ``settle`` waits (in real time) until what the cluster does
on its own has happened (registered Nodes Ready, the device plugin's GPUs advertised)
before the demo moves the simulated clock on: a Node never looks NotReady, or a GPU Node
device-less, for simulated minutes because a real process took a second.

Everything is written with the admin kubeconfig of the local control plane (a real agent
authenticates with its bootstrap token and then its kubelet certificate).
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from automation.catalog.store import Catalog, load_catalog
from automation.clock import Clock
from automation.devcluster.control_plane import KWOK_ANNOTATION
from automation.errors import AnycloudError
from automation.kube.port import DAEMONSET_NAME, DAEMONSET_NAMESPACE, GPU_RESOURCE
from automation.simulators.world import PROVIDER_OF

if TYPE_CHECKING:
    from automation.simulators.cloud import CloudSimulator, SimVm

Report = Callable[[str, str, dict[str, Any]], None]

# As the simulated cluster's default NodeBehaviour: the agent registers 2 minutes after the
# VM was created (boot, cloud-init, the K3s download).
BOOT_DELAY = timedelta(minutes=2)
MERGE_PATCH = "application/merge-patch+json"
PLUGIN_POD_LABEL = f"app.kubernetes.io/name={DAEMONSET_NAME}"
# What K3s's kubelet reports beside the VM type's CPU and memory.
MAX_PODS = "110"


class KubeletFailed(AnycloudError):
    default_code = "KUBELET_FAILED"


@dataclass
class Joined:
    """A Node this bridge registered for a VM."""

    attempt_id: str
    pool_id: str
    node_name: str
    gpus: int  # what the VM type has; advertised once the device plugin runs
    uid: str
    advertised: bool = False
    gone: bool = False  # deleted (by the reconciler or on the VM's release)


@dataclass
class _Pending:
    vm: SimVm
    due: datetime


@dataclass
class _History:
    registered: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # by this bridge, on a VM's release


def _taint(spec: str) -> dict[str, str]:
    """``key=value:Effect`` (K3s ``node-taint``) as a Node taint."""
    pair, _, effect = spec.rpartition(":")
    key, _, value = pair.partition("=")
    return {"key": key, "value": value, "effect": effect}


def _ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def _pod_running(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or [])


class Kubelets:
    """Registers, advertises and deletes the Nodes of a simulated cloud's VMs."""

    def __init__(self, kubeconfig: Path, clock: Clock, *, server_url: str, ca_sha256: str,
                 report: Report | None = None, catalog: Catalog | None = None,
                 boot_delay: timedelta = BOOT_DELAY, settle_timeout: float = 60.0) -> None:
        self.kubeconfig = kubeconfig
        self.clock = clock
        self.server_url = server_url  # what the agent config names (the public address)
        self.ca_sha256 = ca_sha256
        self.report = report or (lambda kind, message, data: None)
        self.catalog = catalog or load_catalog()
        self.boot_delay = boot_delay
        self.settle_timeout = settle_timeout
        self.joined: dict[str, Joined] = {}  # by attempt id
        self.history = _History()
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.RLock()
        self._api: Any = None

    # -- wiring -----------------------------------------------------------------------------

    def attach(self, cloud: CloudSimulator) -> None:
        cloud.on_vm_created.append(self.vm_created)
        cloud.on_vm_deleted.append(self.vm_deleted)

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    # -- the cloud's hooks (called from the mock engine's threads) -----------------------

    def vm_created(self, vm: SimVm) -> None:
        with self._lock:
            if not vm.boots:
                self.report("kubelet", f"VM of {vm.attempt_id} (simulated) never boots: no "
                            "kubelet, no Node", {"attempt": vm.attempt_id, "pool": vm.pool_id})
                return
            self._pending[vm.attempt_id] = _Pending(vm, self.clock.now() + self.boot_delay)

    def vm_deleted(self, vm: SimVm) -> None:
        with self._lock:
            self._pending.pop(vm.attempt_id, None)
            joined = self.joined.get(vm.attempt_id)
            if joined is None or joined.gone:
                return
            found = self._delete_node(joined.node_name)
            joined.gone = True
            data = {"node": joined.node_name, "attempt": vm.attempt_id, "pool": vm.pool_id,
                    "deleted": found}
            if found:
                self.history.deleted.append(joined.node_name)
                self.report("kubelet", f"VM of {vm.attempt_id} released: its Node "
                            f"{joined.node_name} deleted from the API server", data)
            else:
                self.report("kubelet", f"VM of {vm.attempt_id} released: its Node "
                            f"{joined.node_name} was already gone from the API server", data)

    # -- moving on --------------------------------------------------------------------------

    def sync(self) -> None:
        """Register the Nodes whose VMs have booted by now; advertise devices that run."""
        now = self.clock.now()
        with self._lock:
            due = sorted((p for p in self._pending.values() if p.due <= now),
                         key=lambda p: p.vm.attempt_id)
            for p in due:
                del self._pending[p.vm.attempt_id]
                self._register(p.vm)
            self._advertise_devices()

    def settle(self) -> None:
        """Wait, in real time, until every registered Node is Ready and every GPU Node whose
        device plugin the cluster runs advertises its GPUs; raise if that does not happen
        within ``settle_timeout`` seconds."""
        deadline = time.monotonic() + self.settle_timeout
        while True:
            with self._lock:
                waiting = self._waiting_for()
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise KubeletFailed(
                    f"after {self.settle_timeout:.0f} s of real time, still waiting for "
                    + "; ".join(waiting) + ": kwok plays the kubelets, the scheduler and "
                    "the DaemonSet controller place the device plugin (see the logs under "
                    "the control plane's logs/ directory)")
            time.sleep(0.1)

    def _waiting_for(self) -> list[str]:
        self._advertise_devices()
        live = [j for j in self.joined.values() if not j.gone]
        if not live:
            return []
        nodes = {n["metadata"]["name"]: n for n in self._list_nodes()}
        plugin = self._daemonset() is not None
        waiting = []
        for j in live:
            node = nodes.get(j.node_name)
            if node is None:
                j.gone = True  # the reconciler removed it
            elif not _ready(node):
                waiting.append(f"Node {j.node_name} to be Ready")
            elif j.gpus and plugin and not j.advertised:
                waiting.append(f"the device plugin on Node {j.node_name}")
        return waiting

    # -- the API server ---------------------------------------------------------------------

    def _client(self) -> Any:
        if self._api is None:
            from kubernetes import client, config

            cfg = client.Configuration()
            config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=cfg,
                                    persist_config=False)
            self._api = client.ApiClient(cfg)
        return self._api

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self._client())

    def _call(self, what: str, fn: Callable[[], Any], *, absent_ok: bool = False) -> Any:
        """The parsed JSON answer; None for a 404 when ``absent_ok``."""
        from kubernetes.client.exceptions import ApiException

        try:
            return json.loads(fn().data)
        except ApiException as exc:
            if absent_ok and exc.status == 404:
                return None
            raise KubeletFailed(f"the API server answered {exc.status} {exc.reason} to "
                                f"{what}: {exc.body!s}") from exc

    def _register(self, vm: SimVm) -> None:
        from components.join_script import JoinSpec, agent_config
        from stacks.pins import load_pins

        provider = next((p for prefix, p in PROVIDER_OF.items()
                         if vm.resource_type.startswith(prefix)), "aws")
        spec_vm = self.catalog.providers[provider].vm_type(vm.vm_type)
        gpus = spec_vm.gpus if spec_vm else 0
        join = JoinSpec(provider=provider, server_url=self.server_url,  # type: ignore[arg-type]
                        ca_sha256=self.ca_sha256, cluster_id=vm.cluster_id,
                        pool_id=vm.pool_id, attempt_id=vm.attempt_id, k3s=load_pins().k3s,
                        accelerator="nvidia" if gpus else None)
        # What the agent reads from /etc/rancher/k3s/config.yaml (no token: not needed here).
        agent = agent_config(join, "")
        name = str(agent["node-name"])
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                  "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "k3s",
                  **dict(str(item).split("=", 1) for item in agent["node-label"])}
        resources = {"cpu": str(spec_vm.vcpus if spec_vm else 2),
                     "memory": f"{int((spec_vm.memory_gib if spec_vm else 4) * 1024)}Mi",
                     "pods": MAX_PODS}
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {KWOK_ANNOTATION: "fake"}},
            "spec": {"providerID": f"k3s://{name}",
                     "taints": [_taint(str(t)) for t in agent["node-taint"]]},
            # The simulated VM has one address, the public one: K3s registers it as the
            # external IP (node-external-ip) and, here, as the internal one too (with both
            # an InternalIP and a Hostname, kwok keeps the addresses as registered).
            "status": {"capacity": resources, "allocatable": resources,
                       "addresses": [{"type": "InternalIP", "address": vm.public_ip},
                                     {"type": "ExternalIP", "address": vm.public_ip},
                                     {"type": "Hostname", "address": name}]},
        }
        core = self._core()
        created = self._call(f"create Node {name}",
                             lambda: core.create_node(body, _preload_content=False))
        meta = created.get("metadata") or {}
        joined = Joined(vm.attempt_id, vm.pool_id, name, gpus, str(meta.get("uid")))
        self.joined[vm.attempt_id] = joined
        self.history.registered.append(name)
        taints = ", ".join(f"{t['key']}={t['value']}:{t['effect']}" for t in body["spec"]["taints"])
        self.report("kubelet", f"VM of {vm.attempt_id} booted: its kubelet registered Node {name} "
                    f"on the API server (uid {joined.uid[:8]}…, taint {taints}"
                    + (f"; {gpus} GPU(s) once the device plugin runs" if gpus else "") + ")",
                    {"node": name, "attempt": vm.attempt_id, "pool": vm.pool_id,
                     "uid": joined.uid, "created": meta.get("creationTimestamp"),
                     "labels": (meta.get("labels") or {}),
                     "taints": (created.get("spec") or {}).get("taints") or []})

    def _delete_node(self, name: str) -> bool:
        """True if the Node was there."""
        core = self._core()
        return self._call(f"delete Node {name}",
                          lambda: core.delete_node(name, _preload_content=False),
                          absent_ok=True) is not None

    def _list_nodes(self) -> list[dict[str, Any]]:
        core = self._core()
        listed = self._call("list Nodes", lambda: core.list_node(_preload_content=False))
        return list(listed.get("items") or [])

    def _daemonset(self) -> dict[str, Any] | None:
        from kubernetes import client

        apps = client.AppsV1Api(self._client())
        return self._call(  # type: ignore[no-any-return]
            f"get DaemonSet {DAEMONSET_NAMESPACE}/{DAEMONSET_NAME}",
            lambda: apps.read_namespaced_daemon_set(DAEMONSET_NAME, DAEMONSET_NAMESPACE,
                                                    _preload_content=False),
            absent_ok=True)

    def _plugin_pods(self) -> list[dict[str, Any]]:
        core = self._core()
        listed = self._call("list device-plugin Pods", lambda: core.list_namespaced_pod(
            DAEMONSET_NAMESPACE, label_selector=PLUGIN_POD_LABEL, _preload_content=False))
        return list(listed.get("items") or [])

    def _advertise_devices(self) -> None:
        """What the kubelet's device manager does once the NVIDIA device plugin registers."""
        wanting = {j.node_name: j for j in self.joined.values()
                   if j.gpus and not j.advertised and not j.gone}
        if not wanting:
            return
        core = self._core()
        for pod in self._plugin_pods():
            node_name = (pod.get("spec") or {}).get("nodeName")
            joined = wanting.get(node_name or "")
            if joined is None or not _pod_running(pod):
                continue
            count = str(joined.gpus)
            patch = {"status": {"capacity": {GPU_RESOURCE: count},
                                "allocatable": {GPU_RESOURCE: count}}}
            found = self._call(f"patch Node {joined.node_name} status", functools.partial(
                core.patch_node_status, joined.node_name, patch, _content_type=MERGE_PATCH,
                _preload_content=False), absent_ok=True)
            if found is None:
                joined.gone = True
                continue
            joined.advertised = True
            pod_name = (pod.get("metadata") or {}).get("name")
            self.report("kubelet", f"device plugin Pod {pod_name} runs on Node "
                        f"{joined.node_name}: the Node advertises {count} {GPU_RESOURCE}",
                        {"node": joined.node_name, "pod": pod_name, "gpus": joined.gpus})

    # -- what is really there -----------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The Nodes, the NVIDIA add-on objects and the device plugin's Pods as the API
        server returns them now, and which of the Nodes registered here are gone."""
        from kubernetes import client

        nodes = self._list_nodes()
        present = {n["metadata"]["name"] for n in nodes}
        gone = [name for name in self.history.registered if name not in present]
        # Absent from the list, and a GET says 404: really deleted.
        core = self._core()
        confirmed = [name for name in gone if self._call(
            f"get Node {name}", functools.partial(core.read_node, name, _preload_content=False),
            absent_ok=True) is None]
        node_api = client.NodeV1Api(self._client())
        runtime_class = self._call("get RuntimeClass nvidia", lambda: node_api.read_runtime_class(
            "nvidia", _preload_content=False), absent_ok=True)
        daemonset = self._daemonset()
        return {
            "server": self._client().configuration.host,
            "nodes": [_node_summary(n) for n in sorted(nodes, key=lambda n: n["metadata"]["name"])],
            "registeredNodes": list(self.history.registered),
            "deletedNodes": confirmed,
            "runtimeClass": _object_summary(runtime_class) if runtime_class else None,
            "daemonSet": _daemonset_summary(daemonset) if daemonset else None,
            "devicePluginPods": [
                {"name": p["metadata"]["name"], "node": (p.get("spec") or {}).get("nodeName"),
                 "phase": (p.get("status") or {}).get("phase"), "ready": _pod_running(p)}
                for p in self._plugin_pods()],
        }


def _managers(obj: dict[str, Any]) -> list[str]:
    """Who wrote the object (its managedFields), as the API server recorded it."""
    return sorted({str(m.get("manager")) for m in (obj.get("metadata") or {}).get(
        "managedFields") or []})


def _object_summary(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {"name": meta.get("name"), "namespace": meta.get("namespace"),
            "uid": meta.get("uid"), "created": meta.get("creationTimestamp"),
            "labels": meta.get("labels") or {}, "managers": _managers(obj)}


def _daemonset_summary(obj: dict[str, Any]) -> dict[str, Any]:
    status = obj.get("status") or {}
    containers = (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers") or [{}]
    return {**_object_summary(obj), "image": containers[0].get("image"),
            "desired": status.get("desiredNumberScheduled", 0),
            "ready": status.get("numberReady", 0)}


def _node_summary(node: dict[str, Any]) -> dict[str, Any]:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return {
        "name": meta["name"], "uid": meta.get("uid"), "created": meta.get("creationTimestamp"),
        "ready": _ready(node), "unschedulable": bool(spec.get("unschedulable", False)),
        "gpus": int((status.get("allocatable") or {}).get(GPU_RESOURCE, 0) or 0),
        "externalIp": addresses.get("ExternalIP"),
        "labels": {k: v for k, v in (meta.get("labels") or {}).items()
                   if k.startswith("anycloud.sh/")},
        "taints": [f"{t.get('key')}={t.get('value', '')}:{t.get('effect')}"
                   for t in spec.get("taints") or []],
    }
