"""plan, preview, policy check and unlock through the CLI (mock engine; no Pulumi CLI here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from automation.cli import cli
from automation.devcluster.control_plane import kubeconfig_document
from tests.automation.conftest import DEMO_CA


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


def test_plan_json_lists_every_resource_with_secrets_hidden(run) -> None:  # type: ignore[no-untyped-def]
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


def test_plan_human_tree(run) -> None:  # type: ignore[no-untyped-def]
    result = run("node-pool", "plan", "gpu")
    assert result.exit_code == 0
    assert "gcp:compute/instance:Instance" in result.stdout and "[secret]" in result.stdout
    assert "mock engine" in result.stdout


def test_preview_summary_and_exit_codes(run) -> None:  # type: ignore[no-untyped-def]
    result = run("node-pool", "preview", "cpu", "--engine", "mock", "--json")
    assert result.exit_code == 0, result.stderr
    (preview,) = json.loads(result.stdout)
    assert preview["engine"] == "mock" and preview["summary"]["create"] > 0
    events = [json.loads(line)["event"] for line in result.stderr.splitlines() if line]
    assert {e["kind"] for e in events} == {"resource"} and len(events) == preview["summary"][
        "create"]
    assert run("node-pool", "preview", "cpu", "--engine", "mock",
               "--detailed-exitcode").exit_code == 2
    text = run("node-pool", "preview", "cpu", "--engine", "mock", "--diff")
    assert "[mock engine]" in text.stdout and "+ aws:ec2/instance:Instance" in text.stdout
    everything = json.loads(run("preview", "--all", "--engine", "mock", "--json").stdout)
    assert len(everything) == 2


def test_policy_check_passes_compliant_pools(run) -> None:  # type: ignore[no-untyped-def]
    result = run("policy", "check", "--all", "--json")
    assert result.exit_code == 0, result.stdout
    reports = json.loads(result.stdout)
    # two pool stacks, and the add-on stack of the cluster (it has a GPU pool)
    assert [(r["pool"] is not None, r["cluster"] is not None) for r in reports] == [
        (True, False), (True, False), (False, True)]
    assert reports[2]["stack"].startswith("cluster-addons-")
    assert all(f["enforcement"] != "mandatory" for r in reports for f in r["findings"])


def test_policy_check_fails_a_tampered_pool_naming_the_rule(
    run, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
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
    assert run("node-pool", "preview", "cpu", "--engine", "mock").exit_code == 3


def test_policy_check_needs_one_target(run) -> None:  # type: ignore[no-untyped-def]
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


def test_unlock_with_the_mock_engine(run) -> None:  # type: ignore[no-untyped-def]
    result = run("node-pool", "unlock", "cpu", "--engine", "mock", "--json")
    assert result.exit_code == 0
    # The mock engine keeps no lock: it says so rather than claim it unlocked something.
    assert json.loads(result.stdout) == {"stack": json.loads(result.stdout)["stack"],
                                         "engine": "mock", "unlocked": False}
