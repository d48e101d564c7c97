"""Reads what a cluster record needs from the cluster itself, through the official client.

The ``kubernetes`` package costs ~0.5 s to import, so it is imported only here and only
when a cluster is registered or refreshed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True)
class KubeconfigTarget:
    """What the kubeconfig says, before anything is asked of the cluster."""

    server_url: str
    ca_sha256: str | None


@dataclass(frozen=True)
class ClusterFacts:
    kubernetes_version: str
    kube_system_uid: str


class ClusterUnreachable(Exception):
    """The cluster could not be read; the message says why."""


class ClusterProbe(Protocol):
    def target(self, kubeconfig: Path, context: str | None) -> KubeconfigTarget: ...

    def read(self, kubeconfig: Path, context: str | None) -> ClusterFacts: ...


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class KubernetesProbe:
    """The real probe: kubeconfig through the official client, then two GETs."""

    def __init__(self, timeout_seconds: float = 5.0) -> None:
        self.timeout = timeout_seconds

    def target(self, kubeconfig: Path, context: str | None) -> KubeconfigTarget:
        from automation.kube.kubeconfig import read_context_target  # YAML: only when read

        t = read_context_target(kubeconfig, context)
        return KubeconfigTarget(t.server_url, sha256_hex(t.ca_pem) if t.ca_pem else None)

    def read(self, kubeconfig: Path, context: str | None) -> ClusterFacts:
        # The cluster port's adapter does the talking: one client set-up, one error mapping.
        from automation.kube.adapter import KubernetesCluster
        from automation.kube.port import ClusterForbidden, ClusterUnavailable

        cluster = KubernetesCluster(kubeconfig, context, timeout_seconds=self.timeout)
        try:
            version, uid = cluster.identity()
        except ClusterForbidden as exc:
            raise ClusterUnreachable(f"the API server answered 403 Forbidden: {exc}") from exc
        except ClusterUnavailable as exc:
            raise ClusterUnreachable(str(exc)) from exc
        finally:
            cluster.close()
        return ClusterFacts(kubernetes_version=version, kube_system_uid=uid)
