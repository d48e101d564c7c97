"""One operator pass (automation/agentpools/reconcile.py) over an in-memory API and broker
state, and the operator's config file: fast, no cluster. The same pass runs against the
real API server in test_operator.py."""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from automation.agentpools.autoscaler import Worker
from automation.agentpools.operator import load_config
from automation.agentpools.pods import AGENT_POOL_LABEL, NodePoolRef, render_pod, secret_token
from automation.agentpools.reconcile import TOKEN_RECHECK, Reconciler
from automation.agentpools.registry import Registry
from automation.auth.tokens import authenticate
from automation.clock import ManualClock
from automation.errors import InvalidInput, NotFound, Unauthenticated
from automation.kube.port import ClusterForbidden, ClusterUnavailable
from automation.ledger import open_ledger
from tests.automation.agentpools.cases import example

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@dataclass
class FakeApi:
    """Pods, ConfigMaps, status patches and Events in memory, with the API server's
    behaviour the pass relies on (label selection, uid preconditions)."""

    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    config_maps: set[str] = field(default_factory=lambda: {"anycloud-agent-config"})
    patches: list[dict[str, Any]] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    forbid: set[tuple[str, str]] = field(default_factory=set)
    uids: itertools.count[int] = field(default_factory=itertools.count)
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def _check(self, verb: str, resource: str) -> None:
        if (verb, resource) in self.forbid:
            raise ClusterForbidden(verb, resource, "ns", "forbidden by the test")

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        self._check("list", "pods")
        key, _, value = selector.partition("=")
        return [p for p in self.pods.values() if p["metadata"]["labels"].get(key) == value]

    def create_pod(self, namespace: str, pod: dict[str, Any]) -> bool:
        self._check("create", "pods")
        name = pod["metadata"]["name"]
        if name in self.pods:
            return False
        pod = {**pod, "metadata": {**pod["metadata"], "uid": f"pod-{next(self.uids)}",
                                   "creationTimestamp": NOW.isoformat()}}
        self.pods[name] = pod
        return True

    def delete_pod(self, namespace: str, name: str, uid: str) -> bool:
        self._check("delete", "pods")
        if name in self.pods and self.pods[name]["metadata"]["uid"] == uid:
            del self.pods[name]
            return True
        return False

    def config_map_exists(self, namespace: str, name: str) -> bool:
        self._check("get", "configmaps")
        return name in self.config_maps

    def read_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        self._check("get", "secrets")
        return copy.deepcopy(self.secrets.get(name))

    def write_secret(self, namespace: str, secret: dict[str, Any],
                     existing: dict[str, Any] | None) -> None:
        name = secret["metadata"]["name"]
        self._check("update" if existing else "create", "secrets")
        current = self.secrets.get(name)
        if (current is None) != (existing is None) or (current is not None and existing
                is not None and current["metadata"]["resourceVersion"]
                != existing["metadata"]["resourceVersion"]):
            raise ClusterUnavailable("409 Conflict: the Secret changed meanwhile")
        stored = copy.deepcopy(secret)
        stored["metadata"]["resourceVersion"] = str(next(self.uids))
        self.secrets[name] = stored

    def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self._check("patch", "agentpools/status")
        self.patches.append(status)

    def post_event(self, pool: dict[str, Any], type_: str, reason: str, message: str,
                   now: datetime) -> None:
        self.events.append((type_, reason, message))


@dataclass
class FakeState:
    workers_: list[Worker] = field(default_factory=list)
    pending: int = 0
    closed: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)
    busy_now: set[str] = field(default_factory=set)  # took a session after the decision
    tokens: dict[str, str] = field(default_factory=dict)  # pool -> its live agent token
    minted: int = 0
    observed: list[tuple[str, str, int, str]] = field(default_factory=list)

    def observe_pool(self, pool: str, uid: str, desired: int, reason: str) -> None:
        self.observed.append((pool, uid, desired, reason))

    def workers(self, pool: str, now: datetime) -> list[Worker]:
        return list(self.workers_)

    def pending_sessions(self, pool: str) -> int:
        return self.pending

    def close_pool(self, pool: str) -> int:
        self.closed.append(pool)
        return 0

    def forget_pod(self, pool: str, pod: str, reason: str) -> None:
        self.forgotten.append(pod)

    def retire_if_idle(self, pool: str, pod: str) -> bool:
        return pod not in self.busy_now

    def agent_token(self, pool: str, current: str | None) -> str | None:
        if current is not None and self.tokens.get(pool) == current:
            return None
        self.minted += 1
        self.tokens[pool] = f"acy_token-{self.minted}"
        return self.tokens[pool]


def pool_body(file: str = "cpu-pool.yaml", uid: str = "uid-1", **autoscaler: Any
              ) -> dict[str, Any]:
    doc = example(file)
    doc["metadata"].update({"uid": uid, "generation": 1, "namespace": "ns"})
    doc["spec"]["autoscaler"].update(autoscaler)
    return doc


def with_status(body: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    return {**body, "status": status}


def test_a_pass_creates_what_the_autoscaler_decides_and_reports_it() -> None:
    api = FakeApi()
    out = Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW)).reconcile(pool_body())
    assert len(out.created) == 3 and len(api.pods) == 3  # minReplicas 2, minIdle 3
    status = api.patches[-1]
    assert status["replicas"] == 3 and status["readyReplicas"] == 0
    # Only registered agents count: three pods starting serve nothing yet.
    assert status["idleSlots"] == 0 and status["observedGeneration"] == 1
    cond = status["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Ready", "True", "Reconciled")
    assert [e[1] for e in api.events] == ["AgentTokenIssued"] + ["ScaledUp"] * 3
    for pod in api.pods.values():
        assert pod["metadata"]["labels"][AGENT_POOL_LABEL] == "cpu-pool"


def _token_env(pod: dict[str, Any]) -> dict[str, Any]:
    env = pod["spec"]["containers"][0]["env"]
    return next(e for e in env if e["name"] == "ANYCLOUD_AGENT_TOKEN")["valueFrom"]


def test_the_pools_agent_token_is_in_a_secret_it_owns_before_any_pod() -> None:
    api, state = FakeApi(), FakeState()
    clock = ManualClock(NOW)
    rec = Reconciler(api=api, state=state, clock=clock)
    rec.reconcile(pool_body())
    secret = api.secrets["cpu-pool-agent-token"]
    assert secret_token(secret) == state.tokens["ns/cpu-pool"] == "acy_token-1"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "anycloud"
    for pod in api.pods.values():
        assert _token_env(pod) == {"secretKeyRef": {"name": "cpu-pool-agent-token",
                                                    "key": "token"}}
    # Still live: never minted again, however many passes.
    for _ in range(3):
        clock.advance(TOKEN_RECHECK)
        rec.reconcile(pool_body())
    assert state.minted == 1
    # Lost (deleted by hand, or revoked): minted again at the next check.
    del api.secrets["cpu-pool-agent-token"]
    clock.advance(TOKEN_RECHECK)
    rec.reconcile(pool_body())
    assert secret_token(api.secrets["cpu-pool-agent-token"]) == "acy_token-2"


def test_a_recreated_pool_gets_a_new_token_in_the_secret_of_the_old_one() -> None:
    api, state = FakeApi(), FakeState()
    Reconciler(api=api, state=state, clock=ManualClock(NOW)).reconcile(pool_body(uid="uid-1"))
    # The old pool's Secret is still there (its garbage collection is not instant).
    out = Reconciler(api=api, state=state, clock=ManualClock(NOW)).reconcile(
        pool_body(uid="uid-2"))
    assert out.reason == "Reconciled"
    secret = api.secrets["cpu-pool-agent-token"]
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "uid-2"
    assert secret_token(secret) == "acy_token-2" and state.minted == 2


def test_a_secret_that_is_not_ours_is_never_overwritten() -> None:
    api, state = FakeApi(), FakeState()
    theirs = {"metadata": {"name": "cpu-pool-agent-token", "resourceVersion": "7",
                           "labels": {}}, "data": {"token": "dGhlaXJz"}}
    api.secrets["cpu-pool-agent-token"] = copy.deepcopy(theirs)
    out = Reconciler(api=api, state=state, clock=ManualClock(NOW)).reconcile(pool_body())
    assert out.reason == "SecretConflict" and "is not anycloud's" in (out.message or "")
    assert api.secrets["cpu-pool-agent-token"] == theirs and not api.pods
    assert state.minted == 0


def test_no_access_to_secrets_is_the_forbidden_condition_and_no_pod() -> None:
    api = FakeApi(forbid={("get", "secrets")})
    out = Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW)).reconcile(pool_body())
    assert out.reason == "Forbidden" and "secrets" in (out.message or "") and not api.pods


def test_registry_mints_checks_and_revokes_the_pools_agent_token(ledger_url: str) -> None:
    ledger = open_ledger(ledger_url)
    try:
        registry = Registry(ledger)
        first = registry.agent_token("ns/cpu", None)
        assert first is not None and registry.agent_token("ns/cpu", first) is None
        assert registry.agent_token("ns/gpu", first) is not None  # another pool's: not this
        registry.close_pool("ns/cpu")  # the pool deleted: its token revoked
        with pytest.raises(Unauthenticated, match="revoked"):
            authenticate(ledger, first, registry.clock.now())
        second = registry.agent_token("ns/cpu", first)
        assert second not in (None, first)
    finally:
        ledger.dispose()


def test_an_unchanged_pool_writes_no_status_and_posts_no_event() -> None:
    api = FakeApi()
    rec = Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW))
    body = pool_body()
    rec.reconcile(body)
    # The pass after a scale-up says the pool is as asked (its message was the action's).
    rec.reconcile(with_status(body, api.patches[-1]))
    assert api.patches[-1]["conditions"][0]["message"] == "the pool is as its spec asks"
    body = with_status(body, api.patches[-1])
    patches, events = len(api.patches), len(api.events)
    out = rec.reconcile(body)
    assert out.created == [] and out.deleted == []
    assert (len(api.patches), len(api.events)) == (patches, events)


def test_warning_event_once_per_cause_and_transition_time_kept() -> None:
    api = FakeApi(config_maps=set())
    clock = ManualClock(NOW)
    rec = Reconciler(api=api, state=FakeState(), clock=clock)
    body = pool_body()
    out = rec.reconcile(body)
    assert out.reason == "ConfigMapMissing" and api.pods == {}
    first = api.patches[-1]["conditions"][0]
    clock.advance(timedelta(seconds=30))
    rec.reconcile(with_status(body, api.patches[-1]))
    assert [e for e in api.events if e[0] == "Warning"] == [
        ("Warning", "ConfigMapMissing", out.message)]
    assert api.patches[-1]["conditions"][0]["lastTransitionTime"] == \
        first["lastTransitionTime"]
    api.config_maps.add("anycloud-agent-config")
    again = rec.reconcile(with_status(body, api.patches[-1]))
    assert again.reason == "Reconciled" and len(api.pods) == 3
    assert api.events[-1][:2] == ("Normal", "Reconciled")


def test_a_pass_on_a_body_read_before_the_last_status_landed_announces_nothing_again(
        ) -> None:
    """kopf may hand a pass the pool as it was before the previous pass's status patch (a
    timer and an update handler called with the same body): the cause, already announced,
    is not announced again (seen on a loaded machine: ConfigMapMissing posted twice)."""
    api = FakeApi(config_maps=set())
    rec = Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW))

    def warnings() -> list[str]:
        return [e[1] for e in api.events if e[0] == "Warning"]

    stale = pool_body()  # no status: as read before either pass wrote one
    assert rec.reconcile(stale).reason == rec.reconcile(stale).reason == "ConfigMapMissing"
    assert warnings() == ["ConfigMapMissing"]
    api.config_maps.add("anycloud-agent-config")
    assert rec.reconcile(with_status(stale, api.patches[-1])).reason == "Reconciled"
    assert api.events[-1][:2] == ("Normal", "Reconciled")
    api.config_maps.clear()  # the cause again, after a recovery: announced again, once
    current = with_status(stale, api.patches[-1])
    rec.reconcile(current)
    rec.reconcile(current)
    assert warnings() == ["ConfigMapMissing", "ConfigMapMissing"]


def test_forbidden_create_is_the_condition() -> None:
    api = FakeApi(forbid={("create", "pods")})
    out = Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW)).reconcile(pool_body())
    assert out.reason == "Forbidden" and "`create` on `pods`" in out.message
    assert api.patches[-1]["conditions"][0]["reason"] == "Forbidden"


def test_template_errors_and_missing_node_pools_create_nothing() -> None:
    body = pool_body()
    body["spec"]["template"]["spec"]["containers"][0]["args"] = ["--pool=other"]
    api = FakeApi()
    out = Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW)).reconcile(body)
    assert out.reason == "TemplateInvalid" and api.pods == {}

    def no_pool(name: str) -> str:
        raise NotFound("node pool", name, field="spec.nodePool")

    body = pool_body()
    body["spec"]["nodePool"] = "gone"
    out = Reconciler(api=api, state=FakeState(), node_pool_id=no_pool,
                     clock=ManualClock(NOW)).reconcile(body)
    assert out.reason == "NodePoolNotFound" and "gone" in out.message and api.pods == {}
    out = Reconciler(api=api, state=FakeState(), node_pool_id=lambda name: NodePoolRef("np_77"),
                     clock=ManualClock(NOW)).reconcile(body)
    assert out.reason == "Reconciled"
    assert {p["spec"]["nodeSelector"]["anycloud.sh/node-pool"] for p in api.pods.values()} \
        == {"np_77"}


@pytest.mark.parametrize("gpus, edit, words", [
    (4, {"limits": "500m", "requests": "500m"}, "whole nvidia.com/gpu devices"),
    (4, {"limits": 2, "requests": 1}, "requests == limits"),
    (1, {"runtimeClassName": "runc"}, "must run under the nvidia RuntimeClass"),
    (0, {}, "work on a CPU node pool must request none"),
])
def test_gpu_work_rule_breaches_on_a_node_pool_create_nothing(
        gpus: int, edit: dict[str, Any], words: str) -> None:
    """Seed 003's GPU work rule for AgentPools with spec.nodePool: the pass stops at
    TemplateInvalid with the seed's words before any Secret or Pod is made."""
    body = pool_body("gpu-pool.yaml")
    body["spec"]["nodePool"] = "gpus"
    spec = body["spec"]["template"]["spec"]
    spec.pop("runtimeClassName", None)
    spec.pop("nodeSelector", None)
    resources = spec["containers"][0]["resources"]
    for part in ("limits", "requests"):
        if part in edit:
            resources.setdefault(part, {})["nvidia.com/gpu"] = edit[part]
    if "runtimeClassName" in edit:
        spec["runtimeClassName"] = edit["runtimeClassName"]
    api = FakeApi()
    out = Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW),
                     node_pool_id=lambda name: NodePoolRef("np_9", gpus=gpus)).reconcile(body)
    assert out.reason == "TemplateInvalid" and words in out.message
    assert api.pods == {} and api.secrets == {}


def test_registered_idle_agents_decay_and_busy_ones_stay() -> None:
    api = FakeApi()
    body = pool_body("shell-pool.yaml", minReplicas=0, minIdle=1, maxIdle=1,
                     idleDecaySecond=60, maxReplicas=4)
    for _ in range(3):
        api.create_pod("ns", render_pod(body))
    names = sorted(api.pods)
    long_ago = NOW - timedelta(minutes=5)
    state = FakeState(workers_=[
        Worker(name=names[0], created_at=long_ago, state="ready", slots=1, busy_slots=1),
        Worker(name=names[1], created_at=long_ago, state="ready", slots=1,
               idle_since=long_ago),
        Worker(name=names[2], created_at=long_ago, state="ready", slots=1,
               idle_since=long_ago)])
    rec = Reconciler(api=api, state=state, clock=ManualClock(NOW))
    out = rec.reconcile(body)
    assert len(out.deleted) == 1 and names[0] not in out.deleted
    assert sorted(api.pods) == sorted(set(names) - set(out.deleted))


def test_a_victim_that_took_a_session_after_the_decision_is_kept() -> None:
    api = FakeApi()
    body = pool_body("shell-pool.yaml", minReplicas=0, minIdle=0, maxIdle=0,
                     idleDecaySecond=60, maxReplicas=4)
    api.create_pod("ns", render_pod(body))
    (name,) = api.pods
    long_ago = NOW - timedelta(minutes=5)
    state = FakeState(workers_=[Worker(name=name, created_at=long_ago, state="ready",
                                       slots=1, idle_since=long_ago)], busy_now={name})
    out = Reconciler(api=api, state=state, clock=ManualClock(NOW)).reconcile(body)
    assert out.decision is not None and out.decision.delete == (name,)
    assert out.deleted == [] and list(api.pods) == [name]


def test_registry_retires_only_an_idle_agent_and_assigns_it_nothing(ledger_url: str) -> None:
    """Over the real registry: retiring is refused while the agent holds a slot; once
    retired, a pending session is not given to it."""
    from automation.agentpools.registry import Registry
    from automation.agentpools.wire import AgentRetired
    from automation.ledger import open_ledger

    ledger = open_ledger(ledger_url)
    registry = Registry(ledger, ManualClock(NOW))
    registry.observe_pool("ns/shell", "uid-1", desired=1, reason="Reconciled")
    registry.register("ns/shell", "a", "pod-a", 1)
    session = registry.acquire("ns/shell", ["true"])
    assert registry.session(session.id).state == "running"
    assert registry.retire_if_idle("ns/shell", "pod-a") is False
    registry.release(session.id, 0, agent="a")
    assert registry.retire_if_idle("ns/shell", "pod-a") is True
    waiting = registry.acquire("ns/shell", ["true"])
    assert registry.session(waiting.id).state == "pending"
    with pytest.raises(AgentRetired):  # it cannot heartbeat or register back into the pool
        registry.heartbeat("a", 0)
    with pytest.raises(AgentRetired):
        registry.register("ns/shell", "a", "pod-a", 1)
    assert registry.retire_if_idle("ns/shell", "never-registered") is True
    ledger.dispose()


def test_a_template_change_replaces_pods_one_at_a_time_busy_last() -> None:
    api = FakeApi()
    body = pool_body(minReplicas=3, minIdle=0, maxIdle=0)
    Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW)).reconcile(body)
    old = sorted(api.pods)
    busy = old[0]
    state = FakeState(workers_=[
        Worker(name=n, created_at=NOW, state="ready", slots=1, busy_slots=int(n == busy),
               idle_since=None if n == busy else NOW) for n in old])
    body["spec"]["template"]["spec"]["containers"][0]["image"] = "anycloud/agent:2"
    rec = Reconciler(api=api, state=state, clock=ManualClock(NOW))
    seen = []
    for _ in range(8):
        out = rec.reconcile(body)
        seen.append((len(out.created), len(out.deleted)))
        assert len(api.pods) >= 2, "never more than one agent missing"
        state.workers_ = [w for w in state.workers_ if w.name in api.pods]
    assert seen[:4] == [(0, 1), (1, 0), (0, 1), (1, 0)]
    assert set(api.pods) & set(old) == {busy}, "the busy pod waits"
    state.workers_ = [Worker(name=busy, created_at=NOW, state="ready", slots=1,
                             idle_since=NOW)]
    rec.reconcile(body)
    rec.reconcile(body)
    assert not set(api.pods) & set(old) and len(api.pods) == 3
    assert ("Normal", "Replaced") in {e[:2] for e in api.events}


def test_unknown_agents_whose_pod_is_gone_are_forgotten() -> None:
    ago = NOW - timedelta(minutes=2)
    state = FakeState(workers_=[
        Worker(name="lost", created_at=ago, state="unknown", slots=1, unknown_since=ago),
        Worker(name="by-hand", created_at=ago, state="ready", slots=1, idle_since=ago)])
    Reconciler(api=FakeApi(), state=state, clock=ManualClock(NOW)).reconcile(pool_body())
    assert state.forgotten == ["lost"]


def test_registry_state_forgets_the_lost_agent_in_the_ledger(ledger_url: str) -> None:
    """Over C's real registry: an agent whose pod vanished and whose heartbeats stopped is
    deregistered (gone); the pool's other agent, whose pod exists, is kept."""
    from automation.agentpools.reconcile import RegistryState
    from automation.agentpools.registry import Registry
    from automation.ledger import open_ledger

    ledger = open_ledger(ledger_url)
    clock = ManualClock(NOW)
    registry = Registry(ledger, clock)
    api = FakeApi()
    body = pool_body("shell-pool.yaml", minIdle=1, maxIdle=2)
    api.create_pod("ns", render_pod(body))
    (kept,) = api.pods
    registry.register("ns/shell", kept, kept, 1)
    registry.register("ns/shell", "vanished", "vanished", 1)
    clock.advance(timedelta(minutes=2))
    registry.heartbeat(kept, 0)
    Reconciler(api=api, state=RegistryState(registry), clock=clock).reconcile(body)
    states = {a.id: a.state for a in registry.pool_view("ns/shell").agents}
    assert states == {kept: "ready"}
    ledger.dispose()


def test_delete_removes_exactly_the_pools_own_pods() -> None:
    api = FakeApi()
    state = FakeState()
    a, b = pool_body(uid="uid-a"), pool_body(uid="uid-b")
    b["metadata"]["name"] = "cpu-pool"  # same name, another object (recreated)
    Reconciler(api=api, state=state, clock=ManualClock(NOW)).reconcile(a)
    mine = set(api.pods)
    stranger = {"metadata": {"name": "stranger", "uid": "u-s",
                             "labels": {AGENT_POOL_LABEL: "cpu-pool"}}}
    api.pods["stranger"] = stranger
    gone = Reconciler(api=api, state=state).delete(b)
    assert gone == [] and set(api.pods) == mine | {"stranger"}
    gone = Reconciler(api=api, state=state).delete(a)
    assert set(gone) == mine and set(api.pods) == {"stranger"}
    assert state.closed == ["ns/cpu-pool", "ns/cpu-pool"]


class Crash(Exception):
    pass


@settings(max_examples=40, deadline=None)
@given(min_replicas=st.integers(0, 6), min_idle=st.integers(0, 6), slots=st.integers(1, 3),
       crash_after=st.integers(1, 6))
def test_a_crash_mid_scale_then_a_fresh_operator_makes_exactly_the_same_pods(
        min_replicas: int, min_idle: int, slots: int, crash_after: int) -> None:
    body = pool_body(minReplicas=min_replicas, maxReplicas=8, minIdle=min_idle,
                     maxIdle=min_idle + 2, defaultSlotsPerAgent=slots)
    clean = FakeApi()
    Reconciler(api=clean, state=FakeState(), clock=ManualClock(NOW)).reconcile(body)
    want = len(clean.pods)

    api = FakeApi()
    made: list[str] = []

    def crash(name: str) -> None:
        made.append(name)
        if len(made) == crash_after:
            raise Crash(name)

    try:
        Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW),
                   after_create=crash).reconcile(body)
    except Crash:
        assert len(api.pods) == crash_after < want + 1
    fresh = Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW))
    fresh.reconcile(body)
    assert len(api.pods) == want
    assert fresh.reconcile(body).created == []


# -- the config file ----------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_config_the_seeds_shape(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, """
provisioners:
  - kubernetes:
      namespace: anycloud
  - kubernetes:
      namespace: team-b
      agentConfigMap: team-b-agents
      gke: {project: my-proj, location: us-central1, cluster_name: c1}
  - static: {hosts: []}
other: kept for other readers
"""))
    assert config.config_maps() == {"anycloud": "anycloud-agent-config",
                                    "team-b": "team-b-agents"}
    assert config.context() == "gke_my-proj_us-central1_c1"


@pytest.mark.parametrize(("text", "field", "rule"), [
    ("provisioners: []", "provisioners", "must list a kubernetes provisioner"),
    ("provisioners:\n  - kubernetes: {}", "provisioners.0.kubernetes.namespace", "required"),
    ("provisioners:\n  - kubernetes: {namespace: Bad_NS}",
     "provisioners.0.kubernetes.namespace", "pattern"),
    ("provisioners:\n  - kubernetes: {namespace: a, nmespace: b}",
     "provisioners.0.kubernetes.nmespace", "not a field"),
    ("provisioners:\n  - kubernetes: {namespace: a}\n  - kubernetes: {namespace: a}",
     "provisioners", "once"),
    ("provisioners:\n  - kubernetes: {namespace: a, gke: {project: p, location: l, "
     "cluster_name: c}}\n  - kubernetes: {namespace: b, gke: {project: p, location: l, "
     "cluster_name: d}}", "provisioners[].kubernetes.gke", "one cluster"),
    ("- just a list", "config.yaml", "mapping"),
])
def test_config_refusals_name_field_and_rule(tmp_path: Path, text: str, field: str,
                                             rule: str) -> None:
    with pytest.raises(InvalidInput) as err:
        load_config(write(tmp_path, text))
    assert err.value.field is not None and err.value.field.endswith(field)
    assert rule in str(err.value.rule)


def test_operator_command_refuses_a_bad_config_with_exit_2(tmp_path: Path) -> None:
    from automation.cli import cli

    path = write(tmp_path, "provisioners: []")
    done = CliRunner().invoke(cli, ["--home", str(tmp_path), "operator", "--config",
                                    str(path), "--json"])
    assert done.exit_code == 2, done.output
    assert "must list a kubernetes provisioner" in done.output
    missing = CliRunner().invoke(cli, ["--home", str(tmp_path), "operator", "--config",
                                       str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "readable" in missing.output
