"""The one interface every provisioner type answers to: the caller never branches on type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from automation.errors import AnycloudError


class ProvisionerUnavailable(AnycloudError):
    """A provisioner could not do its part (its cluster unreachable, its kubeconfig
    unreadable): a domain error naming the provisioner, never an internal one."""

    default_code = "PROVISIONER_UNAVAILABLE"
    http_status = 503  # the request was fine; the provisioner is not, for now

    def __init__(self, provisioner: str, cause: str) -> None:
        super().__init__(f"provisioner {provisioner!r}: {cause}", field="provisioner",
                         value=provisioner, rule="must be reachable and usable: fix it in the "
                                                 "set, or choose another provisioner")


@dataclass(frozen=True)
class ProvisionRequest:
    """What a deployment asks of its runtime."""

    slots: int = 1  # static: slots held on one runtime; templated: sizes what is not given
    cpu: str | None = None  # None: the provisioner's per_slot.cpu times slots
    memory: str | None = None
    storage: str | None = None


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

    def preflight(self, provision_id: str, request: ProvisionRequest) -> None:
        """Raises (a domain error) when ``provision`` would fail for a reason known now:
        no capacity, cluster unreachable, namespace not allowed, templates that do not render
        with these values. Changes nothing: a move asks this before releasing anything."""
        ...
