"""The reconciler's add-on step: keep a cluster's NVIDIA add-on objects as the seed says.

``AddonEnsurer`` is what ``Ports.ensure_addons`` calls on a GPU pool pass. Per cluster it
builds the desired RuntimeClass and DaemonSet by evaluating the cluster add-on stack program
under the mock engine (so ``components/nvidia.py`` stays the one source of truth), reads what
the cluster holds under the two fixed names, and lets ``automation.kube.addons.plan_addons``
decide; then it acts:

* foreign object under a name: return the plan's diagnostic (it names the object and the
  ``kubectl delete`` that removes it); nothing is written;
* adoptable (installed by a destroyed record of the same control plane, i.e. a ``deleted``
  cluster row with the same ``kube_system_uid``): relabel for this record, then apply;
* ours with an immutable field changed: delete the object, then apply (the stack recreates);
* absent, or ours but edited: apply; an edit the apply did not take back (what another
  field manager added survives a server-side apply) is then deleted and applied again;
* ours and unchanged: nothing is written and the stack is not run;
* K3s's own RuntimeClass (nvidia handler, no overrides): used as is, never written (the
  stack runs with ``manage_runtime_class=False`` and only reads it).

"Apply" is the cluster add-on stack (``StackKind.CLUSTER_ADDONS``, keyed by the cluster id):
by default ``runner.refresh`` then ``runner.up``; the refresh lets the engine see edits and
deletions made outside it, which a plain ``up`` would diff against stale state. A denied
write (``ClusterForbidden`` from the port, or the API server's 403 text inside an
``EngineFailed``) becomes a diagnostic naming the missing verb and resource.

Caller contract (the reconciler's side):

* call it only on GPU pool passes (``Reconciler._pass`` does: ``gpus`` and the pool neither
  failed nor deleting). A cluster with no GPU pool is therefore never checked or touched;
  CPU pools need none of these objects.
* a cluster is ensured at most once per reconcile run: results are kept in an
  ``AddonRunCache`` keyed by cluster id; call ``cache.reset()`` (or ``ensurer.new_run()``)
  at the start of every ``Reconciler.run_once``. Without a reset the first result stands.

A transiently unavailable cluster (``ClusterUnavailable`` that is not a denial) or a stack
lock held by another update returns None and is not cached: failing a pool over a blip would
park it, and the pass itself stops on an unreachable cluster before this step anyway.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import sqlalchemy as sa

from automation.app import App
from automation.engine.errors import EngineFailed, StackLocked
from automation.engine.runner import StackRunner, StackTarget
from automation.kube.addons import AddonPlan, plan_addons
from automation.kube.port import (
    ADDON_KINDS,
    CLUSTER_LABEL,
    AddonKind,
    AddonObservation,
    ClusterForbidden,
    ClusterUnavailable,
    addon_display,
    parse_forbidden,
)
from automation.ledger import schema
from automation.stack_targets import addons_target

if TYPE_CHECKING:
    from automation.engine.mock.model import ProgramRun

RUNTIME_CLASS_TYPE = "kubernetes:node.k8s.io/v1:RuntimeClass"
DAEMONSET_TYPE = "kubernetes:apps/v1:DaemonSet"
ADDON_TYPES: dict[AddonKind, str] = {"runtimeclass": RUNTIME_CLASS_TYPE,
                                     "daemonset": DAEMONSET_TYPE}

ClusterRow = Mapping[Any, Any]  # a clusters ledger row (RowMapping) or a plain mapping
AdoptableLookup = Callable[[ClusterRow], Collection[str]]
ApplyHook = Callable[[StackTarget, AddonPlan], None]
Evaluate = Callable[[StackTarget], "ProgramRun"]


@runtime_checkable
class AddonPort(Protocol):
    """The subset of ``automation.kube.port.ClusterPort`` this step uses."""

    def addon_objects(self, cluster_id: str) -> AddonObservation: ...

    def write_addon_labels(self, cluster_id: str, kinds: Collection[AddonKind]) -> None: ...

    def delete_addon_object(self, kind: AddonKind) -> None: ...


class AddonWriter(Protocol):
    """What the simulated apply writes through (``SimulatedCluster.apply_addon``)."""

    def apply_addon(self, kind: AddonKind, obj: dict[str, Any]) -> None: ...


# -- desired objects ---------------------------------------------------------------------


@dataclass(frozen=True)
class DesiredAddons:
    """The add-on objects as the stack program registers them (wire-format camelCase)."""

    runtime_class: dict[str, Any] | None
    daemonset: dict[str, Any] | None

    def get(self, kind: AddonKind) -> dict[str, Any] | None:
        return self.runtime_class if kind == "runtimeclass" else self.daemonset

    @classmethod
    def from_run(cls, run: ProgramRun) -> DesiredAddons:
        found: dict[AddonKind, dict[str, Any] | None] = {}
        for kind, type_ in ADDON_TYPES.items():
            matches = run.of_type(type_)
            if len(matches) > 1:
                raise LookupError(f"the add-on stack registers {len(matches)} {type_}")
            found[kind] = dict(matches[0].inputs) if matches else None
        return cls(found["runtimeclass"], found["daemonset"])


def mock_evaluator(runner: object) -> Evaluate:
    """``runner.evaluate`` for a MockEngineRunner; otherwise a side MockEngineRunner (its
    ``evaluate`` runs the program against a fresh simulated cloud and keeps no state)."""
    evaluate = getattr(runner, "evaluate", None)
    if callable(evaluate):
        return evaluate  # type: ignore[no-any-return]
    from automation.engine.mock.runner import MockEngineRunner

    home = getattr(runner, "home", None)
    return MockEngineRunner(home if isinstance(home, Path) else Path.home() / ".anycloud").evaluate


def planned_writes(plan: AddonPlan) -> tuple[AddonKind, ...]:
    """The kinds the add-on stack writes for this plan (never K3s's own RuntimeClass)."""
    if plan.diagnostic or not plan.apply:
        return ()
    out: list[AddonKind] = []
    for kind in ADDON_KINDS:
        v = plan.verdict(kind)
        if kind == "runtimeclass" and not plan.manage_runtime_class:
            continue
        if v.classification in ("absent", "adoptable") or v.drift != "none":
            out.append(kind)
    return tuple(out)


# -- the ledger: destroyed records of the same control plane ------------------------------


def destroyed_records(app: App) -> AdoptableLookup:
    """Deleted cluster records with this row's kube-system UID (and another id)."""
    clusters = schema.clusters

    def lookup(cluster_row: ClusterRow) -> tuple[str, ...]:
        uid = cluster_row["kube_system_uid"]
        if not uid:  # registered offline: the control plane's identity is unknown
            return ()
        with app.ledger.read() as conn:
            return tuple(conn.execute(
                sa.select(clusters.c.id).where(
                    clusters.c.kube_system_uid == uid, clusters.c.state == "deleted",
                    clusters.c.id != cluster_row["id"],
                ).order_by(clusters.c.id)).scalars())

    return lookup


# -- results and the per-run cache --------------------------------------------------------


@dataclass(frozen=True)
class AddonResult:
    cluster_id: str
    diagnostic: str | None  # the GPU pool fails with this; None when fine
    state: str  # what the objects look like after this step, for GPU device diagnostics
    actions: tuple[str, ...] = ()  # what was written, in order ("relabel daemonset", ...)


@dataclass
class AddonRunCache:
    """Results of one reconcile run, by cluster id: reset it at the start of each run."""

    results: dict[str, AddonResult] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self, cluster_id: str) -> AddonResult | None:
        with self._lock:
            return self.results.get(cluster_id)

    def put(self, result: AddonResult) -> None:
        with self._lock:
            self.results[result.cluster_id] = result

    def reset(self) -> None:
        with self._lock:
            self.results.clear()


class _Skip(Exception):
    """Nothing decided this pass (transient); not cached."""


# -- the step -----------------------------------------------------------------------------


class AddonEnsurer:
    """``Ports.ensure_addons``: ``ensurer(cluster_row, port) -> diagnostic | None``."""

    def __init__(self, ledger: App | AdoptableLookup, runner: StackRunner,
                 cache: AddonRunCache | None = None, *, apply: ApplyHook | None = None,
                 evaluate: Evaluate | None = None,
                 report: Callable[[str, str, dict[str, Any]], None] | None = None) -> None:
        self.adoptable: AdoptableLookup = (
            destroyed_records(ledger) if isinstance(ledger, App) else ledger)
        self.runner = runner
        self.cache = cache if cache is not None else AddonRunCache()
        self.apply: ApplyHook = apply or self.stack_apply
        self.evaluate: Evaluate = evaluate or mock_evaluator(runner)
        self.report = report

    def new_run(self) -> None:
        """Forget the previous run's results (call at the start of each ``run_once``)."""
        self.cache.reset()

    def __call__(self, cluster_row: ClusterRow, port: object) -> str | None:
        result = self.ensure(cluster_row, port)
        return result.diagnostic if result is not None else None

    def ensure(self, cluster_row: ClusterRow, port: object) -> AddonResult | None:
        """The cached result of this run, or check (and write) now; None on a transient
        failure, which is not cached so a later pass tries again."""
        cluster_id = str(cluster_row["id"])
        cached = self.cache.get(cluster_id)
        if cached is not None:
            return cached
        try:
            result = self._ensure(cluster_id, cluster_row, _addon_port(port))
        except _Skip:
            return None
        self.cache.put(result)
        if self.report is not None and (result.actions or result.diagnostic):
            what = ", ".join(result.actions) or "nothing written"
            self.report("addons", f"cluster {cluster_id}: NVIDIA add-ons: {what}"
                        + (f" ({result.diagnostic})" if result.diagnostic else ""),
                        {"cluster": cluster_id, "actions": list(result.actions)})
        return result

    def addons_state(self, cluster_row: ClusterRow, port: object) -> str:
        """The add-on objects' state for the GPU device diagnostic; reads nothing when this
        run already ensured the cluster."""
        cached = self.cache.get(str(cluster_row["id"]))
        if cached is not None:
            return cached.state
        try:
            plan, _, _ = self.plan(cluster_row, port)
        except (ClusterUnavailable, EngineFailed, ValueError, LookupError) as exc:
            return f"unknown ({exc})"
        return plan.summary

    def plan(self, cluster_row: ClusterRow, port: object) -> tuple[
        AddonPlan, DesiredAddons, tuple[str, ...]
    ]:
        """Read-only: the plan, the desired objects and the adoptable record ids."""
        desired = self.desired(cluster_row)
        observed = _addon_port(port).addon_objects(str(cluster_row["id"]))
        adoptable = tuple(self.adoptable(cluster_row))
        return self._plan(cluster_row, observed, desired, adoptable), desired, adoptable

    def preview_target(self, cluster_row: ClusterRow, port: object) -> StackTarget:
        """Read-only: the add-on stack as this step would apply it now (which cluster records
        it adopts from, whether it manages the RuntimeClass). A plan that writes nothing
        (a foreign object in the way) raises with its diagnostic; a cluster not read raises
        ClusterUnavailable without its address or kubeconfig's path (whoever asked for the
        preview sees the message)."""
        desired = self.desired(cluster_row)
        try:
            observed = _addon_port(port).addon_objects(str(cluster_row["id"]))
        except ClusterUnavailable as exc:
            raise ClusterUnavailable(_without_location(str(exc), cluster_row)) from exc
        plan = self._plan(cluster_row, observed, desired, tuple(self.adoptable(cluster_row)))
        if plan.diagnostic is not None:
            raise EngineFailed(plan.diagnostic, code="ADDONS_BLOCKED")
        return self._target(cluster_row, observed, plan)

    @staticmethod
    def _target(cluster_row: ClusterRow, observed: AddonObservation,
                plan: AddonPlan) -> StackTarget:
        return addons_target(cluster_row, adopt_from=_previous_owners(observed, plan),
                             manage_runtime_class=plan.manage_runtime_class)

    def desired(self, cluster_row: ClusterRow) -> DesiredAddons:
        desired = DesiredAddons.from_run(self.evaluate(addons_target(cluster_row)))
        missing = [addon_display(k) for k in ADDON_KINDS if desired.get(k) is None]
        if missing:
            raise LookupError(f"the add-on stack registers no {' and no '.join(missing)}")
        return desired

    def stack_apply(self, target: StackTarget, plan: AddonPlan) -> None:
        """The default apply."""
        refresh_and_up(self.runner, target)

    # -- internals ------------------------------------------------------------------------

    @staticmethod
    def _plan(cluster_row: ClusterRow, observed: AddonObservation, desired: DesiredAddons,
              adoptable: Collection[str]) -> AddonPlan:
        assert desired.runtime_class is not None and desired.daemonset is not None
        return plan_addons(
            observed.runtime_class, observed.daemonset, cluster_id=str(cluster_row["id"]),
            adoptable_cluster_ids=adoptable, desired_runtime_class=desired.runtime_class,
            desired_daemonset=desired.daemonset,
        )

    def _ensure(self, cluster_id: str, cluster_row: ClusterRow,
                port: AddonPort) -> AddonResult:
        try:
            desired = self.desired(cluster_row)
        except (EngineFailed, ValueError, LookupError) as exc:
            message = str(exc)
            return AddonResult(cluster_id, "cannot build the NVIDIA add-on objects: " + message,
                               f"unknown ({message})")
        actions: list[str] = []
        stuck: tuple[AddonKind, ...] = ()
        summary = "unknown"
        try:
            observed = port.addon_objects(cluster_id)
            adoptable = tuple(self.adoptable(cluster_row))
            plan = self._plan(cluster_row, observed, desired, adoptable)
            summary = plan.summary
            if plan.diagnostic is not None:
                return AddonResult(cluster_id, plan.diagnostic, summary)
            if not plan.apply:
                return AddonResult(cluster_id, None, summary)
            # An adoptable object that must be recreated anyway is not relabelled first.
            relabel = [k for k in plan.relabel if k not in plan.recreate]
            if relabel:
                port.write_addon_labels(cluster_id, relabel)
                actions += [f"relabel {k}" for k in relabel]
            for kind in plan.recreate:
                port.delete_addon_object(kind)
                actions.append(f"delete {kind}")
            target = self._target(cluster_row, observed, plan)
            self.apply(target, plan)
            actions += [f"apply {k}" for k in planned_writes(plan)]
            stuck = self._rewrites_not_taken(cluster_row, port, desired, adoptable, plan)
            for kind in stuck:
                port.delete_addon_object(kind)
                actions.append(f"delete {kind}")
            if stuck:
                self.apply(target, plan)
                actions += [f"apply {k}" for k in stuck]
        except ClusterForbidden as exc:
            return AddonResult(cluster_id, _denied(exc), summary, tuple(actions))
        except ClusterUnavailable as exc:
            raise _Skip(str(exc)) from exc
        except StackLocked as exc:
            raise _Skip(str(exc)) from exc
        except EngineFailed as exc:
            message = exc.message
            forbidden = parse_forbidden(message)
            diagnostic = (_denied(forbidden) if forbidden is not None else
                          f"installing the NVIDIA add-ons failed: {message}")
            return AddonResult(cluster_id, diagnostic, summary, tuple(actions))
        return AddonResult(cluster_id, None, _after(plan, stuck), tuple(actions))

    def _rewrites_not_taken(self, cluster_row: ClusterRow, port: AddonPort,
                            desired: DesiredAddons, adoptable: Collection[str],
                            plan: AddonPlan) -> tuple[AddonKind, ...]:
        """The edited objects the apply did not bring back, read again after it.

        The engine applies server-side: it takes back the fields it sets, but what another
        field manager added (an env var, a toleration, a nodeSelector key, a RuntimeClass
        overhead) stays, and the provider does not even see it as a difference. Such an object
        is recreated (deleted, then applied again), as for an immutable field."""
        edited = [k for k in planned_writes(plan) if plan.verdict(k).drift == "edited"]
        if not edited:
            return ()
        observed = port.addon_objects(str(cluster_row["id"]))
        after = self._plan(cluster_row, observed, desired, adoptable)
        return tuple(k for k in edited if after.verdict(k).classification == "ours-edited")


def refresh_and_up(runner: StackRunner, target: StackTarget) -> None:
    """An add-on stack's apply: refresh first, so the engine sees edits and deletions made
    outside it, then ``up``. A mandatory policy violation stops ``up`` without raising:
    make it an EngineFailed."""
    runner.refresh(target)
    result = runner.up(target)
    if result.mandatory_violations:
        raise EngineFailed("policy: " + "; ".join(
            f"{v.policy}: {v.message}" for v in result.mandatory_violations))


def simulated_apply(runner: StackRunner, cluster: AddonWriter,
                    evaluate: Evaluate | None = None) -> ApplyHook:
    """Apply for the simulated world: what the default apply does (refresh, up), then, as
    the mock engine writes to no cluster, the planned objects into the simulated cluster."""
    evaluate_ = evaluate or mock_evaluator(runner)

    def apply(target: StackTarget, plan: AddonPlan) -> None:
        refresh_and_up(runner, target)
        desired = DesiredAddons.from_run(evaluate_(target))
        for kind in planned_writes(plan):
            obj = desired.get(kind)
            if obj is not None:
                cluster.apply_addon(kind, obj)

    return apply


def _addon_port(port: object) -> AddonPort:
    if not isinstance(port, AddonPort):
        raise TypeError(f"{type(port).__name__} does not implement the add-on port methods")
    return port


def _without_location(message: str, cluster_row: ClusterRow) -> str:
    """``message`` with the cluster's API server and kubeconfig path (and any other address
    or path) replaced by what they were, as ``node-pool status`` shows errors."""
    from automation.redact import cluster_values, redact

    hide = cluster_values(cluster_row.get("server_url"), cluster_row.get("kubeconfig_path"))
    return redact(message, hide) or message


def _denied(exc: ClusterForbidden) -> str:
    return f"installing the NVIDIA add-ons failed: {exc}"


def _previous_owners(observed: AddonObservation, plan: AddonPlan) -> tuple[str, ...]:
    owners = set()
    for kind in plan.relabel:
        obj = observed.get(kind) or {}
        owner = ((obj.get("metadata") or {}).get("labels") or {}).get(CLUSTER_LABEL)
        if owner:
            owners.add(str(owner))
    return tuple(sorted(owners))


_DONE = {"absent": "installed", "adoptable": "adopted", "edited": "rewritten",
         "immutable": "recreated"}


def _after(plan: AddonPlan, recreated: Collection[AddonKind] = ()) -> str:
    """The plan's summary with what this step did to each object."""
    writes = planned_writes(plan)
    parts = []
    for kind in ADDON_KINDS:
        v = plan.verdict(kind)
        text = f"{addon_display(kind)}: {v.classification}"
        if kind in recreated:
            text += f", {_DONE['immutable']}"
        elif kind in writes:
            done = _DONE.get(v.classification) or _DONE.get(v.drift, "applied")
            text += f", {done}"
        parts.append(text)
    return ", ".join(parts)


__all__ = ["ADDON_TYPES", "AddonEnsurer", "AddonPort", "AddonResult", "AddonRunCache",
           "AdoptableLookup", "ApplyHook", "DesiredAddons", "addons_target",
           "destroyed_records", "mock_evaluator", "planned_writes", "refresh_and_up",
           "simulated_apply"]
