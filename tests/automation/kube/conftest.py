"""The official-client adapter against the real control plane (``control_plane``), and
against the local JSON server for the faults a real API server will not produce on demand
(a 500 from etcd, a body that is not JSON)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from automation.devcluster.control_plane import ControlPlane
from automation.kube.adapter import KubernetesCluster
from tests.automation.kube_api_server import FakeKubeApi, serve, write_kubeconfig


@pytest.fixture
def api() -> Iterator[FakeKubeApi]:
    with serve() as server:
        yield server


@pytest.fixture
def cluster(api: FakeKubeApi, tmp_path: Path) -> Iterator[KubernetesCluster]:
    kc = KubernetesCluster(write_kubeconfig(tmp_path / "kc", api.url), "test",
                           timeout_seconds=5)
    yield kc
    kc.close()


@dataclass(frozen=True)
class Sent:
    """One request the client sent to the real API server."""

    method: str
    path: str
    query: dict[str, list[str]]
    content_type: str | None
    body: Any


@dataclass
class Recorder:
    calls: list[Sent] = field(default_factory=list)

    def clear(self) -> None:
        self.calls.clear()


def record_requests(cluster: KubernetesCluster) -> Recorder:
    """Wrap the adapter's ApiClient so every request it sends is recorded."""
    recorder = Recorder()
    api = cluster._client()
    send = api.call_api

    def call_api(method: str, url: str, header_params: dict[str, str] | None = None,
                 body: Any = None, *args: Any, **kwargs: Any) -> Any:
        parts = urlsplit(url)
        recorder.calls.append(Sent(method, parts.path, parse_qs(parts.query),
                                   (header_params or {}).get("Content-Type"), body))
        return send(method, url, header_params, body, *args, **kwargs)

    api.call_api = call_api
    return recorder


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[KubernetesCluster]:
    """The adapter, as the cluster's admin, on the real API server."""
    kc = KubernetesCluster(control_plane.kubeconfig, timeout_seconds=10)
    yield kc
    kc.close()


@pytest.fixture
def sent(kube: KubernetesCluster) -> Recorder:
    return record_requests(kube)


@pytest.fixture
def suffix() -> str:
    """Names unique to one test: the control plane is shared by the whole session."""
    return secrets.token_hex(3)
