"""The reconciler's ports over a simulated world, chosen by an edge (``reconcile --simulate``,
``demo``, tests): the mock engine over the simulated cloud, with the simulated cluster or a
real one. The reconciler itself never imports this package."""

from __future__ import annotations

from automation.app import App
from automation.engine.mock.runner import MockEngineRunner
from automation.engine.runner import StackRunner
from automation.reconciler.reconcile import Ports
from automation.reconciler.wiring import Report, addon_ensurer, ingress_step, kubernetes_clusters
from automation.simulators.world import SimWorld


def simulated_ports(app: App, world: SimWorld, report: Report | None = None, *,
                    runner: StackRunner | None = None) -> Ports:
    """The simulated cloud and the simulated cluster; every stack on ``runner`` (the real
    engine with the stand-in cloud plugins serving ``world.cloud``, ``--simulate --engine
    pulumi``), by default on the mock engine over it."""
    runner = runner or MockEngineRunner(app.home, cloud=world.cloud)
    return Ports(runner=runner, cluster_for=lambda row: world.cluster,
                 vm_lookup=lambda pool_id, ids: {a: world.cloud.lookup(a) for a in ids},
                 ensure_addons=addon_ensurer(app, runner, report, mirror_to=world.cluster),
                 ensure_ingress=ingress_step(runner, mirror_to=world.cluster))


def local_ports(app: App, world: SimWorld, report: Report | None = None, *,
                addons_runner: StackRunner | None = None,
                pools_runner: StackRunner | None = None) -> Ports:
    """``anycloud demo --cluster local``: the cluster side is real, the cloud side simulated.

    Each cluster through its registered kubeconfig (the real ``KubernetesCluster`` adapter:
    Nodes, labels, cordon, delete, namespaces); the cluster add-on stack on the real engine
    (``addons_runner``, by default an ``AutomationRunner`` over ``app.home``: it needs the
    ``pulumi`` CLI and the kubernetes provider plugin); node-pool stacks on ``pools_runner``
    (the real engine with the stand-in cloud plugins serving ``world.cloud``; by default the
    mock engine over it), their VMs looked up in the simulated cloud.
    """
    if addons_runner is None:
        from automation.engine.pulumi_driver import AutomationRunner

        addons_runner = AutomationRunner(app.home)
    runner = pools_runner or MockEngineRunner(app.home, cloud=world.cloud)
    return Ports(runner=runner, cluster_for=kubernetes_clusters(),
                 vm_lookup=lambda pool_id, ids: {a: world.cloud.lookup(a) for a in ids},
                 ensure_addons=addon_ensurer(app, addons_runner, report),
                 ensure_ingress=ingress_step(addons_runner))
