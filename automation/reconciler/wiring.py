"""Builds the reconciler's ports: the real ones, or the simulated world's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import RowMapping

from automation.engine.select import make_runner
from automation.reconciler.reconcile import Lookup, Ports
from automation.services.context import App
from automation.services.stacks import pool_target
from automation.simulators.world import SimWorld

Report = Callable[[str, str, dict[str, Any]], None]


def real_ports(app: App, engine: str | None = None, report: Report | None = None) -> Ports:
    """The engine (Pulumi when installed), each cluster through its registered kubeconfig."""
    from automation.kube.adapter import KubernetesCluster

    runner = make_runner(app.home, engine)
    clusters: dict[str, Any] = {}

    def cluster_for(row: RowMapping) -> Any:
        if row["id"] not in clusters:
            clusters[row["id"]] = KubernetesCluster(Path(row["kubeconfig_path"]),
                                                    row["kube_context"])
        return clusters[row["id"]]

    def vm_lookup(pool_id: str, attempt_ids: list[str]) -> dict[str, Lookup]:
        found = runner.lookup_vms(pool_target(app, pool_id, planned=False), attempt_ids)
        return found  # type: ignore[return-value]

    return Ports(runner=runner, cluster_for=cluster_for, vm_lookup=vm_lookup,
                 ensure_addons=_addon_ensurer(app, runner, None, report))


def simulated_ports(app: App, world: SimWorld, report: Report | None = None) -> Ports:
    """The mock engine over the simulated cloud, and the simulated cluster."""
    from automation.engine.mock_runner import MockEngineRunner

    runner = MockEngineRunner(app.home, cloud=world.cloud)
    return Ports(runner=runner, cluster_for=lambda row: world.cluster,
                 vm_lookup=lambda pool_id, ids: {a: world.cloud.lookup(a) for a in ids},
                 ensure_addons=_addon_ensurer(app, runner, world, report))


def _addon_ensurer(app: App, runner: Any, world: SimWorld | None,
                   report: Report | None) -> Any:
    from automation.reconciler.addons_step import AddonEnsurer, simulated_apply

    if world is None:
        return AddonEnsurer(app, runner, report=report)
    # The mock engine writes nothing to the simulated cluster: the hook mirrors the write.
    return AddonEnsurer(app, runner, apply=simulated_apply(runner, world.cluster),
                        report=report)
