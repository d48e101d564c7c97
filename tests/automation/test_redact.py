"""Status never shows where a cluster is or how anycloud reaches it (node-pool seed)."""

from __future__ import annotations

import json
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from automation.app import App
from automation.devcluster.control_plane import kubeconfig_document
from automation.ledger import open_ledger, schema
from automation.redact import known_values, redact
from automation.services import node_pools, pool_status
from automation.services.ingress_status import with_ingress
from tests.automation.conftest import DEMO_CA, credential, ok_json, ready_cluster

LEAKY = ("cluster unavailable: cannot reach https://203.0.113.10:6443 (list nodes): "
         "HTTPSConnectionPool(host='203.0.113.10', port=6443): Max retries exceeded; "
         "then cannot load kubeconfig {kubeconfig}: not a kubeconfig document; key file "
         "/keys/team-sa.json")


def test_redact_hides_urls_hosts_kubeconfig_paths_and_known_values() -> None:
    text = redact(LEAKY.format(kubeconfig="/home/me/.kube/config"), ["/keys/team-sa.json"])
    assert text is not None
    for leak in ("203.0.113.10", "6443", "/home/me/.kube/config", "/keys/team-sa.json"):
        assert leak not in text
    assert "cannot reach <endpoint> (list nodes)" in text
    assert redact(None) is None and redact("") == ""


def test_known_values_reads_credential_references() -> None:
    assert known_values('{"profile": "team", "key_file": "/k/sa.json"}', "x", None) == [
        "/k/sa.json"]


@pytest.fixture
def pool_with_a_leaky_error(app: App, kubeconfig: Path) -> str:
    ready_cluster(app, kubeconfig)
    credential(app)
    pool = node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name="cpu", credentials="team-aws", region="us-east-1", vm_type="m7i.large",
        min_vms=1, max_vms=1))
    with app.ledger.write() as conn:
        conn.execute(schema.node_pools.update().where(schema.node_pools.c.id == pool.id).values(
            last_error=LEAKY.format(kubeconfig=kubeconfig), last_error_code="CLUSTER_UNAVAILABLE"))
    return pool.id


def test_pool_status_and_list_show_no_endpoint_path_or_credential(
    app: App, kubeconfig: Path, pool_with_a_leaky_error: str
) -> None:
    for status in (pool_status.node_pool_status(app.ledger, pool_with_a_leaky_error),
                   *pool_status.list_node_pools(app.ledger)):
        shown = status.model_dump_json()
        for leak in ("203.0.113.10", str(kubeconfig)):
            assert leak not in shown
        assert status.last_error_code == "CLUSTER_UNAVAILABLE"
    with app.ledger.read() as conn:  # the ledger keeps the detail for operators
        stored = conn.execute(sa.select(schema.node_pools.c.last_error)).scalar_one()
    assert "203.0.113.10" in stored


def test_an_unreadable_cluster_in_the_ingress_view_names_no_path() -> None:
    from automation.kube.port import ClusterUnavailable
    from automation.models import NodePoolStatus

    def factory(status: NodePoolStatus) -> object:
        raise ClusterUnavailable("cannot load kubeconfig /srv/anycloud/kc.yaml: no such file")

    status = NodePoolStatus.model_validate({
        "id": "np-1", "name": "web", "cluster": "prod", "credentials": "aws",
        "provider": "aws", "region": "us-east-1", "zone": None, "vm_type": "m7i.large",
        "vms": 1, "state": "ready", "last_error": None,
        "counts": {"ready": 1, "starting": 0, "draining": 0}, "hosts_service": True,
        "created_at": "2026-12-01T00:00:00Z", "updated_at": "2026-12-01T00:00:00Z"})
    release = with_ingress(status, factory).ingress.release  # type: ignore[arg-type,union-attr]
    assert release is not None and "/srv/anycloud" not in (release.last_event or "")
    assert "cannot load kubeconfig <file>: no such file" in (release.last_event or "")


# -- issue 23: what the ledger records, and what every user-facing path shows of it ---------

UNRESOLVED = "k3s-abc123.invalid"
# urllib3 when the API server's name does not resolve (as automation.kube.adapter words it)
DNS_FAILURE = (f"cluster unavailable: cannot reach https://{UNRESOLVED}:6443 (list nodes): "
               f"HTTPSConnectionPool(host='{UNRESOLVED}', port=6443): Max retries exceeded "
               f"with url: /api/v1/nodes (Caused by NameResolutionError(\"HTTPSConnection("
               f"host='{UNRESOLVED}', port=6443): Failed to resolve '{UNRESOLVED}' ([Errno -2] "
               "Name or service not known)\"))")
MISSING_FILE = ("cluster unavailable: cannot load kubeconfig /srv/kc.yaml: File does not exist: "
                "/srv/secrets/admin-client.crt")
# The Pulumi kubernetes provider (Go) when the API server refuses the connection
DIAL_REFUSED = ("provider failure 1 in a row: kubernetes:core/v1:Namespace anycloud: Get "
                "\"https://203.0.113.10:6443/api?timeout=32s\": dial tcp 203.0.113.10:6443: "
                "connect: connection refused")


def _cluster_pool(run: Any, tmp_path: Path, server: str, *, user: dict[str, str] | None = None,
                  ) -> str:
    """A cluster registered offline at ``server`` (its kubeconfig's user: ``user``) and a pool
    on it, through the CLI; the pool's id."""
    doc = kubeconfig_document(server, DEMO_CA)
    if user is not None:
        doc["users"][0]["user"] = user
    kc = tmp_path / "kc.json"
    kc.write_text(json.dumps(doc))
    ok_json(run("cluster", "register", "prod", "--kubeconfig", str(kc), "--offline",
                "--kubernetes-version", "v1.36.2+k3s1", "--json"))
    ok_json(run("credentials", "new", "team", "--provider", "aws", "--role-arn",
                "arn:aws:iam::123456789012:role/anycloud", "--json"))  # remote mode: no profile
    pool = ok_json(run("node-pool", "create", "cpu", "--credentials", "team", "--region",
                       "us-east-1", "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms",
                       "1", "--json"))
    return str(pool["id"])


def _record(ledger_url: str, pool_id: str, **values: Any) -> None:
    """What the reconciler records (the ledger keeps the detail for operators)."""
    ledger = open_ledger(ledger_url)
    try:
        with ledger.write() as conn:
            conn.execute(schema.node_pools.update().where(schema.node_pools.c.id == pool_id)
                         .values(**values))
    finally:
        ledger.dispose()


def _shown(run: Any, *args: str) -> str:
    result = run(*args)
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return str(result.stdout)


def _status_and_list(run: Any) -> list[str]:
    """``node-pool status`` (JSON and text) and ``node-pool list --json``."""
    listed = json.loads(_shown(run, "node-pool", "list", "--json"))
    return [json.loads(_shown(run, "node-pool", "status", "cpu", "--json"))["lastError"],
            _shown(run, "node-pool", "status", "cpu"), listed[0]["lastError"]]


def test_an_unresolved_api_server_is_named_in_no_status_or_list(
    run: Any, tmp_path: Path, ledger_url: str, in_each_mode: str
) -> None:
    pool = _cluster_pool(run, tmp_path, f"https://{UNRESOLVED}:6443")
    _record(ledger_url, pool, last_error=DNS_FAILURE, last_error_code="CLUSTER_UNAVAILABLE")
    for shown in _status_and_list(run):
        assert UNRESOLVED not in shown and "k3s-abc123" not in shown
        # the kind of error stays: which name did not resolve does not
        assert "Failed to resolve '<api-server>' ([Errno -2] Name or service not known)" in shown


def test_an_unresolved_api_server_is_named_in_no_ingress_event(
    run: Any, tmp_path: Path, ledger_url: str
) -> None:
    """The real path: status reads the cluster through its kubeconfig; .invalid never
    resolves (RFC 6761)."""
    pool = _cluster_pool(run, tmp_path, f"https://{UNRESOLVED}:6443")
    _record(ledger_url, pool, hosts_service=True)
    status = json.loads(_shown(run, "node-pool", "status", "cpu", "--json"))
    event = status["ingress"]["release"]["lastEvent"]
    assert UNRESOLVED not in json.dumps(status) and "k3s-abc123" not in json.dumps(status)
    assert "Failed to resolve '<api-server>'" in event


def test_files_the_kubeconfig_names_are_shown_as_file(
    run: Any, tmp_path: Path, ledger_url: str
) -> None:
    """Embedded mode only: the API refuses a kubeconfig that names files."""
    pool = _cluster_pool(run, tmp_path, "https://203.0.113.10:6443", user={
        "client-certificate": "/srv/secrets/admin-client.crt",
        "client-key": "/srv/secrets/admin-client.key"})
    _record(ledger_url, pool, hosts_service=True, last_error=MISSING_FILE,
            last_error_code="CLUSTER_UNAVAILABLE")
    status = json.loads(_shown(run, "node-pool", "status", "cpu", "--json"))
    event = status["ingress"]["release"]["lastEvent"]  # read now, through the kubeconfig
    for shown in (*_status_and_list(run), event):
        assert "/srv/" not in shown and "admin-client" not in shown
        assert "File does not exist: <file>" in shown


def test_a_dialled_address_and_port_are_shown_as_the_api_server(
    run: Any, tmp_path: Path, ledger_url: str, in_each_mode: str
) -> None:
    pool = _cluster_pool(run, tmp_path, "https://203.0.113.10:6443")
    _record(ledger_url, pool, last_error=DIAL_REFUSED, last_error_code="ENGINE_FAILED")
    for shown in _status_and_list(run):
        assert "203.0.113.10" not in shown and "6443" not in shown
        assert "dial tcp <api-server>: connect: connection refused" in shown
        assert "kubernetes:core/v1:Namespace anycloud" in shown  # what failed stays


def test_delete_shows_the_last_error_redacted(
    run: Any, tmp_path: Path, ledger_url: str, in_each_mode: str
) -> None:
    pool = _cluster_pool(run, tmp_path, "https://203.0.113.10:6443")
    _record(ledger_url, pool, last_error=DIAL_REFUSED, last_error_code="ENGINE_FAILED")
    deleted = json.loads(_shown(run, "node-pool", "delete", "cpu", "--json"))
    assert deleted["state"] == "deleting" and deleted["name"] == "cpu"
    assert "203.0.113.10" not in deleted["lastError"] and "6443" not in deleted["lastError"]
    assert "connect: connection refused" in deleted["lastError"]


_PORTS = st.integers(min_value=1, max_value=65535)


@given(ip=st.ip_addresses(), port=_PORTS)
def test_no_address_or_port_survives(ip: IPv4Address | IPv6Address, port: int) -> None:
    host = f"[{ip}]" if ip.version == 6 else str(ip)
    for text in (f"dial tcp {host}:{port}: connect: connection refused",
                 f"lookup api on {host}:{port}: no such host", f"no route to {ip}."):
        shown = redact(text)
        assert shown is not None and "<address>" in shown
        assert str(ip) not in shown and str(port) not in shown.replace("<address>", "")
        assert redact(shown) == shown  # a second pass (the CLI over the API) changes nothing


@given(words=st.lists(st.sampled_from(
    ["cpu", "m7i.large", "us-east-1", "us-east-1b", "g5.12xlarge", "np-0a1b2c", "v1.36.2+k3s1",
     "[ENGINE_FAILED]", "1/2", "3:04", "aws:ec2/instance:Instance", "ready", "→"]), max_size=8))
def test_names_people_need_are_kept(words: list[str]) -> None:
    text = " ".join(words)
    assert redact(text) == text
