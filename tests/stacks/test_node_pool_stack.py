"""The node-pool stack program: providers, outputs, CLI entry."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import pytest

from automation.engine.mock.model import SECRET
from automation.engine.mock.program import run_program
from stacks import node_pool
from stacks.config import CloudCredentialRef

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_outputs_per_attempt_and_network_but_never_a_token(config_for: Any, provider: str) -> None:
    run = run_program(node_pool.build_program(config_for(provider)), reveal_secrets=True)
    assert run.outputs["networkId"]
    assert set(run.outputs["attempts"]) == {"at-0", "at-1"}
    for attempt_id, out in run.outputs["attempts"].items():
        assert out["nodeName"] == f"anycloud-{attempt_id}"
        assert out["vmId"] and out["publicIp"]
    assert run.secret_outputs == ()
    text = json.dumps(run.outputs)
    assert "K10" not in text
    for token in run.of_type("kubernetes:core/v1:Secret"):
        assert token.inputs["stringData"]["token-secret"] not in text


@pytest.mark.parametrize("provider", ["aws", "gcp", "azure"])
def test_every_cloud_resource_uses_the_pools_explicit_provider(
    config_for: Any, provider: str
) -> None:
    run = run_program(node_pool.build_program(config_for(provider)))
    prefix = {"aws": "aws:", "gcp": "gcp:", "azure": "azure-native:"}[provider]
    pkg = prefix.rstrip(":")
    cloud = [r for r in run.resources if r.custom and r.type.startswith(prefix)]
    assert cloud
    for r in cloud:
        assert r.provider and r.provider.split("::")[2] == f"pulumi:providers:{pkg}", r.urn


def test_aws_provider_from_profile_role_and_region(config_for: Any) -> None:
    run = run_program(node_pool.build_program(config_for("aws")))
    p = run.one("pulumi:providers:aws")
    assert p.inputs["profile"] == "pool-profile"
    assert p.inputs["region"] == "us-east-1"
    # Provider config travels JSON-encoded on the wire.
    assert json.loads(p.inputs["assumeRoles"]) == [{"roleArn": "arn:aws:iam::1:role/r"}]
    assert json.loads(p.inputs["defaultTags"]) == {
        "tags": {"anycloud.sh/cluster": "cl-1", "anycloud.sh/node-pool": "np-1"}
    }


def test_gcp_provider_reads_the_key_file_itself(config_for: Any) -> None:
    p = run_program(node_pool.build_program(config_for("gcp"))).one("pulumi:providers:gcp")
    assert p.inputs["project"] == "proj-1"
    assert p.inputs["credentials"] == "/secrets/gcp.json"  # a path, not key material


def test_azure_client_secret_comes_from_env_as_a_secret(
    config_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_CLIENT_SECRET", "s3cr3t-value")
    run = run_program(node_pool.build_program(config_for("azure")))
    p = run.one("pulumi:providers:azure-native")
    assert p.inputs["clientSecret"] == SECRET
    assert "clientSecret" in p.secret_inputs
    assert (p.inputs["subscriptionId"], p.inputs["tenantId"]) == ("sub", "ten")
    assert "s3cr3t-value" not in json.dumps(run.to_dict())


def test_credential_for_another_cloud_is_refused(config_for: Any) -> None:
    cfg = config_for("aws").model_copy(
        update={"credential": CloudCredentialRef(provider="gcp", project="p")}
    )
    with pytest.raises(ValueError, match="credential is for 'gcp'"):
        run_program(node_pool.build_program(cfg))


def test_plain_pulumi_cli_entry_reads_the_same_config(config_for: Any) -> None:
    cfg = config_for("aws", hosts_service=True)
    direct = run_program(node_pool.build_program(cfg))
    config = {"anycloud:pool": cfg.model_dump_json()}
    via_config = run_program(node_pool.program_from_pulumi_config, config=config)

    def main() -> None:
        runpy.run_path(str(ROOT / "stacks" / "__main__.py"))

    via_main = run_program(main, config=config)
    urns = sorted(r.urn for r in direct.resources)
    assert sorted(r.urn for r in via_config.resources) == urns
    assert sorted(r.urn for r in via_main.resources) == urns
    assert via_main.outputs == direct.outputs


def test_pulumi_yaml_points_at_the_entry() -> None:
    text = (ROOT / "Pulumi.yaml").read_text()
    assert "name: anycloud" in text and "main: stacks/" in text and "virtualenv: .venv" in text
