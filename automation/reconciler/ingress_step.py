"""The reconciler's ingress-release step: a pool's Traefik HelmChart through the add-on
mechanism (seed, "Ingress entry": "installed through the same cluster add-on mechanism as the
NVIDIA stack").

The release is a stack of its own (``StackKind.INGRESS_RELEASE``, keyed by the pool id,
program ``stacks/ingress_release.py``), so deleting the pool destroys exactly its release.
The rules are the NVIDIA objects' (``addons_step``), applied to the one HelmChart:

* ``check`` (read-only, every pass of a pool that hosts a Service): the desired HelmChart is
  the stack program evaluated under the mock engine (``components/traefik.py`` stays the one
  source of truth); the cluster's object under the release's name is classified by
  ``automation.kube.ingress_release.plan_release``. A foreign object yields the diagnostic
  that fails the pool (it names the object and the ``kubectl delete``); nothing is written.
* ``install`` (under the pool's lease, after the pool's stack holds the port-80 rule):
  absent or edited: apply (refresh, then up: the refresh lets the engine see outside edits
  and deletions); an edit the apply did not take back (fields another field manager added
  survive a server-side apply) is deleted and applied again; a field that cannot change in
  place: delete, then apply. Ours and unchanged: ``check`` asks for nothing.
* ``remove`` (deletion, once every VM is released and before the network goes): destroy the
  stack; the helm-controller's finalizer uninstalls the release.

A denied read or write (``ClusterForbidden``, or the API server's 403 inside an
``EngineFailed``) is a diagnostic naming the verb and resource. A transiently unavailable
cluster or a stack locked by another update decides nothing this pass.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from automation.engine.errors import EngineFailed, StackLocked
from automation.engine.runner import StackRunner, StackTarget
from automation.kube.ingress_release import ReleaseClass, plan_release
from automation.kube.port import ClusterForbidden, ClusterUnavailable, parse_forbidden
from automation.reconciler.addons_step import mock_evaluator, refresh_and_up
from automation.stack_targets import release_target

if TYPE_CHECKING:
    from automation.engine.mock.model import ProgramRun

HELMCHART_TYPE = "kubernetes:helm.cattle.io/v1:HelmChart"
# What a check can ask ``install`` to do.
NEEDS_WRITE: tuple[ReleaseClass, ...] = ("absent", "ours-edited", "ours-immutable-differs")

ClusterRow = Mapping[Any, Any]
StackHook = Callable[[StackTarget], None]
Evaluate = Callable[[StackTarget], "ProgramRun"]


@runtime_checkable
class ReleasePort(Protocol):
    """The subset of ``automation.kube.port.ClusterPort`` this step uses."""

    def ingress_helm_chart(self, pool_id: str) -> dict[str, Any] | None: ...

    def delete_ingress_helm_chart(self, pool_id: str) -> None: ...


class HelmChartWriter(Protocol):
    """What the simulated apply writes through (``SimulatedCluster.apply_helm_chart``)."""

    def apply_helm_chart(self, pool_id: str, obj: dict[str, Any] | None) -> None: ...


@dataclass(frozen=True)
class ReleaseCheck:
    classification: ReleaseClass | None  # None: not known this pass (the cluster blinked)
    diagnostic: str | None = None  # the pool fails with this; None when fine

    @property
    def needs_write(self) -> bool:
        return self.diagnostic is None and self.classification in NEEDS_WRITE


@dataclass(frozen=True)
class ReleaseResult:
    diagnostic: str | None  # the pool fails with this; None when fine
    actions: tuple[str, ...] = ()  # what was written, in order
    skipped: str | None = None  # why nothing was decided (transient)


class IngressReleaseStep:
    """``Ports.ensure_ingress``: check, install and remove one pool's ingress release."""

    def __init__(self, runner: StackRunner, *, apply: StackHook | None = None,
                 destroy: StackHook | None = None, evaluate: Evaluate | None = None) -> None:
        self.runner = runner
        self.apply: StackHook = apply or self.stack_apply
        self.destroy: StackHook = destroy or self.stack_destroy
        self.evaluate: Evaluate = evaluate or mock_evaluator(runner)
        # The desired object depends only on the cluster record, the pool and the pins.
        self._desired: dict[str, dict[str, Any]] = {}
        # Concurrent passes call in from several threads; the mock engine's settings are per
        # process, so evaluations and stack operations go one at a time (they are rare).
        self._lock = threading.RLock()

    def desired(self, cluster_row: ClusterRow, pool_id: str) -> dict[str, Any]:
        target = release_target(cluster_row, pool_id)
        key = target.config.model_dump_json()
        with self._lock:
            if key not in self._desired:
                self._desired[key] = self._evaluate_one(target)
            return self._desired[key]

    def _evaluate_one(self, target: StackTarget) -> dict[str, Any]:
        found = self.evaluate(target).of_type(HELMCHART_TYPE)
        if len(found) != 1:
            raise LookupError(f"the ingress release stack registers {len(found)} "
                              f"{HELMCHART_TYPE}, not one")
        return dict(found[0].inputs)

    def check(self, cluster_row: ClusterRow, pool_id: str, port: object) -> ReleaseCheck:
        """Read-only: what the cluster holds under the release's name, against the stack."""
        try:
            desired = self.desired(cluster_row, pool_id)
        except (EngineFailed, ValueError, LookupError) as exc:
            return ReleaseCheck(None, f"cannot build the ingress release: {exc}")
        try:
            observed = _release_port(port).ingress_helm_chart(pool_id)
        except ClusterForbidden as exc:
            return ReleaseCheck(None, f"checking the ingress release failed: {exc}")
        except ClusterUnavailable:
            return ReleaseCheck(None)
        plan = plan_release(observed, desired, cluster_id=str(cluster_row["id"]),
                            pool_id=pool_id)
        return ReleaseCheck(plan.classification, plan.diagnostic)

    def install(self, cluster_row: ClusterRow, pool_id: str, port: object,
                classification: ReleaseClass) -> ReleaseResult:
        """Write what ``check`` found missing or changed (a class from NEEDS_WRITE)."""
        release_port = _release_port(port)
        target = release_target(cluster_row, pool_id)
        actions: list[str] = []
        try:
            with self._lock:
                self._write(cluster_row, pool_id, release_port, target, classification,
                            actions)
        except ClusterForbidden as exc:
            return ReleaseResult(_failed(exc), tuple(actions))
        except (ClusterUnavailable, StackLocked) as exc:
            return ReleaseResult(None, tuple(actions), skipped=str(exc))
        except EngineFailed as exc:
            forbidden = parse_forbidden(exc.message)
            return ReleaseResult(_failed(forbidden) if forbidden is not None else
                                 f"installing the ingress release failed: {exc.message}",
                                 tuple(actions))
        return ReleaseResult(None, tuple(actions))

    def remove(self, cluster_row: ClusterRow, pool_id: str) -> None:
        """Deletion: destroy the release's stack. Engine errors propagate: the pool stays
        deleting and the next pass tries again."""
        with self._lock:
            self.destroy(release_target(cluster_row, pool_id))

    def _write(self, cluster_row: ClusterRow, pool_id: str, port: ReleasePort,
               target: StackTarget, classification: ReleaseClass, actions: list[str]) -> None:
        if classification == "ours-immutable-differs":
            port.delete_ingress_helm_chart(pool_id)
            actions.append("delete helmchart")
        self.apply(target)
        actions.append("apply helmchart")
        if classification == "ours-edited" and self._still_edited(cluster_row, pool_id, port):
            port.delete_ingress_helm_chart(pool_id)
            actions.append("delete helmchart")
            self.apply(target)
            actions.append("apply helmchart")

    def stack_apply(self, target: StackTarget) -> None:
        refresh_and_up(self.runner, target)

    def stack_destroy(self, target: StackTarget) -> None:
        self.runner.destroy(target)

    def _still_edited(self, cluster_row: ClusterRow, pool_id: str, port: ReleasePort) -> bool:
        """Read again after the apply: the engine takes back the fields it sets, but what
        another field manager added stays, and the provider does not see it as a change."""
        after = plan_release(port.ingress_helm_chart(pool_id),
                             self.desired(cluster_row, pool_id),
                             cluster_id=str(cluster_row["id"]), pool_id=pool_id)
        return after.classification == "ours-edited"


def simulated_release_hooks(runner: StackRunner, cluster: HelmChartWriter,
                            evaluate: Evaluate | None = None) -> tuple[StackHook, StackHook]:
    """(apply, destroy) for the simulated world: the stack operation the default hooks run,
    then, as the mock engine writes to no cluster, the same change in the simulated one."""
    evaluate_ = evaluate or mock_evaluator(runner)

    def apply(target: StackTarget) -> None:
        refresh_and_up(runner, target)
        (chart,) = evaluate_(target).of_type(HELMCHART_TYPE)
        cluster.apply_helm_chart(target.key, dict(chart.inputs))

    def destroy(target: StackTarget) -> None:
        # Only what the stack holds goes (a foreign HelmChart under the name stays): the
        # stack registers its provider, component and HelmChart together, or nothing.
        if runner.destroy(target).summary.delete:
            cluster.apply_helm_chart(target.key, None)

    return apply, destroy


def _release_port(port: object) -> ReleasePort:
    if not isinstance(port, ReleasePort):
        raise TypeError(f"{type(port).__name__} does not implement the ingress release reads")
    return port


def _failed(exc: ClusterForbidden) -> str:
    return f"installing the ingress release failed: {exc}"


__all__ = ["HELMCHART_TYPE", "IngressReleaseStep", "ReleaseCheck", "ReleasePort",
           "ReleaseResult", "release_target", "simulated_release_hooks"]
