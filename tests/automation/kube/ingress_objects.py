"""A pool's ingress release on the real control plane, written by the test that plays the
parts no process plays here.

No helm-controller runs: the test writes the HelmChart's status and the install Job as K3s's
helm-controller would. The Job controller then really creates the install Pods and the
scheduler really binds them. On a kwok Node kwok plays the kubelet (the Pod runs, then
succeeds, and the Job completes); on a plain Node nothing does, and the test writes the
Pod's status and the kubelet's Events itself. Helm is played by writing the release
namespace and a Traefik-like DaemonSet, which the DaemonSet controller and the scheduler act
on for real.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from automation.devcluster.control_plane import ControlPlane
from automation.kube.port import HELM_NAMESPACE, ingress_release_name
from tests.automation.kube import objects
from tests.automation.kube.objects import wait_for

JOB_LABEL = "batch.kubernetes.io/job-name"
ENTRY_LABEL = "anycloud.sh/ingress-entry"
# K3s's install Jobs run before the CNI is up, so they tolerate a Node that is not Ready;
# the test's Nodes that no kubelet plays carry nothing else.
TOLERATE_NOT_READY = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                       "effect": "NoSchedule"},
                      {"key": "CriticalAddonsOnly", "operator": "Exists"}]
HELM_IMAGE = "rancher/klipper-helm:v0.9.8-build20250709"


def labels(pool_id: str) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/cluster": "c-1",
            "anycloud.sh/node-pool": pool_id}


def stamp(at: datetime | None = None) -> str:
    """A legacy Event or status time: whole seconds, as the API server stores them."""
    return (at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class PoolRelease:
    """The names of one pool's ingress release on the control plane."""

    plane: ControlPlane
    pool_id: str

    @property
    def release(self) -> str:
        return ingress_release_name(self.pool_id)

    @property
    def job(self) -> str:
        return f"helm-install-{self.release}"

    # -- what anycloud's stack writes, and the helm-controller's part -----------------------

    def helm_chart(self, *, job_created: bool = True) -> None:
        """The HelmChart the node-pool stack writes; with ``job_created``, the status the
        helm-controller writes once it created the install Job."""
        self.plane.apply({
            "apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
            "metadata": {"name": self.release, "namespace": HELM_NAMESPACE,
                         "labels": labels(self.pool_id)},
            "spec": {"repo": "https://traefik.github.io/charts", "chart": "traefik",
                     "version": "37.1.1", "targetNamespace": self.release,
                     "createNamespace": True,
                     "valuesContent": "deployment:\n  kind: DaemonSet\n"},
        })
        if job_created:
            self.plane.patch_status("helmcharts.helm.cattle.io", self.release, {
                "jobName": self.job, "conditions": [
                    {"type": "JobCreated", "status": "True", "reason": "Job created",
                     "message": f"Applying HelmChart using Job {HELM_NAMESPACE}/{self.job}"}]},
                HELM_NAMESPACE)

    def install_job(self, node: str, *, backoff_limit: int = 1000) -> None:
        """The helm-controller's install Job, its Pods pinned to ``node``."""
        self.plane.apply({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": self.job, "namespace": HELM_NAMESPACE,
                         "labels": {"helmcharts.helm.cattle.io/chart": self.release}},
            "spec": {"backoffLimit": backoff_limit, "template": {
                "metadata": {"labels": {"helmcharts.helm.cattle.io/chart": self.release}},
                "spec": {"restartPolicy": "OnFailure",
                         "nodeSelector": {"kubernetes.io/hostname": node},
                         "tolerations": TOLERATE_NOT_READY,
                         "automountServiceAccountToken": False,
                         "containers": [{"name": "helm", "image": HELM_IMAGE,
                                         "args": ["install"]}]}}},
        })

    def job_object(self) -> dict[str, Any]:
        return objects.get(self.plane, "job", self.job, HELM_NAMESPACE) or {}

    def job_condition(self, kind: str) -> bool:
        return any(c.get("type") == kind and c.get("status") == "True"
                   for c in (self.job_object().get("status") or {}).get("conditions") or [])

    def pods(self) -> list[dict[str, Any]]:
        done = self.plane.kubectl("get", "pods", "-n", HELM_NAMESPACE, "-l",
                                  f"{JOB_LABEL}={self.job}", "-o", "json")
        return list(json.loads(done.stdout)["items"])

    def bound_pod(self) -> dict[str, Any]:
        """The install Pod, once the Job controller created it and the scheduler bound it."""
        bound = wait_for(f"the scheduler to bind a Pod of {self.job}", lambda: [
            p for p in self.pods() if (p.get("spec") or {}).get("nodeName")])
        return bound[0]

    # -- the kubelet's part, on a Node no kubelet plays --------------------------------------

    def kubelet_status(self, pod: str, container: dict[str, Any], *,
                       phase: str = "Running") -> None:
        """What the kubelet reports for the install Pod; ``container`` is the helm
        container's state fields (state, lastState, restartCount)."""
        status = {"name": "helm", "image": f"docker.io/{HELM_IMAGE}", "imageID": "",
                  "ready": False, "started": False, "restartCount": 0, **container}
        self.plane.patch_status("pod", pod, {"phase": phase, "containerStatuses": [status]},
                                HELM_NAMESPACE)

    def event(self, kind: str, name: str, reason: str, message: str, *,
              namespace: str = HELM_NAMESPACE, type_: str = "Normal",
              source: str = "kubelet", host: str | None = None) -> None:
        """A core/v1 Event as client-go's legacy recorder writes it (the kubelet's and the
        controllers' Events): named ``<object>.<nanoseconds in hex>``, timed to the second."""
        subject = objects.get(self.plane, kind.lower(), name, namespace) or {}
        now = datetime.now(UTC)
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{name}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": {"kind": kind, "namespace": namespace, "name": name,
                               "apiVersion": "batch/v1" if kind == "Job" else "v1",
                               "uid": (subject.get("metadata") or {}).get("uid", "")},
            "reason": reason, "message": message, "type": type_, "count": 1,
            "firstTimestamp": stamp(now), "lastTimestamp": stamp(now),
            "source": {"component": source, **({"host": host} if host else {})},
            "reportingComponent": source, "reportingInstance": host or "",
        }
        self.plane.kubectl("create", "-f", "-", input=json.dumps(event))

    def events(self, namespace: str = HELM_NAMESPACE) -> list[dict[str, Any]]:
        done = self.plane.kubectl("get", "events", "-n", namespace, "-o", "json")
        return list(json.loads(done.stdout)["items"])

    def has_event(self, reason: str, name: str, namespace: str = HELM_NAMESPACE) -> bool:
        return any(e.get("reason") == reason
                   and (e.get("involvedObject") or {}).get("name") == name
                   for e in self.events(namespace))

    # -- Helm's part: the release namespace and the Traefik DaemonSet ------------------------

    def traefik(self, *, tolerate_not_ready: bool = False) -> None:
        """The release namespace and the chart's DaemonSet, for the pool's entry Node."""
        objects.namespace(self.plane, self.release)
        ds = objects.daemon_set(
            self.release, self.release,
            {**labels(self.pool_id), "app.kubernetes.io/name": "traefik",
             "app.kubernetes.io/managed-by": "Helm", "helm.sh/chart": "traefik-37.1.1"},
            app=f"traefik-{self.release}", node_selector={ENTRY_LABEL: self.pool_id},
            image="docker.io/traefik:v3.5")
        if tolerate_not_ready:
            ds["spec"]["template"]["spec"]["tolerations"] = TOLERATE_NOT_READY[:1]
        self.plane.apply(ds)

    def daemon_set_status(self) -> dict[str, Any]:
        obj = objects.get(self.plane, "daemonset", self.release, self.release) or {}
        return dict(obj.get("status") or {})

    # -- removing it all ---------------------------------------------------------------------

    def remove(self, *nodes: str) -> None:
        """Everything this release put on the shared control plane, and ``nodes``."""
        plane = self.plane
        # The Job first (its controller would replace a Pod deleted before it), the
        # namespace before its Pods (nothing can create Pods in a Terminating namespace).
        plane.kubectl("delete", f"helmcharts.helm.cattle.io/{self.release}", f"job/{self.job}",
                      "-n", HELM_NAMESPACE, "--ignore-not-found", "--wait=false")
        plane.kubectl("delete", f"namespace/{self.release}", *(f"node/{n}" for n in nodes),
                      "--ignore-not-found", "--wait=false")
        # No kubelet confirms the deletion of a Pod on a Node that kwok does not play.
        for where, which in ((HELM_NAMESPACE, ["-l", f"{JOB_LABEL}={self.job}"]),
                             (self.release, ["--all"])):
            plane.kubectl("delete", "pods", "-n", where, *which, "--ignore-not-found",
                          "--grace-period=0", "--force", "--wait=false")
        mine = [e["metadata"]["name"] for e in self.events()
                if str((e.get("involvedObject") or {}).get("name") or "").startswith(self.job)]
        if mine:
            objects.delete(plane, "events", *mine, namespace=HELM_NAMESPACE)


@contextmanager
def pool_release(plane: ControlPlane, pool_id: str, *nodes: str) -> Iterator[PoolRelease]:
    """A pool's release whose objects (and ``nodes``) are removed afterwards."""
    release = PoolRelease(plane, pool_id)
    try:
        yield release
    finally:
        release.remove(*nodes)


def plain_node(plane: ControlPlane, name: str, labels: dict[str, str] | None = None) -> None:
    """A Node no kubelet plays (it never goes Ready), with room for Pods so the scheduler
    binds those that tolerate it; the test writes their status."""
    objects.node(plane, name, labels, kwok=False, gpus=0)

