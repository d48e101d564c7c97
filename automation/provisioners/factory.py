"""A provisioner of the set by name, built for this control plane (its ledger and clock)."""

from __future__ import annotations

from collections.abc import Callable

from automation.errors import InvalidInput
from automation.provisioners.base import RuntimeProvisioner
from automation.provisioners.provisioner_set import SET_ENV, ProvisionerSet, StaticEntry
from automation.services.context import App

Provisioners = Callable[[str], RuntimeProvisioner]


def provisioners(app: App, provisioner_set: ProvisionerSet) -> Provisioners:
    """name -> its provisioner (built once per name)."""
    built: dict[str, RuntimeProvisioner] = {}

    def get(name: str) -> RuntimeProvisioner:
        if name not in built:
            built[name] = _build(app, provisioner_set, name)
        return built[name]

    return get


def _build(app: App, provisioner_set: ProvisionerSet, name: str) -> RuntimeProvisioner:
    entry = provisioner_set.provisioners.get(name)
    if entry is None:
        # A deployment provisioned with a provisioner since removed from the set.
        raise InvalidInput("provisioner", name, f"is not in the set ({SET_ENV}): put it back "
                           "to deprovision what it holds, then remove it")
    if isinstance(entry, StaticEntry):
        from automation.provisioners.static import StaticProvisioner

        return StaticProvisioner(name, entry.spec, app.ledger, app.clock)
    raise InvalidInput("provisioner", name,
                       f"type {entry.type} cannot provision here yet (issue 12 continues)")
