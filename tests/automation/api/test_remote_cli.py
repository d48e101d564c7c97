"""The CLI in both modes: the same commands, the same ``--json`` and exit codes, embedded
(the local ledger) and remote (a real API server on loopback over that ledger); and the
commands that choose the mode (``api use``, ``login``, ``api status``)."""

from __future__ import annotations

import base64
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from automation.api.app import create_api
from automation.app import App
from automation.cli import cli
from automation.sealing import SealingKey
from automation.services.tokens import create_token
from automation.serving import ServerThread
from tests.automation.conftest import credential, ready_cluster, snapshot
from tests.imports import modules_loaded_by_each

Run = Callable[..., Result]


@pytest.fixture
def server(app: App) -> Iterator[tuple[str, App]]:
    """A real server on loopback over the test's ledger (``app``: its clock and probe)."""
    thread = ServerThread(create_api(app, limiter=None), "127.0.0.1:0")
    yield thread.url, app
    thread.stop()


@pytest.fixture
def env(tmp_path: Path, ledger_url: str) -> dict[str, str]:
    return {"ANYCLOUD_HOME": str(tmp_path / "home"), "ANYCLOUD_DATABASE_URL": ledger_url,
            "ANYCLOUD_CLI_CONFIG": str(tmp_path / "cli" / "config.json"),
            "ANYCLOUD_API_URL": "", "ANYCLOUD_TOKEN": ""}


def invoke(env: dict[str, str], *args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), env=env, input=stdin, catch_exceptions=False)


def _in_mode(name: str, env: dict[str, str], server: tuple[str, App]) -> tuple[str, Run, App]:
    url, app = server
    kube = Path(env["ANYCLOUD_HOME"]).parent / "kubeconfig.yaml"
    kube.write_text("apiVersion: v1\nkind: Config\n")
    ready_cluster(app, kube)
    credential(app)
    run_env = dict(env)
    if name == "remote":
        run_env |= {"ANYCLOUD_API_URL": url,
                    "ANYCLOUD_TOKEN": create_token(app, "ci", "admin", by="test").token}
    return name, lambda *a, **extra: invoke(run_env | extra, *a), app


@pytest.fixture(params=["embedded", "remote"])
def mode(request: pytest.FixtureRequest, env: dict[str, str],
         server: tuple[str, App]) -> tuple[str, Run, App]:
    """The CLI in one mode, and an App over the same ledger (for set-up and checks)."""
    return _in_mode(request.param, env, server)


@pytest.fixture
def remote(env: dict[str, str], server: tuple[str, App]) -> tuple[str, Run, App]:
    return _in_mode("remote", env, server)


def ok(result: Result) -> Any:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return json.loads(result.stdout)


def refused(result: Result, code: str, exit_code: int = 2) -> dict[str, Any]:
    assert result.exit_code == exit_code, (result.exit_code, result.stdout, result.stderr)
    error: dict[str, Any] = json.loads(result.stdout)["error"]
    assert error["code"] == code, error
    return error


CREATE = ("node-pool", "create", "cpu", "--credentials", "team-aws", "--region", "us-east-1",
          "--vm-type", "m7i.large", "--min-vms", "2", "--max-vms", "2", "--json")


def test_the_node_pool_story_in_both_modes(mode: tuple[str, Run, App]) -> None:
    _, run, _ = mode
    made = ok(run(*CREATE))
    assert (made["name"], made["state"], made["zone"], made["zoneChosen"]) == (
        "cpu", "pending", "us-east-1a", True)
    assert made["cost"]["vms"] == 2
    listed = ok(run("node-pool", "list", "--json"))
    assert [p["id"] for p in listed] == [made["id"]]
    assert ok(run("node-pool", "list", "--cluster", "prod", "--json")) == listed
    status = ok(run("node-pool", "status", "cpu", "--json"))
    assert status["id"] == made["id"] and status["counts"] == {"ready": 0, "starting": 0,
                                                               "draining": 0}
    assert [c["name"] for c in ok(run("cluster", "list", "--json"))] == ["prod"]
    assert [c["name"] for c in ok(run("credentials", "list", "--json"))] == ["team-aws"]
    assert ok(run("node-pool", "delete", "cpu", "--json"))["state"] == "deleting"


@pytest.mark.parametrize(("args", "code", "field"), [
    ((*CREATE[:-1], "--zone", "mars-1a", "--json"), "INVALID_ARGUMENT", "--zone"),
    (("node-pool", "create", "Bad_Name", *CREATE[3:]), "INVALID_ARGUMENT", "name"),
    (("node-pool", "status", "nothing", "--json"), "NOT_FOUND", "node_pool"),
    (("node-pool", "delete", "nothing", "--json"), "NOT_FOUND", "node_pool"),
    (("node-pool", "list", "--cluster", "nowhere", "--json"), "NOT_FOUND", "--cluster"),
    (("token", "revoke", "nobody", "--json"), "NOT_FOUND", "name"),
    (("token", "create", "x", "--role", "root", "--json"), "INVALID_ARGUMENT", "--role"),
    (("token", "create", "x", "--role", "member", "--expires", "99999999999d", "--json"),
     "INVALID_ARGUMENT", "--expires"),
    (("token", "create", "x", "--role", "member", "--expires", "inf", "--json"),
     "INVALID_ARGUMENT", "--expires"),
])
def test_refusals_are_the_same_error_in_both_modes(mode: tuple[str, Run, App],
                                                   args: tuple[str, ...], code: str,
                                                   field: str) -> None:
    _, run, app = mode
    before = snapshot(app)
    error = refused(run(*args), code)
    assert error["field"] == field and error["rule"] and error["message"]
    assert snapshot(app) == before


def test_tokens_in_both_modes(mode: tuple[str, Run, App]) -> None:
    name, run, _ = mode
    made = ok(run("token", "create", "bob", "--role", "member", "--expires", "1h", "--json"))
    assert made["token"].startswith("acy_") and made["role"] == "member"
    assert made["createdBy"].startswith("local:" if name == "embedded" else "ci")
    names = [t["name"] for t in ok(run("token", "list", "--json"))]
    assert "bob" in names and made["token"] not in json.dumps(names)
    assert ok(run("token", "revoke", "bob", "--json"))["state"] == "revoked"


AWS_SECRET = ("NeverOnDisk" * 4)[:40]


def test_a_credentials_secret_in_both_modes(mode: tuple[str, Run, App]) -> None:
    """An access key is sealed in both modes (embedded: under the CLI's own key), shown as a
    fingerprint, rotated, and never printed."""
    _, run, app = mode
    key = SealingKey(os.urandom(32))
    app.sealing = key  # the server's
    cli_key = {"ANYCLOUD_SECRETS_KEY": base64.b64encode(key.raw).decode()}
    secret = {"AWS_SECRET_ACCESS_KEY": AWS_SECRET}
    made = run("credentials", "new", "sealed", "--provider", "aws", "--access-key-id",
               "AKIAIOSFODNN7EXAMPLE", "--json", **secret, **cli_key)
    cred = ok(made)
    assert cred["secret"]["fields"] == {"accessKeyId": "AKIA…MPLE"} and cred["reference"] == {}
    table = run("credentials", "list", **cli_key)
    assert cred["secret"]["fingerprint"] in table.stdout
    rotated = ok(run("credentials", "rotate", "sealed", "--access-key-id",
                     "AKIAIOSFODNN7EXAMPL2", "--json",
                     AWS_SECRET_ACCESS_KEY=AWS_SECRET[::-1], **cli_key))
    assert rotated["secret"]["fingerprint"] != cred["secret"]["fingerprint"]
    for result in (made, table):
        assert "NeverOnDisk" not in result.stdout + result.stderr
    assert "NeverOnDisk" not in str(snapshot(app))
    # Without a key (embedded: none in the environment; remote: the server has none).
    app.sealing = None
    before = snapshot(app)
    refused(run("credentials", "new", "again", "--provider", "aws", "--access-key-id",
                "AKIAIOSFODNN7EXAMPLE", "--json", **secret), "SEALING_KEY_MISSING")
    assert snapshot(app) == before
    assert ok(run("credentials", "delete", "sealed", "--json"))["state"] == "deleted"


def test_remote_mode_sends_a_key_files_contents_and_refuses_local_references(
        remote: tuple[str, Run, App], tmp_path: Path) -> None:
    _, run, app = remote
    app.sealing = SealingKey(os.urandom(32))
    key_file = tmp_path / "sa.json"
    key_file.write_text(json.dumps({
        "type": "service_account", "project_id": "my-project", "private_key_id": "k-9",
        "private_key": "-----BEGIN PRIVATE KEY-----\nNeverOnDisk\n-----END PRIVATE KEY-----\n",
        "client_email": "ci@my-project.iam.gserviceaccount.com"}))
    made = ok(run("credentials", "new", "team-gcp", "--provider", "gcp", "--project",
                  "my-project", "--key-file", str(key_file), "--json"))
    assert made["reference"] == {"project": "my-project"}
    assert made["secret"]["fields"]["clientEmail"] == "ci@my-project.iam.gserviceaccount.com"
    before = snapshot(app)
    error = refused(run("credentials", "new", "p", "--provider", "aws", "--profile", "team",
                        "--json"), "INVALID_ARGUMENT")
    assert error["field"] == "--profile" and "server cannot read" in error["rule"]
    error = refused(run("credentials", "new", "az", "--provider", "azure",
                        "--subscription-id", "00000000-0000-0000-0000-000000000001",
                        "--tenant-id", "00000000-0000-0000-0000-000000000002",
                        "--client-id", "00000000-0000-0000-0000-000000000003", "--json",
                        AZURE_CLIENT_SECRET=""), "INVALID_ARGUMENT")
    assert error["field"] == "AZURE_CLIENT_SECRET"
    # Plain HTTP to another machine: the secret is not sent at all, even where the user
    # lets the token go in the clear (--insecure).
    error = refused(run("--insecure", "credentials", "new", "x", "--provider", "aws",
                        "--access-key-id", "AKIAIOSFODNN7EXAMPLE", "--json",
                        AWS_SECRET_ACCESS_KEY=AWS_SECRET,
                        ANYCLOUD_API_URL="http://api.example.invalid"), "INVALID_ARGUMENT")
    assert error["field"] == "api" and "a secret is sent only over HTTPS" in error["rule"]
    assert snapshot(app) == before


@pytest.mark.usefixtures("memory_runtime_dir")
def test_cluster_register_refresh_delete_in_both_modes(mode: tuple[str, Run, App],
                                                       tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedded mode references the kubeconfig; remote mode sends it (self-contained), and
    the server seals it. The same command, the same JSON shape, the same refusals."""
    from tests.automation.api.test_api_clusters import kubeconfig
    from tests.automation.conftest import DEMO_CA

    name, run, app = mode
    app.sealing = SealingKey(os.urandom(32))
    kube = tmp_path / "edge.yaml"
    kube.write_text(kubeconfig())
    made = ok(run("cluster", "register", "edge", "--kubeconfig", str(kube), "--offline",
                  "--kubernetes-version", "v1.36.2+k3s1", "--ca-file", str(DEMO_CA), "--json"))
    assert made["state"] == "ready"
    if name == "remote":
        assert made["kubeconfigPath"] is None and made["sealedKubeconfig"]["fingerprint"]
    else:
        assert made["kubeconfigPath"] == str(kube) and made["sealedKubeconfig"] is None
    assert "NeverOnDisk" not in str(snapshot(app)) or name == "embedded"
    refused(run("cluster", "register", "edge", "--kubeconfig", str(kube), "--offline",
                "--kubernetes-version", "v1.36.2+k3s1", "--json"), "ALREADY_EXISTS")
    assert ok(run("cluster", "refresh", "edge", "--json"))["lastError"].startswith(
        "cluster not read")
    assert ok(run("cluster", "delete", "edge", "--json"))["state"] == "deleted"


def test_orgs_and_projects_in_both_modes(mode: tuple[str, Run, App]) -> None:
    _, run, app = mode
    org = ok(run("org", "create", "acme", "--json"))
    assert org["name"] == "acme" and org["defaultProvisioner"] is None
    made = ok(run("project", "create", "web", "--org", "acme", "--json"))
    assert made["orgId"] == org["id"]
    # "default": the org that owns the set-up's cluster (made with it)
    assert [o["name"] for o in ok(run("org", "list", "--json"))] == ["acme", "default"]
    assert ok(run("project", "list", "--org", org["id"], "--json")) == [made]
    before = snapshot(app)
    refused(run("org", "create", "acme", "--json"), "ALREADY_EXISTS")
    assert refused(run("project", "create", "x", "--org", "nobody", "--json"),
                   "NOT_FOUND")["field"] == "--org"
    assert refused(run("project", "list", "--org", "nobody", "--json"),
                   "NOT_FOUND")["field"] == "--org"
    assert snapshot(app) == before


def test_deployments_in_both_modes(mode: tuple[str, Run, App],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The server provisions with its own provisioner set (its environment), as the CLI does
    in embedded mode; a project deployment and a placement on a pool, one listing."""
    static = {"a": {"type": "static", "spec": {"runtimes": [
        {"host": "a1.example", "slots": 2, "data_dir": "/data/a",
         "audience_url": "https://a1.example"}]}}}
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps(static))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")
    _, run, app = mode
    ok(run("org", "create", "acme", "--json"))
    ok(run("project", "create", "web", "--org", "acme", "--json"))
    made = ok(run("deployment", "create", "api", "--project", "web", "--start", "--json"))
    assert (made["state"], made["provisioner"], made["runtimeHost"]) == (
        "running", "a", "a1.example")
    status = ok(run("deployment", "status", "api", "--json"))
    assert status["nextStart"] == {"provisioner": "a", "level": "current"}
    assert status["health"]["ok"] is True and status["provisionId"] == made["provisionId"]
    assert ok(run("deployment", "stop", "api", "--json"))["state"] == "stopped"
    assert ok(run("deployment", "restart", "api", "--json"))["state"] == "running"
    ok(run(*CREATE))
    placed = ok(run("deployment", "create", "edge", "--node-pool", "cpu", "--service",
                    "--json"))
    assert placed["kind"] == "service"
    assert [d["name"] for d in ok(run("deployment", "list", "--json"))] == ["api", "edge"]
    assert ok(run("deployment", "status", "edge", "--json")) == placed
    before = snapshot(app)
    assert refused(run("deployment", "start", "edge", "--json"),
                   "INVALID_ARGUMENT")["field"] == "deployment"
    assert refused(run("deployment", "create", "x", "--json"),
                   "INVALID_ARGUMENT")["field"] == "--project"
    assert snapshot(app) == before
    assert ok(run("deployment", "delete", "api", "--json"))["state"] == "deleted"


def test_runtime_tokens_in_both_modes(mode: tuple[str, Run, App], server: tuple[str, App],
                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`deployment token` signs for the runtime the deployment runs on now: a runtime's
    verifier (the published key set, its own audience) accepts it, the other runtime's does
    not, and after a move the tokens name the new runtime. The signing key is sealed."""
    import pwd
    from datetime import datetime, timedelta

    import httpx2

    from automation.auth.runtime_tokens import RuntimeTokenRefused, verify

    static = {name: {"type": "static", "spec": {"runtimes": [
        {"host": f"{name}1.example", "slots": 2, "data_dir": f"/data/{name}",
         "audience_url": f"https://{name}1.example/aud"}]}} for name in ("a", "b")}
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps(static))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")
    config = tmp_path / "config.yaml"
    config.write_text(f"superusers:\n  users: [{pwd.getpwuid(os.geteuid()).pw_name}]\n")
    monkeypatch.setenv("ANYCLOUD_CONFIG", str(config))
    name, run, app = mode
    key = SealingKey(os.urandom(32))
    app.sealing = key
    cli_key = {"ANYCLOUD_SECRETS_KEY": base64.b64encode(key.raw).decode()}
    ok(run("org", "create", "acme", "--json"))
    ok(run("project", "create", "web", "--org", "acme", "--json"))
    made = ok(run("deployment", "create", "api", "--project", "web", "--json"))
    before = snapshot(app)
    error = refused(run("deployment", "token", "api", "--json", **cli_key),
                    "DEPLOYMENT_NOT_RUNNING")
    assert error["field"] == "deployment" and "start" in error["rule"]
    assert snapshot(app) == before
    ok(run("deployment", "start", "api", "--json"))
    assert refused(run("deployment", "token", "api", "--ttl", "7200", "--json", **cli_key),
                   "INVALID_ARGUMENT")["field"] == "ttlSeconds"

    issued = ok(run("deployment", "token", "api", "--ttl", "120", "--json", **cli_key))
    assert (issued["audience"], issued["subject"]) == ("https://a1.example/aud",
                                                        made["provisionId"])
    jwks = ok(run("deployment", "jwks", **cli_key))
    assert [k["kid"] for k in jwks["keys"]] == [issued["keyId"]]
    now = datetime.fromisoformat(issued["expiresAt"]) - timedelta(seconds=60)  # its clock
    mine = made["provisionId"]
    verify(issued["token"], jwks, audience="https://a1.example/aud", now=now, subject=mine)
    with pytest.raises(RuntimeTokenRefused):
        verify(issued["token"], jwks, audience="https://b1.example/aud", now=now,
               subject=mine)
    plain = run("deployment", "token", "api", **cli_key)  # the token alone on stdout
    assert plain.exit_code == 0 and plain.stdout.count(".") == 2 and "\n" not in \
        plain.stdout.strip() and "https://a1.example/aud" in plain.stderr
    if name == "remote":  # the key set is served to anyone: a runtime fetches it first
        served = httpx2.get(f"{server[0]}/v1/.well-known/jwks.json")
        assert served.status_code == 200 and served.json() == jwks

    # Moved by a superuser: its tokens now name b's audience, which a's verifier refuses.
    ok(run("sudo", "project", "edit", "web", "--provisioner", "b", "--json"))
    ok(run("sudo", "project", "restart", "web", "--yes", "--json"))
    moved = ok(run("deployment", "token", "api", "--json", **cli_key))
    assert (moved["audience"], moved["subject"]) == ("https://b1.example/aud",
                                                      made["provisionId"])
    verify(moved["token"], jwks, audience="https://b1.example/aud", now=now, subject=mine)
    with pytest.raises(RuntimeTokenRefused):
        verify(moved["token"], jwks, audience="https://a1.example/aud", now=now,
               subject=mine)
    # The private key is in the ledger only sealed; a token is never stored.
    ledger = str(snapshot(app))
    assert "PRIVATE KEY" not in ledger and issued["token"] not in ledger
    assert ok(run("deployment", "delete", "api", "--json"))["audience"] is None


def test_sudo_in_both_modes(mode: tuple[str, Run, App], monkeypatch: pytest.MonkeyPatch,
                           tmp_path: Path) -> None:
    """Embedded: an OS user the config names a superuser; remote: an admin token (a member's
    is refused by the server, and nothing changes)."""
    import pwd

    statics = {name: {"type": "static", "spec": {"runtimes": [
        {"host": f"{name}1.example", "slots": 2, "data_dir": f"/data/{name}",
         "audience_url": f"https://{name}1.example"}]}} for name in ("a", "b")}
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps(statics))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")
    config = tmp_path / "config.yaml"
    config.write_text(f"superusers:\n  users: [{pwd.getpwuid(os.geteuid()).pw_name}]\n")
    monkeypatch.setenv("ANYCLOUD_CONFIG", str(config))
    name, run, app = mode
    ok(run("org", "create", "acme", "--json"))
    ok(run("project", "create", "web", "--org", "acme", "--json"))
    ok(run("deployment", "create", "api", "--project", "web", "--start", "--json"))
    edited = ok(run("sudo", "project", "edit", "web", "--provisioner", "b", "--json"))
    assert edited["provisioner"] == "b"
    moved = ok(run("sudo", "project", "restart", "web", "--yes", "--json"))
    assert [(d["name"], d["provisioner"], d["runtimeHost"]) for d in moved] == [
        ("api", "b", "b1.example")]
    assert ok(run("sudo", "org", "set-default-provisioner", "acme", "b", "--json"))[
        "defaultProvisioner"] == "b"
    assert ok(run("sudo", "org", "set-default-provisioner", "acme", "--unset", "--json"))[
        "defaultProvisioner"] is None
    assert refused(run("sudo", "project", "edit", "web", "--provisioner", "zz", "--json"),
                   "INVALID_ARGUMENT")["field"] == "--provisioner"
    member = create_token(app, "dev", "member", by="test").token
    before = snapshot(app)
    if name == "remote":
        refused(run("sudo", "project", "edit", "web", "--unset-provisioner", "--json",
                    ANYCLOUD_TOKEN=member), "PERMISSION_DENIED")
    else:
        config.write_text("superusers:\n  users: [somebody-else]\n")
        refused(run("sudo", "project", "edit", "web", "--unset-provisioner", "--json"),
                "PERMISSION_DENIED")
    assert snapshot(app) == before


# -- remote mode only --------------------------------------------------------------------------


def test_api_use_login_status_and_back_to_local(server: tuple[str, App],
                                                env: dict[str, str]) -> None:
    url, app = server
    token = create_token(app, "alice", "member", by="test").token
    # As `serve` prints it (…/v1) or without the path: the same base URL is kept.
    assert ok(invoke(env, "api", "use", f"{url}/v1/", "--json"))["apiUrl"] == url
    used = ok(invoke(env, "api", "use", url, "--json"))
    assert used == {"mode": "remote", "apiUrl": url, "configFile": env["ANYCLOUD_CLI_CONFIG"],
                    "insecure": False}
    config = Path(env["ANYCLOUD_CLI_CONFIG"])
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    refused(invoke(env, "node-pool", "list", "--json"), "UNAUTHENTICATED")
    refused(invoke(env, "login", "--json", stdin="acy_" + "x" * 43 + "\n"), "UNAUTHENTICATED")
    assert "token" not in json.loads(config.read_text())
    logged = ok(invoke(env, "login", "--json", stdin=token + "\n"))
    assert (logged["name"], logged["role"]) == ("alice", "member")
    assert json.loads(config.read_text())["token"] == token
    status = ok(invoke(env, "api", "status", "--json"))
    assert (status["mode"], status["apiUrl"], status["source"], status["identity"],
            status["role"], status["tokenSource"]) == ("remote", url, "config file", "alice",
                                                       "member", "config file")
    assert status["serverVersion"] == status["clientVersion"]
    # A member may not make tokens: the server says so, as it would say to the SDK.
    refused(invoke(env, "token", "create", "x", "--role", "viewer", "--json"),
            "PERMISSION_DENIED")
    # --api local for one command; env beats the file; api use local for good.
    assert ok(invoke(env, "--api", "local", "api", "status", "--json"))["mode"] == "embedded"
    assert ok(invoke(env | {"ANYCLOUD_API_URL": "local"}, "api", "status", "--json"))[
        "source"] == "env"
    assert ok(invoke(env, "api", "use", "local", "--json"))["mode"] == "embedded"
    assert json.loads(config.read_text()) == {}


def test_api_use_refuses_what_it_cannot_reach_and_keeps_the_old_choice(
        server: tuple[str, App], env: dict[str, str]) -> None:
    url, _ = server
    ok(invoke(env, "api", "use", url, "--json"))
    before = Path(env["ANYCLOUD_CLI_CONFIG"]).read_text()
    refused(invoke(env, "api", "use", "http://127.0.0.1:9", "--json"), "UNAVAILABLE", 1)
    refused(invoke(env, "api", "use", "ftp://x", "--json"), "INVALID_ARGUMENT")
    refused(invoke(env, "api", "use", f"{url}/v2", "--json"), "INVALID_ARGUMENT")
    not_pem = Path(env["ANYCLOUD_HOME"]).parent / "not-a-ca.txt"
    not_pem.write_text("hello")
    error = refused(invoke(env, "api", "use", "https://127.0.0.1:9", "--ca-file", str(not_pem),
                           "--json"), "INVALID_ARGUMENT")
    assert error["field"] == "caFile"
    assert Path(env["ANYCLOUD_CLI_CONFIG"]).read_text() == before


ELSEWHERE = "http://api.example.invalid"  # plain HTTP to another machine (never resolves)


def test_the_token_goes_in_the_clear_only_to_loopback_or_with_insecure(
        server: tuple[str, App], env: dict[str, str]) -> None:
    url, app = server
    token = create_token(app, "alice", "member", by="test").token
    config = Path(env["ANYCLOUD_CLI_CONFIG"])
    # Plain HTTP to another machine: refused before anything is sent, naming where the URL
    # came from and why; an HTTPS URL or --insecure would go (and then finds no server).
    for args, extra, field in (
            ((), {"ANYCLOUD_API_URL": ELSEWHERE}, "ANYCLOUD_API_URL"),
            (("--api", ELSEWHERE), {}, "--api")):
        error = refused(invoke(env | extra | {"ANYCLOUD_TOKEN": token}, *args, "node-pool",
                               "list", "--json"), "INVALID_ARGUMENT")
        assert (error["field"], error["value"]) == (field, ELSEWHERE), error
        assert "the API token is sent only over HTTPS" in error["rule"], error
        assert "--insecure" in error["rule"]
    sent = invoke(env | {"ANYCLOUD_TOKEN": token}, "--insecure", "--api", ELSEWHERE,
                  "node-pool", "list", "--json")
    refused(sent, "UNAVAILABLE", 1)  # it tried: the user said so
    refused(invoke(env, "api", "use", ELSEWHERE, "--json"), "INVALID_ARGUMENT")
    refused(invoke(env, "--api", ELSEWHERE, "login", "--json", stdin=token + "\n"),
            "INVALID_ARGUMENT")
    assert not config.exists()  # nothing kept
    # The config file's consent (what `api use URL --insecure` writes) is for its URL alone.
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"apiUrl": ELSEWHERE, "token": token, "insecure": "true"}))
    refused(invoke(env, "node-pool", "list", "--json"), "UNAVAILABLE", 1)
    assert ok(invoke(env, "api", "use", "local", "--json"))["mode"] == "embedded"
    assert json.loads(config.read_text()) == {}
    config.write_text(json.dumps({"apiUrl": ELSEWHERE, "token": token, "insecure": "true"}))
    error = refused(invoke(env | {"ANYCLOUD_API_URL": "http://other.example.invalid"},
                           "node-pool", "list", "--json"), "INVALID_ARGUMENT")
    assert error["field"] == "ANYCLOUD_API_URL"
    # Loopback is this machine: plain HTTP is fine there, and `api use --insecure` is kept.
    used = ok(invoke(env, "api", "use", url, "--insecure", "--json"))
    assert used["insecure"] is True and json.loads(config.read_text())["insecure"] == "true"
    ok(invoke(env, "login", "--json", stdin=token + "\n"))
    assert ok(invoke(env, "api", "status", "--json"))["insecure"] is True
    assert ok(invoke(env, "api", "use", url, "--json"))["insecure"] is False
    assert "insecure" not in json.loads(config.read_text())
    assert ok(invoke(env, "node-pool", "list", "--json")) == []


@pytest.mark.parametrize(("url", "clear"), [
    ("http://127.0.0.1:8443", False), ("http://127.3.4.5", False), ("http://localhost:1", False),
    ("http://LOCALHOST", False), ("http://[::1]:8443", False),
    ("http://[::ffff:127.0.0.1]:8443", False), ("https://cp.example.com", False),
    ("https://10.0.0.1", False), ("http://cp.example.com", True), ("http://10.0.0.1:8443", True),
    ("http://128.0.0.1", True), ("http://[::2]:8443", True),
    ("http://localhost.example.com", True), ("http://127.0.0.1.nip.io", True),
])
def test_what_counts_as_in_the_clear(url: str, clear: bool) -> None:
    from automation.client.config import in_the_clear

    assert in_the_clear(url) is clear


def test_cost_in_both_modes(mode: tuple[str, Run, App]) -> None:
    """The same sums from the same ledger, and the same refusal of a bad --since."""
    _, run, app = mode
    ok(run(*CREATE))
    report = ok(run("cost", "--by", "cluster", "--since", "2020-11-01", "--json"))
    assert report["by"] == "cluster" and report["since"].startswith("2020-11-01T00:00:00")
    assert report["totalVmHours"] == 0 and report["lines"] == []  # no VM confirmed yet
    assert ok(run("cost", "--json"))["by"] == "pool"
    before = snapshot(app)
    error = refused(run("cost", "--since", "last tuesday", "--json"), "INVALID_ARGUMENT")
    assert (error["field"], error["value"]) == ("--since", "last tuesday")
    assert snapshot(app) == before


def test_plan_policy_and_unlock_in_both_modes(mode: tuple[str, Run, App],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack evaluated offline where the ledger is (the server, in remote mode): the
    same plan and findings; unlock with the server's engine, which the caller cannot pick."""
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")
    name, run, app = mode
    made = ok(run(*CREATE))
    plan = ok(run("node-pool", "plan", "cpu", "--json"))
    assert (plan["engine"], plan["pool"], plan["cost"]["vms"]) == ("mock", made["id"], 2)
    types = {r["type"] for r in plan["resources"]}
    assert {"aws:ec2/vpc:Vpc", "aws:ec2/instance:Instance"} <= types, types
    vms = [r for r in plan["resources"] if r["type"] == "aws:ec2/instance:Instance"]
    assert vms and all(vm["inputs"]["userData"] == "[secret]" for vm in vms)  # a join token
    report = ok(run("policy", "check", "cpu", "--json"))
    assert [r["stack"] for r in report] == [plan["stack"]]
    assert not [f for f in report[0]["findings"] if f["enforcement"] == "mandatory"]
    before = snapshot(app)
    unlocked = ok(run("node-pool", "unlock", "cpu", "--json"))
    assert unlocked == {"stack": plan["stack"], "engine": "mock", "unlocked": False,
                        "ingressRelease": None}
    assert refused(run("node-pool", "plan", "nothing", "--json"), "NOT_FOUND")
    if name == "remote":
        error = refused(run("node-pool", "unlock", "cpu", "--engine", "mock", "--json"),
                        "INVALID_ARGUMENT")
        assert error["field"] == "--engine"
    assert snapshot(app) == before


def test_a_command_without_an_api_route_is_refused_in_remote_mode(
        server: tuple[str, App], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every command has a route or runs on the control plane's host on purpose (serve,
    reconcile, broker, operator); one added without either would reach for the local ledger,
    and is refused instead."""
    import click

    from automation.cli.context import ledger_from
    from automation.errors import AnycloudError

    url, _ = server
    monkeypatch.setenv("ANYCLOUD_CLI_CONFIG", str(tmp_path / "cli.json"))
    root = click.Context(cli, info_name="anycloud", obj={"home": str(tmp_path), "api": url})
    fresh = click.Context(click.Command("fresh"), parent=root, info_name="fresh")
    with pytest.raises(AnycloudError) as err:
        ledger_from(fresh)
    assert err.value.code == "UNIMPLEMENTED"
    assert "`fresh` is not served by the API yet" in err.value.message
    assert not (tmp_path / "anycloud.db").exists()


def test_bootstrap_in_remote_mode_writes_the_servers_own_ledger(
        server: tuple[str, App], env: dict[str, str]) -> None:
    url, _ = server
    ok(invoke(env, "api", "use", url, "--json"))
    made = ok(invoke(env, "token", "create", "root", "--role", "admin", "--bootstrap", "--json"))
    assert made["role"] == "admin" and made["createdBy"].startswith("local:")


# What a remote command must never load: the server's code and its stack (issue 35).
SERVER_STACK = ("automation.api", "automation.ui", "automation.services", "automation.ledger",
                "automation.engine", "automation.reconciler", "automation.app",
                "automation.kube", "automation.catalog", "automation.provisioners",
                "automation.agentpools", "sqlalchemy", "alembic", "psycopg", "fastapi",
                "starlette", "uvicorn", "pulumi", "pulumi_aws", "pulumi_gcp",
                "pulumi_azure_native", "pulumi_kubernetes", "kubernetes")
# What a read that only prints the server's answer need not load (the thin client).
MODELS = ("pydantic", "pydantic_core", "automation.models")


def _under(modules: object, roots: tuple[str, ...]) -> list[str]:
    assert isinstance(modules, list)
    return [m for m in modules if any(m == r or m.startswith(r + ".") for r in roots)]


def test_remote_mode_is_a_thin_client(remote: tuple[str, Run, App], server: tuple[str, App],
                                      env: dict[str, str]) -> None:
    """One process runs the reads, then writes and the other groups' commands, as a user
    would in remote mode: the reads load no model and no pydantic, and nothing loads any of
    the server's code. Each command's output is checked, so a refusal cannot pass for thin."""
    _, run, app = remote
    ok(run(*CREATE))
    ok(run("node-pool", "status", "cpu", "--json"))
    url, _ = server
    probe = env | {"ANYCLOUD_API_URL": url,
                   "ANYCLOUD_TOKEN": create_token(app, "probe", "admin", by="test").token}
    reads = [["node-pool", "list", "--json"], ["node-pool", "status", "cpu", "--json"],
             ["node-pool", "history", "cpu", "--json"], ["node-pool", "list"],
             ["node-pool", "status", "cpu"], ["node-pool", "history", "cpu"]]
    others = [["token", "list", "--json"], ["cluster", "list", "--json"],
              ["credentials", "list", "--json"], ["org", "list", "--json"],
              ["deployment", "list", "--json"], ["catalog", "list", "--provider", "aws",
                                                 "--json"],
              ["cost", "--json"], ["node-pool", "create", "gpu", *CREATE[3:]],
              ["node-pool", "delete", "gpu", "--json"], ["node-pool", "status", "nothing"]]
    ran = modules_loaded_by_each(reads + others, probe)
    assert [r["exit"] for r in ran] == [0] * (len(ran) - 1) + [2], ran
    assert json.loads(str(ran[0]["stdout"]))[0]["name"] == "cpu"
    assert json.loads(str(ran[1]["stdout"]))["vmType"] == "m7i.large"
    assert "Node pool cpu" in str(ran[4]["stdout"]) and "cpu" in str(ran[3]["stdout"])
    assert json.loads(str(ran[-2]["stdout"]))["state"] == "deleting"
    after_reads = ran[len(reads) - 1]["modules"]
    assert _under(after_reads, MODELS) == [], "a read loaded the models"
    assert _under(ran[-1]["modules"], SERVER_STACK) == []


def test_text_views_are_the_same_in_both_modes(env: dict[str, str],
                                               server: tuple[str, App]) -> None:
    """The text of list, status and history is built from JSON in both modes: the models
    dumped (embedded) and the server's JSON as it came (remote) give the same lines."""
    _, embedded, _ = _in_mode("embedded", env, server)
    url, app = server
    remote_env = env | {"ANYCLOUD_API_URL": url,
                        "ANYCLOUD_TOKEN": create_token(app, "text", "viewer", by="test").token}
    ok(embedded(*CREATE))
    for args in (("node-pool", "list"), ("node-pool", "status", "cpu"),
                 ("node-pool", "history", "cpu")):
        here, there = embedded(*args), invoke(remote_env, *args)
        assert here.exit_code == there.exit_code == 0, (here.stderr, there.stderr)
        assert here.stdout == there.stdout and "cpu" in here.stdout


def test_the_client_retries_a_post_under_one_idempotency_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first answer is lost (the connection drops after the server acted): the retry
    carries the same key, so the server answers it from the first run."""
    import httpx2

    from automation.client import http as client_http

    monkeypatch.setattr(client_http.time, "sleep", lambda _: None)
    seen: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers["Idempotency-Key"])
        if len(seen) == 1:
            raise httpx2.ReadError("connection reset", request=request)
        return httpx2.Response(201, json={"ok": True})

    api = client_http.ApiClient("http://api.invalid", "acy_" + "t" * 43)
    api._http = httpx2.Client(base_url="http://api.invalid/v1",
                              transport=httpx2.MockTransport(handler))
    assert api.call("POST", "/node-pools", dict, json={"name": "x"}) == {"ok": True}
    assert len(seen) == 2 and seen[0] == seen[1] and len(seen[0]) == 32


def test_the_client_waits_out_a_429_but_never_repeats_a_delete_otherwise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import httpx2

    from automation.client import http as client_http

    waits: list[float] = []
    monkeypatch.setattr(client_http.time, "sleep", waits.append)
    answers = iter([httpx2.Response(429, headers={"Retry-After": "2"}, json={"code": "R"}),
                    httpx2.Response(200, json={"ok": True}),
                    httpx2.Response(503, json={"code": "UNAVAILABLE", "detail": "down"})])
    api = client_http.ApiClient("http://api.invalid", "acy_" + "t" * 43)
    api._http = httpx2.Client(base_url="http://api.invalid/v1", transport=httpx2.MockTransport(
        lambda request: next(answers)))
    assert api.call("DELETE", "/node-pools/x", dict) == {"ok": True}
    assert waits == [2.0]
    with pytest.raises(client_http.AnycloudError) as caught:
        api.call("DELETE", "/node-pools/y", dict)  # a 503 on a DELETE: said, not repeated
    assert caught.value.code == "UNAVAILABLE" and waits == [2.0]


def test_an_agent_pools_token_is_revoked_by_its_name_remotely(
        remote: tuple[str, Run, App]) -> None:
    from automation.auth.tokens import mint_agent_token

    _, run, app = remote
    mint_agent_token(app.ledger, "ml/gpu", by="operator", now=app.clock.now())
    done = ok(run("token", "revoke", "agentpool/ml/gpu", "--json"))
    assert (done["name"], done["state"]) == ("agentpool/ml/gpu", "revoked")


def test_the_catalog_in_both_modes(mode: tuple[str, Run, App]) -> None:
    """The same rows, the same refusals naming the flag typed, in both modes."""
    _, run, app = mode
    before = snapshot(app)
    rows = ok(run("catalog", "list", "--gpu", "H100", "--provider", "aws", "--min-memory",
                  "64", "--max-price", "1000", "--json"))
    assert rows and all(r["provider"] == "aws" and r["gpus"] >= 1 for r in rows)
    assert rows[0]["priceSource"]["asOf"] and rows[0]["memoryGib"] >= 64
    shown = ok(run("catalog", "show", "m7i.large", "--json"))
    assert shown["vmType"] == "m7i.large" and shown["offerings"] and shown["sources"]
    assert ok(run("catalog", "refreshes", "--json")) == []
    for args, field in ((("list", "--provider", "oracle"), "--provider"),
                        (("list", "--zone", "us-east-1a"), "--zone"),
                        (("show", "m7i.larg"), "VM_TYPE")):
        error = refused(run("catalog", *args, "--json"), "INVALID_ARGUMENT")
        assert error["field"] == field and error["rule"], error
    assert "did you mean m7i.large" in refused(
        run("catalog", "show", "m7i.larg", "--json"), "INVALID_ARGUMENT")["rule"]
    error = refused(run("catalog", "refresh", "--credentials", "nope", "--json"), "NOT_FOUND")
    assert "nope" in error["message"]
    text = run("catalog", "show", "m7i.large")
    assert text.exit_code == 0 and "us-east-1" in text.stdout and "Sources" in text.stdout
    assert snapshot(app) == before
