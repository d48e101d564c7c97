"""The CLI through click's runner, and through real subprocesses of the installed command.

The full flow registers the real control plane (``control_plane``); the other cases register
a cluster offline, at an address nobody dials.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from automation.devcluster.control_plane import ControlPlane, kubeconfig_document
from tests.automation.conftest import DEMO_CA, ok_json
from tests.imports import modules_loaded_by

ANYCLOUD = Path(sys.executable).with_name("anycloud")


def _offline_kubeconfig(path: Path, *, ca: bool = True) -> Path:
    """A kubeconfig of a cluster at 203.0.113.10 (TEST-NET-3), with or without its CA."""
    doc = kubeconfig_document("https://203.0.113.10:6443", DEMO_CA)
    if not ca:
        del doc["clusters"][0]["cluster"]["certificate-authority-data"]
    path.write_text(json.dumps(doc))
    return path


def _register_offline(run, tmp_path: Path) -> dict:  # type: ignore[no-untyped-def]
    kc = _offline_kubeconfig(tmp_path / "kc")
    return ok_json(run("cluster", "register", "prod", "--kubeconfig", str(kc), "--offline",
                       "--kubernetes-version", "v1.36.2+k3s1", "--json"))  # type: ignore[return-value]


@pytest.mark.kube
def test_full_flow_json(run, control_plane: ControlPlane) -> None:  # type: ignore[no-untyped-def]
    cluster = ok_json(run("cluster", "register", "prod", "--kubeconfig",
                          str(control_plane.kubeconfig), "--server-url",
                          "https://203.0.113.10:6443", "--json"))
    assert cluster["state"] == "ready" and cluster["factsSource"] == "cluster"
    assert cluster["kubernetesVersion"] == "v1.36.3"  # what the real API server says
    assert ok_json(run("credentials", "new", "team", "--provider", "aws", "--profile", "team",
                       "--json"))["reference"] == {"profile": "team"}
    pool = ok_json(run("node-pool", "create", "gpu", "--credentials", "team", "--region",
                       "us-east-1", "--zone", "us-east-1b", "--vm-type", "g5.12xlarge",
                       "--min-vms", "2", "--max-vms", "2", "--json"))
    assert pool["state"] == "pending" and pool["zone"] == "us-east-1b"
    assert pool["zoneChosen"] is False
    listed = ok_json(run("node-pool", "list", "--json"))
    assert [p["id"] for p in listed] == [pool["id"]]
    status = ok_json(run("node-pool", "status", "gpu", "--json"))
    assert status["counts"] == {"ready": 0, "starting": 0, "draining": 0}
    # status exposes no credentials, endpoints, Pods or Node objects
    text = json.dumps(status)
    api_address = urlsplit(control_plane.server).netloc
    for leak in ("203.0.113.10", api_address, "kubeconfig", "token", "profile", "nodes", "pods"):
        assert leak not in text

    ok_json(run("deployment", "create", "train", "--node-pool", "gpu", "--json"))
    refused = run("node-pool", "delete", "gpu", "--json")
    assert refused.exit_code == 2
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "NODE_POOL_IN_USE" and error["field"] == "node_pool"
    assert error["value"] == "gpu" and "cannot be deleted" in error["rule"]
    ok_json(run("deployment", "delete", "train", "--json"))
    assert ok_json(run("node-pool", "terminate", "gpu", "--json"))["state"] == "deleting"
    assert ok_json(run("node-pool", "rm", pool["id"], "--json"))["state"] == "deleting"


# A credential both modes take: a role the server (or this machine) assumes with its own
# identity. A --profile names a file on this machine: refused in remote mode, on purpose.
AWS_ROLE = ("credentials", "new", "team", "--provider", "aws", "--role-arn",
            "arn:aws:iam::123456789012:role/anycloud")


def test_bad_input_exit_2_names_field_value_rule(run, tmp_path: Path, in_each_mode: str) -> None:  # type: ignore[no-untyped-def]
    _register_offline(run, tmp_path)
    ok_json(run(*AWS_ROLE, "--json"))
    result = run("node-pool", "create", "cpu", "--credentials", "team", "--region", "us-east-1",
                 "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "3")
    assert result.exit_code == 2 and result.stdout == ""
    assert "--max-vms 3: must equal --min-vms (1)" in result.stderr
    assert "INVALID_ARGUMENT" in result.stderr
    assert ok_json(run("node-pool", "list", "--json")) == []


def test_pending_cluster_gives_node_pools_unavailable(  # type: ignore[no-untyped-def]
        run, tmp_path: Path, in_each_mode: str) -> None:
    kc = _offline_kubeconfig(tmp_path / "kc", ca=False)
    c = ok_json(run("cluster", "register", "prod", "--kubeconfig", str(kc), "--offline", "--json"))
    assert c["state"] == "pending"
    ok_json(run(*AWS_ROLE, "--json"))
    result = run("node-pool", "create", "cpu", "--credentials", "team", "--region", "us-east-1",
                 "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"]["code"] == "NODE_POOLS_UNAVAILABLE"


def test_no_cluster_gives_node_pools_unavailable(  # type: ignore[no-untyped-def]
        run, in_each_mode: str) -> None:
    ok_json(run(*AWS_ROLE, "--json"))
    result = run("node-pool", "create", "cpu", "--credentials", "team", "--region", "us-east-1",
                 "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1", "--json")
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert (error["code"], error["field"]) == ("NODE_POOLS_UNAVAILABLE", "--cluster")
    assert ok_json(run("node-pool", "list", "--json")) == []


def test_private_server_url_needs_allow_private_address(  # type: ignore[no-untyped-def]
        run, tmp_path: Path, in_each_mode: str) -> None:
    """In both modes: refused naming the flag, nothing registered; with it, registered."""
    kc = _offline_kubeconfig(tmp_path / "kc")
    args = ("cluster", "register", "prod", "--kubeconfig", str(kc), "--offline",
            "--kubernetes-version", "v1.36.2+k3s1", "--server-url", "https://10.0.0.5:6443",
            "--json")
    result = run(*args)
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert (error["field"], error["value"]) == ("--server-url", "https://10.0.0.5:6443")
    assert "--allow-private-address" in error["rule"]
    assert ok_json(run("cluster", "list", "--json")) == []
    made = ok_json(run(*args, "--allow-private-address"))
    assert made["serverUrl"] == "https://10.0.0.5:6443" and made["state"] == "ready"


def test_unknown_names_exit_2(run, in_each_mode: str) -> None:  # type: ignore[no-untyped-def]
    for args in (["node-pool", "status", "ghost"], ["cluster", "status", "ghost"],
                 ["credentials", "delete", "ghost"], ["deployment", "delete", "ghost"]):
        result = run(*args, "--json")
        assert result.exit_code == 2, args
        assert json.loads(result.stdout)["error"]["code"] == "NOT_FOUND"


def test_human_output_renders_tables(run, tmp_path: Path, in_each_mode: str) -> None:  # type: ignore[no-untyped-def]
    _register_offline(run, tmp_path)
    run(*AWS_ROLE)
    created = run("node-pool", "create", "cpu", "--credentials", "team", "--region", "us-east-1",
                  "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1")
    assert created.exit_code == 0 and "created" in created.stderr
    assert "zone us-east-1a chosen" in created.stderr  # no --zone: the choice is said
    listed = run("node-pool", "list")
    assert "cpu" in listed.stdout and "m7i.large" in listed.stdout
    status = run("node-pool", "status", "cpu")
    assert "0 / 0 / 0" in status.stdout and "pending" in status.stdout


def _subprocess(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANYCLOUD_HOME": str(home)}
    env.pop("ANYCLOUD_DATABASE_URL", None)
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)


def test_installed_command_in_a_subprocess(tmp_path: Path) -> None:
    assert ANYCLOUD.exists(), "the package is not installed (pip install -e .)"
    home = tmp_path / "home"
    first = _subprocess([str(ANYCLOUD), "node-pool", "list", "--json"], home)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == []
    bad = _subprocess([str(ANYCLOUD), "credentials", "new", "x", "--provider", "oracle"], home)
    assert bad.returncode == 2 and "--provider 'oracle'" in bad.stderr
    assert (home / "anycloud.db").exists()


GUARDED = ("pulumi_aws", "pulumi_gcp", "pulumi_azure_native", "pulumi_kubernetes", "kubernetes",
           "pulumi")

@pytest.mark.parametrize("args", [["node-pool", "list", "--json"], ["--help"],
                                  ["node-pool", "status", "x", "--json"]])
def test_start_up_paths_import_no_provider_sdk(tmp_path: Path, args: list[str]) -> None:
    # ANYCLOUD_DATABASE_URL empty: the default ledger under the home.
    loaded, _ = modules_loaded_by(args, {"ANYCLOUD_HOME": str(tmp_path / "home"),
                                         "ANYCLOUD_DATABASE_URL": ""})
    assert not loaded & set(GUARDED), loaded & set(GUARDED)


def test_a_cluster_moves_to_another_org_with_its_pools(  # type: ignore[no-untyped-def]
        run, tmp_path: Path, in_each_mode: str) -> None:
    _register_offline(run, tmp_path)
    ok_json(run(*AWS_ROLE, "--json"))
    ok_json(run("node-pool", "create", "cpu", "--credentials", "team", "--region", "us-east-1",
                "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1", "--json"))
    acme = ok_json(run("org", "create", "acme", "--json"))
    in_use = run("credentials", "move", "team", "--org", "acme", "--json")
    assert in_use.exit_code == 2 and "cluster move" in in_use.stdout
    moved = ok_json(run("cluster", "move", "prod", "--org", "acme", "--json"))
    assert moved == {"orgId": acme["id"], "clusters": ["prod"], "nodePools": ["cpu"],
                     "credentials": ["team"]}
    assert {c["orgId"] for c in ok_json(run("cluster", "list", "--json"))} == {acme["id"]}
    text = run("cluster", "move", "prod", "--org", "acme")
    assert text.exit_code == 0 and "moved to org acme" in text.stdout
    ghost = run("cluster", "move", "prod", "--org", "ghost", "--json")
    assert ghost.exit_code == 2 and json.loads(ghost.stdout)["error"]["code"] == "NOT_FOUND"
