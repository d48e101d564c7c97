"""The official-client adapter pointed at a local server that answers with Kubernetes JSON."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
