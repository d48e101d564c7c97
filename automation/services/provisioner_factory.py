"""A provisioner of the set by name, built for this control plane (its ledger and clock)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from automation.app import App
from automation.errors import InvalidInput
from automation.provisioners.base import RuntimeProvisioner
from automation.provisioners.provisioner_set import (
    SET_ENV,
    KubernetesEntry,
    ProvisionerSet,
    StaticEntry,
)

Provisioners = Callable[[str], RuntimeProvisioner]


class Built:
    """name -> its provisioner, built once per name; ``close`` ends their connections."""

    def __init__(self, app: App, provisioner_set: ProvisionerSet, base_dir: Path) -> None:
        self.app, self.provisioner_set, self.base_dir = app, provisioner_set, base_dir
        self.built: dict[str, RuntimeProvisioner] = {}

    def __call__(self, name: str) -> RuntimeProvisioner:
        if name not in self.built:
            self.built[name] = _build(self.app, self.provisioner_set, name, self.base_dir)
        return self.built[name]

    def close(self) -> None:
        for provisioner in self.built.values():
            close = getattr(provisioner, "close", None)
            if close is not None:
                close()
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
                        where.kube_context)
    return AdmittedNodePool(app, NodePoolProvisioner(name, entry.spec, target, base_dir))
