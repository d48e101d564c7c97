"""One reconcile pass of one AgentPool: observe, decide, act, report.

Observe: the pool's pods from the API server (label ``anycloud.sh/agent-pool=<name>`` *and*
controlled by this pool's uid) and the broker's view of its agents and pending sessions
(``PoolState``: the registry, or anything a test feeds it). Decide: ``autoscaler.decide``.
Act: create and delete pods. Report: the AgentPool's status and Events.

Restart-safe by construction: nothing is remembered between passes. Every pass reads the
pods that exist, so pods a previous operator created (even one killed between two creates)
count as ``starting`` capacity and are never made again.

Before any pod, the pool's agent token: the Secret ``<pool>-agent-token`` holds a live token
of this pool for the broker (minted, earlier ones revoked, when it is missing, unreadable, or
left by an earlier pool of the same name); checked again every ``TOKEN_RECHECK``.

Conditions: ``Ready`` says why the pool is not what its spec asks, first cause first: what
stops the pass (TemplateInvalid, NodePoolNotFound, SecretConflict, ConfigMapMissing,
Forbidden, AdmissionRefused), then what is wrong with its pods (``health.TYPES``:
ImagePullFailed, CrashLooping, Unschedulable, AgentsNotRegistering), else True
(Reconciled). Each pod problem is also a condition of its own, True while it holds, naming
the pods. A Warning Event is posted when a cause appears, a Normal one for every pod created
or deleted, so ``kubectl describe agentpool`` tells the story. ``idleSlots`` and
``busySlots`` count registered agents only: a pod whose agent never registered serves
nothing, however Ready Kubernetes says it is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from automation.agentpools import health
from automation.agentpools import pods as render
from automation.agentpools.autoscaler import Decision, Settings, Worker, decide
from automation.agentpools.kubeapi import AdmissionRefused, PodRejected
from automation.agentpools.model import validate_manifest
from automation.clock import Clock, SystemClock
from automation.errors import AnycloudError, InvalidInput
from automation.kube.port import ClusterForbidden

CONDITION = "Ready"
ENDED = ("Succeeded", "Failed")
TOKEN_RECHECK = timedelta(seconds=60)


class PoolState(Protocol):
    """The broker's side of a pool (``automation.agentpools.registry.Registry`` is one)."""

    def workers(self, pool: str, now: datetime) -> list[Worker]: ...

    def pending_sessions(self, pool: str) -> int: ...

    def close_pool(self, pool: str) -> int: ...

    def forget_pod(self, pool: str, pod: str, reason: str) -> None:
        """The agent(s) of that pod are gone for good (their sessions fail)."""
        ...

    def retire_if_idle(self, pool: str, pod: str) -> bool:
        """Take the pod's agents out of the pool if none holds a slot (False: keep it)."""
        ...

    def agent_token(self, pool: str, current: str | None) -> str | None:
        """None when ``current`` (the token in the pool's Secret) is the pool's live agent
        token; else a fresh one (earlier ones revoked) to write there."""
        ...

    def observe_pool(self, pool: str, uid: str, desired: int, reason: str) -> None:
        """The pool exists (sessions for it are taken), wanting ``desired`` agents."""
        ...


@dataclass
class RegistryState:
    """``PoolState`` over the broker's registry (C's ``Registry``)."""

    registry: Any  # automation.agentpools.registry.Registry (imported lazily: the ledger)

    def workers(self, pool: str, now: datetime) -> list[Worker]:
        found: list[Worker] = self.registry.workers(pool, now)
        return found

    def pending_sessions(self, pool: str) -> int:
        return int(self.registry.pending_sessions(pool))

    def close_pool(self, pool: str) -> int:
        return int(self.registry.close_pool(pool))

    def forget_pod(self, pool: str, pod: str, reason: str) -> None:
        for agent in self.registry.pool_view(pool).agents:
            if agent.pod_name == pod and agent.state != "gone":
                self.registry.deregister(agent.id, reason)

    def retire_if_idle(self, pool: str, pod: str) -> bool:
        return bool(self.registry.retire_if_idle(pool, pod))

    def agent_token(self, pool: str, current: str | None) -> str | None:
        fresh: str | None = self.registry.agent_token(pool, current)
        return fresh

    def observe_pool(self, pool: str, uid: str, desired: int, reason: str) -> None:
        self.registry.observe_pool(pool, uid, desired, reason)


# The live node pool named (NotFound, or another AnycloudError, when none).
NodePoolIds = Callable[[str], render.NodePoolRef]


class Api(Protocol):
    """What a pass calls (``kubeapi.KubeApi``)."""

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]: ...

    def create_pod(self, namespace: str, pod: dict[str, Any]) -> bool: ...

    def delete_pod(self, namespace: str, name: str, uid: str) -> bool: ...

    def config_map_exists(self, namespace: str, name: str) -> bool: ...

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def write_secret(self, namespace: str, secret: dict[str, Any],
                     existing: dict[str, Any] | None) -> None: ...

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None: ...

    def post_event(self, pool: dict[str, Any], type_: str, reason: str, message: str,
                   now: datetime) -> None: ...


class Blocked(Exception):
    """The pass cannot go on: ``reason`` is the condition's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class Outcome:
    """What one pass saw and did (the status it wrote, for callers and tests)."""

    created: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    reason: str = "Reconciled"
    message: str = ""
    status: dict[str, Any] = field(default_factory=dict)
    decision: Decision | None = None
    problems: list[health.Problem] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)


def pool_key(pool: dict[str, Any]) -> str:
    """The broker's name of the pool: ``namespace/name``."""
    return f"{pool['metadata']['namespace']}/{pool['metadata']['name']}"


def _ts(value: Any) -> datetime:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def pod_ready(pod: dict[str, Any]) -> bool:
    return _condition(pod, "Ready").get("status") == "True"


def as_workers(pods: Sequence[dict[str, Any]], registered: Sequence[Worker]) -> list[Worker]:
    """Each live pod as the autoscaler's Worker: the broker's agent of that pod name when it
    registered, else ``starting`` since the pod was made; a pod being deleted is
    ``terminating``. Agents with no pod here are not capacity the operator can act on."""
    agents = {w.name: w for w in registered}
    out = []
    for pod in pods:
        meta = pod["metadata"]
        created = _ts(meta["creationTimestamp"])
        if meta.get("deletionTimestamp"):
            out.append(Worker(name=meta["name"], created_at=created, state="terminating"))
        elif meta["name"] in agents:
            w = agents[meta["name"]]
            out.append(Worker(name=w.name, created_at=created, state=w.state, slots=w.slots,
                              busy_slots=w.busy_slots, idle_since=w.idle_since,
                              unknown_since=w.unknown_since))
        else:
            out.append(Worker(name=meta["name"], created_at=created, state="starting"))
    return out


def settings_of(pool: dict[str, Any]) -> Settings:
    a = validate_manifest({"apiVersion": pool["apiVersion"], "kind": pool["kind"],
                           "metadata": {"name": pool["metadata"]["name"]},
                           "spec": pool["spec"]}).spec.autoscaler
    return Settings(min_replicas=a.min_replicas, max_replicas=a.max_replicas,
                    min_idle=a.min_idle, max_idle=a.max_idle,
                    idle_decay_second=a.idle_decay_second,
                    kill_unknown_after_second=a.kill_unknown_after_second,
                    default_slots_per_agent=a.default_slots_per_agent)


@dataclass
class Reconciler:
    api: Api
    state: PoolState
    node_pool_id: NodePoolIds | None = None
    clock: Clock = field(default_factory=SystemClock)
    # The agent ConfigMap mounted at /run/anycloud (None: none) and the broker address given
    # to the agents as ANYCLOUD_BROKER (None: they read it from that ConfigMap).
    config_map: str | None = render.DEFAULT_CONFIG_MAP
    broker: str | None = None
    # Called after each pod create: tests stop the operator there (a crash mid-scale).
    after_create: Callable[[str], None] | None = None
    log: Callable[[str], None] = lambda line: None
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _token_checked: dict[str, datetime] = field(default_factory=dict)  # pool uid -> when
    # "<pool uid>/<condition type>" -> the (status, reason) this process last posted an Event
    # for. A pass
    # may read the pool as it was before the previous pass's status landed (kopf hands the
    # timer and the update handler the body they were called with): without this, one change
    # of cause would be announced twice.
    _announced: dict[str, tuple[str, str]] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    # pool uid -> the (desired, reason) last recorded in the ledger: written on change only.
    _observed: dict[str, tuple[int, str]] = field(default_factory=dict)

    def _lock(self, uid: str) -> threading.Lock:
        # kopf may run a pool's timer and its update handler at once: one pass at a time.
        with self._guard:
            return self._locks.setdefault(uid, threading.Lock())

    # -- a pass -------------------------------------------------------------------------

    def reconcile(self, pool: dict[str, Any]) -> Outcome:
        with self._lock(pool["metadata"]["uid"]):
            return self._reconcile(pool)

    def _reconcile(self, pool: dict[str, Any]) -> Outcome:
        now = self.clock.now()
        meta = pool["metadata"]
        ns, name = meta["namespace"], meta["name"]
        out = Outcome()
        live: list[dict[str, Any]] = []
        try:
            try:
                settings = settings_of(pool)
            except InvalidInput as exc:
                raise Blocked("TemplateInvalid", exc.message) from exc
            sample = self._render(pool)
            self._ensure_token(pool, now)
            pods = [p for p in self.api.list_pods(ns, render.pod_selector(name))
                    if render.owned_by(p, meta["uid"])]
            ended = [p for p in pods if (p.get("status") or {}).get("phase") in ENDED]
            live = [p for p in pods if p not in ended]
            for p in ended:  # a worker whose container exited for good: not capacity
                if not p["metadata"].get("deletionTimestamp"):
                    self._delete(pool, p, out, f"its pod ended ({p['status']['phase']})", now)
            key = pool_key(pool)
            registered = self.state.workers(key, now)
            self._forget_lost(key, pods, registered)
            workers = as_workers(live, registered)
            out.workers = workers
            decision = decide(settings, workers, self.state.pending_sessions(key), now)
            out.decision = decision
            missing = [cm for cm in render.config_maps(sample)
                       if not self.api.config_map_exists(ns, cm)]
            by_name = {p["metadata"]["name"]: p for p in live}
            for victim in decision.delete:
                # Between the decision and the delete the broker may have given the agent a
                # session: retiring it first is one locked step that refuses if so.
                if not self.state.retire_if_idle(key, victim):
                    self.log(f"{key}: kept pod {victim}: its agent took a session meanwhile")
                    continue
                self._delete(pool, by_name[victim], out, "; ".join(decision.reasons), now)
            if missing:
                raise Blocked("ConfigMapMissing", f"ConfigMap {', '.join(missing)} not found "
                              f"in namespace {ns}: no worker pod is created until it exists "
                              "(it holds the agents' broker address)")
            for _ in range(decision.create):
                pod = self._render(pool)
                self._create(pool, pod, out, "; ".join(decision.reasons), now)
            if not decision.create and not decision.delete:
                self._roll(pool, live, workers, render.template_hash(sample), out, now)
            kept = [(p, w) for p, w in zip(live, workers, strict=True)
                    if p["metadata"]["name"] not in out.deleted]
            out.problems = health.problems([p for p, _ in kept], [w for _, w in kept], now)
        except Blocked as exc:
            out.reason, out.message = exc.reason, exc.message
        except ClusterForbidden as exc:
            out.reason, out.message = "Forbidden", str(exc)
        self._report(pool, live, out, now)
        return out

    def _ensure_token(self, pool: dict[str, Any], now: datetime) -> None:
        meta = pool["metadata"]
        checked = self._token_checked.get(meta["uid"])
        if checked is not None and now - checked < TOKEN_RECHECK:
            return
        ns, name = meta["namespace"], render.token_secret_name(meta["name"])
        found = self.api.read_secret(ns, name)
        if found is not None and (found["metadata"].get("labels") or {}).get(
                render.MANAGED_BY) != render.MANAGER:
            raise Blocked("SecretConflict", f"Secret {name} in namespace {ns} is not "
                          "anycloud's: the operator keeps the pool's agent token there; "
                          "rename or delete that Secret")
        current = render.secret_token(found) if found is not None and render.owned_by(
            found, meta["uid"]) else None
        fresh = self.state.agent_token(pool_key(pool), current)
        if fresh is not None:
            self.api.write_secret(ns, render.token_secret(pool, fresh), found)
            self.log(f"{pool_key(pool)}: wrote the agent token to Secret {name}")
            self.api.post_event(pool, "Normal", "AgentTokenIssued",
                                f"agent token written to Secret {name}", now)
        self._token_checked[meta["uid"]] = now

    def _roll(self, pool: dict[str, Any], live: list[dict[str, Any]], workers: list[Worker],
              current: str | None, out: Outcome, now: datetime) -> None:
        """spec.template changed: replace the pods made from an older one, one per pass and
        only in a pass that scaled nothing (the next pass's scale-up makes its successor), a
        pod that never registered first, then the longest idle; a busy one waits until it
        is idle. One at a time keeps at most one agent's slots missing."""
        ranked = []
        for pod, w in zip(live, workers, strict=True):
            if render.template_hash(pod) == current or w.state == "terminating":
                continue
            if w.state == "starting":
                ranked.append((0, now, pod))
            elif w.busy_slots == 0:
                ranked.append((1, w.idle_since or now, pod))
        if ranked:
            ranked.sort(key=lambda r: (r[0], r[1], r[2]["metadata"]["name"]))
            self._delete(pool, ranked[0][2], out, "made from an older spec.template: "
                         "replaced one pod at a time", now, reason="Replaced")

    def _forget_lost(self, key: str, pods: list[dict[str, Any]],
                     registered: list[Worker]) -> None:
        """An agent whose heartbeats stopped and whose pod no longer exists (its node died,
        the pod was force-deleted) will never come back: tell the broker, so its sessions
        fail now and it stops being listed. A live agent with no pod (run by hand) is left."""
        names = {p["metadata"]["name"] for p in pods}
        for w in registered:
            if w.state == "unknown" and w.name not in names:
                self.state.forget_pod(key, w.name, "its pod is gone")
                self.log(f"{key}: forgot agent of pod {w.name} (unknown, its pod is gone)")

    def _render(self, pool: dict[str, Any]) -> dict[str, Any]:
        node_pool = pool["spec"].get("nodePool")
        ref = None
        if node_pool:
            if self.node_pool_id is None:
                raise Blocked("NodePoolNotFound", f"spec.nodePool {node_pool!r}: this "
                              "operator has no ledger to look node pools up in")
            try:
                ref = self.node_pool_id(node_pool)
            except AnycloudError as exc:
                raise Blocked("NodePoolNotFound", f"spec.nodePool {node_pool!r}: "
                              f"{exc.message}; its agents stay unplaced rather than "
                              "landing on another node pool") from exc
        try:
            return render.render_pod(pool, node_pool=ref, config_map=self.config_map,
                                     broker=self.broker)
        except InvalidInput as exc:
            raise Blocked("TemplateInvalid", exc.message) from exc

    def _create(self, pool: dict[str, Any], pod: dict[str, Any], out: Outcome, why: str,
                now: datetime) -> None:
        ns = pool["metadata"]["namespace"]
        try:
            self.api.create_pod(ns, pod)
        except PodRejected as exc:
            raise Blocked("TemplateInvalid", f"the API server refused the worker pod: "
                          f"{exc}") from exc
        except AdmissionRefused as exc:
            raise Blocked("AdmissionRefused", str(exc)) from exc
        name = pod["metadata"]["name"]
        out.created.append(name)
        self.log(f"{pool_key(pool)}: created pod {name} ({why})")
        self.api.post_event(pool, "Normal", "ScaledUp", f"created worker pod {name}: {why}",
                            now)
        if self.after_create is not None:
            self.after_create(name)

    def _delete(self, pool: dict[str, Any], pod: dict[str, Any], out: Outcome, why: str,
                now: datetime, reason: str = "ScaledDown") -> None:
        ns = pool["metadata"]["namespace"]
        name = pod["metadata"]["name"]
        self.api.delete_pod(ns, name, pod["metadata"]["uid"])
        out.deleted.append(name)
        self.log(f"{pool_key(pool)}: deleted pod {name} ({why})")
        self.api.post_event(pool, "Normal", reason, f"deleted worker pod {name}: {why}", now)

    # -- status ---------------------------------------------------------------------------

    def _report(self, pool: dict[str, Any], live: list[dict[str, Any]], out: Outcome,
                now: datetime) -> None:
        meta = pool["metadata"]
        old = dict(pool.get("status") or {})
        kept = [p for p in live if p["metadata"]["name"] not in out.deleted
                and not p["metadata"].get("deletionTimestamp")]
        d = out.decision
        # Only registered agents serve: a starting pod's slots are the autoscaler's estimate.
        serving = [w for w in out.workers if w.name not in out.deleted]
        status: dict[str, Any] = {
            "replicas": len(kept) + len(out.created),
            "readyReplicas": sum(1 for p in kept if pod_ready(p)),
            "idleSlots": sum(max(0, w.slots - w.busy_slots) for w in serving
                             if w.state == "ready") if d else old.get("idleSlots", 0),
            "busySlots": sum(w.busy_slots for w in serving if w.state in ("ready", "unknown"))
            if d else old.get("busySlots", 0),
            "pendingSessions": d.pending_sessions if d else old.get("pendingSessions", 0),
            "observedGeneration": meta.get("generation"),
        }
        problems = {p.type: p for p in out.problems}
        if out.reason == "Reconciled" and out.problems:
            out.reason, out.message = out.problems[0].type, out.problems[0].message
        ok = out.reason == "Reconciled"
        message = out.message or (
            "; ".join(d.reasons) if d and d.reasons else "the pool is as its spec asks")
        if ok and not d:
            message = "the pool is as its spec asks"
        before = {c.get("type"): c for c in old.get("conditions") or []}
        wanted = [(CONDITION, "True" if ok else "False", out.reason, message)]
        for kind in health.TYPES:
            hit = problems.get(kind)
            wanted.append((kind, "True", kind, hit.message) if hit else
                          (kind, "False", "NoPodAffected", "no worker pod has it"))
        conditions = []
        announce: list[tuple[str, str, str]] = []  # Events: (type, reason, message)
        for kind, state, reason, text in wanted:
            prior = before.get(kind) or {}
            changed = (prior.get("status"), prior.get("reason")) != (state, reason)
            conditions.append({
                "type": kind, "status": state, "reason": reason, "message": text[:32768],
                "observedGeneration": meta.get("generation"),
                "lastTransitionTime": prior.get("lastTransitionTime")
                if not changed and prior.get("lastTransitionTime")
                else now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            })
            key = f"{meta['uid']}/{kind}"
            if changed and self._announced.get(key) != (state, reason):
                self._announced[key] = (state, reason)
                if kind == CONDITION and not ok:
                    announce.append(("Warning", reason, text))
                elif kind == CONDITION and prior:
                    announce.append(("Normal", "Reconciled",
                                     "the pool is as its spec asks again"))
                elif kind != CONDITION and state == "True" and kind != out.reason:
                    announce.append(("Warning", kind, text))  # Ready's Event says the first
        status["conditions"] = conditions
        out.status = status
        same = {k: old.get(k) for k in status} == status
        for type_, reason, text in announce:
            if type_ == "Warning":
                self.log(f"{pool_key(pool)}: {reason}: {text}")
            self._event(pool, type_, reason, text, now)
        if not same:
            try:
                self.api.patch_status(meta["namespace"], meta["name"], status)
            except ClusterForbidden as exc:
                self.log(f"{pool_key(pool)}: cannot write its status: {exc}")
        seen = (d.replicas if d else status["replicas"], out.reason)
        if self._observed.get(meta["uid"]) != seen:
            self.state.observe_pool(pool_key(pool), meta["uid"], *seen)
            self._observed[meta["uid"]] = seen

    def _event(self, pool: dict[str, Any], type_: str, reason: str, message: str,
               now: datetime) -> None:
        try:
            self.api.post_event(pool, type_, reason, message, now)
        except ClusterForbidden as exc:
            self.log(f"{pool_key(pool)}: cannot post an event: {exc}")

    # -- delete ---------------------------------------------------------------------------

    def delete(self, pool: dict[str, Any]) -> list[str]:
        """The AgentPool is being deleted: delete exactly its pods (label and controller uid)
        and close it in the broker (pending sessions cancelled). Returns the pods deleted."""
        meta = pool["metadata"]
        with self._lock(meta["uid"]):
            ns = meta["namespace"]
            gone = []
            for p in self.api.list_pods(ns, render.pod_selector(meta["name"])):
                if render.owned_by(p, meta["uid"]) and not p["metadata"].get("deletionTimestamp"):
                    self.api.delete_pod(ns, p["metadata"]["name"], p["metadata"]["uid"])
                    gone.append(p["metadata"]["name"])
            self.state.close_pool(pool_key(pool))  # its agent tokens revoked too
            self._token_checked.pop(meta["uid"], None)
            self._observed.pop(meta["uid"], None)
            for kind in (CONDITION, *health.TYPES):
                self._announced.pop(f"{meta['uid']}/{kind}", None)
            self.log(f"{pool_key(pool)}: deleted; removed its pods {', '.join(gone) or '(none)'}")
            return gone
