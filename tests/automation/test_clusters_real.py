"""``anycloud cluster register/status/refresh`` against the real control plane.

Through the CLI (click's runner, and once the installed command in a subprocess) with the
real probe: what a record holds is checked against what the API server and its CA file say.
The service-level cases with scripted answers stay in test_clusters.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from automation.cli import cli
from automation.devcluster.control_plane import ControlPlane, kubeconfig_document
from tests.automation.kube.objects import wait_for

pytestmark = pytest.mark.kube

ANYCLOUD = Path(sys.executable).with_name("anycloud")
PUBLIC = "https://203.0.113.10:6443"  # what agents would join (TEST-NET-3: never dialled)
K8S_VERSION = "v1.36.3"  # what tools/build.py builds the API server as

Run = Callable[..., Result]


@pytest.fixture
def anycloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setenv("ANYCLOUD_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ANYCLOUD_DATABASE_URL", raising=False)

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    return invoke


def ok(result: Result) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def refused(result: Result) -> dict[str, Any]:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    error: dict[str, Any] = json.loads(result.stdout)["error"]
    return error


def kube_system_uid(plane: ControlPlane) -> str:
    uid = plane.kubectl("get", "namespace", "kube-system",
                        "-o", "jsonpath={.metadata.uid}").stdout.strip()
    assert uid, "kubectl printed no kube-system UID"
    return uid


def ca_sha256(plane: ControlPlane) -> str:
    return hashlib.sha256(plane.pki.ca_cert.read_bytes()).hexdigest()


def assert_read_from(plane: ControlPlane, record: dict[str, Any]) -> None:
    assert record["state"] == "ready" and record["factsSource"] == "cluster"
    assert record["kubernetesVersion"] == K8S_VERSION
    assert record["kubeSystemUid"] == kube_system_uid(plane)
    assert record["caSha256"] == ca_sha256(plane)
    assert record["lastError"] is None


@pytest.fixture
def service_account(control_plane: ControlPlane, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A kubeconfig of a ServiceAccount granted nothing, and its user name; whatever the
    test grants it is named ``anycloud-test-<its namespace>`` and removed afterwards."""
    namespace = f"clusters-{secrets.token_hex(3)}"
    path = control_plane.token_kubeconfig(tmp_path / "sa.kubeconfig", "registrar", namespace)
    yield path, namespace
    grant = f"anycloud-test-{namespace}"
    control_plane.kubectl("delete", "clusterrolebinding", grant, "--ignore-not-found")
    control_plane.kubectl("delete", "clusterrole", grant, "--ignore-not-found")
    control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.mark.parametrize("server_url", [None, "loopback"])
def test_a_loopback_api_address_is_refused(control_plane: ControlPlane, anycloud: Run,
                                           server_url: str | None) -> None:
    """The admin kubeconfig names https://127.0.0.1:<port>; agents in other clouds could
    never join that, whether it comes from the kubeconfig or from --server-url."""
    extra = ["--server-url", control_plane.server] if server_url else []
    field = "--server-url" if server_url else "--kubeconfig"
    args = ["cluster", "register", "prod", "--kubeconfig", str(control_plane.kubeconfig), *extra]

    error = refused(anycloud(*args, "--json"))
    assert error["code"] == "INVALID_ARGUMENT"
    assert (error["field"], error["value"]) == (field, control_plane.server)
    assert error["rule"] == (
        "must be a public address, not loopback: VMs in another cloud could not join it; "
        "give the cluster's public address with --server-url, or pass "
        "--allow-private-address when VPC peering or a VPN makes it reachable from them")
    human = anycloud(*args)
    assert human.exit_code == 2 and human.stdout == ""
    assert f"{field} '{control_plane.server}': must be a public address" in human.stderr
    assert ok(anycloud("cluster", "list", "--json")) == []  # nothing recorded


def test_register_with_server_url_reads_the_real_cluster(control_plane: ControlPlane,
                                                         anycloud: Run) -> None:
    cluster = ok(anycloud("cluster", "register", "prod", "--kubeconfig",
                          str(control_plane.kubeconfig), "--server-url", PUBLIC, "--json"))
    assert_read_from(control_plane, cluster)
    assert cluster["serverUrl"] == PUBLIC
    assert cluster["kubeconfigPath"] == str(control_plane.kubeconfig.resolve())
    assert ok(anycloud("cluster", "status", "prod", "--json")) == cluster
    assert ok(anycloud("cluster", "status", cluster["id"], "--json")) == cluster
    listed = ok(anycloud("cluster", "list", "--json"))
    assert [(c["id"], c["state"]) for c in listed] == [(cluster["id"], "ready")]

    shown = anycloud("cluster", "status", "prod")
    assert shown.exit_code == 0
    for value in (K8S_VERSION, cluster["kubeSystemUid"], cluster["caSha256"], PUBLIC):
        assert value in shown.stdout


@pytest.mark.parametrize(("offline", "before"), [
    ([], ("pending", None, None)),
    (["--kubernetes-version", "v1.35.1+k3s1"], ("ready", "v1.35.1+k3s1", "offline")),
])
def test_refresh_of_an_offline_record_reads_the_real_cluster(
    control_plane: ControlPlane, anycloud: Run, offline: list[str],
    before: tuple[str, str | None, str | None],
) -> None:
    registered = ok(anycloud("cluster", "register", "prod", "--kubeconfig",
                             str(control_plane.kubeconfig), "--server-url", PUBLIC,
                             "--offline", *offline, "--json"))
    assert (registered["state"], registered["kubernetesVersion"],
            registered["factsSource"]) == before
    assert registered["kubeSystemUid"] is None
    assert registered["caSha256"] == ca_sha256(control_plane)  # from the kubeconfig

    refreshed = ok(anycloud("cluster", "refresh", "prod", "--json"))
    assert_read_from(control_plane, refreshed)
    assert refreshed["id"] == registered["id"] and refreshed["serverUrl"] == PUBLIC
    assert ok(anycloud("cluster", "status", "prod", "--json")) == refreshed


def test_a_service_account_without_rights_stays_pending_until_granted(
    control_plane: ControlPlane, anycloud: Run, service_account: tuple[Path, str],
) -> None:
    kc, namespace = service_account
    user = f"system:serviceaccount:{namespace}:registrar"
    denial = (f"cluster not read: the API server answered 403 Forbidden: the cluster's RBAC "
              f"denies `get` on `namespaces`; grant it to the identity in the registered "
              f"kubeconfig (namespaces \"kube-system\" is forbidden: User \"{user}\" cannot get "
              f"resource \"namespaces\" in API group \"\" in the namespace \"kube-system\")")

    pending = ok(anycloud("cluster", "register", "prod", "--kubeconfig", str(kc),
                          "--server-url", PUBLIC, "--json"))
    assert pending["state"] == "pending" and pending["factsSource"] is None
    assert pending["kubernetesVersion"] is None and pending["kubeSystemUid"] is None
    assert pending["caSha256"] == ca_sha256(control_plane)
    assert pending["lastError"] == denial

    # No node pool on it, and the refusal says why.
    ok(anycloud("credentials", "new", "team", "--provider", "aws", "--profile", "team",
                "--json"))
    error = refused(anycloud("node-pool", "create", "cpu", "--credentials", "team",
                             "--region", "us-east-1", "--vm-type", "m7i.large",
                             "--min-vms", "1", "--max-vms", "1", "--json"))
    assert error["code"] == "NODE_POOLS_UNAVAILABLE" and error["value"] == "prod"
    assert "denies `get` on `namespaces`" in error["message"]

    still = ok(anycloud("cluster", "refresh", "prod", "--json"))
    assert (still["state"], still["lastError"]) == ("pending", denial)

    grant = f"anycloud-test-{namespace}"
    control_plane.kubectl("create", "clusterrole", grant, "--verb=get",
                          "--resource=namespaces", "--resource-name=kube-system")
    control_plane.kubectl("create", "clusterrolebinding", grant, f"--clusterrole={grant}",
                          f"--serviceaccount={namespace}:registrar")
    # The authorizer sees the binding once its informer has it.
    wait_for(f"{user} may get namespaces/kube-system", lambda: control_plane.kubectl(
        "auth", "can-i", "get", "namespaces/kube-system", f"--as={user}", check=False,
    ).stdout.strip() == "yes")

    assert_read_from(control_plane, ok(anycloud("cluster", "refresh", "prod", "--json")))
    ok(anycloud("node-pool", "create", "cpu", "--credentials", "team", "--region",
                "us-east-1", "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1",
                "--json"))


def test_rejected_credentials_leave_the_record_pending(control_plane: ControlPlane,
                                                       anycloud: Run, tmp_path: Path) -> None:
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump(kubeconfig_document(
        control_plane.server, control_plane.pki.ca_cert, token="abcdef.0123456789abcdef")))
    pending = ok(anycloud("cluster", "register", "prod", "--kubeconfig", str(kc),
                          "--server-url", PUBLIC, "--json"))
    assert pending["state"] == "pending" and pending["kubernetesVersion"] is None
    assert pending["lastError"] == (
        "cluster not read: the API server rejected the registered credentials "
        "(401 Unauthorized); give it a new one with `anycloud cluster update NAME "
        "--kubeconfig FILE`")
    # A new kubeconfig for the same cluster: read, checked (the same CA; no UID was known)
    # and recorded, the record ready.
    updated = ok(anycloud("cluster", "update", "prod", "--kubeconfig",
                          str(control_plane.kubeconfig), "--json"))
    assert_read_from(control_plane, updated)
    assert updated["kubeconfigPath"] == str(control_plane.kubeconfig.resolve())
    assert updated["serverUrl"] == PUBLIC  # what agents join is kept
    # Now that its UID is known, a kubeconfig that reaches nothing is refused: unchanged.
    again = refused(anycloud("cluster", "update", "prod", "--kubeconfig", str(kc), "--json"))
    assert again["field"] == "--kubeconfig" and "did not reach the cluster" in again["message"]
    assert ok(anycloud("cluster", "status", "prod", "--json")) == updated


def test_installed_command_registers_and_refreshes_the_real_cluster(
    control_plane: ControlPlane, tmp_path: Path,
) -> None:
    assert ANYCLOUD.exists(), "the package is not installed (pip install -e .)"
    env = {**os.environ, "ANYCLOUD_HOME": str(tmp_path / "home")}
    env.pop("ANYCLOUD_DATABASE_URL", None)

    def anycloud(*args: str) -> Any:
        done = subprocess.run([str(ANYCLOUD), *args, "--json"], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        return json.loads(done.stdout)

    registered = anycloud("cluster", "register", "prod", "--kubeconfig",
                          str(control_plane.kubeconfig), "--server-url", PUBLIC)
    assert_read_from(control_plane, registered)
    refreshed = anycloud("cluster", "refresh", "prod")
    assert_read_from(control_plane, refreshed)
    assert refreshed["id"] == registered["id"]
    assert refreshed["updatedAt"] > registered["updatedAt"]


@pytest.mark.usefixtures("memory_runtime_dir")
def test_a_kubeconfig_sent_to_the_api_reads_the_real_cluster(
        control_plane: ControlPlane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Remote mode against a real server on loopback, with the real probe: the kubeconfig
    travels as contents, is sealed, and is opened into a memory-only file to read the real
    API server at registration and afterwards (the reconciler's cluster port)."""
    from automation.api.app import create_api
    from automation.app import App
    from automation.kube.adapter import KubernetesCluster
    from automation.ledger import open_ledger
    from automation.sealing import SealingKey
    from automation.services.clusters import cluster_row
    from automation.services.tokens import create_token
    from automation.serving import ServerThread

    ledger = open_ledger(f"sqlite:///{tmp_path / 'server.db'}")
    app = App(ledger=ledger, home=tmp_path / "server-home")
    app.sealing = SealingKey(os.urandom(32))
    server = ServerThread(create_api(app), "127.0.0.1:0")
    try:
        env = {"ANYCLOUD_API_URL": server.url, "ANYCLOUD_CLI_CONFIG": str(tmp_path / "c.json"),
               "ANYCLOUD_TOKEN": create_token(app, "ci", "admin", by="test").token}
        result = CliRunner().invoke(cli, ["cluster", "register", "prod", "--kubeconfig",
                                          str(control_plane.kubeconfig), "--server-url",
                                          PUBLIC, "--json"], env=env, catch_exceptions=False)
        cluster = ok(result)
        assert_read_from(control_plane, cluster)
        assert cluster["kubeconfigPath"] is None and cluster["sealedKubeconfig"]
        path = app.kubeconfig_path(cluster_row(app, "prod"))
        assert path is not None and path.startswith("/dev/shm/")
        port = KubernetesCluster(Path(path), None)
        version, uid = port.identity()
        assert (version, uid) == (K8S_VERSION, kube_system_uid(control_plane))
        # A new kubeconfig of the same cluster (another user, a token): sent, read, sealed in
        # place of the old one.
        token_kc = control_plane.token_kubeconfig(tmp_path / "ops.kubeconfig", "ops",
                                                  "kube-system")
        control_plane.kubectl("create", "clusterrolebinding", "anycloud-test-ops-view",
                              "--clusterrole=view", "--serviceaccount=kube-system:ops")
        try:
            wait_for("ops may get namespaces", lambda: control_plane.kubectl(
                "auth", "can-i", "get", "namespaces/kube-system",
                "--as=system:serviceaccount:kube-system:ops", check=False,
            ).stdout.strip() == "yes")
            updated = ok(CliRunner().invoke(cli, [
                "cluster", "update", "prod", "--kubeconfig", str(token_kc), "--json"],
                env=env, catch_exceptions=False))
        finally:
            control_plane.kubectl("delete", "clusterrolebinding", "anycloud-test-ops-view",
                                  "--ignore-not-found")
        assert_read_from(control_plane, updated)
        assert updated["sealedKubeconfig"]["rotatedAt"] is not None
        assert updated["sealedKubeconfig"]["fingerprint"] != \
            cluster["sealedKubeconfig"]["fingerprint"]
        opened = Path(app.kubeconfig_path(cluster_row(app, "prod")) or "").read_text()
        assert opened == token_kc.read_text()
    finally:
        server.stop()
        ledger.dispose()
