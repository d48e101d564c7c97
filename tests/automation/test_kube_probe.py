"""The real probe (official client) against a local server speaking Kubernetes JSON."""

from pathlib import Path

import pytest

from automation.kube.probe import ClusterUnreachable, KubernetesProbe, sha256_hex
from tests.automation.conftest import DEMO_CA
from tests.automation.kube_api_server import FORBIDDEN, KUBE_SYSTEM, serve, write_kubeconfig


def test_reads_version_uid_and_ca(tmp_path: Path) -> None:
    with serve() as api:
        kc = write_kubeconfig(tmp_path / "kc", api.url, DEMO_CA.read_bytes())
        probe = KubernetesProbe(timeout_seconds=5)
        target = probe.target(kc, None)
        facts = probe.read(kc, None)
    assert target.server_url == api.url
    assert target.ca_sha256 == sha256_hex(DEMO_CA.read_bytes())
    assert facts.kubernetes_version == "v1.36.2+k3s1"
    assert facts.kube_system_uid == KUBE_SYSTEM["metadata"]["uid"]  # type: ignore[index]
    assert api.requests == ["/version", "/api/v1/namespaces/kube-system"]


def test_forbidden_is_unreachable_with_the_status(tmp_path: Path) -> None:
    with serve() as api:
        api.routes["/api/v1/namespaces/kube-system"] = (403, FORBIDDEN)
        kc = write_kubeconfig(tmp_path / "kc", api.url)
        with pytest.raises(ClusterUnreachable, match="403"):
            KubernetesProbe().read(kc, None)


def test_closed_port_is_unreachable(tmp_path: Path) -> None:
    with serve() as api:
        url = api.url
    kc = write_kubeconfig(tmp_path / "kc", url)
    with pytest.raises(ClusterUnreachable, match="cannot reach"):
        KubernetesProbe(timeout_seconds=2).read(kc, None)


def test_broken_kubeconfig_is_a_value_error(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(ValueError, match="cannot load kubeconfig"):
        KubernetesProbe().target(kc, None)
