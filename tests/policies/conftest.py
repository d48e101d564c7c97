"""Shared fixtures for the policy-pack tests: test data files and compliant resources.

The tests never read the project's data/ files (other engineers own them): an autouse
fixture points the pack at a temporary data directory with small, known contents.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResourceOptions,
    ResourceValidationArgs,
)
from pulumi_policy.proxy import unknown_checking_proxy

from policies import check_resources
from policies.config import DATA_DIR_ENV
from policies.offline import Violation

NOW = datetime(2026, 11, 30, 21, 0, tzinfo=UTC)
K3S_SHA = "a" * 20 + "0123456789abcdef" * 2 + "b" * 12
assert len(K3S_SHA) == 64
CF_V4 = ["173.245.48.0/20", "103.21.244.0/22"]
CF_V6 = ["2400:cb00::/32"]

CLOUDFLARE_TOML = """\
ipv4 = ["173.245.48.0/20", "103.21.244.0/22"]
ipv6 = ["2400:cb00::/32"]
"""

CATALOG_TOML = """\
[aws."m5.large"]
arch = "x86_64"
[aws."m6g.large"]
arch = "arm64"
[aws."g5.2xlarge"]
arch = "x86_64"
gpus = 1
[gcp."n2-standard-4"]
arch = "x86_64"
[gcp."t2a-standard-4"]
arch = "arm64"
[azure."Standard_D4s_v5"]
arch = "x86_64"
[azure."Standard_D4ps_v5"]
arch = "arm64"
"""


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "data"
    directory.mkdir()
    (directory / "cloudflare.toml").write_text(CLOUDFLARE_TOML)
    (directory / "catalog.toml").write_text(CATALOG_TOML)
    monkeypatch.setenv(DATA_DIR_ENV, str(directory))
    return directory


def user_data(
    provider: str = "aws",
    pool: str = "pool-1",
    cluster: str = "c1",
    attempt: str | None = "a1",
    verify: str | None = None,
) -> str:
    """A compliant agent script; ``verify`` replaces the checksum line."""
    check = (
        verify
        if verify is not None
        else 'echo "${K3S_SHA256}  /usr/local/bin/k3s" | sha256sum -c -'
    )
    attempt_label = f" --node-label anycloud.sh/attempt={attempt}" if attempt else ""
    return f"""#!/bin/bash
set -euo pipefail
K3S_SHA256={K3S_SHA}
curl -sfL -o /usr/local/bin/k3s https://github.com/k3s-io/k3s/releases/download/v1.35.1%2Bk3s1/k3s
{check}
chmod +x /usr/local/bin/k3s
exec /usr/local/bin/k3s agent --server https://203.0.113.10:6443 \\
  --node-label anycloud.sh/cluster={cluster} --node-label anycloud.sh/node-pool={pool} \\
  --node-label anycloud.sh/provider={provider}{attempt_label} \\
  --node-taint anycloud.sh/node-pool={pool}:NoSchedule
"""


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def aws_vm() -> dict[str, Any]:
    return {
        "ami": "ami-0123456789abcdef0",
        "instanceType": "m5.large",
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
        "userData": user_data("aws"),
        "tags": {
            "anycloud.sh/cluster": "c1",
            "anycloud.sh/node-pool": "pool-1",
            "anycloud.sh/attempt": "a1",
        },
        "volumeTags": {"anycloud.sh/cluster": "c1", "anycloud.sh/node-pool": "pool-1"},
    }


def gcp_vm() -> dict[str, Any]:
    return {
        "machineType": "n2-standard-4",
        "zone": "us-central1-a",
        "metadata": {"user-data": user_data("gcp"), "enable-oslogin": "TRUE"},
        "bootDisk": {"initializeParams": {"labels": {
            "anycloud-sh_cluster": "c1", "anycloud-sh_node-pool": "pool-1",
        }}},
        "labels": {
            "anycloud-sh_cluster": "c1",
            "anycloud-sh_node-pool": "pool-1",
            "anycloud-sh_attempt": "a1",
        },
    }


def azure_vm() -> dict[str, Any]:
    return {
        "hardwareProfile": {"vmSize": "Standard_D4s_v5"},
        "osProfile": {
            "computerName": "a1",
            "adminUsername": "anycloud",
            "customData": b64(user_data("azure")),
            "linuxConfiguration": {"disablePasswordAuthentication": True},
        },
        "tags": {
            "anycloud.sh/cluster": "c1",
            "anycloud.sh/node-pool": "pool-1",
            "anycloud.sh/attempt": "a1",
        },
    }


VM_TYPES = {
    "aws": "aws:ec2/instance:Instance",
    "gcp": "gcp:compute/instance:Instance",
    "azure": "azure-native:compute:VirtualMachine",
}
VM_BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    "aws": aws_vm,
    "gcp": gcp_vm,
    "azure": azure_vm,
}


def resource(
    rtype: str,
    inputs: Mapping[str, Any],
    name: str = "r",
    secret_keys: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "urn": f"urn:pulumi:dev::anycloud::{rtype}::{name}",
        "type": rtype,
        "name": name,
        "inputs": copy.deepcopy(dict(inputs)),
        "secret_keys": secret_keys or [],
        **extra,
    }


def check(
    policy: str,
    rtype: str,
    inputs: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    **extra: Any,
) -> list[Violation]:
    """Violations of one policy for one resource, through the offline path."""
    found = check_resources([resource(rtype, inputs, **extra)], config, clock=lambda: NOW)
    return [v for v in found if v.policy == policy]


def engine_args(
    rtype: str,
    props: Mapping[str, Any],
    config: Mapping[str, Any] | None = None,
    secret_outputs: list[str] | None = None,
    ignore_changes: list[str] | None = None,
) -> ResourceValidationArgs:
    """Args shaped as the engine builds them: props behind the SDK's unknown-checking proxy."""
    opts = PolicyResourceOptions(
        False, ignore_changes or [], None, [], PolicyCustomTimeouts(0, 0, 0),
        secret_outputs or []
    )
    return ResourceValidationArgs(
        rtype,
        unknown_checking_proxy(copy.deepcopy(dict(props))),
        f"urn:pulumi:dev::anycloud::{rtype}::r",
        "r",
        opts,
        None,
        config,
    )


def run_rule(rule: Callable[..., Any], args: ResourceValidationArgs) -> list[str]:
    messages: list[str] = []
    rule(args, lambda message, urn=None: messages.append(message))
    return messages


@pytest.fixture
def s() -> SimpleNamespace:
    """Builders and helpers, as one namespace (tests import nothing from this file)."""
    return SimpleNamespace(
        NOW=NOW,
        K3S_SHA=K3S_SHA,
        CF_V4=CF_V4,
        CF_V6=CF_V6,
        user_data=user_data,
        b64=b64,
        aws_vm=aws_vm,
        gcp_vm=gcp_vm,
        azure_vm=azure_vm,
        VM_TYPES=VM_TYPES,
        VM_BUILDERS=VM_BUILDERS,
        resource=resource,
        check=check,
        engine_args=engine_args,
        run_rule=run_rule,
    )
