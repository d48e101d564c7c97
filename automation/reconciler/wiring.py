"""Builds the reconciler's ports for a real world: the engine (Pulumi when installed) and each
cluster through its registered kubeconfig. The pieces are public so that an edge that chooses
a simulated world (``automation.simulators.ports``) assembles its ports from the same parts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import RowMapping

from automation.app import App
from automation.engine.runner import StackRunner
from automation.engine.select import make_runner
from automation.reconciler.reconcile import Lookup, Ports
from automation.stack_targets import pool_target

Report = Callable[[str, str, dict[str, Any]], None]


def real_ports(app: App, engine: str | None = None, report: Report | None = None) -> Ports:
    """The engine (Pulumi when installed), each cluster through its registered kubeconfig."""
    runner = make_runner(app.home, engine)

    def vm_lookup(pool_id: str, attempt_ids: list[str]) -> dict[str, Lookup]:
        found = runner.lookup_vms(pool_target(app, pool_id, planned=False), attempt_ids)
        return found  # type: ignore[return-value]

    return Ports(runner=runner, cluster_for=kubernetes_clusters(), vm_lookup=vm_lookup,
                 ensure_addons=addon_ensurer(app, runner, report),
                 ensure_ingress=ingress_step(runner))


def kubernetes_clusters() -> Callable[[RowMapping], Any]:
    """A cluster row → its ``KubernetesCluster`` (one client per cluster record)."""
    from automation.kube.adapter import KubernetesCluster

    clusters: dict[str, Any] = {}

    def cluster_for(row: RowMapping) -> Any:
        if row["id"] not in clusters:
            clusters[row["id"]] = KubernetesCluster(Path(row["kubeconfig_path"]),
                                                    row["kube_context"])
        return clusters[row["id"]]

    return cluster_for


def addon_ensurer(app: App, runner: StackRunner, report: Report | None = None, *,
                  mirror_to: Any = None) -> Any:
    """The NVIDIA add-on step. ``mirror_to``: a simulated cluster that the mock engine's
    writes are mirrored into (the mock engine writes to no cluster)."""
    from automation.reconciler.addons_step import AddonEnsurer, simulated_apply

    if mirror_to is None:
        return AddonEnsurer(app, runner, report=report)
    return AddonEnsurer(app, runner, apply=simulated_apply(runner, mirror_to), report=report)


def ingress_step(runner: StackRunner, *, mirror_to: Any = None) -> Any:
    """The ingress release step; ``mirror_to`` as for ``addon_ensurer``."""
    from automation.reconciler.ingress_step import IngressReleaseStep, simulated_release_hooks

    if mirror_to is None:
        return IngressReleaseStep(runner)
    apply, destroy = simulated_release_hooks(runner, mirror_to)
    return IngressReleaseStep(runner, apply=apply, destroy=destroy)
