"""The real probe (official client) against the real control plane (``control_plane``).

The version, the kube-system UID and the CA hash are checked against what the API server and
the CA file say, not against values the test wrote; RBAC denial is a real ServiceAccount's.
A closed port and a broken kubeconfig need no server.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from automation.devcluster.control_plane import ControlPlane, free_port, kubeconfig_document
from automation.kube.probe import ClusterUnreachable, KubernetesProbe
from tests.automation.conftest import DEMO_CA

K8S_VERSION = "v1.36.3"  # what tools/build.py builds the API server as


def kube_system_uid(plane: ControlPlane) -> str:
    uid = plane.kubectl("get", "namespace", "kube-system",
                        "-o", "jsonpath={.metadata.uid}").stdout.strip()
    assert uid, "kubectl printed no kube-system UID"
    return uid


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every (method, path) any official-client ApiClient sends during the test."""
    from kubernetes.client import ApiClient

    calls: list[tuple[str, str]] = []
    send = ApiClient.call_api

    def call_api(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        calls.append((method, urlsplit(url).path))
        return send(self, method, url, *args, **kwargs)

    monkeypatch.setattr(ApiClient, "call_api", call_api)
    return calls


@pytest.fixture
def service_account(control_plane: ControlPlane,
                    tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A kubeconfig of a ServiceAccount granted nothing, and its user name."""
    namespace = f"probe-{secrets.token_hex(3)}"
    path = control_plane.token_kubeconfig(tmp_path / "sa.kubeconfig", "prober", namespace)
    yield path, f"system:serviceaccount:{namespace}:prober"
    control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.mark.kube
def test_reads_version_uid_and_ca(control_plane: ControlPlane,
                                  sent: list[tuple[str, str]]) -> None:
    probe = KubernetesProbe(timeout_seconds=10)
    target = probe.target(control_plane.kubeconfig, None)
    facts = probe.read(control_plane.kubeconfig, None)
    assert target.server_url == control_plane.server
    assert target.ca_sha256 == hashlib.sha256(control_plane.pki.ca_cert.read_bytes()).hexdigest()
    assert facts.kubernetes_version == K8S_VERSION
    assert facts.kube_system_uid == kube_system_uid(control_plane)
    # two GETs, nothing listed
    assert sent == [("GET", "/version/"), ("GET", "/api/v1/namespaces/kube-system")]


@pytest.mark.kube
def test_ca_and_client_certificate_given_as_files(control_plane: ControlPlane,
                                                  tmp_path: Path) -> None:
    """A kubeconfig naming files (as kubeadm and K3s write them) rather than inline data;
    a relative CA path is relative to the kubeconfig."""
    pki = control_plane.pki
    (tmp_path / "ca.crt").write_bytes(pki.ca_cert.read_bytes())
    kc = write(tmp_path / "kubeconfig", {
        "apiVersion": "v1", "kind": "Config", "current-context": "files",
        "clusters": [{"name": "files", "cluster": {
            "server": control_plane.server, "certificate-authority": "ca.crt"}}],
        "users": [{"name": "files", "user": {
            "client-certificate": str(pki.admin_cert), "client-key": str(pki.admin_key)}}],
        "contexts": [{"name": "files", "context": {"cluster": "files", "user": "files"}}],
    })
    probe = KubernetesProbe(timeout_seconds=10)
    assert probe.target(kc, "files").ca_sha256 == hashlib.sha256(control_plane.ca_pem).hexdigest()
    assert probe.read(kc, "files").kube_system_uid == kube_system_uid(control_plane)


@pytest.mark.kube
def test_forbidden_is_unreachable_naming_the_denial(
    service_account: tuple[Path, str],
) -> None:
    kc, user = service_account
    with pytest.raises(ClusterUnreachable) as caught:
        KubernetesProbe(timeout_seconds=10).read(kc, None)
    message = str(caught.value)
    assert message.startswith("the API server answered 403 Forbidden: ")
    assert "the cluster's RBAC denies `get` on `namespaces`" in message
    assert f'User "{user}" cannot get resource "namespaces"' in message


@pytest.mark.kube
def test_rejected_token_is_unreachable_naming_401(control_plane: ControlPlane,
                                                  tmp_path: Path) -> None:
    kc = write(tmp_path / "kc", kubeconfig_document(
        control_plane.server, control_plane.pki.ca_cert, token="abcdef.0123456789abcdef"))
    with pytest.raises(ClusterUnreachable, match=r"rejected the registered credentials \(401"):
        KubernetesProbe(timeout_seconds=10).read(kc, None)


@pytest.mark.kube
def test_a_ca_that_did_not_sign_the_server_is_unreachable(control_plane: ControlPlane,
                                                          tmp_path: Path) -> None:
    pki = control_plane.pki
    kc = write(tmp_path / "kc", kubeconfig_document(
        control_plane.server, DEMO_CA, pki.admin_cert, pki.admin_key))
    with pytest.raises(ClusterUnreachable, match="CERTIFICATE_VERIFY_FAILED"):
        KubernetesProbe(timeout_seconds=10).read(kc, None)


def test_closed_port_is_unreachable(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text(json.dumps(kubeconfig_document(f"https://127.0.0.1:{free_port()}", DEMO_CA)))
    with pytest.raises(ClusterUnreachable, match="cannot reach"):
        KubernetesProbe(timeout_seconds=2).read(kc, None)


def test_broken_kubeconfig_is_a_value_error(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(ValueError, match="cannot load kubeconfig"):
        KubernetesProbe().target(kc, None)
