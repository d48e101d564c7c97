"""Builds the reconciler's ports: the real ones, the simulated world's, or the local demo's
(a real cluster, a simulated cloud)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import RowMapping

from automation.engine.runner import StackRunner
from automation.engine.select import make_runner
from automation.reconciler.reconcile import Lookup, Ports
from automation.services.context import App
from automation.services.stacks import pool_target
from automation.simulators.world import SimWorld

Report = Callable[[str, str, dict[str, Any]], None]


def real_ports(app: App, engine: str | None = None, report: Report | None = None) -> Ports:
    """The engine (Pulumi when installed), each cluster through its registered kubeconfig."""
    runner = make_runner(app.home, engine)

    def vm_lookup(pool_id: str, attempt_ids: list[str]) -> dict[str, Lookup]:
        found = runner.lookup_vms(pool_target(app, pool_id, planned=False), attempt_ids)
        return found  # type: ignore[return-value]

    return Ports(runner=runner, cluster_for=_kubernetes_clusters(), vm_lookup=vm_lookup,
                 ensure_addons=_addon_ensurer(app, runner, None, report),
                 ensure_ingress=_ingress_step(runner, None))


def simulated_ports(app: App, world: SimWorld, report: Report | None = None) -> Ports:
    """The mock engine over the simulated cloud, and the simulated cluster."""
    from automation.engine.mock_runner import MockEngineRunner

    runner = MockEngineRunner(app.home, cloud=world.cloud)
    return Ports(runner=runner, cluster_for=lambda row: world.cluster,
                 vm_lookup=lambda pool_id, ids: {a: world.cloud.lookup(a) for a in ids},
                 ensure_addons=_addon_ensurer(app, runner, world, report),
                 ensure_ingress=_ingress_step(runner, world))


def local_ports(app: App, world: SimWorld, report: Report | None = None, *,
                addons_runner: StackRunner | None = None) -> Ports:
    """``anycloud demo --cluster local``: the cluster side is real, the cloud side simulated.

    Each cluster through its registered kubeconfig (the real ``KubernetesCluster`` adapter:
    Nodes, labels, cordon, delete, namespaces); the cluster add-on stack on the real engine
    (``addons_runner``, by default an ``AutomationRunner`` over ``app.home``: it needs the
    ``pulumi`` CLI and the kubernetes provider plugin); node-pool stacks on the mock engine
    over the simulated cloud, whose VMs are looked up there.
    """
    from automation.engine.mock_runner import MockEngineRunner

    if addons_runner is None:
        from automation.engine.pulumi_driver import AutomationRunner

        addons_runner = AutomationRunner(app.home)
    runner = MockEngineRunner(app.home, cloud=world.cloud)
    return Ports(runner=runner, cluster_for=_kubernetes_clusters(),
                 vm_lookup=lambda pool_id, ids: {a: world.cloud.lookup(a) for a in ids},
                 ensure_addons=_addon_ensurer(app, addons_runner, None, report),
                 ensure_ingress=_ingress_step(addons_runner, None))


def _kubernetes_clusters() -> Callable[[RowMapping], Any]:
    """A cluster row → its ``KubernetesCluster`` (one client per cluster record)."""
    from automation.kube.adapter import KubernetesCluster

    clusters: dict[str, Any] = {}

    def cluster_for(row: RowMapping) -> Any:
        if row["id"] not in clusters:
            clusters[row["id"]] = KubernetesCluster(Path(row["kubeconfig_path"]),
                                                    row["kube_context"])
        return clusters[row["id"]]

    return cluster_for


def _addon_ensurer(app: App, runner: Any, world: SimWorld | None,
                   report: Report | None) -> Any:
    from automation.reconciler.addons_step import AddonEnsurer, simulated_apply

    if world is None:
        return AddonEnsurer(app, runner, report=report)
    # The mock engine writes nothing to the simulated cluster: the hook mirrors the write.
    return AddonEnsurer(app, runner, apply=simulated_apply(runner, world.cluster),
                        report=report)


def _ingress_step(runner: Any, world: SimWorld | None) -> Any:
    from automation.reconciler.ingress_step import IngressReleaseStep, simulated_release_hooks

    if world is None:
        return IngressReleaseStep(runner)
    # The mock engine writes nothing to the simulated cluster: the hooks mirror the writes.
    apply, destroy = simulated_release_hooks(runner, world.cluster)
    return IngressReleaseStep(runner, apply=apply, destroy=destroy)
