"""Issue 23: a deployment's and a cluster's errors are shown redacted like a node pool's, by
every command (text and --json) in both modes (remote: over the HTTP API): no API server host
name that did not resolve, no file the kubeconfig names, no bare ``ip:port``, no URL. What a
person acts on stays (the ``kubectl delete -l anycloud.sh/provision-id=…`` hint)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from automation.devcluster.control_plane import kubeconfig_document
from automation.ledger import open_ledger, schema
from tests.automation.conftest import DEMO_CA, ok_json
from tests.automation.test_redact import (
    DIAL_REFUSED,
    DNS_FAILURE,
    MISSING_FILE,
    UNRESOLVED,
    _cluster_pool,
    _record,
    _shown,
)

REPO = Path(__file__).resolve().parents[2]
FULL_URL = ("cannot reach the API server https://k3s-x.example:6443 (GET /version): "
            "connection reset by peer")
# (what the ledger records, what must not be shown, what must stay)
SHAPES = {
    "dns": (DNS_FAILURE, (UNRESOLVED, "k3s-abc123"), "Failed to resolve '<"),
    "file": (MISSING_FILE, ("/srv/", "admin-client"), "File does not exist: <file>"),
    "address": (DIAL_REFUSED, ("203.0.113.10", "6443"), "connect: connection refused"),
    "url": (FULL_URL, ("k3s-x.example", "6443", "https://"), "connection reset by peer"),
}


def _ledger_update(ledger_url: str, table: Any, ref_column: Any, ref: str,
                   **values: Any) -> None:
    ledger = open_ledger(ledger_url)
    try:
        with ledger.write() as conn:
            conn.execute(table.update().where(ref_column == ref).values(**values))
    finally:
        ledger.dispose()


@pytest.fixture
def deploying(run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A provisioner set: ``a`` (static) and ``k`` (kubernetes, on a cluster whose API server
    name never resolves: .invalid, RFC 6761); an org and project ``web``."""
    shutil.copytree(REPO / "k8s/runtime-templates", tmp_path / "templates")
    kc = tmp_path / "rt-kubeconfig.json"
    kc.write_text(json.dumps(kubeconfig_document(f"https://{UNRESOLVED}:6443", DEMO_CA)))
    pset = {
        "a": {"type": "static", "spec": {"runtimes": [
            {"host": "a1.example", "slots": 2, "data_dir": "/data/a",
             "audience_url": "https://a1.example"}]}},
        "k": {"type": "kubernetes", "spec": {
            "namespace": "rt", "kubeconfig_path": str(kc), "timeout_seconds": 5,
            "data_dir": "/data", "image": "registry.k8s.io/pause:3.10",
            "host": "http://*.localhost",
            "template_paths": {"deployment": str(tmp_path / "templates/deployment.yaml"),
                               "service": str(tmp_path / "templates/service.yaml")}}}}
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps(pset))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")
    monkeypatch.setenv("ANYCLOUD_CONFIG", str(tmp_path / "config.yaml"))
    assert run("org", "create", "acme").exit_code == 0
    assert run("project", "create", "web", "--org", "acme").exit_code == 0
    return run


def _deployment_views(run: Any, name: str) -> list[str]:
    """``deployment status`` (JSON and text) and ``deployment list --json``."""
    listed = json.loads(_shown(run, "deployment", "list", "--json"))
    return [json.loads(_shown(run, "deployment", "status", name, "--json"))["lastError"],
            _shown(run, "deployment", "status", name),
            next(d for d in listed if d["name"] == name)["lastError"]]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_deployments_last_error_is_shown_redacted(
        deploying: Any, ledger_url: str, in_each_mode: str, shape: str) -> None:
    recorded, leaks, kept = SHAPES[shape]
    made = ok_json(deploying("deployment", "create", "api", "--project", "web", "--json"))
    _ledger_update(ledger_url, schema.deployments, schema.deployments.c.id, made["id"],
                   last_error=recorded)
    for shown in _deployment_views(deploying, "api"):
        for leak in leaks:
            assert leak not in shown, (leak, shown)
        assert kept in shown
    ledger = open_ledger(ledger_url)  # the ledger keeps the detail for operators
    try:
        with ledger.read() as conn:
            stored = conn.execute(schema.deployments.select().where(
                schema.deployments.c.id == made["id"])).mappings().one()["last_error"]
    finally:
        ledger.dispose()
    assert stored == recorded


def test_an_unreachable_runtime_cluster_is_named_in_no_status_or_delete(
        deploying: Any, ledger_url: str, in_each_mode: str) -> None:
    """The real path: provisioner ``k``'s API server does not resolve. Status's runtime
    health and delete's lastError say so without its name; delete's kubectl hint stays."""
    made = ok_json(deploying("deployment", "create", "api", "--project", "web", "--json"))
    _ledger_update(ledger_url, schema.deployments, schema.deployments.c.id, made["id"],
                   provisioner="k", state="running", runtime_host="http://x.localhost")
    status = json.loads(_shown(deploying, "deployment", "status", "api", "--json"))
    text = _shown(deploying, "deployment", "status", "api")
    for shown in (json.dumps(status), text):
        assert UNRESOLVED not in shown and "k3s-abc123" not in shown
        assert "Failed to resolve '<" in shown
    assert status["health"]["ok"] is False
    deleted = json.loads(_shown(deploying, "deployment", "delete", "api", "--json"))
    error = deleted["lastError"]
    assert UNRESOLVED not in error and "k3s-abc123" not in error and "6443" not in error
    assert "Failed to resolve '<" in error
    assert (f"kubectl delete deployment,service,ingress,pvc -l "
            f"anycloud.sh/provision-id={made['provisionId']} -n <its namespace>") in error


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_clusters_last_error_is_shown_redacted(
        run: Any, tmp_path: Path, ledger_url: str, in_each_mode: str, shape: str) -> None:
    recorded, leaks, kept = SHAPES[shape]
    _cluster_pool(run, tmp_path, f"https://{UNRESOLVED}:6443")
    _ledger_update(ledger_url, schema.clusters, schema.clusters.c.name, "prod",
                   last_error=recorded)
    listed = json.loads(_shown(run, "cluster", "list", "--json"))
    # The text's Server row is the registration itself, shown on purpose: the error is not.
    text = "\n".join(line for line in _shown(run, "cluster", "status", "prod").splitlines()
                     if "Server" not in line)
    for shown in (json.loads(_shown(run, "cluster", "status", "prod", "--json"))["lastError"],
                  text, listed[0]["lastError"]):
        for leak in leaks:
            assert leak not in shown, (leak, shown)
        assert kept in shown


def test_node_pool_delete_json_shows_no_api_server_url(
        run: Any, tmp_path: Path, ledger_url: str, in_each_mode: str) -> None:
    pool = _cluster_pool(run, tmp_path, "https://k3s-x.example:6443")
    _record(ledger_url, pool, last_error=FULL_URL, last_error_code="CLUSTER_UNAVAILABLE")
    deleted = json.loads(_shown(run, "node-pool", "delete", "cpu", "--json"))
    assert "k3s-x.example" not in deleted["lastError"] and "https://" not in deleted["lastError"]
    assert "connection reset by peer" in deleted["lastError"]
