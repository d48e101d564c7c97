"""Clusters through the API: the kubeconfig sent is sealed, never answered, opened only into
a memory-only file for the clients that read a path, and refused when it reaches outside
itself (files on the client, exec plugins)."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from automation.app import App
from automation.sealing import SealingKey
from automation.services.clusters import cluster_row
from tests.automation.conftest import DEMO_CA, snapshot

TOKEN = "NeverOnDiskClusterToken"
CA_DATA = base64.b64encode(DEMO_CA.read_bytes()).decode()


def kubeconfig(user: str = f"    token: {TOKEN}\n") -> str:
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
        "clusters:\n- name: prod\n  cluster:\n    server: https://203.0.113.10:6443\n"
        f"    certificate-authority-data: {CA_DATA}\n"
        "contexts:\n- name: prod\n  context:\n    cluster: prod\n    user: admin\n"
        f"users:\n- name: admin\n  user:\n{user}")


@pytest.fixture(autouse=True)
def runtime_dir(memory_runtime_dir: Path) -> Path:
    return memory_runtime_dir


@pytest.fixture
def keyed(app: App) -> App:
    app.sealing = SealingKey(os.urandom(32))
    return app


def register(http: TestClient, headers: dict[str, str], **extra: Any) -> Any:
    body = {"name": "prod", "kubeconfig": kubeconfig(), "kubernetesVersion": "v1.36.2+k3s1",
            "offline": True} | extra
    return http.post("/v1/clusters", json=body, headers=headers)


def test_a_sent_kubeconfig_is_sealed_and_opened_into_memory_only(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]],
        runtime_dir: Path) -> None:
    made = register(http, callers["admin"])
    assert made.status_code == 201, made.text
    cluster = made.json()
    assert cluster["state"] == "ready" and cluster["kubeconfigPath"] is None
    assert cluster["sealedKubeconfig"]["fields"] == {"server": "https://203.0.113.10:6443",
                                                     "context": "(current)"}
    listed = http.get("/v1/clusters", headers=callers["viewer"]).text
    assert TOKEN not in made.text + listed + str(snapshot(keyed))
    assert list(runtime_dir.iterdir()) == []  # the registration's own copy is gone
    # A client that reads a path gets a memory-only file, readable by this user only.
    opened = Path(keyed.kubeconfig_path(cluster_row(keyed, "prod")) or "")
    assert opened.parent == runtime_dir and opened.read_text() == kubeconfig()
    assert stat.S_IMODE(opened.stat().st_mode) == 0o600
    assert stat.S_IMODE(runtime_dir.stat().st_mode) == 0o700
    assert http.delete("/v1/clusters/prod", headers=callers["admin"]).status_code == 200
    assert not opened.exists() and snapshot(keyed)["sealed_secrets"] == []


@pytest.mark.parametrize(("user", "found"), [
    ("    client-certificate: /home/me/.kube/admin.crt\n    client-key: /home/me/admin.key\n",
     "uses client-certificate"),
    ("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: aws\n",
     "uses exec"),
    ("    tokenFile: /var/run/token\n", "uses tokenFile"),
])
def test_a_kubeconfig_that_reaches_outside_itself_is_refused(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]], user: str,
        found: str) -> None:
    before = snapshot(keyed)
    resp = http.post("/v1/clusters", json={"name": "prod", "kubeconfig": kubeconfig(user)},
                     headers=callers["admin"])
    assert resp.status_code == 400, resp.text
    problem = resp.json()
    assert problem["field"] == "--kubeconfig" and found in problem["rule"]
    assert "inline" in problem["rule"] and snapshot(keyed) == before


def test_without_a_key_nothing_is_registered(app: App, http: TestClient,
                                             callers: dict[str, dict[str, str]]) -> None:
    app.sealing = None
    before = snapshot(app)
    resp = register(http, callers["admin"])
    assert resp.status_code == 409 and resp.json()["code"] == "SEALING_KEY_MISSING"
    assert TOKEN not in resp.text and snapshot(app) == before


def test_a_process_without_the_key_cannot_open_it(keyed: App, http: TestClient,
                                                  callers: dict[str, dict[str, str]]) -> None:
    from automation.sealing import SealingKeyMissing

    assert register(http, callers["admin"]).status_code == 201
    row = cluster_row(keyed, "prod")
    keyed.sealing = None
    with pytest.raises(SealingKeyMissing, match="kubeconfig of cluster 'prod'"):
        keyed.kubeconfig_path(row)


def test_roles_and_a_bad_ca(keyed: App, http: TestClient,
                            callers: dict[str, dict[str, str]]) -> None:
    assert register(http, callers["member"]).status_code == 403
    bad = register(http, callers["admin"], caPem="not a certificate")
    assert bad.status_code == 400 and bad.json()["field"] == "caPem"
    assert register(http, callers["admin"]).status_code == 201
    refreshed = http.post("/v1/clusters/prod/refresh", headers=callers["member"])
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["lastError"].startswith("cluster not read")  # the probe says so


def test_a_server_side_kubeconfig_path_is_shown_to_admins_only(
        world: App, http: TestClient, callers: dict[str, dict[str, str]],
        kubeconfig: Path) -> None:
    """A cluster registered on the server's host names a file there: the server's business."""
    for role, shown in (("viewer", None), ("member", None), ("admin", str(kubeconfig))):
        one = http.get("/v1/clusters/prod", headers=callers[role]).json()
        listed = http.get("/v1/clusters", headers=callers[role]).json()["items"]
        assert one["kubeconfigPath"] == listed[0]["kubeconfigPath"] == shown, role
        assert one["serverUrl"] == listed[0]["serverUrl"]
    refreshed = http.post("/v1/clusters/prod/refresh", headers=callers["member"]).json()
    assert refreshed["kubeconfigPath"] is None


def test_if_match_deletes_only_the_version_that_was_read(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    from automation.ledger import schema

    admin = callers["admin"]
    assert register(http, admin).status_code == 201
    etag = http.get("/v1/clusters/prod", headers=callers["viewer"]).headers["etag"]
    assert http.get("/v1/clusters/prod", headers=admin).headers["etag"] == etag  # one record
    with keyed.ledger.write() as conn:  # the cluster changes (a refresh recorded an error)
        conn.execute(schema.clusters.update().where(schema.clusters.c.name == "prod")
                     .values(last_error="cluster not read: timeout"))
    before = snapshot(keyed)
    stale = http.delete("/v1/clusters/prod", headers=admin | {"If-Match": etag})
    assert stale.status_code == 412 and stale.json()["field"] == "If-Match"
    assert snapshot(keyed) == before
    fresh = http.get("/v1/clusters/prod", headers=admin).headers["etag"]
    assert http.delete("/v1/clusters/prod", headers=admin | {"If-Match": fresh}
                       ).status_code == 200


def test_a_private_server_url_is_refused_unless_allowed(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    """VMs in another cloud could not join 10.0.0.5: refused, nothing written, unless the
    caller says (allowPrivateAddress) that peering or a VPN makes it reachable."""
    before = snapshot(keyed)
    url = "https://10.0.0.5:6443"
    resp = register(http, callers["admin"], serverUrl=url)
    assert resp.status_code == 400, resp.text
    problem = resp.json()
    assert (problem["code"], problem["field"], problem["value"]) == (
        "INVALID_ARGUMENT", "--server-url", url)
    assert "private (RFC 1918)" in problem["rule"]
    assert "--allow-private-address" in problem["rule"] and snapshot(keyed) == before
    made = register(http, callers["admin"], serverUrl=url, allowPrivateAddress=True)
    assert made.status_code == 201, made.text
    assert made.json()["serverUrl"] == url and made.json()["state"] == "ready"


def _as_yaml_object() -> Any:
    import yaml

    return yaml.safe_load(kubeconfig())


@pytest.mark.parametrize("sent", [_as_yaml_object(), [kubeconfig()], {"k": [kubeconfig()]}],
                         ids=["object", "list", "nested"])
def test_a_kubeconfig_of_another_type_is_never_echoed(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]], sent: Any) -> None:
    """A kubeconfig sent as JSON (an object, a list) is refused without its token in the
    answer, on register and on update; a whole body sent as a list too."""
    before = snapshot(keyed)
    admin = callers["admin"]
    made = register(http, admin, kubeconfig=sent)
    assert made.status_code == 422 and made.json()["field"] == "kubeconfig", made.text
    updated = http.put("/v1/clusters/prod/kubeconfig", json={"kubeconfig": sent},
                       headers=admin)
    assert updated.status_code == 422, updated.text
    listed = http.post("/v1/clusters", json=[{"name": "prod", "kubeconfig": kubeconfig()}],
                       headers=admin)
    assert listed.status_code == 422, listed.text
    for answer in (made, updated, listed):
        assert TOKEN not in answer.text and CA_DATA not in answer.text
    assert snapshot(keyed) == before


@pytest.mark.parametrize(("text", "why"), [
    (kubeconfig().replace("users:\n- name: admin\n  user:\n", "users: 5\n")
     .replace(f"    token: {TOKEN}\n", ""), "users must be a list, not int"),
    (kubeconfig().replace("- name: admin\n  user:\n", "- 7\n- name: admin\n  user:\n"),
     "users[0] must be a mapping"),
    (kubeconfig().replace("contexts:\n- name: prod\n", "contexts:\n- name: [prod]\n"),
     "contexts[0] must be a mapping with a name"),
])
def test_a_kubeconfig_of_a_broken_shape_is_a_400(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]], text: str,
        why: str) -> None:
    before = snapshot(keyed)
    refused = register(http, callers["admin"], kubeconfig=text)
    assert refused.status_code == 400, refused.text
    problem = refused.json()
    assert problem["field"] == "--kubeconfig" and why in problem["rule"]
    assert problem["value"].startswith("(hidden") and TOKEN not in refused.text
    assert snapshot(keyed) == before


def test_reading_a_kubeconfig_of_a_broken_shape_names_what_is_broken(tmp_path: Path) -> None:
    """The file's reader (embedded mode reads the file itself): a ValueError naming what is
    broken, never a TypeError."""
    from automation.kube.kubeconfig import read_context_target

    path = tmp_path / "config"
    for text, why in (("current-context: prod\nclusters: 5\ncontexts:\n- name: prod\n"
                       "  context:\n    cluster: prod\n", "clusters must be a list"),
                      (kubeconfig().replace(f"certificate-authority-data: {CA_DATA}",
                                            "certificate-authority-data: 5"), "not base64"),
                      (kubeconfig().replace(f"certificate-authority-data: {CA_DATA}",
                                            "certificate-authority: [1]"), "a file's path")):
        path.write_text(text)
        with pytest.raises(ValueError, match=why):
            read_context_target(path)
