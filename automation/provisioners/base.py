"""The one interface every provisioner type answers to: the caller never branches on type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ProvisionRequest:
    """What a deployment asks of its runtime."""

    slots: int = 1  # static: slots held on one runtime
    cpu: str = "1"
    memory: str = "2Gi"
    storage: str = "10Gi"


@dataclass(frozen=True)
class Provisioned:
    """Where a provisioned resource runs."""

    provision_id: str
    provisioner: str
    host: str
    data_dir: str
    audience_url: str | None = None
    warnings: tuple[str, ...] = ()
    checksum: str | None = None  # kubernetes/nodepool: SHA-256 of the rendered templates


@dataclass(frozen=True)
class Health:
    ok: bool
    detail: str


class RuntimeProvisioner(Protocol):
    name: str

    def provision(self, provision_id: str, request: ProvisionRequest) -> Provisioned:
        """Idempotent per id: provisioning an id again returns what it already has."""
        ...

    def deprovision(self, provision_id: str) -> bool:
        """Removes what the id holds; False when it held nothing (already removed)."""
        ...

    def await_ready(self, provisioned: Provisioned) -> None:
        """Returns once the runtime serves, or raises naming what is not ready."""
        ...

    def check(self, provision_id: str) -> Health:
        """Whether what the id holds is still as provisioned (drift, capacity, config)."""
        ...
