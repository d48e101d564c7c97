"""plan, preview, policy check and unlock through the CLI (mock engine; no Pulumi CLI here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from automation.cli import cli
from automation.clock import ManualClock
from automation.devcluster.control_plane import kubeconfig_document
from automation.services import ingress_status
from automation.simulators.cluster import SimulatedCluster
from tests.automation.conftest import DEMO_CA
from tests.automation.kube.test_ingress import (
    TERMINATED_OK,
    daemon_set_json,
    helm_chart_json,
    job_json,
    pod_json,
)
from tests.automation.test_cli import _offline_kubeconfig


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ANYCLOUD_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("ANYCLOUD_DATABASE_URL", raising=False)
    monkeypatch.delenv("ANYCLOUD_ENGINE", raising=False)

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    # Registered offline: no server is dialled, none is needed.
    kc = tmp_path / "kc"
    kc.write_text(json.dumps(kubeconfig_document("https://203.0.113.10:6443", DEMO_CA)))
    invoke("cluster", "register", "prod", "--kubeconfig", str(kc), "--offline",
           "--kubernetes-version", "v1.36.2+k3s1")
    invoke("credentials", "new", "aws", "--provider", "aws", "--profile", "team")
    invoke("credentials", "new", "gcp", "--provider", "gcp", "--project", "my-project",
           "--key-file", str(DEMO_CA))
    invoke("node-pool", "create", "cpu", "--credentials", "aws", "--region", "us-east-1",
           "--vm-type", "m7i.large", "--min-vms", "2", "--max-vms", "2")
    invoke("node-pool", "create", "gpu", "--credentials", "gcp", "--region", "us-central1",
           "--vm-type", "g2-standard-4", "--min-vms", "1", "--max-vms", "1")
    return invoke


def test_plan_json_lists_every_resource_with_secrets_hidden(run, in_each_mode: str) -> None:  # type: ignore[no-untyped-def]
    result = run("node-pool", "plan", "cpu", "--json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["engine"] == "mock"
    vms = [r for r in plan["resources"] if r["type"] == "aws:ec2/instance:Instance"]
    assert len(vms) == 2  # a pool with no attempts yet is planned with those it would create
    assert all(vm["inputs"]["userData"] == "[secret]" for vm in vms)
    assert all(vm["inputs"]["metadataOptions"]["httpTokens"] == "required" for vm in vms)
    assert all(set(r) == {"urn", "type", "name", "parent", "inputs"} for r in plan["resources"])
    assert "K10" not in result.stdout  # no join token anywhere


def test_plan_human_tree(run, in_each_mode: str) -> None:  # type: ignore[no-untyped-def]
    result = run("node-pool", "plan", "gpu")
    assert result.exit_code == 0
    assert "gcp:compute/instance:Instance" in result.stdout and "[secret]" in result.stdout
    assert "mock engine" in result.stdout


def test_preview_summary_and_exit_codes(run, in_each_mode: str,  # type: ignore[no-untyped-def]
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")  # remote mode: the server's choice
    result = run("node-pool", "preview", "cpu", "--json")
    assert result.exit_code == 0, result.stderr
    (preview,) = json.loads(result.stdout)
    assert preview["engine"] == "mock" and preview["summary"]["create"] > 0
    # The join token is drawn at apply time: as in the engine's preview, the policy pack
    # cannot verify the user data and token Secret that carry it, and says so (advisory).
    assert preview["policy"] and all(
        f["enforcement"] == "advisory" and f["message"].startswith("not verified: ")
        for f in preview["policy"])
    if in_each_mode == "embedded":  # progress streams from this machine's engine only
        events = [json.loads(line)["event"] for line in result.stderr.splitlines() if line]
        resources = [e for e in events if e["kind"] == "resource"]
        assert len(resources) == preview["summary"]["create"]
        policy = [e for e in events if e["kind"] == "policy"]
        assert len(policy) + len(resources) == len(events)
        assert len(policy) == len(preview["policy"])
    assert run("node-pool", "preview", "cpu", "--detailed-exitcode").exit_code == 2
    text = run("node-pool", "preview", "cpu", "--diff")
    assert "[mock engine]" in text.stdout and "+ aws:ec2/instance:Instance" in text.stdout
    everything = json.loads(run("preview", "--all", "--json").stdout)
    assert sorted(p["pool"] for p in everything) == sorted(
        p["id"] for p in json.loads(run("node-pool", "list", "--json").stdout))
    assert run("preview", "--all", "--detailed-exitcode").exit_code == 2
    assert run("node-pool", "preview", "nope").exit_code == 2


@pytest.mark.usefixtures("remote_mode")
def test_remote_mode_leaves_the_engine_to_the_server(run) -> None:  # type: ignore[no-untyped-def]
    for command in (("node-pool", "preview", "cpu"), ("preview", "--all"),
                    ("node-pool", "unlock", "cpu"), ("cluster", "unlock", "prod"),
                    ("node-pool", "adopt", "cpu")):
        result = run(*command, "--engine", "mock", "--json")
        assert result.exit_code == 2, (command, result.output)
        assert json.loads(result.stdout)["error"]["field"] == "--engine"
    simulated = run("node-pool", "adopt", "cpu", "--simulate", "--json")
    assert simulated.exit_code == 2 and "--simulate" in simulated.stdout


def test_policy_check_passes_compliant_pools(run, in_each_mode: str) -> None:  # type: ignore[no-untyped-def]
    result = run("policy", "check", "--all", "--json")
    assert result.exit_code == 0, result.stdout
    reports = json.loads(result.stdout)
    # two pool stacks, and the add-on stack of the cluster (it has a GPU pool)
    assert [(r["pool"] is not None, r["cluster"] is not None) for r in reports] == [
        (True, False), (True, False), (False, True)]
    assert reports[2]["stack"].startswith("cluster-addons-")
    assert all(f["enforcement"] != "mandatory" for r in reports for f in r["findings"])


def test_policy_check_fails_a_tampered_pool_naming_the_rule(
    run, in_each_mode: str, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    import components.network.aws as aws_network

    original = aws_network.aws.ec2.SecurityGroup

    def extra_port(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["ingress"] = [{"protocol": "tcp", "from_port": 8080, "to_port": 8080,
                              "cidr_blocks": ["0.0.0.0/0"]}]
        return original(*args, **kwargs)

    monkeypatch.setattr(aws_network.aws.ec2, "SecurityGroup", extra_port)
    result = run("policy", "check", "cpu")
    assert result.exit_code == 3
    assert "mandatory: no-public-ingress" in result.stdout and "FAIL" in result.stdout
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")  # remote mode: the server's choice
    assert run("node-pool", "preview", "cpu").exit_code == 3


def test_policy_check_needs_one_target(run, in_each_mode: str) -> None:  # type: ignore[no-untyped-def]
    assert run("policy", "check").exit_code == 2
    assert run("policy", "check", "cpu", "--all").exit_code == 2


@pytest.mark.parametrize("command", [
    ("node-pool", "preview", "cpu"), ("preview", "--all"), ("node-pool", "unlock", "cpu"),
    ("cluster", "unlock", "prod"), ("reconcile", "--once"),
])
def test_without_the_pulumi_cli_the_engine_is_never_guessed(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]  # type: ignore[no-untyped-def]
) -> None:
    """The default engine is Pulumi's: without its CLI a command that needs the engine is
    one clear error before anything is read or written, never a quiet mock run."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    ledger = tmp_path / "home" / "anycloud.db"
    before = ledger.read_bytes()
    result = run(*command, "--json")
    assert result.exit_code == 1, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "ENGINE_MISSING" and "get.pulumi.com" in error["message"]
    assert "--engine mock" in error["message"]
    assert ledger.read_bytes() == before
    # commands that need no engine keep working
    assert run("node-pool", "list", "--json").exit_code == 0


def test_unlock_with_the_mock_engine(run, in_each_mode: str,  # type: ignore[no-untyped-def]
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")  # remote mode: the server's choice
    result = run("node-pool", "unlock", "cpu", "--json")
    assert result.exit_code == 0
    # The mock engine keeps no lock: it says so rather than claim it unlocked something.
    assert json.loads(result.stdout) == {"stack": json.loads(result.stdout)["stack"],
                                         "engine": "mock", "unlocked": False,
                                         "ingressRelease": None}  # it hosts no Service


def test_cluster_addons_unlock_with_the_mock_engine(  # type: ignore[no-untyped-def]
        run, in_each_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")
    done = json.loads(run("cluster", "unlock", "prod", "--json").stdout)
    assert done["stack"].startswith("cluster-addons-")
    assert (done["engine"], done["unlocked"]) == ("mock", False)
    assert run("cluster", "unlock", "nope").exit_code == 2


def test_unlock_of_a_service_pool_also_unlocks_its_ingress_release(  # type: ignore[no-untyped-def]
        run, in_each_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlalchemy as sa

    from automation.engine.mock.runner import MockEngineRunner
    from automation.ledger import open_ledger, schema
    from automation.settings import Settings

    with open_ledger(Settings.from_env(None).database_url).write() as conn:
        conn.execute(sa.update(schema.node_pools).where(schema.node_pools.c.name == "cpu")
                     .values(hosts_service=True))
    unlocked: list[str] = []
    monkeypatch.setattr(MockEngineRunner, "unlock",
                        lambda self, target: unlocked.append(target.stack_name) or True)
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")
    result = run("node-pool", "unlock", "cpu", "--json")
    doc = json.loads(result.stdout)
    release = doc["ingressRelease"]
    assert release["stack"].startswith("ingress-release-np-") and release["unlocked"] is True
    assert unlocked == [doc["stack"], release["stack"]]
    human = run("node-pool", "unlock", "cpu")
    assert f"stack {release['stack']} unlocked" in human.stderr


# -- the JSON convention ---------------------------------------------------------------------
def _underscored_keys(doc: Any, path: str = "$") -> list[str]:
    """Every key, at any depth, that is not camelCase (has an underscore). Not walked into:
    ``inputs`` (``plan``'s resources: the engine's wire-format names) and label/tag maps."""
    found: list[str] = []
    if isinstance(doc, dict):
        for key, value in doc.items():
            if "_" in key:
                found.append(f"{path}.{key}")
            if key not in ("inputs", "labels", "tags"):
                found += _underscored_keys(value, f"{path}.{key}")
    elif isinstance(doc, list):
        for i, item in enumerate(doc):
            found += _underscored_keys(item, f"{path}[{i}]")
    return found


def test_every_json_output_has_camel_case_keys(
    run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    """list, status, register, create, delete, reconcile, preview, plan, policy and unlock
    print camelCase keys only: nested objects, JSON lines and errors included."""
    # Service pools' status reads the ingress release from this cluster, not from the network.
    sim = SimulatedCluster(ManualClock())
    monkeypatch.setattr(ingress_status, "kubernetes_port_factory", lambda *_: lambda s: sim)
    documents: dict[str, Any] = {}

    def doc(*args: str, code: int = 0) -> Any:
        result = run(*args, "--json")
        assert result.exit_code == code, (args, result.stdout, result.stderr)
        try:
            out = json.loads(result.stdout)
        except json.JSONDecodeError:  # JSON lines (reconcile's events, then its summary)
            out = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
        documents[" ".join(args)] = out
        # --json progress goes to stderr as JSON lines: they follow the convention too.
        documents[" ".join(args) + " (stderr)"] = [
            json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
        return documents[" ".join(args)]

    edge = doc("cluster", "register", "edge", "--kubeconfig",
               str(_offline_kubeconfig(tmp_path / "edge-kc")), "--offline",
               "--kubernetes-version", "v1.36.2+k3s1")
    assert {"serverUrl", "caSha256", "kubeSystemUid", "factsSource", "lastError",
            "createdAt"} <= set(edge)
    doc("cluster", "list")
    doc("cluster", "status", "prod")
    doc("cluster", "delete", "edge")
    azure = doc("credentials", "new", "az", "--provider", "azure", "--subscription-id",
                "00000000-0000-0000-0000-000000000001", "--tenant-id",
                "00000000-0000-0000-0000-000000000002", "--client-id",
                "00000000-0000-0000-0000-000000000003")
    assert set(azure["reference"]) == {"subscriptionId", "tenantId", "clientId",
                                       "clientSecretEnv"}
    doc("credentials", "list")
    doc("credentials", "delete", "az")
    web = doc("node-pool", "create", "web", "--credentials", "aws", "--region", "us-east-1",
              "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1")
    assert {"clusterId", "credentialId", "vmType", "minVms", "maxVms", "hostsService",
            "lastError"} <= set(web)
    doc("deployment", "create", "site", "--node-pool", "web", "--service")
    doc("deployment", "create", "train", "--node-pool", "cpu")
    doc("deployment", "list")
    doc("node-pool", "plan", "cpu")
    doc("node-pool", "preview", "cpu", "--engine", "mock")  # progress: JSON lines on stderr
    doc("preview", "--all", "--engine", "mock")
    doc("policy", "check", "--all")
    doc("node-pool", "unlock", "cpu", "--engine", "mock")
    doc("cluster", "unlock", "prod", "--engine", "mock")
    doc("reconcile", "--once", "--simulate", "--engine", "mock", "--passes", "4",
        "--advance", "1m")
    (*events, summary) = documents["reconcile --once --simulate --engine mock --passes 4 "
                                   "--advance 1m"]
    assert set(summary["pools"]) == {p["id"] for p in doc("node-pool", "list")}
    assert any("nodeState" in e["data"] for e in events)  # the reconciler's node_state
    sim.set_helm_chart(web["id"], helm_chart_json())
    sim.set_helm_job(web["id"], job_json(complete=True))
    sim.set_helm_pods(web["id"], [pod_json("x1a2b", TERMINATED_OK)])
    sim.set_ingress_daemon_set(web["id"], daemon_set_json(desired=1, ready=1))
    for pool in ("web", "cpu", "gpu"):
        doc("node-pool", "status", pool)
    status = documents["node-pool status web"]
    assert {"vmType", "lastError", "lastErrorCode", "hostsService", "ingressEntryIp",
            "createdAt", "updatedAt"} <= set(status)
    assert {"helmJob", "daemonSet", "lastEvent"} <= set(status["ingress"]["release"])
    doc("deployment", "delete", "train")
    doc("node-pool", "delete", "cpu")
    doc("node-pool", "status", "ghost", code=2)  # the error object

    assert documents["node-pool preview cpu --engine mock (stderr)"]
    offenders = {name: keys for name, d in documents.items() if (keys := _underscored_keys(d))}
    assert offenders == {}


def test_create_and_plan_warn_about_an_image_not_verified_first_hand(run) -> None:  # type: ignore[no-untyped-def]
    created = run("node-pool", "create", "more", "--credentials", "aws", "--region",
                  "us-east-1", "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1",
                  "--json")
    assert created.exit_code == 0, created.output
    warnings = json.loads(created.stdout)["warnings"]
    assert warnings and "not verified first-hand" in warnings[0]
    assert "warning: the aws CPU image" in created.stderr
    plan = run("node-pool", "plan", "more", "--json")
    assert json.loads(plan.stdout)["warnings"] == warnings
    assert "warning:" in plan.stderr


def _list_price(vm_type: str, region: str) -> tuple[float, str, str]:
    """The offering's price straight from the shipped catalog file (not through our code)."""
    import sqlite3

    from stacks.data_dir import DATA_DIR

    con = sqlite3.connect(DATA_DIR / "catalog.sqlite")
    try:
        price, source, as_of = con.execute(
            "SELECT o.price_usd_hour, s.name, s.as_of FROM offerings o "
            "JOIN vm_types t ON t.id = o.type_id JOIN regions r ON r.id = o.region_id "
            "JOIN sources s ON s.id = o.price_source_id WHERE t.name = ? AND r.region = ?",
            (vm_type, region)).fetchone()
    finally:
        con.close()
    return price, source, as_of


def test_plan_and_preview_carry_the_cost_of_the_planned_vms(  # type: ignore[no-untyped-def]
        run, in_each_mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")  # remote mode: the server's choice
    price, source, as_of = _list_price("m7i.large", "us-east-1")
    expected = {"vms": 2, "hourlyUsd": round(2 * price, 6),
                "monthlyUsd": round(2 * price * 720, 6), "source": source, "asOf": as_of}
    plan = json.loads(run("node-pool", "plan", "cpu", "--json").stdout)
    assert {k: plan["cost"][k] for k in expected} == expected
    (preview,) = json.loads(run("node-pool", "preview", "cpu", "--json").stdout)
    assert {k: preview["cost"][k] for k in expected} == expected and preview["pool"]
    text = run("node-pool", "preview", "cpu").stdout
    assert f"cost once applied: ${2 * price:.4f}/hour" in text
    gpu_price, _, _ = _list_price("g2-standard-4", "us-central1")
    gpu_plan = json.loads(run("node-pool", "plan", "gpu", "--json").stdout)
    assert gpu_plan["cost"]["vms"] == 1 and gpu_plan["cost"]["hourlyUsd"] == round(gpu_price, 6)


def test_what_the_mock_engine_ran_says_so_wherever_it_is_read(run) -> None:  # type: ignore[no-untyped-def]
    """After a simulated pass (mock engine), every view of the pools says the VMs are
    simulated: list and status in text and --json, the pass's summary, its notes."""
    once = run("reconcile", "--once", "--simulate", "--engine", "mock", "--passes", "4",
               "--advance", "1m", "--json")
    assert once.exit_code == 0, once.output
    summary = json.loads(once.stdout.strip().splitlines()[-1])
    assert summary["engine"] == "mock" and summary["pools"]
    text = run("reconcile", "--once", "--simulate", "--engine", "mock")
    assert "[mock engine]" in text.stderr and "nothing was bought" in text.stderr

    listed = json.loads(run("node-pool", "list", "--json").stdout)
    running = [p for p in listed if p["counts"]["ready"] or p["counts"]["starting"]]
    assert running, listed
    assert {p["engine"] for p in running} == {"mock"}
    assert all(p["cost"]["vms"] == 0 for p in running)  # nothing billed
    table = run("node-pool", "list").stdout
    assert table.count("simulated") >= len(running)
    for p in running:
        status = run("node-pool", "status", p["name"])
        assert "mock (simulated VMs: nothing was bought)" in status.stdout
        assert "simulated: the mock engine bought nothing" in status.stdout
        assert json.loads(run("node-pool", "status", p["name"], "--json").stdout)[
            "engine"] == "mock"
