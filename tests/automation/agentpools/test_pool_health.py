"""The AgentPool's status never says healthy while nothing works: pod problems as conditions
(automation/agentpools/health.py) through one operator pass over the in-memory API."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from automation.agentpools.autoscaler import Worker
from automation.agentpools.health import REGISTER_GRACE, TYPES, problems
from automation.agentpools.kubeapi import AdmissionRefused
from automation.agentpools.reconcile import Reconciler
from automation.clock import ManualClock
from tests.automation.agentpools.test_reconcile import NOW, FakeApi, FakeState, pool_body

STAMP = NOW.strftime("%Y-%m-%dT%H:%M:%SZ")


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def set_status(api: FakeApi, **status: Any) -> None:
    for pod in api.pods.values():
        pod["status"] = status


def waiting(reason: str, message: str = "", **extra: Any) -> dict[str, Any]:
    return {"phase": "Pending", "containerStatuses": [{
        "name": "agent", "image": "registry.example/agent:nope", "ready": False,
        "state": {"waiting": {"reason": reason, "message": message}}, **extra}]}


def ready_pod() -> dict[str, Any]:
    return {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True", "lastTransitionTime": STAMP}]}


def two_passes(api: FakeApi, state: FakeState, clock: ManualClock,
               status: dict[str, Any], later: timedelta = timedelta(seconds=10)
               ) -> dict[str, Any]:
    """A first pass makes the pods; they get ``status``; a second pass reports them."""
    pool = pool_body("shell-pool.yaml", minIdle=2, maxIdle=2, maxReplicas=2)
    r = Reconciler(api=api, state=state, clock=clock)
    r.reconcile(pool)
    assert len(api.pods) == 2
    set_status(api, **status)
    clock.advance(later)
    out = r.reconcile({**pool, "status": api.patches[-1]})
    return out.status


def test_image_pull_failure_is_not_ready_and_names_the_pods() -> None:
    api, clock = FakeApi(), ManualClock(NOW)
    status = two_passes(api, FakeState(), clock, waiting(
        "ImagePullBackOff", 'Back-off pulling image "registry.example/agent:nope"'))
    ready, pull = conditions(status)["Ready"], conditions(status)["ImagePullFailed"]
    assert (ready["status"], ready["reason"]) == ("False", "ImagePullFailed")
    assert pull["status"] == "True" and "cannot pull their image" in pull["message"]
    assert sorted(api.pods)[0] in pull["message"] or sorted(api.pods)[1] in pull["message"]
    assert "registry.example/agent:nope" in pull["message"] and "(and 1 more)" in pull["message"]
    assert status["idleSlots"] == 0 and status["readyReplicas"] == 0
    assert [e for e in api.events if e[0] == "Warning"] == [
        ("Warning", "ImagePullFailed", ready["message"])]
    for other in ("CrashLooping", "Unschedulable", "AgentsNotRegistering"):
        assert conditions(status)[other]["status"] == "False"


def test_crash_loop_quotes_the_last_exit() -> None:
    api = FakeApi()
    status = two_passes(api, FakeState(), ManualClock(NOW), waiting(
        "CrashLoopBackOff", "back-off 40s restarting failed container", restartCount=4,
        lastState={"terminated": {"exitCode": 2, "reason": "Error",
                                  "message": "--broker: no such host\n"}}))
    c = conditions(status)["CrashLooping"]
    assert c["status"] == "True"
    assert "restarted 4 times, last exit code 2 (Error): --broker: no such host" in c["message"]
    assert conditions(status)["Ready"]["reason"] == "CrashLooping"


def test_ready_pods_whose_agents_never_register_are_named_after_the_grace() -> None:
    api, clock = FakeApi(), ManualClock(NOW)
    state = FakeState()
    early = two_passes(api, state, clock, ready_pod(), later=REGISTER_GRACE - timedelta(seconds=1))
    assert conditions(early)["Ready"]["status"] == "True"
    assert conditions(early)["AgentsNotRegistering"]["status"] == "False"
    clock.advance(timedelta(seconds=1))
    pool = {**pool_body("shell-pool.yaml", minIdle=2, maxIdle=2, maxReplicas=2),
            "status": api.patches[-1]}
    late = Reconciler(api=api, state=state, clock=clock).reconcile(pool).status
    c = conditions(late)["AgentsNotRegistering"]
    assert c["status"] == "True" and "Ready for 60 s" in c["message"]
    assert "broker address" in c["message"]
    assert conditions(late)["Ready"]["reason"] == "AgentsNotRegistering"
    assert late["readyReplicas"] == 2 and late["idleSlots"] == 0  # Ready, yet serving nothing
    # Once the agents register, the pool is Ready and their slots count.
    state.workers_ = [Worker(name=n, created_at=NOW, state="ready", slots=1, idle_since=NOW)
                      for n in api.pods]
    clock.advance(timedelta(seconds=10))
    well = Reconciler(api=api, state=state, clock=clock).reconcile(
        {**pool, "status": late}).status
    assert conditions(well)["Ready"]["reason"] == "Reconciled"
    assert conditions(well)["AgentsNotRegistering"]["status"] == "False"
    assert well["idleSlots"] == 2
    assert ("Normal", "Reconciled", "the pool is as its spec asks again") in api.events


def test_admission_refusal_is_named_as_such_not_as_rbac() -> None:
    class Refusing(FakeApi):
        def create_pod(self, namespace: str, pod: dict[str, Any]) -> bool:
            raise AdmissionRefused("create", "pods", namespace, f'pods "{pod["metadata"]["name"]}"'
                                   ' is forbidden: violates PodSecurity "restricted:latest": '
                                   'privileged (container "agent" must not set '
                                   "securityContext.privileged=true)")

    api = Refusing()
    out = Reconciler(api=api, state=FakeState(), clock=ManualClock(NOW)).reconcile(pool_body())
    c = conditions(out.status)["Ready"]
    assert (c["status"], c["reason"]) == ("False", "AdmissionRefused")
    assert c["message"].startswith("PodSecurity admission refused `create` on `pods`")
    assert "RBAC" not in c["message"] and "pod-security.kubernetes.io/enforce" in c["message"]
    quota = AdmissionRefused("create", "pods", "ns", 'pods "x" is forbidden: exceeded quota: '
                             "q, requested: cpu=4, used: cpu=8, limited: cpu=10")
    assert quota.plugin == "ResourceQuota admission"
    runtime = AdmissionRefused("create", "pods", "ns", 'pod rejected: RuntimeClass "nvidia" '
                               "not found")
    assert runtime.plugin == "RuntimeClass admission"


def test_a_pod_being_deleted_has_no_problem_and_order_is_stable() -> None:
    pod = {"metadata": {"name": "p", "deletionTimestamp": STAMP},
           "status": waiting("ErrImagePull")}
    w = Worker(name="p", created_at=NOW, state="terminating")
    assert problems([pod], [w], NOW) == []
    assert TYPES == ("ImagePullFailed", "CrashLooping", "Unschedulable", "AgentsNotRegistering")
