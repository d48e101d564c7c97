"""Fixtures for stack-program tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from stacks.config import (
    AttemptSpec,
    CloudCredentialRef,
    ClusterRef,
    NodePoolStackConfig,
    Provider,
)

CREDENTIAL = {
    "aws": CloudCredentialRef(
        provider="aws", profile="pool-profile", role_arn="arn:aws:iam::1:role/r"
    ),
    "gcp": CloudCredentialRef(provider="gcp", project="proj-1", key_file="/secrets/gcp.json"),
    "azure": CloudCredentialRef(
        provider="azure", subscription_id="sub", tenant_id="ten", client_id="cli"
    ),
}
REGION = {"aws": "us-east-1", "gcp": "us-central1", "azure": "eastus"}


def make_config(
    provider: Provider, *, hosts_service: bool = False, n: int = 2
) -> NodePoolStackConfig:
    return NodePoolStackConfig(
        pool_id="np-1",
        pool_name="pool",
        cluster=ClusterRef(
            id="cl-1",
            server_url="https://203.0.113.10:6443",
            ca_sha256="c" * 64,
            kubeconfig_path="/etc/anycloud/kubeconfig",
        ),
        credential=CREDENTIAL[provider],
        provider=provider,
        region=REGION[provider],
        vm_type="m6i.large",
        attempts=tuple(
            AttemptSpec(id=f"at-{i}", token_issued_at=datetime(2026, 11, 30, tzinfo=UTC))
            for i in range(n)
        ),
        hosts_service=hosts_service,
    )


@pytest.fixture
def config_for() -> Callable[..., NodePoolStackConfig]:
    return make_config


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/tests/stacks/" in str(item.path):
            item.add_marker(pytest.mark.filterwarnings("ignore::DeprecationWarning"))
