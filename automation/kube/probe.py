"""Reads what a cluster record needs from the cluster itself, through the official client.

The ``kubernetes`` package costs ~0.5 s to import, so it is imported only here and only
when a cluster is registered or refreshed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from automation.kube.kubeconfig import read_context_target


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

    def _client(self, kubeconfig: Path, context: str | None):  # type: ignore[no-untyped-def]
        from kubernetes import config
        from kubernetes.config.config_exception import ConfigException

        try:
            return config.new_client_from_config(config_file=str(kubeconfig), context=context)
        except (ConfigException, OSError, ValueError, TypeError) as exc:
            raise ValueError(f"cannot load kubeconfig {kubeconfig}: {exc}") from exc

    def target(self, kubeconfig: Path, context: str | None) -> KubeconfigTarget:
        t = read_context_target(kubeconfig, context)
        return KubeconfigTarget(t.server_url, sha256_hex(t.ca_pem) if t.ca_pem else None)

    def read(self, kubeconfig: Path, context: str | None) -> ClusterFacts:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        api = self._client(kubeconfig, context)
        api.configuration.retries = 0
        try:
            version = client.VersionApi(api).get_code(_request_timeout=self.timeout)
            ns = client.CoreV1Api(api).read_namespace("kube-system", _request_timeout=self.timeout)
        except ApiException as exc:
            raise ClusterUnreachable(f"the API server answered {exc.status} {exc.reason}") from exc
        except (HTTPError, OSError) as exc:
            raise ClusterUnreachable(f"cannot reach {api.configuration.host}: {exc}") from exc
        finally:
            api.close()
        uid = ns.metadata.uid if ns.metadata else None
        if not uid or not version.git_version:
            raise ClusterUnreachable("the API server answered without a version or namespace UID")
        return ClusterFacts(kubernetes_version=version.git_version, kube_system_uid=uid)
