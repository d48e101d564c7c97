"""One reconciliation pass per node pool: observe, decide, act, record.

The decision is ``decide.decide`` (pure). Around it, this module reads the ledger, asks the
cluster for the Nodes that claim the pool, writes durable intent before any cloud call (an
attempt row exists before its VM is bought; a release is recorded before the VM is deleted),
runs the pool's stack through the StackRunner, and records what it saw. A pool whose state
did not change is not written at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import RowMapping

from automation import ids, instruments
from automation.app import App
from automation.crash import crashpoint
from automation.engine.errors import EngineFailed
from automation.engine.runner import StackRunner
from automation.errors import AnycloudError
from automation.kube.port import ClusterPort, ClusterUnavailable, pool_namespace, service_namespace
from automation.ledger import schema
from automation.ledger.records import record_event
from automation.reconciler import brake as b
from automation.reconciler import decide as d
from automation.reconciler import progress as p
from automation.reconciler.ingress_step import IngressReleaseStep
from automation.reconciler.lease import Leases
from automation.reconciler.token_renewal import renewal_reason
from automation.reconciler.workers import Serialized, WorkerRunner, is_throttling, run_turns
from automation.recorded_engines import recorded_engine
from automation.redact import redact
from automation.reports import write_crash_report
from automation.settings import BrakeLimits, Limits
from automation.stack_targets import pool_target, token_ttl_minutes

pools, attempts_t, workloads = schema.node_pools, schema.vm_attempts, schema.workloads
ACTIVE_STATES = ("pending", "provisioning", "ready", "failed", "deleting")
# Attempts whose VM may exist: acting on them needs the engine that bought them.
LIVE_ATTEMPT_STATES = ("pending", "creating", "running", "releasing")
# The pools whose VMs the mass-failure brake counts (not those being deleted).
BRAKE_POOL_STATES = ("pending", "provisioning", "ready", "failed")
NOT_OWNED = "NAMESPACE_NOT_OWNED"  # the pool's namespace is someone else's: left in place
Lookup = Literal["running", "absent", "uncertain"]


@dataclass
class Ports:
    """What a pass talks to: the engine, the cluster of a pool, the provider's VM lookup."""

    runner: StackRunner
    cluster_for: Callable[[RowMapping], ClusterPort]
    # (pool id, attempt ids) → per attempt: one provider or engine query for the whole pool.
    vm_lookup: Callable[[str, list[str]], dict[str, Lookup]]
    ensure_addons: Callable[[RowMapping, ClusterPort], str | None] | None = None
    # A Service pool's ingress release (``ingress_step``); None: no release is managed.
    ensure_ingress: IngressReleaseStep | None = None


@dataclass
class Snapshot:
    """The ledger as one pass reads it."""

    pools: list[RowMapping]
    clusters: dict[str, RowMapping]
    attempts: dict[str, list[RowMapping]] = field(default_factory=dict)
    refs: dict[str, list[RowMapping]] = field(default_factory=dict)
    # The mass-failure brake: the braked clusters (cluster id → Brake), from these rows.
    brakes: dict[str, b.Brake] = field(default_factory=dict)

    def held(self, pool: RowMapping) -> b.Brake | None:
        """The brake holding this pool, or None."""
        found = self.brakes.get(pool["cluster_id"])
        return found if found is not None and pool["id"] in found.held_pools else None


@dataclass
class PoolOutcome:
    pool_id: str
    state: str
    wrote: bool = False
    skipped: str | None = None  # why nothing was done (lease held elsewhere, unreachable)
    actions: list[str] = field(default_factory=list)
    throttled: bool = False  # the cloud rate-limited its stack operation: retried next pass
    error_code: str | None = None  # the error this turn ended in (counted by /metrics)


Reporter = Callable[[str, str, dict[str, Any]], None]
# The reports that quote an error (a pool's last error, a cluster or provider failure): the
# reconcile command prints them (its "events"), redacted like status. The others keep the
# addresses an operator acts on (a VM's public IP). The ledger keeps the detail.
# How to run a pass with the engine that bought a pool's VMs.
_RUN_WITH = {"pulumi": "--engine pulumi", "mock": "--engine mock",
             "standin": "--simulate --engine pulumi"}
_ERROR_KINDS = frozenset({"error", "provider", "pool", "ingress", "addons", "drift"})


class Reconciler:
    def __init__(self, app: App, ports: Ports, leases: Leases | None = None,
                 report: Reporter | None = None, limits: Limits | None = None,
                 drift_interval: float | None = None,
                 brake: BrakeLimits | None = None) -> None:
        self.app, self.ports = app, ports
        # Seconds between a pool's drift checks (0: off); None: ANYCLOUD_DRIFT_INTERVAL or
        # the engine's default (``automation.settings``).
        self.drift_interval = drift_interval
        # ANYCLOUD_BRAKE_FRACTION / ANYCLOUD_BRAKE_MIN unless given.
        self.brake_limits = brake or BrakeLimits.from_env()
        # Pools held by the brake as last recorded (pool_held / pool_resumed events): read
        # from the ledger on the first pass, then kept here, so each hold and each resume is
        # recorded once.
        self._held: set[str] | None = None
        # None or overall 1: pools one after another in this process (deterministic).
        self.limits = limits
        self._concurrent_ports: Ports | None = None
        self.leases = leases or Leases(app.ledger, app.clock)
        self.engine = recorded_engine(ports.runner)
        given = report or (lambda kind, message, data: None)

        # Everything a pass reports and records names the engine that ran it.
        def labelled(kind: str, message: str, data: dict[str, Any]) -> None:
            if kind in _ERROR_KINDS:  # the text status shows: shown as status shows it
                message = redact(message) or message
            given(kind, message, {**data, "engine": self.engine})

        self.report: Reporter = labelled

    def _event(self, conn: Any, at: datetime, pool_id: str, kind: str, message: str,
               data: dict[str, Any] | None = None) -> None:
        record_event(conn, at, "node_pool", pool_id, kind, message,
                     {**(data or {}), "engine": self.engine})

    # -- the loop ---------------------------------------------------------------------

    def run_once(self) -> list[PoolOutcome]:
        with instruments.reconcile_pass() as error_codes:
            outcomes = self._pass()
            error_codes.extend(o.error_code for o in outcomes if o.error_code)
        return outcomes

    def _pass(self) -> list[PoolOutcome]:
        # A long-running `serve` sees catalog refreshes stored since its last pass.
        self.app.__dict__.pop("catalog", None)
        # Add-ons are checked at most once per cluster per run.
        new_run = getattr(self.ports.ensure_addons, "new_run", None)
        if new_run is not None:
            new_run()
        snap = self._snapshot()
        # The real engine's stack operations always run in a worker, even one pool at a
        # time: a worker that loses this process ends its engine and the engine's plugins
        # (``processes.worker_session``); an engine run here would outlive a SIGKILL of this
        # process and go on changing a stack that no lease covers.
        limits = self.limits
        if limits is None or (self.ports.runner.engine == "mock"
                              and (limits.serial or len(snap.pools) < 2)):
            return [self._turn(pool, snap) for pool in snap.pools]
        return self._run_concurrently(snap, limits)

    def _run_concurrently(self, snap: Snapshot, limits: Limits) -> list[PoolOutcome]:
        """Pools side by side (``workers``): stack operations in worker processes, at most
        ``limits`` turns per credential and in all; this pass's turns use those ports."""
        if self._concurrent_ports is None:
            runner = self.ports.runner
            if not isinstance(runner, WorkerRunner):  # given one: its workers are used
                runner = WorkerRunner(runner, limits.overall, timeout=limits.stack_timeout)
            # The cluster-wide steps (add-ons, ingress) run their stacks in this process and
            # keep per-pass state: one turn at a time.
            # (A Serialized stands in for the step it wraps: same calls, one at a time.)
            steps: dict[str, Any] = {
                f.name: Serialized(getattr(self.ports, f.name)) for f in fields(Ports)
                if f.name.startswith("ensure_") and getattr(self.ports, f.name)}
            self._concurrent_ports = replace(self.ports, runner=runner, **steps)
        serial_ports, self.ports = self.ports, self._concurrent_ports
        try:
            return run_turns(snap.pools, lambda pool: self._turn(pool, snap),
                             lambda pool: str(pool["credential_id"]), limits,
                             lambda outcome: outcome.throttled)
        finally:
            self.ports = serial_ports

    def close(self) -> None:
        """Stop the worker processes of concurrent passes."""
        if self._concurrent_ports is not None:
            runner = self._concurrent_ports.runner
            assert isinstance(runner, WorkerRunner)
            runner.close()
            self._concurrent_ports = None

    def reconcile_pool(self, pool_id: str) -> PoolOutcome:
        snap = self._snapshot(pool_id)
        if not snap.pools:
            return PoolOutcome(pool_id, "?", skipped="no such active pool")
        return self._turn(snap.pools[0], snap)

    # -- reading ----------------------------------------------------------------------

    def _snapshot(self, pool_id: str | None = None) -> Snapshot:
        """Everything a pass reads, in four queries however many pools there are."""
        only = (lambda col: col == pool_id) if pool_id else (lambda col: sa.true())
        with self.app.ledger.read() as conn:
            pool_rows = conn.execute(sa.select(pools).where(
                pools.c.state.in_(ACTIVE_STATES), only(pools.c.id)).order_by(pools.c.id)
            ).mappings().all()
            cluster_rows = conn.execute(sa.select(schema.clusters)).mappings().all()
            # Released attempts too: a Node left behind by one is recognised and removed.
            attempt_rows = conn.execute(sa.select(attempts_t).where(
                only(attempts_t.c.pool_id)).order_by(attempts_t.c.id)).mappings().all()
            ref_rows = conn.execute(sa.select(workloads).where(
                workloads.c.state.in_(["active", "terminated"]), only(workloads.c.pool_id)
            )).mappings().all()
            brake_rows: list[RowMapping] = []
            if pool_id and pool_rows:
                # One pool reconciled: the brake still counts every VM of its cluster.
                brake_rows = list(conn.execute(
                    sa.select(attempts_t, pools.c.cluster_id).join(
                        pools, pools.c.id == attempts_t.c.pool_id).where(
                        pools.c.cluster_id == pool_rows[0]["cluster_id"],
                        pools.c.state.in_(BRAKE_POOL_STATES),
                        attempts_t.c.state.in_(d.LIVE))).mappings().all())
            if self._held is None:
                self._held = self._load_held(conn)
        snap = Snapshot(list(pool_rows), {c["id"]: c for c in cluster_rows})
        for a in attempt_rows:
            snap.attempts.setdefault(a["pool_id"], []).append(a)
        for w in ref_rows:
            snap.refs.setdefault(w["pool_id"], []).append(w)
        if pool_id:
            cluster_of = {pool_rows[0]["id"]: pool_rows[0]["cluster_id"]} if pool_rows else {}
            by_pool: dict[str, list[RowMapping]] = {}
            for a in brake_rows:
                cluster_of[a["pool_id"]] = a["cluster_id"]
                by_pool.setdefault(a["pool_id"], []).append(a)
        else:
            cluster_of = {p["id"]: p["cluster_id"] for p in pool_rows
                          if p["state"] in BRAKE_POOL_STATES}
            by_pool = snap.attempts
        snap.brakes = self._brakes(cluster_of, by_pool)
        return snap

    def _brakes(self, cluster_of: dict[str, str],
                rows: dict[str, list[RowMapping]]) -> dict[str, b.Brake]:
        """The pass's brake, once per cluster, from the rows already read (pool id → its
        cluster, for the pools the brake counts; pool id → its attempt rows)."""
        now = self.app.clock.now()
        clusters: dict[str, list[b.PoolHealth]] = {}
        for pool_id, cluster_id in cluster_of.items():
            clusters.setdefault(cluster_id, []).append(b.pool_health(pool_id, (
                (a["state"], a["node_state"], a["not_ready_since"], a["vm_created_at"])
                for a in rows.get(pool_id, ())), now))
        return b.evaluate(clusters, self.brake_limits)

    @staticmethod
    def _load_held(conn: Any) -> set[str]:
        """The pools whose last brake event says held."""
        ev = schema.events
        last = sa.select(sa.func.max(ev.c.id)).where(
            ev.c.subject_kind == "node_pool", ev.c.kind.in_(("pool_held", "pool_resumed"))
        ).group_by(ev.c.subject_id)
        return set(conn.execute(sa.select(ev.c.subject_id).where(
            ev.c.id.in_(last), ev.c.kind == "pool_held")).scalars())

    def _note_hold(self, pool: RowMapping, hold: b.Brake | None, now: datetime) -> None:
        """Record (an event, a progress line) a pool becoming held or resuming, once."""
        held = self._held if self._held is not None else set()
        was = pool["id"] in held
        if (hold is not None) == was:
            return
        if hold is not None:
            kind, message = "pool_held", f"Held: {b.HELD_REASON} — {hold.evidence}"
            data = {"reason": b.HELD_REASON, "evidence": hold.evidence,
                    "since": hold.since.isoformat(), "failing": hold.failing,
                    "total": hold.total}
            held.add(pool["id"])
        else:
            kind, message = "pool_resumed", "resumed: the cluster-wide failure is over"
            data = {}
            held.discard(pool["id"])
        self._held = held
        with self.app.ledger.write() as conn:
            self._event(conn, now, pool["id"], kind, message, data)
        self.report("pool", f"{pool['name']}: {message}", {"pool": pool["id"], **data})

    def _load(self, pool_id: str) -> tuple[RowMapping, list[RowMapping]]:
        with self.app.ledger.read() as conn:
            pool = conn.execute(sa.select(pools).where(pools.c.id == pool_id)).mappings().one()
            rows = conn.execute(sa.select(attempts_t).where(attempts_t.c.pool_id == pool_id)
                                .order_by(attempts_t.c.id)).mappings().all()
        return pool, list(rows)

    # -- one pool ---------------------------------------------------------------------

    def _turn(self, pool: RowMapping, snap: Snapshot) -> PoolOutcome:
        """The pool's reconcile, then its drift check when one is due."""
        outcome = self._reconcile(pool, snap)
        if outcome.skipped != "bought by another engine":
            self._check_drift_if_due(pool)
        return outcome

    def _check_drift_if_due(self, pool: RowMapping) -> None:
        """The periodic drift check (``automation.reconciler.drift``), for pools whose stack
        was applied. Never fails the pool's turn: a failed check is recorded as the check's
        outcome, and whatever else goes wrong is reported and left for the next pass."""
        from automation.reconciler import drift

        try:
            if self.drift_interval is None:
                from automation.settings import Settings

                self.drift_interval = Settings.from_env(self.app.home).drift_seconds(
                    self.engine)
            if (self.drift_interval <= 0 or pool["state"] not in drift.CHECKED_STATES
                    or not pool["applied_digest"]):
                return
            now = self.app.clock.now()
            if not drift.is_due(drift.last_checked(self.app, pool["id"]), now,
                                self.drift_interval):
                return
            try:
                report = drift.run_check(self.ports.runner, pool_target(self.app, pool["id"]),
                                         now)
            except Exception as exc:  # not the engine's refusal: recorded all the same
                from automation.models import DriftReport

                report = DriftReport(checked_at=now, engine=self.engine,
                                     source=drift.source_of(self.engine),
                                     error=f"{type(exc).__name__}: {exc}",
                                     error_code="INTERNAL_ERROR")
            drift.record(self.app, pool["id"], report)
            found = (f"failed: [{report.error_code}] {report.error}" if report.error
                     else f"{len(report.changes)} change(s)")
            self.report("drift", f"{pool['name']}: drift check {found}",
                        {"pool": pool["id"], "changes": len(report.changes)})
        except Exception as exc:
            self.report("drift", f"{pool['name']}: drift check not recorded: "
                        f"{type(exc).__name__}: {exc}", {"pool": pool["id"]})

    def _reconcile(self, pool: RowMapping, snap: Snapshot) -> PoolOutcome:
        """One pool's turn. Whatever goes wrong with it (a stack locked by a killed run, an
        engine error, a cluster that stops answering mid-step, a bug) is recorded as the
        pool's last error with a code, and the pass goes on with the other pools."""
        try:
            return self._reconcile_pool(pool, snap)
        except AnycloudError as exc:
            if is_throttling(exc):
                outcome = self._failed_turn(pool, _throttled(exc), "THROTTLED")
                outcome.throttled = True
                return outcome
            return self._failed_turn(pool, exc.message, exc.code)
        except ClusterUnavailable as exc:
            return self._failed_turn(pool, f"cluster unavailable: {exc}", "CLUSTER_UNAVAILABLE")
        except Exception as exc:
            report = write_crash_report(self.app.home, f"reconciling node pool {pool['id']}")
            return self._failed_turn(
                pool, f"internal error: {type(exc).__name__}: {exc} (report: {report})",
                "INTERNAL_ERROR")

    def _failed_turn(self, pool: RowMapping, error: str, code: str) -> PoolOutcome:
        outcome = PoolOutcome(pool["id"], pool["state"], skipped=code)
        self.report("error", f"{pool['name']}: [{code}] {error}",
                    {"pool": pool["id"], "code": code})
        self._store_error(pool, error, self.app.clock.now(), outcome, code)
        return outcome

    def _reconcile_pool(self, pool: RowMapping, snap: Snapshot) -> PoolOutcome:
        """Decide read-only; take the pool's lease and act only when there is something to
        do, so a converged pass writes nothing at all."""
        now = self.app.clock.now()
        pool_id = pool["id"]
        outcome = PoolOutcome(pool_id, pool["state"])
        cluster = snap.clusters[pool["cluster_id"]]
        rows = snap.attempts.get(pool_id, [])
        mismatch = self._engine_mismatch(rows)
        if mismatch is not None:
            self._store_error(pool, mismatch, now, outcome, "ENGINE_MISMATCH")
            outcome.skipped = "bought by another engine"
            return outcome
        try:
            cluster = self.app.with_kubeconfig(cluster)  # type: ignore[assignment]  # sealed: opened
        except AnycloudError as exc:
            self._store_error(pool, f"cluster's kubeconfig: {exc}", now, outcome, exc.code)
            outcome.skipped = "cluster's kubeconfig unreadable"
            return outcome
        port = self.ports.cluster_for(cluster)
        hold = snap.held(pool) if pool["state"] != "deleting" else None
        if pool["state"] != "deleting":  # a pool being deleted neither holds nor resumes
            self._note_hold(pool, hold, now)
        held = hold.evidence if hold is not None else None
        try:
            referenced = self._confirm_services(pool, snap.refs.get(pool_id, []), port, now)
            nodes = port.nodes_claiming(pool_id, {r["node_name"] for r in rows if r["node_name"]})
            decision = self._decide(pool, cluster, rows, nodes, referenced, port, now, held)
        except ClusterUnavailable as exc:
            self._store_error(pool, f"cluster unavailable: {exc}", now, outcome,
                              "CLUSTER_UNAVAILABLE")
            outcome.skipped = "cluster unavailable"
            return outcome
        # A release goes on until the provider confirms the VM gone: not converged before.
        releasing = any(r["state"] == "releasing" for r in rows)
        if not decision.actions and not decision.attempts and not releasing and not (
                self._pool_changes(pool, decision, pool["consecutive_failures"],
                                   pool["backoff_until"], None, now)):
            return outcome
        if not self.leases.acquire(pool_id):
            outcome.skipped = "another replica holds the lease"
            return outcome
        try:
            # Under the lease, decide again on fresh rows: another replica may have acted.
            pool, rows = self._load(pool_id)
            if pool["state"] not in ACTIVE_STATES:
                return outcome
            decision = self._decide(pool, cluster, rows, nodes, referenced, port, now, held)
            outcome.actions = [type(a).__name__ for a in decision.actions]
            with self.leases.renewed(pool_id):
                self._act(pool, rows, decision, port, now, outcome)
        finally:
            self.leases.release(pool_id)
        return outcome

    def _decide(self, pool: RowMapping, cluster: RowMapping, rows: list[RowMapping],
                nodes: list[Any], referenced: bool, port: ClusterPort,
                now: datetime, held: str | None = None) -> d.Decision:
        vm = self.app.catalog.providers[pool["provider"]].vm_type(pool["vm_type"])
        gpus = vm.gpus if vm else 0
        addons_diag, addons_state = None, "unknown"
        addons_due = pool["state"] not in ("failed", "deleting") or (
            pool["state"] == "failed" and pool["last_error_code"] == d.ADDONS_FAILED)
        if gpus and addons_due and self.ports.ensure_addons:
            # First pass: before any VM is bought. Later: after the pool's VMs were observed.
            # CPU pools never get here: they touch none of the add-on objects.
            addons_diag = self.ports.ensure_addons(cluster, port)
            describe = getattr(self.ports.ensure_addons, "addons_state", None)
            if describe is not None:
                addons_state = describe(cluster, port)
        release = None
        if pool["hosts_service"] and addons_due and self.ports.ensure_ingress:
            # Read-only here; a write is an action, taken under the pool's lease.
            release = self.ports.ensure_ingress.check(cluster, pool["id"], port)
        view = d.PoolView(
            id=pool["id"], state=pool["state"], vm_count=pool["max_vms"], gpus=gpus,
            replacements_in_row=pool["replacements_in_row"], backoff_until=pool["backoff_until"],
            referenced=referenced, network_removed=pool["network_removed"],
            addons_diagnostic=addons_diag, addons_state=addons_state,
            hosts_service=bool(pool["hosts_service"]),
            ingress_entry=pool["ingress_entry_attempt_id"], applied_digest=pool["applied_digest"],
            last_error_code=pool["last_error_code"],
            ingress_release=release.classification if release else None,
            ingress_diagnostic=release.diagnostic if release else None,
            held=held,
        )
        return d.decide(view, [_attempt_view(r) for r in rows], [n.to_view() for n in nodes],
                        now)

    def _confirm_services(self, pool: RowMapping, refs: list[RowMapping], port: ClusterPort,
                          now: datetime) -> bool:
        """Remove the objects of terminated services and confirm them gone; True while any
        service still targets the pool. A cluster that cannot be reached raises (the pass
        records it); the next pass that reaches it carries on where this one stopped."""
        still = False
        for w in refs:
            if w["state"] != "terminated":
                still = True
                continue
            namespace = service_namespace(w["id"])
            owner = port.namespace_owner(namespace, pool["id"])
            if owner == "ours":
                port.delete_namespace(namespace)  # idempotent: Terminating is fine
            if owner == "ours" and not port.service_objects_removed(namespace):
                still = True
                continue
            note = ("objects confirmed removed" if owner != "foreign" else
                    f"namespace {namespace} is not owned by anycloud and was left in place")
            with self.app.ledger.write() as conn:
                conn.execute(workloads.update().where(workloads.c.id == w["id"])
                             .values(state="removed", removed_at=now))
                self._event(conn, now, pool["id"], "service_removed",
                            f"service {w['name']}: {note}")
            self.report("service", f"{pool['name']}: service {w['name']}: {note}",
                        {"pool": pool["id"], "service": w["id"]})
        return still

    # -- acting -----------------------------------------------------------------------

    def _act(self, pool: RowMapping, rows: list[RowMapping], decision: d.Decision,
             port: ClusterPort, now: datetime, outcome: PoolOutcome) -> None:
        pool_id = pool["id"]
        new = decision.of(d.NewAttempt)
        releases = decision.of(d.Release)
        drops = decision.of(d.DropToken)
        # A token goes as soon as its Node exists, whatever the pool's state (parked, backing
        # off, deleting: passes that apply no stack): delete its Secret on the cluster, then
        # record it. A crash in between deletes nothing twice: the next pass finds none.
        removed = {t.attempt_id: port.delete_attempt_tokens(t.attempt_id) for t in drops}
        # Durable intent first: releases and new attempt rows are written before any cloud
        # call acts on them, each in its own transaction.
        if releases or drops:
            with self.app.ledger.write() as conn:
                for r in releases:
                    conn.execute(attempts_t.update().where(attempts_t.c.id == r.attempt_id)
                                 .values(state="releasing", updated_at=now, last_error=r.reason))
                    self._event(conn, now, pool_id, "attempt_releasing",
                                 f"VM attempt {r.attempt_id}: {r.reason}")
                    self.report("vm", f"{pool['name']}: releasing {r.attempt_id} ({r.reason})",
                                {"pool": pool_id, "attempt": r.attempt_id})
                for t in drops:
                    conn.execute(attempts_t.update().where(attempts_t.c.id == t.attempt_id)
                                 .values(token_removed_at=now, updated_at=now))
                    self._event(conn, now, pool_id, "token_removed",
                                 f"bootstrap token of {t.attempt_id} removed: its Node exists",
                                 {"secrets": removed[t.attempt_id]})
                    self.report("token", f"{pool['name']}: Node of {t.attempt_id} exists; "
                                f"bootstrap token removed ({removed[t.attempt_id]} Secret(s) "
                                "deleted)", {"attempt": t.attempt_id,
                                             "secrets": removed[t.attempt_id]})
            if releases:
                crashpoint("after-release-write")
        if new:
            with self.app.ledger.write() as conn:
                for n in new:
                    attempt_id = ids.new_id("at")
                    conn.execute(attempts_t.insert().values(
                        id=attempt_id, pool_id=pool_id, state="pending",
                        replaces_attempt_id=n.replaces, token_generation=0,
                        node_name=_node_name(attempt_id), token_issued_at=now,
                        engine=self.engine, created_at=now, updated_at=now))
                    self._event(conn, now, pool_id, "attempt_created",
                                 f"VM attempt {attempt_id}"
                                 + (f" replaces {n.replaces}" if n.replaces else ""))
                    self.report("vm", f"{pool['name']}: VM attempt {attempt_id} "
                                + (f"replaces {n.replaces}" if n.replaces else "starting"),
                                {"pool": pool_id, "attempt": attempt_id})
            crashpoint("after-attempt-write")

        for label in decision.of(d.LabelNode):
            port.label_node(label.name, label.key, label.value)
            if label.key == d.INGRESS_ENTRY_LABEL:
                self.report("ingress", f"{pool['name']}: Node {label.name} "
                            + ("is the ingress entry" if label.value else "no longer the entry"),
                            {"node": label.name})
        for gone in decision.of(d.RemoveNode):
            port.cordon_node(gone.name)
            port.delete_node(gone.name)
            self.report("node", f"{pool['name']}: Node {gone.name} removed ({gone.reason})",
                        {"node": gone.name})
            crashpoint("after-node-removed")
        namespace_note = None
        if decision.of(d.DeleteNamespace):
            namespace_note = self._delete_namespace(pool, port)

        failures, backoff_until = pool["consecutive_failures"], pool["backoff_until"]
        error: str | None = None
        code: str | None = None
        if decision.of(d.ApplyStack):
            self._renew_tokens(pool, now)
            # What the state must hold is read before this up is marked as started.
            target = pool_target(self.app, pool_id, planned=False)
            self._mark_creating(pool_id, now)
            try:
                result = self.ports.runner.up(target)
            except EngineFailed as exc:
                if exc.code not in ("PENDING_CREATES", "STATE_MISSING"):
                    # The engine answered, its state holding whatever it bought: what it
                    # did not buy is pending again (and may get a new token for the retry).
                    self._mark_creating(pool_id, now, back=True)
                if is_throttling(exc):
                    # Rate-limited, not failed: no failure counted, no back-off; the next pass
                    # applies the stack again (this pass gives the credential fewer slots).
                    error, code, outcome.throttled = _throttled(exc), "THROTTLED", True
                    self.report("provider", f"{pool['name']}: {error}", {"pool": pool_id})
                elif exc.code in ("PENDING_CREATES", "STATE_MISSING"):
                    # Creates a killed run left that no lookup could settle, or an engine
                    # state that lost what the ledger saw it apply: a person must look (the
                    # message says what). Not the cloud failing, so no failure is counted
                    # and the pool is never parked for it; each pass looks again.
                    error, code = exc.message, exc.code
                    self.report("error", f"{pool['name']}: [{code}] {error}", {"pool": pool_id})
                else:
                    failures += 1
                    backoff_until = now + d.backoff_after(failures)
                    error = f"provider failure {failures} in a row: {exc.message}"
                    code = exc.code
                    self.report("provider", f"{pool['name']}: {error}; backing off until "
                                f"{backoff_until:%H:%M:%S}", {"pool": pool_id})
            else:
                crashpoint("after-stack-up")
                if result.mandatory_violations:
                    error = "policy: " + "; ".join(
                        f"{v.policy}: {v.message}" for v in result.mandatory_violations)
                    code = "POLICY_VIOLATION"
                else:
                    failures, backoff_until = 0, None
                    self._sync_attempts(pool_id, result.outputs, now)
                    crashpoint("after-ledger-sync")
                    self._record_applied(pool, now)
        if error is None:
            decision = self._install_ingress(pool, decision, port, now)
        self._confirm_releases(pool, now)

        if decision.of(d.RemoveIngressRelease):
            self._remove_ingress(pool, now)
        if decision.of(d.DestroyStack):
            try:
                self.ports.runner.destroy(pool_target(self.app, pool_id, planned=False))
            except EngineFailed as exc:
                if exc.code != "STATE_MISSING":
                    raise
                # The pool stays where it is (deleting), saying why, until the state is back.
                self.report("error", f"{pool['name']}: [{exc.code}] {exc.message}",
                            {"pool": pool_id})
                self._store_error(pool, exc.message, now, outcome, exc.code)
                return
            crashpoint("after-destroy")
            with self.app.ledger.write() as conn:
                conn.execute(pools.update().where(pools.c.id == pool_id)
                             .values(network_removed=True, updated_at=now))
                self._event(conn, now, pool_id, "network_removed",
                             "isolated network removed")
            self.report("pool", f"{pool['name']}: network removed", {"pool": pool_id})

        if error is None and namespace_note is not None:
            error, code = namespace_note, NOT_OWNED
        progress, stall = self._progress(pool, rows, decision, now)
        if error is None and decision.last_error is None and stall is not None:
            error, code = stall, p.NO_PROGRESS
            self.report("error", f"{pool['name']}: [{code}] {error}", {"pool": pool_id})
        outcome.error_code = code if error is not None else None
        self._store(pool, rows, decision, failures, backoff_until, error, code, now, outcome,
                    progress)

    def _progress(self, pool: RowMapping, rows: list[RowMapping], decision: d.Decision,
                  now: datetime) -> tuple[p.Progress, str | None]:
        """This pass's progress (``progress``), read back after acting, and the error of a
        stalled pool (None unless stalled)."""
        after, after_rows = self._load(pool["id"])
        mark = p.mark(decision.state, bool(after["network_removed"]),
                      ((r["id"], r["state"]) for r in after_rows))
        acting = bool(decision.actions) or any(r["state"] == "releasing" for r in rows)
        progress = p.step(p.Progress(pool["progress_mark"], pool["progress_since"],
                                     pool["passes_without_progress"]), mark, now,
                          acting=acting)
        if not p.stalled(progress, now):
            return progress, None
        return progress, p.describe(
            pool["id"], progress,
            releasing=[r["id"] for r in after_rows if r["state"] == "releasing"],
            starting=[r["id"] for r in after_rows if r["state"] in ("pending", "creating")],
            repeated=[type(a).__name__ for a in decision.actions])

    # -- the pool's ingress release (``ingress_step``) ----------------------------------

    def _install_ingress(self, pool: RowMapping, decision: d.Decision, port: ClusterPort,
                         now: datetime) -> d.Decision:
        """After the pool's stack holds the port-80 rule: install or rewrite the release.
        A denied or failed write fails the pool as an add-on failure."""
        step = self.ports.ensure_ingress
        wanted = decision.of(d.EnsureIngressRelease)
        if step is None or not wanted:
            return decision
        result = step.install(self._cluster_row(pool), pool["id"], port, wanted[0].found)
        if result.actions:
            message = f"ingress release: {', '.join(result.actions)}"
            with self.app.ledger.write() as conn:
                self._event(conn, now, pool["id"], "ingress_release", message)
            self.report("ingress", f"{pool['name']}: {message}", {"pool": pool["id"]})
        if result.skipped is not None:
            # Transient (cluster blip, stack locked by another update): the next pass retries.
            self.report("ingress", f"{pool['name']}: ingress release not written this pass: "
                        f"{result.skipped}", {"pool": pool["id"]})
        if result.diagnostic is not None:
            return d.fail_addons(decision, result.diagnostic)
        return decision

    def _remove_ingress(self, pool: RowMapping, now: datetime) -> None:
        """Deletion: destroy the release's stack; an engine error propagates (the turn
        records it) and the network is not removed until a later pass succeeds."""
        if self.ports.ensure_ingress is None:
            return
        self.ports.ensure_ingress.remove(self._cluster_row(pool), pool["id"])
        with self.app.ledger.write() as conn:
            self._event(conn, now, pool["id"], "ingress_release_removed",
                        "ingress release removed")
        self.report("ingress", f"{pool['name']}: ingress release removed", {"pool": pool["id"]})

    def _cluster_row(self, pool: RowMapping) -> RowMapping:
        with self.app.ledger.read() as conn:
            row = conn.execute(sa.select(schema.clusters).where(
                schema.clusters.c.id == pool["cluster_id"])).mappings().one()
        return self.app.with_kubeconfig(row)  # type: ignore[return-value]

    def _delete_namespace(self, pool: RowMapping, port: ClusterPort) -> str | None:
        name = pool_namespace(pool["id"])
        owner = port.namespace_owner(name, pool["id"])
        if owner == "ours":
            port.delete_namespace(name)
        elif owner == "foreign":
            return f"namespace {name} is not owned by anycloud and was left in place"
        return None

    def _renew_tokens(self, pool: RowMapping, now: datetime) -> None:
        """Draw a new token generation for attempts about to be bought with a stale one
        (``token_renewal``): written before the ``up`` that uses it, so a crash in between
        leaves the next pass applying the new generation, never the old."""
        ttl = timedelta(minutes=token_ttl_minutes())
        with self.app.ledger.write() as conn:
            rows = conn.execute(sa.select(attempts_t).where(
                attempts_t.c.pool_id == pool["id"], attempts_t.c.state == "pending")
            ).mappings().all()
            for r in rows:
                why = renewal_reason(state=r["state"], token_removed=r["token_removed_at"]
                                     is not None, issued_at=r["token_issued_at"], ttl=ttl,
                                     now=now, pool_failures=pool["consecutive_failures"])
                if why is None:
                    continue
                generation = r["token_generation"] + 1
                conn.execute(attempts_t.update().where(attempts_t.c.id == r["id"]).values(
                    token_generation=generation, token_issued_at=now, updated_at=now))
                self._event(conn, now, pool["id"], "token_renewed",
                             f"bootstrap token of {r['id']} renewed (generation {generation}): "
                             f"{why}")
                self.report("token", f"{pool['name']}: new bootstrap token for {r['id']} "
                            f"(generation {generation}): {why}",
                            {"attempt": r["id"], "generation": generation})

    def _mark_creating(self, pool_id: str, now: datetime, back: bool = False) -> None:
        """Durable intent before the ``up`` that may buy them: pending attempts become
        ``creating``. A crash after the cloud bought their VMs and before the ledger heard
        back leaves them so, and an engine whose state is then gone refuses to buy them
        again (``Expected.started``) instead of reading them as never bought. ``back``:
        the up failed and the engine's state says what it bought: pending again."""
        old, new = ("creating", "pending") if back else ("pending", "creating")
        with self.app.ledger.write() as conn:
            conn.execute(attempts_t.update().where(
                attempts_t.c.pool_id == pool_id, attempts_t.c.state == old)
                .values(state=new, updated_at=now))

    def _sync_attempts(self, pool_id: str, outputs: dict[str, Any], now: datetime) -> None:
        """After a successful up: pending attempts are running, with the VM's facts. The
        image each VM was built from is recorded once, and every later run builds the VM
        from it (``pool_target``): a newer image only ever reaches new attempts."""
        vms = outputs.get("attempts") or {}
        with self.app.ledger.write() as conn:
            rows = conn.execute(sa.select(attempts_t).where(
                attempts_t.c.pool_id == pool_id,
                attempts_t.c.state.in_(["pending", "creating", "running"]))).mappings().all()
            for r in rows:
                facts = vms.get(r["id"])
                if not isinstance(facts, dict):
                    continue
                image = facts.get("image")
                # A concrete image id (vm_attempts.image is String(512)), never a placeholder
                # for a value the engine hid or did not know.
                if not isinstance(image, str) or not 0 < len(image) <= 512 or image.startswith(
                        "["):
                    image = None
                if r["state"] == "running":
                    # Running before images were recorded: this up left it built from this.
                    if r["image"] is None and image is not None:
                        conn.execute(attempts_t.update().where(attempts_t.c.id == r["id"])
                                     .values(image=image))
                    continue
                conn.execute(attempts_t.update().where(attempts_t.c.id == r["id"]).values(
                    state="running", vm_id=str(facts.get("vmId") or ""),
                    public_ip=facts.get("publicIp"), vm_created_at=r["vm_created_at"] or now,
                    image=r["image"] or image, updated_at=now))
                self._event(conn, now, pool_id, "vm_running",
                             f"VM of {r['id']} is running ({facts.get('publicIp')})")
                self.report("vm", f"VM {r['id']} running at {facts.get('publicIp')}",
                            {"attempt": r["id"]})

    def _record_applied(self, pool: RowMapping, now: datetime) -> None:
        """Remember what the stack now reflects, so an unchanged pool is not applied again."""
        _, rows = self._load(pool["id"])
        digest = d.stack_digest(bool(pool["hosts_service"]), [_attempt_view(r) for r in rows])
        with self.app.ledger.write() as conn:
            conn.execute(pools.update().where(pools.c.id == pool["id"])
                         .values(applied_digest=digest))

    def _confirm_releases(self, pool: RowMapping, now: datetime) -> None:
        """A release ends only once the provider confirms the VM gone."""
        with self.app.ledger.read() as conn:
            releasing = conn.execute(sa.select(attempts_t.c.id).where(
                attempts_t.c.pool_id == pool["id"], attempts_t.c.state == "releasing")
            ).scalars().all()
        if not releasing:
            return
        found = self.ports.vm_lookup(pool["id"], list(releasing))
        for attempt_id in releasing:
            if found.get(attempt_id) != "absent":
                continue  # running or uncertain: keep the attempt open
            with self.app.ledger.write() as conn:
                conn.execute(attempts_t.update().where(attempts_t.c.id == attempt_id)
                             .values(state="released", released_at=now, updated_at=now))
                self._event(conn, now, pool["id"], "attempt_released",
                             f"VM of {attempt_id} confirmed released")
            self.report("vm", f"{pool['name']}: VM of {attempt_id} confirmed released",
                        {"attempt": attempt_id})

    # -- recording --------------------------------------------------------------------

    def _engine_mismatch(self, rows: list[RowMapping]) -> str | None:
        """Why this pass must not act on the pool: its live VMs were bought by another
        engine (the mock engine bought nothing; the real one must not forget real VMs)."""
        bought_by = sorted({r["engine"] for r in rows if r["state"] in LIVE_ATTEMPT_STATES
                            and r["engine"] and r["engine"] != self.engine})
        if not bought_by:
            return None
        return (f"the pool's VMs were bought by the {' and '.join(bought_by)} engine, and this "
                f"pass runs the {self.engine} engine: run it with {_RUN_WITH[bought_by[0]]}, "
                "or delete the pool with that engine")

    def _store_error(self, pool: RowMapping, error: str, now: datetime,
                     outcome: PoolOutcome, code: str) -> None:
        outcome.error_code = code
        if pool["last_error"] == error and pool["last_error_code"] == code:
            return
        with self.app.ledger.write() as conn:
            conn.execute(pools.update().where(pools.c.id == pool["id"])
                         .values(last_error=error, last_error_code=code, updated_at=now))
        outcome.wrote = True

    @staticmethod
    def _pool_changes(pool: RowMapping, decision: d.Decision, failures: int,
                      backoff_until: datetime | None, note: str | None,
                      now: datetime, note_code: str | None = None) -> dict[str, Any]:
        """The pool columns this pass would change (empty when nothing changes)."""
        state, error = decision.state, decision.last_error or note
        code = (decision.error_code or d.POOL_FAILED) if decision.last_error else note_code
        if failures >= d.MAX_PROVIDER_FAILURES and state not in ("deleting", "deleted"):
            state = "failed"
            error = f"parked after {failures} consecutive provider failures; last: {note or ''}"
            code = "PARKED"
        if state == "failed" and error is None:
            # A parked pool keeps the diagnostic that parked it.
            error, code = pool["last_error"], pool["last_error_code"]
        if state == "deleted" and error is None and pool["last_error_code"] == NOT_OWNED:
            # What deletion left behind stays visible in the deleted pool's status.
            error, code = pool["last_error"], NOT_OWNED
        wanted = {"state": state, "last_error": error,
                  "last_error_code": code if error else None,
                  "replacements_in_row": decision.replacements_in_row,
                  "consecutive_failures": failures, "backoff_until": backoff_until,
                  "ingress_entry_attempt_id": decision.ingress_entry}
        changes = {k: v for k, v in wanted.items() if pool[k] != v}
        if state == "deleted" and pool["state"] != "deleted":
            changes["deleted_at"] = now
        return changes

    def _store(self, pool: RowMapping, rows: list[RowMapping], decision: d.Decision,
               failures: int, backoff_until: datetime | None, note: str | None,
               note_code: str | None, now: datetime, outcome: PoolOutcome,
               progress: p.Progress | None = None) -> None:
        changes = self._pool_changes(pool, decision, failures, backoff_until, note, now,
                                     note_code)
        if progress is not None:
            changes.update({k: v for k, v in (
                ("progress_mark", progress.mark), ("progress_since", progress.since),
                ("passes_without_progress", progress.passes)) if pool[k] != v})
        state = changes.get("state", pool["state"])
        error = changes.get("last_error", pool["last_error"])
        attempt_patches = dict(decision.attempts)
        if not changes and not attempt_patches:
            outcome.state = state
            return
        with self.app.ledger.write() as conn:
            if changes:
                conn.execute(pools.update().where(pools.c.id == pool["id"])
                             .values(updated_at=now, **changes))
            if "state" in changes:
                self._event(conn, now, pool["id"], f"pool_{state}",
                             f"node pool {pool['name']} {state}"
                             + (f": {error}" if error and state == "failed" else ""))
                self.report("pool", f"{pool['name']}: {pool['state']} → {state}"
                            + (f" ({error})" if error and state == "failed" else ""),
                            {"pool": pool["id"], "state": state})
            before = {r["id"]: r for r in rows}
            for aid, v in attempt_patches.items():
                if before[aid]["node_state"] != v.node_state and v.node_state:
                    self.report("node", f"{pool['name']}: Node {v.node_name} "
                                f"{_NODE_STATES.get(v.node_state, v.node_state)}",
                                {"attempt": aid, "nodeState": v.node_state})
                conn.execute(attempts_t.update().where(attempts_t.c.id == aid).values(
                    not_ready_since=v.not_ready_since, gpu_ready_seen=v.gpu_ready_seen,
                    node_state=v.node_state,
                    gpu_missing_since=v.gpu_missing_since, updated_at=now))
        outcome.state, outcome.wrote = state, True


_NODE_STATES = {
    "NotReady": "joined (NotReady)",
    "Ready": "Ready",
    "NoDevices": "Ready, waiting for its nvidia.com/gpu devices",
    "Mismatch": "advertises the wrong nvidia.com/gpu count",
}


def _throttled(exc: AnycloudError) -> str:
    return f"the provider throttled the stack operation; retried next pass: {exc.message}"


def _node_name(attempt_id: str) -> str:
    from components.naming import node_name

    return node_name(attempt_id)


def _attempt_view(r: RowMapping) -> d.AttemptView:
    return d.AttemptView(
        id=r["id"], state=r["state"], node_name=r["node_name"] or _node_name(r["id"]),
        vm_created_at=r["vm_created_at"], token_present=r["token_removed_at"] is None,
        replaces=r["replaces_attempt_id"], not_ready_since=r["not_ready_since"],
        node_state=r["node_state"],
        gpu_ready_seen=bool(r["gpu_ready_seen"]), gpu_missing_since=r["gpu_missing_since"],
    )
