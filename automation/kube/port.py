"""The cluster port: what the reconciler reads from and writes to the Kubernetes cluster.

Two implementations: ``automation.kube.adapter.KubernetesCluster`` (the official client) and
``automation.simulators.cluster.SimulatedCluster`` (in memory, on an injected clock). This
module holds only the protocol and plain data, so importing it costs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "anycloud"
CLUSTER_LABEL = "anycloud.sh/cluster"
POOL_LABEL = "anycloud.sh/node-pool"
ATTEMPT_LABEL = "anycloud.sh/attempt"
PROVIDER_LABEL = "anycloud.sh/provider"
ACCELERATOR_LABEL = "anycloud.sh/accelerator"
GPU_RESOURCE = "nvidia.com/gpu"

TOKEN_NAMESPACE = "kube-system"
TOKEN_SECRET_TYPE = "bootstrap.kubernetes.io/token"
TOKEN_SECRET_PREFIX = "bootstrap-token-"



def pool_namespace(pool_id: str) -> str:
    """The namespace a pool owns: its deployments' objects, removed with the pool."""
    return f"anycloud-{pool_id}"


def service_namespace(workload_id: str) -> str:
    return f"anycloud-{workload_id}"


RUNTIME_CLASS_NAME = "nvidia"
DAEMONSET_NAMESPACE = "kube-system"
DAEMONSET_NAME = "anycloud-nvidia-device-plugin"

# The pool's ingress release (components/traefik.py): a K3s HelmChart in kube-system, whose
# install Job the helm-controller runs there, releasing into a namespace of the same name.
INGRESS_ENTRY_LABEL = "anycloud.sh/ingress-entry"  # the node a pool elected its entry
HELM_NAMESPACE = "kube-system"
HELM_GROUP = "helm.cattle.io"
HELM_VERSION = "v1"
HELM_PLURAL = "helmcharts"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"

AddonKind = Literal["runtimeclass", "daemonset"]
ADDON_KINDS: tuple[AddonKind, ...] = ("runtimeclass", "daemonset")
NamespaceOwner = Literal["absent", "ours", "foreign"]


@dataclass(frozen=True)
class NodeView:
    """A Node as the reconciler's decision step sees it."""

    name: str
    pool_label: str | None
    attempt_label: str | None
    ready: bool
    gpus: int = 0  # allocatable nvidia.com/gpu
    labels: frozenset[tuple[str, str]] = frozenset()


def token_secret_name(token_id: str) -> str:
    return f"{TOKEN_SECRET_PREFIX}{token_id}"


def addon_display(kind: AddonKind) -> str:
    """How an add-on object is named in diagnostics."""
    if kind == "runtimeclass":
        return f"RuntimeClass {RUNTIME_CLASS_NAME}"
    return f"DaemonSet {DAEMONSET_NAMESPACE}/{DAEMONSET_NAME}"


@dataclass(frozen=True)
class ObservedNode:
    name: str
    labels: dict[str, str]
    ready: bool
    gpu_allocatable: int
    unschedulable: bool
    created_at: datetime | None

    def __hash__(self) -> int:  # labels is a dict; hash what identifies the observation
        return hash((self.name, frozenset(self.labels.items()), self.ready,
                     self.gpu_allocatable, self.unschedulable, self.created_at))

    def to_view(self) -> NodeView:
        return NodeView(
            name=self.name,
            pool_label=self.labels.get(POOL_LABEL),
            attempt_label=self.labels.get(ATTEMPT_LABEL),
            ready=self.ready,
            gpus=self.gpu_allocatable,
            labels=frozenset(self.labels.items()),
        )


@dataclass(frozen=True)
class AddonObservation:
    """The NVIDIA add-on objects as the API server returns them (camelCase JSON), or None."""

    cluster_id: str
    runtime_class: dict[str, Any] | None = None
    daemonset: dict[str, Any] | None = None

    def get(self, kind: AddonKind) -> dict[str, Any] | None:
        return self.runtime_class if kind == "runtimeclass" else self.daemonset


def ingress_release_name(pool_id: str) -> str:
    """The HelmChart's name and its target namespace (``components.traefik.release_name``)."""
    from components.naming import resource_slug  # no SDK import: names only

    return f"anycloud-ingress-{resource_slug(pool_id, 36)}"


def helm_install_job_name(release: str) -> str:
    """The Job the K3s helm-controller runs for a HelmChart (in the HelmChart's namespace)."""
    return f"helm-install-{release}"


@dataclass(frozen=True)
class IngressObjects:
    """A pool's ingress release as the API server returns it (camelCase JSON).

    ``helm_chart`` None: no HelmChart, and nothing else was read. ``job`` is the install Job
    (None before the helm-controller created it), ``pods`` its Pods, ``daemon_sets`` those in
    the release namespace (Helm creates one), ``entry_nodes`` the Nodes labelled
    anycloud.sh/ingress-entry=<pool_id> (read only once a DaemonSet exists), and ``events``
    those of kube-system before a DaemonSet exists, of the release namespace after.
    """

    pool_id: str
    release: str
    helm_chart: dict[str, Any] | None = None
    job: dict[str, Any] | None = None
    pods: tuple[dict[str, Any], ...] = ()
    daemon_sets: tuple[dict[str, Any], ...] = ()
    entry_nodes: tuple[ObservedNode, ...] = ()
    events: tuple[dict[str, Any], ...] = ()


class ClusterUnavailable(Exception):
    """The cluster could not be reached or read; the message says why."""


class ClusterForbidden(ClusterUnavailable):
    """The cluster's RBAC denied a request; names the verb and resource to grant."""

    def __init__(self, verb: str, resource: str, namespace: str | None = None,
                 detail: str | None = None) -> None:
        self.verb = verb
        self.resource = resource
        self.namespace = namespace
        where = f" in namespace {namespace}" if namespace else ""
        message = (
            f"the cluster's RBAC denies `{verb}` on `{resource}`{where}; grant it to the "
            "identity in the registered kubeconfig"
        )
        if detail:
            message += f" ({detail})"
        super().__init__(message)


_FORBIDDEN = re.compile(
    r'cannot (?P<verb>[a-z]+) resource "(?P<resource>[^"]+)" in API group "(?P<group>[^"]*)"'
    r'(?: in the namespace "(?P<namespace>[^"]+)")?'
)


def parse_forbidden(message: str) -> ClusterForbidden | None:
    """The API server's 403 text (as relayed by kubectl or the Pulumi provider) as a
    ClusterForbidden, so writes made outside the port get the same diagnostic."""
    m = _FORBIDDEN.search(message)
    if m is None:
        return None
    return ClusterForbidden(m["verb"], m["resource"], m["namespace"])


class ClusterPort(Protocol):
    def nodes_claiming(self, pool_id: str, issued_names: set[str]) -> list[ObservedNode]:
        """Nodes labelled anycloud.sh/node-pool=<pool_id> plus Nodes named in issued_names."""
        ...

    def cordon_node(self, name: str) -> None:
        """spec.unschedulable = true; an absent Node is left absent."""
        ...

    def delete_node(self, name: str) -> None:
        """Remove the Node object; absent counts as success."""
        ...

    def label_node(self, name: str, key: str, value: str | None) -> None:
        """Set one label, or remove it when value is None; an absent Node is a no-op."""
        ...

    def delete_bootstrap_token(self, token_id: str) -> None:
        """Delete kube-system Secret bootstrap-token-<id>; absent counts as success."""
        ...

    def delete_attempt_tokens(self, attempt_id: str) -> int:
        """Delete the bootstrap-token Secrets in kube-system labelled
        anycloud.sh/attempt=<attempt_id> (those the node-pool stack wrote for it); returns
        how many there were. The token id is drawn by the stack: the label finds it."""
        ...

    def namespace_owner(self, name: str, pool_id: str) -> NamespaceOwner:
        """ours = labelled managed-by=anycloud and anycloud.sh/node-pool=<pool_id>."""
        ...

    def delete_namespace(self, name: str) -> None:
        """Delete the namespace (callers check namespace_owner first); absent = success."""
        ...

    def service_objects_removed(self, namespace: str) -> bool:
        """True once a Service's own namespace is gone (not merely Terminating)."""
        ...

    def addon_objects(self, cluster_id: str) -> AddonObservation:
        """Read RuntimeClass nvidia and DaemonSet kube-system/anycloud-nvidia-device-plugin."""
        ...

    def write_addon_labels(self, cluster_id: str, kinds: Collection[AddonKind]) -> None:
        """Adoption: relabel add-on objects for this cluster record (managed-by, cluster)."""
        ...

    def delete_addon_object(self, kind: AddonKind) -> None:
        """Recreate path: remove our add-on object whose immutable field differs; absent=ok."""
        ...

    def ingress_helm_chart(self, pool_id: str) -> dict[str, Any] | None:
        """Read only the pool's ingress HelmChart (kube-system/<release>); None when absent."""
        ...

    def delete_ingress_helm_chart(self, pool_id: str) -> None:
        """Recreate path: remove our HelmChart whose release cannot be changed in place."""
        ...

    def ingress_objects(self, pool_id: str) -> IngressObjects:
        """Read the pool's ingress release: HelmChart, install Job and Pods, DaemonSet, entry
        Nodes and Events (see IngressObjects). Read-only."""
        ...
