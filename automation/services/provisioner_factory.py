"""A provisioner of the set by name, built for this control plane (its ledger and clock)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from automation.app import App
from automation.errors import AnycloudError, InvalidInput
from automation.kube.port import ClusterUnavailable
from automation.provisioners.base import (
    Health,
    Provisioned,
    ProvisionerUnavailable,
    ProvisionRequest,
    RuntimeProvisioner,
)
from automation.provisioners.provisioner_set import (
    SET_ENV,
    KubernetesEntry,
    ProvisionerSet,
    StaticEntry,
)

Provisioners = Callable[[str], RuntimeProvisioner]
T = TypeVar("T")


class Guarded:
    """A provisioner whose every failure is a domain error: an unreachable cluster or an
    unreadable kubeconfig becomes ProvisionerUnavailable naming it (recorded as the
    deployment's lastError, shown by status), never an internal error and a crash report."""

    def __init__(self, inner: RuntimeProvisioner) -> None:
        self.inner = inner
        self.name = inner.name

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except AnycloudError:
            raise
        except (ClusterUnavailable, OSError) as exc:
            raise ProvisionerUnavailable(self.name, " ".join(str(exc).split()) or
                                         type(exc).__name__) from exc

    def provision(self, provision_id: str, request: ProvisionRequest) -> Provisioned:
        return self._call(self.inner.provision, provision_id, request)

    def deprovision(self, provision_id: str) -> bool:
        return self._call(self.inner.deprovision, provision_id)

    def await_ready(self, provisioned: Provisioned) -> None:
        self._call(self.inner.await_ready, provisioned)

    def check(self, provision_id: str) -> Health:
        return self._call(self.inner.check, provision_id)

    def preflight(self, provision_id: str, request: ProvisionRequest) -> None:
        self._call(self.inner.preflight, provision_id, request)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


class Built:
    """name -> its provisioner, built once per name; ``close`` ends their connections."""

    def __init__(self, app: App, provisioner_set: ProvisionerSet, base_dir: Path) -> None:
        self.app, self.provisioner_set, self.base_dir = app, provisioner_set, base_dir
        self.built: dict[str, Guarded] = {}

    def __call__(self, name: str) -> RuntimeProvisioner:
        if name not in self.built:
            self.built[name] = Guarded(_build(self.app, self.provisioner_set, name,
                                              self.base_dir))
        return self.built[name]

    def close(self) -> None:
        for provisioner in self.built.values():
            provisioner.close()
        self.built.clear()

    def __enter__(self) -> Built:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def provisioners(app: App, provisioner_set: ProvisionerSet,
                 base_dir: Path | None = None) -> Built:
    """The set's provisioners for this control plane. Template and kubeconfig paths are
    relative to ``base_dir``, the directory the set was loaded against (default: the current
    one, as ``load_from_env``)."""
    return Built(app, provisioner_set, base_dir or Path.cwd())


def _build(app: App, provisioner_set: ProvisionerSet, name: str,
           base_dir: Path) -> RuntimeProvisioner:
    entry = provisioner_set.provisioners.get(name)
    if entry is None:
        # A deployment provisioned with a provisioner since removed from the set.
        raise InvalidInput("provisioner", name, f"is not in the set ({SET_ENV}): put it back "
                           "to deprovision what it holds, then remove it")
    if isinstance(entry, StaticEntry):
        from automation.provisioners.static import StaticProvisioner

        return StaticProvisioner(name, entry.spec, app.ledger, app.clock)
    from automation.provisioners.kubernetes import (
        KubernetesProvisioner,
        NodePoolProvisioner,
        PoolTarget,
    )

    if isinstance(entry, KubernetesEntry):
        return KubernetesProvisioner(name, entry.spec, base_dir)
    from automation.kube.port import pool_namespace
    from automation.services.node_pools import find_pool_placement
    from automation.services.pool_admission import AdmittedNodePool

    where = find_pool_placement(app, entry.spec.node_pool, entry.spec.cluster,
                                field=f"{SET_ENV}.{name}.spec.node_pool")
    target = PoolTarget(where.pool_id, pool_namespace(where.pool_id), where.kubeconfig_path,
                        where.kube_context, gpus=where.gpus)
    return AdmittedNodePool(app, NodePoolProvisioner(name, entry.spec, target, base_dir))
