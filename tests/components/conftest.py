"""Fixtures for component tests: pool configs and cached mock-engine runs of the pool stack."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from automation.engine.mock.model import ProgramRun, RegisteredResource
from automation.engine.mock.program import run_program
from stacks.config import (
    AttemptSpec,
    CloudCredentialRef,
    ClusterRef,
    NodePoolStackConfig,
    Provider,
)
from stacks.node_pool import build_program

CA = "c" * 64
ISSUED = datetime(2026, 11, 30, 21, 0, tzinfo=UTC)
REGION = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}
ZONE = {"aws": "us-east-1a", "gcp": "us-central1-b", "azure": "2"}
VM_TYPE = {
    "aws": ("m6i.large", "g5.xlarge"),
    "gcp": ("n2-standard-4", "g2-standard-8"),
    "azure": ("Standard_D4s_v5", "Standard_NC4as_T4_v3"),
}
CREDENTIAL = {
    "aws": CloudCredentialRef(
        provider="aws", profile="pool-profile", role_arn="arn:aws:iam::1:role/r"
    ),
    "gcp": CloudCredentialRef(provider="gcp", project="proj-1", key_file="/secrets/gcp.json"),
    "azure": CloudCredentialRef(
        provider="azure", subscription_id="sub", tenant_id="ten", client_id="cli"
    ),
}
PROVIDERS: tuple[Provider, ...] = ("aws", "gcp", "azure")


def pool_config(
    provider: Provider,
    *,
    hosts_service: bool = False,
    gpu: bool = False,
    attempts: tuple[AttemptSpec, ...] | None = None,
) -> NodePoolStackConfig:
    return NodePoolStackConfig(
        pool_id="np-7f3k",
        pool_name="gpu" if gpu else "cpu",
        cluster=ClusterRef(
            id="cl-42",
            server_url="https://203.0.113.10:6443",
            ca_sha256=CA,
            kubeconfig_path="/etc/anycloud/kubeconfig",
            kube_context="anycloud",
        ),
        credential=CREDENTIAL[provider],
        provider=provider,
        region=REGION[provider],
        zone=ZONE[provider],
        vm_type=VM_TYPE[provider][1 if gpu else 0],
        gpu_count=1 if gpu else 0,
        gpu_model="nvidia-l4" if gpu else None,
        attempts=attempts
        if attempts is not None
        else (
            AttemptSpec(id="at-0001", token_issued_at=ISSUED),
            AttemptSpec(id="at-0002", needs_token=False),
        ),
        hosts_service=hosts_service,
    )


_CACHE: dict[tuple[Any, ...], ProgramRun] = {}


def run_pool(provider: Provider, **kw: Any) -> ProgramRun:
    """Run the pool stack program (secrets revealed for inspection), cached per shape."""
    key = (provider, tuple(sorted(kw.items())))
    if key not in _CACHE:
        _CACHE[key] = run_program(build_program(pool_config(provider, **kw)), reveal_secrets=True)
    return _CACHE[key]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pulumi_gcp warns about its own deprecated aliases when its modules load.
    for item in items:
        if "/tests/components/" in str(item.path) or "/tests/stacks/" in str(item.path):
            item.add_marker(pytest.mark.filterwarnings("ignore::DeprecationWarning"))


@pytest.fixture
def pool_run() -> Callable[..., ProgramRun]:
    return run_pool


VM_TYPES = {
    "aws": "aws:ec2/instance:Instance",
    "gcp": "gcp:compute/instance:Instance",
    "azure": "azure-native:compute:VirtualMachine",
}


def user_data_of(vm: RegisteredResource) -> str:
    """The cloud-config a VM resource carries, whatever the cloud calls it."""
    if vm.type == VM_TYPES["aws"]:
        return str(vm.inputs["userData"])
    if vm.type == VM_TYPES["gcp"]:
        return str(vm.inputs["metadata"]["user-data"])
    return base64.b64decode(vm.inputs["osProfile"]["customData"]).decode()


def cloud_config_of(vm: RegisteredResource) -> dict[str, Any]:
    text = user_data_of(vm)
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


def written_file(doc: dict[str, Any], path: str) -> str:
    for f in doc["write_files"]:
        if f["path"] == path:
            return str(f["content"])
    raise AssertionError(f"{path} not written")


class Helpers:
    """Helpers handed to tests as a fixture (test modules cannot import conftest safely)."""

    CA = CA
    ISSUED = ISSUED
    PROVIDERS = PROVIDERS
    VM_TYPES = VM_TYPES
    pool_config = staticmethod(pool_config)
    run_pool = staticmethod(run_pool)
    user_data_of = staticmethod(user_data_of)
    cloud_config_of = staticmethod(cloud_config_of)
    written_file = staticmethod(written_file)


@pytest.fixture
def h() -> type[Helpers]:
    return Helpers
