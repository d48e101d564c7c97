"""``node-pool status``'s ingress view: the pool's ingress release, read at request time.

A pool that hosts no Service gets ``release: null`` without touching the cluster (and without
importing the kubernetes client). For a Service-hosting pool the cluster is read through the
cluster port; when it cannot be read, the release says so in ``lastEvent`` instead of failing
the command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from automation.ledger.db import Ledger
from automation.models import IngressView, NodePoolStatus

if TYPE_CHECKING:
    from automation.kube.port import IngressObjects

# A person waits for this command: give up on a silent API server sooner than the reconciler.
STATUS_TIMEOUT_SECONDS = 5.0

OpenSealed = Callable[[Any], "str | None"]

_CLUSTER_SQL = """
SELECT c.id, c.name, c.server_url, c.kubeconfig_path, c.kube_context
FROM node_pools p JOIN clusters c ON c.id = p.cluster_id
WHERE p.id = :id
"""


class IngressReader(Protocol):
    """The part of ``automation.kube.port.ClusterPort`` this view reads."""

    def ingress_objects(self, pool_id: str) -> IngressObjects: ...


# Builds the reader for a pool's cluster; raises ClusterUnavailable when it cannot.
ClusterPortFactory = Callable[[NodePoolStatus], IngressReader]


def with_ingress(status: NodePoolStatus, cluster_port_factory: ClusterPortFactory,
                 hide: Mapping[str, str] | None = None) -> NodePoolStatus:
    """``status`` with ``ingress`` filled in (read from the cluster for Service pools);
    ``hide``: the cluster's own values, named by their labels when the cluster is unreadable
    (``automation.redact.cluster_values``)."""
    if not status.hosts_service:
        return status.model_copy(update={"ingress": IngressView(entry_ip=None, release=None)})
    from automation.kube.ingress import ingress_release, unavailable
    from automation.kube.port import ClusterUnavailable
    from automation.redact import redact

    port: IngressReader | None = None
    try:
        port = cluster_port_factory(status)
        release = ingress_release(port.ingress_objects(status.id))
    except ClusterUnavailable as exc:  # ClusterForbidden included: it names the grant
        # The reason, without the cluster's address or the kubeconfig's path.
        release = unavailable(redact(str(exc), hide or {}) or "")
    finally:
        close = getattr(port, "close", None)
        if callable(close):
            close()
    view = IngressView(entry_ip=status.ingress_entry_ip, release=release)
    return status.model_copy(update={"ingress": view})


def kubernetes_port_factory(ledger: Ledger, open_sealed: OpenSealed | None = None
                            ) -> ClusterPortFactory:
    """The pool's cluster through its registered kubeconfig and context (the ledger's record);
    ``open_sealed``: where a kubeconfig sent to the API is opened (``App.kubeconfig_path``)."""

    def build(status: NodePoolStatus) -> IngressReader:
        from automation.errors import AnycloudError
        from automation.kube.adapter import KubernetesCluster
        from automation.kube.port import ClusterUnavailable

        rows = ledger.query(_CLUSTER_SQL, {"id": status.id})
        path = rows[0]["kubeconfig_path"] if rows else None
        if rows and not path and open_sealed is not None:
            try:
                path = open_sealed(rows[0])
            except AnycloudError as exc:
                raise ClusterUnavailable(f"cluster {status.cluster}: {exc}") from exc
        if not path:
            raise ClusterUnavailable(
                f"cluster {status.cluster} has no registered kubeconfig")
        return KubernetesCluster(Path(path), rows[0]["kube_context"],
                                 timeout_seconds=STATUS_TIMEOUT_SECONDS)

    return build


def pool_status_with_ingress(ledger: Ledger, ref: str,
                             open_sealed: OpenSealed | None = None) -> NodePoolStatus:
    """``node-pool status``: the pool's status with its ingress view read from its cluster."""
    from automation.redact import cluster_values
    from automation.services.pool_status import node_pool_status

    status = node_pool_status(ledger, ref)
    rows = ledger.query(_CLUSTER_SQL, {"id": status.id})
    hide = cluster_values(rows[0]["server_url"], rows[0]["kubeconfig_path"]) if rows else {}
    return with_ingress(status, kubernetes_port_factory(ledger, open_sealed), hide)
