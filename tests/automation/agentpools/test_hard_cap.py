"""maxReplicas is a hard cap on pods: a property over whole runs of the operator's pass.

A simulated pool (pods that take time to register and to terminate, agents whose heartbeats
stop during a control-plane outage, bursts of sessions, operator restarts) is driven by the
real ``Reconciler`` and ``decide``. At every step the pods that exist, terminating ones
included, never outnumber ``maxReplicas``. Before the cap counted every pod, a 40 s heartbeat
gap made every agent "unknown", none counted, and one pass doubled a full pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automation.agentpools.autoscaler import Worker
from automation.agentpools.reconcile import Reconciler
from automation.clock import ManualClock
from tests.automation.agentpools.test_reconcile import NOW, FakeApi, FakeState, pool_body

HEARTBEAT_TIMEOUT = timedelta(seconds=30)  # the registry's: older heartbeats read as unknown


@dataclass
class SlowApi(FakeApi):
    """Pods are made at the clock's time and, once deleted, linger ``grace`` seconds as
    terminating (deletionTimestamp set), as the kubelet's graceful stop makes them."""

    clock: ManualClock = field(default_factory=lambda: ManualClock(NOW))
    grace: int = 30
    deleted_at: dict[str, datetime] = field(default_factory=dict)

    def create_pod(self, namespace: str, pod: dict[str, Any]) -> bool:
        made = super().create_pod(namespace, pod)
        if made:
            self.pods[pod["metadata"]["name"]]["metadata"]["creationTimestamp"] = \
                self.clock.now().isoformat()
        return made

    def delete_pod(self, namespace: str, name: str, uid: str) -> bool:
        pod = self.pods.get(name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return False
        if name not in self.deleted_at:
            self.deleted_at[name] = self.clock.now()
            pod["metadata"]["deletionTimestamp"] = self.clock.now().isoformat()
        return True

    def settle(self) -> None:
        for name, when in list(self.deleted_at.items()):
            if self.clock.now() - when >= timedelta(seconds=self.grace):
                self.pods.pop(name, None)
                del self.deleted_at[name]


@dataclass
class Agent:
    slots: int
    busy: int = 0
    heard: datetime = NOW  # the broker's last heartbeat from it
    idle_since: datetime | None = NOW


@dataclass
class Broker(FakeState):
    """The broker's view: pods register ``startup`` s after creation; during an outage no
    heartbeat arrives, so agents read as unknown after HEARTBEAT_TIMEOUT."""

    clock: ManualClock = field(default_factory=lambda: ManualClock(NOW))
    agents: dict[str, Agent] = field(default_factory=dict)

    def workers(self, pool: str, now: datetime) -> list[Worker]:
        out = []
        for name, a in sorted(self.agents.items()):
            silent = now - a.heard >= HEARTBEAT_TIMEOUT
            out.append(Worker(name=name, created_at=NOW, state="unknown" if silent else "ready",
                              slots=a.slots, busy_slots=a.busy,
                              idle_since=a.idle_since if a.busy == 0 else None,
                              unknown_since=a.heard if silent else None))
        return out

    def pending_sessions(self, pool: str) -> int:
        return self.pending

    def retire_if_idle(self, pool: str, pod: str) -> bool:
        a = self.agents.get(pod)
        if a is not None and a.busy:
            return False
        self.agents.pop(pod, None)
        return True

    def forget_pod(self, pool: str, pod: str, reason: str) -> None:
        self.agents.pop(pod, None)


def step(api: SlowApi, broker: Broker, *, outage: bool, startup: int, slots: int,
         ended: int) -> None:
    """One tick of the world between two passes."""
    now = api.clock.now()
    api.settle()
    for name in list(broker.agents):
        if name not in api.pods:
            broker.agents.pop(name)  # its pod is gone: the agent went with it
    for name, pod in api.pods.items():
        made = datetime.fromisoformat(pod["metadata"]["creationTimestamp"])
        if pod["metadata"].get("deletionTimestamp") or now - made < timedelta(seconds=startup):
            continue
        if name not in broker.agents and not outage:
            broker.agents[name] = Agent(slots=slots, heard=now, idle_since=now)
        elif name in broker.agents and not outage:
            broker.agents[name].heard = now
    for a in broker.agents.values():  # sessions end, then waiting ones take free slots
        done = min(a.busy, ended)
        a.busy -= done
        if done and a.busy == 0:
            a.idle_since = now
    if not outage:
        for a in broker.agents.values():
            took = min(broker.pending, a.slots - a.busy)
            if took and now - a.heard < HEARTBEAT_TIMEOUT:
                a.busy += took
                a.idle_since = None
                broker.pending -= took


events = st.lists(st.fixed_dictionaries({
    "tick": st.integers(1, 40),
    "outage": st.booleans(),          # no heartbeats this tick (a control-plane restart)
    "burst": st.integers(0, 12),      # new sessions waiting
    "ended": st.integers(0, 2),       # sessions each agent finishes
    "restart": st.booleans(),         # a fresh operator process: nothing remembered
}), min_size=5, max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(max_replicas=st.integers(1, 8), min_idle=st.integers(0, 4), slots=st.integers(1, 3),
       startup=st.integers(0, 60), kill=st.integers(20, 120), grace=st.integers(0, 60),
       run=events)
def test_pods_never_exceed_max_replicas(max_replicas: int, min_idle: int, slots: int,
                                        startup: int, kill: int, grace: int,
                                        run: list[dict[str, Any]]) -> None:
    clock = ManualClock(NOW)
    api = SlowApi(clock=clock, grace=grace)
    broker = Broker(clock=clock)
    pool = pool_body(minReplicas=0, maxReplicas=max_replicas, minIdle=min(min_idle,
                     max_replicas), maxIdle=max(min_idle, 4), killUnknownAfterSecond=kill,
                     idleDecaySecond=30, defaultSlotsPerAgent=slots)
    reconciler = Reconciler(api=api, state=broker, clock=clock)
    for e in run:
        clock.advance(timedelta(seconds=e["tick"]))
        broker.pending += e["burst"]
        step(api, broker, outage=e["outage"], startup=startup, slots=slots, ended=e["ended"])
        if e["restart"]:
            reconciler = Reconciler(api=api, state=broker, clock=clock)
        reconciler.reconcile(pool)
        assert len(api.pods) <= max_replicas, (
            f"{len(api.pods)} pods for maxReplicas {max_replicas}: "
            f"{sorted(api.pods)}; agents {broker.agents}")
