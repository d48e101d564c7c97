"""Plan, preview and policy check of node-pool stacks: what CI runs before any rollout."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from automation.app import App
from automation.engine.mock.runner import MockEngineRunner
from automation.engine.runner import ProgressSink, StackRunner, StackTarget
from automation.errors import AnycloudError
from automation.models import (
    Cost,
    EngineUnlock,
    Plan,
    PlannedResource,
    PolicyFinding,
    PolicyReport,
    PoolPreview,
    PoolUnlock,
    RunResult,
    StackUnlock,
)
from automation.services.cost import pool_rate
from automation.stack_targets import (
    addons_target,
    gpu_cluster_rows,
    live_pool_ids,
    pool_release_target,
    pool_target,
    pool_warnings,
)


def stack_cost(target: StackTarget) -> Cost:
    """The stack's VMs (one per attempt it holds or plans) at the list price."""
    config = target.config
    return pool_rate(config.provider, config.vm_type, config.region, len(config.attempts))


def plan_pool(app: App, ref: str) -> Plan:
    """The pool's stack program evaluated under the mock engine: no CLI, no cloud."""
    target = pool_target(app, ref)
    run = MockEngineRunner(app.home).evaluate(target, reveal_secrets=False)
    return Plan(pool=target.key, stack=target.stack_name,
                warnings=pool_warnings(app, target.key), cost=stack_cost(target), resources=[
        PlannedResource(urn=r.urn, type=r.type, name=r.name, parent=r.parent, inputs=r.inputs)
        for r in run.resources
    ])


RunnerFor = Callable[[], StackRunner]  # called once the stack is found: a bad reference is a
# 404 (exit 2) wherever the engine is missing


def preview_pool(app: App, runner_for: RunnerFor, ref: str, *, diff: bool = False,
                 on_progress: ProgressSink | None = None) -> PoolPreview:
    target = pool_target(app, ref)
    result = runner_for().preview(target, diff=diff, on_progress=on_progress)
    return PoolPreview(**dict(result), pool=target.key, cost=stack_cost(target))


def preview_all(app: App, runner_for: RunnerFor, *, diff: bool = False,
                pools: Collection[str] | None = None) -> list[PoolPreview]:
    """Every live pool's stack (``preview --all``, for CI; ``pools``: of these only)."""
    return [preview_pool(app, runner_for, pool, diff=diff) for pool in live_pool_ids(app)
            if pools is None or pool in pools]


def preview_addons(app: App, runner_for: RunnerFor, ref: str, *, diff: bool = False,
                   on_progress: ProgressSink | None = None) -> RunResult:
    """Preview the cluster's NVIDIA add-on stack as the reconciler would apply it: the
    cluster's add-on objects are read first (K3s's own RuntimeClass, objects to adopt)."""
    from pathlib import Path

    from automation.kube.adapter import KubernetesCluster
    from automation.kube.port import ClusterUnavailable
    from automation.reconciler.addons_step import AddonEnsurer
    from automation.services.clusters import cluster_row

    row = cluster_row(app, ref)
    row = app.with_kubeconfig(row)  # type: ignore[assignment]
    runner = runner_for()
    port = KubernetesCluster(Path(row["kubeconfig_path"] or ""), row["kube_context"])
    try:
        target = AddonEnsurer(app, runner).preview_target(row, port)
    except ClusterUnavailable as exc:  # a runtime failure (exit 1), named, not an escape
        raise AnycloudError(f"cluster not read: {exc}", code="CLUSTER_UNAVAILABLE") from exc
    finally:
        port.close()
    return runner.preview(target, diff=diff, on_progress=on_progress)


def unlock_pool(app: App, runner_for: RunnerFor, ref: str) -> PoolUnlock:
    """Clear a lock a killed run left on the pool's stack and, for a pool that hosts a
    Service, on its ingress release's (``pulumi cancel``; the mock engine keeps none)."""
    target = pool_target(app, ref)
    release = pool_release_target(app, ref)
    runner = runner_for()
    unlocked = runner.unlock(target)
    return PoolUnlock(stack=target.stack_name, engine=runner.engine, unlocked=unlocked,
                      ingress_release=None if release is None else StackUnlock(
                          stack=release.stack_name, unlocked=runner.unlock(release)))


def unlock_addons(app: App, runner_for: RunnerFor, ref: str) -> EngineUnlock:
    """The same for a cluster's NVIDIA add-on stack."""
    from automation.services.clusters import cluster_row

    target = addons_target(app.with_kubeconfig(cluster_row(app, ref)))
    runner = runner_for()
    return EngineUnlock(stack=target.stack_name, engine=runner.engine,
                        unlocked=runner.unlock(target))


def _check(app: App, target: StackTarget) -> list[PolicyFinding]:
    runner = MockEngineRunner(app.home)
    # Secrets are readable here so the rules can check user data; no value reaches a message.
    return runner.check_policy(runner.evaluate(target, reveal_secrets=True), target)


def check_pool_policy(app: App, ref: str) -> PolicyReport:
    """The policy pack over the resources the pool's stack program registers (offline)."""
    target = pool_target(app, ref)
    return PolicyReport(pool=target.key, stack=target.stack_name, findings=_check(app, target))


def check_addons_policy(app: App, cluster_row: Any) -> PolicyReport:
    """The same over a cluster's NVIDIA add-on stack."""
    target = addons_target(app.with_kubeconfig(cluster_row))
    return PolicyReport(cluster=target.key, stack=target.stack_name,
                        findings=_check(app, target))


def check_all(app: App, pools: Collection[str] | None = None,
              clusters: Collection[str] | None = None) -> list[PolicyReport]:
    """Every live pool's stack, and the add-on stack of every cluster with a GPU pool
    (``pools``, ``clusters``: of these only)."""
    return ([check_pool_policy(app, pool) for pool in live_pool_ids(app)
             if pools is None or pool in pools]
            + [check_addons_policy(app, row) for row in gpu_cluster_rows(app)
               if clusters is None or row["id"] in clusters])

