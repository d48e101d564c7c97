"""Objects for the real control plane: written with kubectl, as a user or a kubelet would.

A Node created with ``kwok=True`` is played by kwok: it goes Ready and Pods bound to it run.
Other Nodes stay as written (no kubelet reports for them).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from automation.devcluster.control_plane import KWOK_ANNOTATION, ControlPlane

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    """Poll until ``probe`` returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def get(plane: ControlPlane, resource: str, name: str,
        namespace: str | None = None) -> dict[str, Any] | None:
    where = ["-n", namespace] if namespace else []
    done = plane.kubectl("get", resource, name, *where, "-o", "json", check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


def delete(plane: ControlPlane, resource: str, *names: str, namespace: str | None = None,
           wait: bool = False) -> None:
    where = ["-n", namespace] if namespace else []
    plane.kubectl("delete", resource, *names, *where, "--ignore-not-found",
                  f"--wait={str(wait).lower()}")


def node(plane: ControlPlane, name: str, labels: dict[str, str] | None = None, *,
         kwok: bool = True, gpus: int | None = None,
         taints: list[dict[str, str]] | None = None) -> None:
    """Register a Node as a K3s agent would; kwok plays its kubelet when ``kwok``."""
    meta: dict[str, Any] = {"name": name, "labels": {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", **(labels or {})}}
    if kwok:
        meta["annotations"] = {KWOK_ANNOTATION: "fake"}
    spec: dict[str, Any] = {"providerID": f"k3s://{name}"}
    if taints:
        spec["taints"] = taints
    plane.apply({"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec})
    if gpus is not None:
        resources = {"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
        plane.patch_status("node", name, {"capacity": resources, "allocatable": resources})


def ready(plane: ControlPlane, name: str) -> bool:
    obj = get(plane, "node", name) or {}
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def namespace(plane: ControlPlane, name: str, labels: dict[str, str] | None = None) -> None:
    plane.apply({"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": name, "labels": labels or {}}})


def daemon_set(name: str, namespace: str, labels: dict[str, str] | None = None,
               app: str = "x", node_selector: dict[str, str] | None = None,
               image: str = "registry.k8s.io/pause:3.10") -> dict[str, Any]:
    """A minimal valid DaemonSet (selector ``app=<app>``)."""
    pod: dict[str, Any] = {"containers": [{"name": "main", "image": image}]}
    if node_selector:
        pod["nodeSelector"] = node_selector
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}, "spec": pod}}}
