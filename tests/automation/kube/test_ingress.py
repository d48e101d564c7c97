"""The ingress release view: raw objects -> IngressRelease (pure), the adapter against the
real control plane (``control_plane``: the objects are really created and the Job, DaemonSet
and scheduler controllers and kwok act on them), and the simulator's staging.

The builders below are real-shaped Kubernetes JSON for a pool's ingress release, for the pure
view and the simulator: the K3s HelmChart, the helm-controller's install Job and its Pods, the
Traefik DaemonSet and core/v1 Events (tests/automation/test_ingress_status.py uses them too).
The local JSON server stays only for a fault a real API server will not produce on demand:
a 500 from etcd.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from automation.clock import ManualClock
from automation.devcluster.control_plane import ControlPlane
from automation.kube.adapter import KubernetesCluster
from automation.kube.ingress import event_time, ingress_release, unavailable
from automation.kube.port import (
    HELM_NAMESPACE,
    ClusterForbidden,
    ClusterUnavailable,
    IngressObjects,
    ObservedNode,
    ingress_release_name,
)
from automation.models import HelmJob, IngressDaemonSet, IngressRelease
from automation.simulators.cluster import Access, SimulatedCluster
from tests.automation.kube import objects as kube_objects
from tests.automation.kube.conftest import Recorder
from tests.automation.kube.ingress_objects import plain_node, pool_release
from tests.automation.kube.objects import wait_for
from tests.automation.kube_api_server import FakeKubeApi, status, write_kubeconfig

POOL = "np-web1"
RELEASE = "anycloud-ingress-np-web1"
JOB = f"helm-install-{RELEASE}"
LABELS = {"app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/cluster": "c-1",
          "anycloud.sh/node-pool": POOL}


def helm_chart_json(job_name: str | None = JOB) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
        "metadata": {"name": RELEASE, "namespace": "kube-system", "generation": 1,
                     "uid": "1d0a6a43-8c44-4b5e-9d1e-0e0c2b6f0a11",
                     "resourceVersion": "90211", "creationTimestamp": "2026-07-01T11:58:00Z",
                     "labels": LABELS,
                     "finalizers": ["wrangler.cattle.io/on-helm-chart-remove"]},
        "spec": {"repo": "https://traefik.github.io/charts", "chart": "traefik",
                 "version": "37.1.1", "targetNamespace": RELEASE, "createNamespace": True,
                 "valuesContent": "deployment:\n  kind: DaemonSet\n"},
    }
    if job_name is not None:
        obj["status"] = {"jobName": job_name, "conditions": [
            {"type": "JobCreated", "status": "True", "reason": "Job created",
             "message": f"Applying HelmChart using Job kube-system/{job_name}"}]}
    return obj


def job_json(*, complete: bool = False, failed: bool = False, active: int = 0,
             name: str = JOB) -> dict[str, Any]:
    conditions: list[dict[str, Any]] = []
    status: dict[str, Any] = {"startTime": "2026-07-01T11:58:01Z", "ready": 0,
                              "terminating": 0, "uncountedTerminatedPods": {}}
    if active:
        status["active"] = active
    if complete:
        conditions = [
            {"type": "SuccessCriteriaMet", "status": "True",
             "lastProbeTime": "2026-07-01T11:58:40Z",
             "lastTransitionTime": "2026-07-01T11:58:40Z"},
            {"type": "Complete", "status": "True", "lastProbeTime": "2026-07-01T11:58:40Z",
             "lastTransitionTime": "2026-07-01T11:58:40Z"}]
        status.update(succeeded=1, completionTime="2026-07-01T11:58:40Z")
    if failed:
        conditions = [
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit",
             "lastProbeTime": "2026-07-01T12:30:00Z",
             "lastTransitionTime": "2026-07-01T12:30:00Z"},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit",
             "lastProbeTime": "2026-07-01T12:30:00Z",
             "lastTransitionTime": "2026-07-01T12:30:00Z"}]
        status["failed"] = 1
    if conditions:
        status["conditions"] = conditions
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "kube-system", "generation": 1,
                     "uid": "5b1f0c9e-0a7d-4a43-b0f4-7c9e2f1d3a22",
                     "creationTimestamp": "2026-07-01T11:58:01Z",
                     "labels": {"helmcharts.helm.cattle.io/chart": RELEASE,
                                "objectset.rio.cattle.io/hash": "0c5b1a8e"}},
        "spec": {"backoffLimit": 1000, "completions": 1, "parallelism": 1,
                 "template": {"spec": {"restartPolicy": "OnFailure", "containers": [
                     {"name": "helm", "image": "rancher/klipper-helm:v0.9.8-build20250709",
                      "args": ["install"]}]}}},
        "status": status,
    }


def pod_json(suffix: str, container: dict[str, Any], *,
             created: str = "2026-07-01T11:58:01Z", phase: str = "Running") -> dict[str, Any]:
    """A Pod of the install Job; ``container`` is the helm container's status fields."""
    name = f"{JOB}-{suffix}"
    return {
        "metadata": {"name": name, "namespace": "kube-system", "creationTimestamp": created,
                     "uid": f"7e0c{suffix}-0000-4000-8000-000000000000",
                     "labels": {"batch.kubernetes.io/job-name": JOB, "job-name": JOB,
                                "batch.kubernetes.io/controller-uid":
                                    "5b1f0c9e-0a7d-4a43-b0f4-7c9e2f1d3a22"},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": JOB,
                                          "uid": "5b1f0c9e-0a7d-4a43-b0f4-7c9e2f1d3a22",
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"nodeName": "k3s-server", "restartPolicy": "OnFailure",
                 "containers": [{"name": "helm", "image": "rancher/klipper-helm"}]},
        "status": {"phase": phase, "startTime": created, "containerStatuses": [
            {"name": "helm", "image": "docker.io/rancher/klipper-helm:v0.9.8-build20250709",
             "imageID": "docker.io/rancher/klipper-helm@sha256:0b1c", "ready": False,
             "started": False, "restartCount": 0, **container}]},
    }


RUNNING = {"state": {"running": {"startedAt": "2026-07-01T11:58:05Z"}}, "ready": True,
           "started": True}
CRASH_LOOP = {
    "state": {"waiting": {"reason": "CrashLoopBackOff",
                          "message": "back-off 40s restarting failed container=helm"}},
    "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                 "startedAt": "2026-07-01T11:59:00Z",
                                 "finishedAt": "2026-07-01T11:59:07Z",
                                 "containerID": "containerd://9a"}},
    "restartCount": 3,
}
TERMINATED_OK = {"state": {"terminated": {"exitCode": 0, "reason": "Completed",
                                          "startedAt": "2026-07-01T11:58:05Z",
                                          "finishedAt": "2026-07-01T11:58:38Z"}}}


def daemon_set_json(desired: int = 1, ready: int = 1, name: str = RELEASE,
                    labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": RELEASE, "generation": 1,
                     "creationTimestamp": "2026-07-01T11:58:30Z",
                     "labels": {"app.kubernetes.io/instance": f"{RELEASE}-{RELEASE}",
                                "app.kubernetes.io/managed-by": "Helm",
                                "app.kubernetes.io/name": "traefik", "helm.sh/chart":
                                "traefik-37.1.1", **(LABELS if labels is None else labels)},
                     "annotations": {"deprecated.daemonset.template.generation": "1",
                                     "meta.helm.sh/release-name": RELEASE,
                                     "meta.helm.sh/release-namespace": RELEASE}},
        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "traefik"}},
                 "template": {"spec": {"nodeSelector": {"anycloud.sh/ingress-entry": POOL}}}},
        "status": {"currentNumberScheduled": desired, "desiredNumberScheduled": desired,
                   "numberAvailable": ready, "numberMisscheduled": 0, "numberReady": ready,
                   "observedGeneration": 1, "updatedNumberScheduled": desired},
    }


def event_json(namespace: str, kind: str, name: str, reason: str, message: str, at: str, *,
               type_: str = "Normal", seq: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{name}.18{seq:014x}", "namespace": namespace,
                     "creationTimestamp": at, "resourceVersion": str(90000 + seq)},
        "involvedObject": {"kind": kind, "namespace": namespace, "name": name,
                           "apiVersion": "batch/v1" if kind == "Job" else "v1"},
        "reason": reason, "message": message, "type": type_, "count": 1,
        "firstTimestamp": at, "lastTimestamp": at,
        "source": {"component": "job-controller" if kind == "Job" else "kubelet"},
        "reportingComponent": "", "reportingInstance": "",
    }


CHART_PATH = f"/apis/helm.cattle.io/v1/namespaces/kube-system/helmcharts/{RELEASE}"
JOB_PATH = f"/apis/batch/v1/namespaces/kube-system/jobs/{JOB}"
PODS_PATH = "/api/v1/namespaces/kube-system/pods"
SYSTEM_EVENTS = "/api/v1/namespaces/kube-system/events"


def entry_node(ready: bool) -> ObservedNode:
    return ObservedNode(name="anycloud-a-1", labels={"anycloud.sh/ingress-entry": POOL},
                        ready=ready, gpu_allocatable=0, unschedulable=False, created_at=None)


def objects(**kw: Any) -> IngressObjects:
    kw.setdefault("helm_chart", helm_chart_json())
    for key in ("pods", "daemon_sets", "entry_nodes", "events"):
        kw[key] = tuple(kw.get(key, ()))
    return IngressObjects(pool_id=POOL, release=RELEASE, **kw)


# -- names -----------------------------------------------------------------------------------


def test_names_match_the_traefik_component() -> None:
    from components import traefik

    for pool in (POOL, "np-Web_2", "np-" + "x" * 60):
        assert ingress_release_name(pool) == traefik.release_name(pool)
    assert ingress_release_name(POOL) == RELEASE
    assert traefik.HELM_NAMESPACE == HELM_NAMESPACE


# -- states ----------------------------------------------------------------------------------


def test_absent_without_a_helm_chart() -> None:
    release = ingress_release(IngressObjects(pool_id=POOL, release=RELEASE))
    assert release == IngressRelease(state="absent", helm_job=None, daemon_set=None,
                                     last_event=None)


def test_installing_before_the_job_exists() -> None:
    release = ingress_release(objects(helm_chart=helm_chart_json(job_name=None)))
    assert release.state == "installing"
    assert release.helm_job == HelmJob(phase="pending", message=None)
    assert release.daemon_set is None


def test_installing_while_the_install_container_runs() -> None:
    release = ingress_release(objects(job=job_json(active=1),
                                      pods=[pod_json("x1a2b", RUNNING)]))
    assert release.state == "installing"
    assert release.helm_job == HelmJob(phase="running")


def test_installed_once_the_job_completed() -> None:
    release = ingress_release(objects(job=job_json(complete=True),
                                      pods=[pod_json("x1a2b", TERMINATED_OK,
                                                     phase="Succeeded")]))
    assert release.state == "installed"
    assert release.helm_job == HelmJob(phase="succeeded", message=None)


def test_failed_while_the_controller_retries_a_non_zero_exit() -> None:
    release = ingress_release(objects(job=job_json(active=1),
                                      pods=[pod_json("x1a2b", CRASH_LOOP)]))
    assert release.state == "failed"
    assert release.helm_job == HelmJob(phase="retrying", message="exit code 1")


def test_failed_job_names_the_install_containers_exit() -> None:
    oom = {"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
    release = ingress_release(objects(job=job_json(failed=True),
                                      pods=[pod_json("x1a2b", oom, phase="Failed")]))
    assert release.state == "failed"
    assert release.helm_job == HelmJob(phase="failed", message="exit code 137 (OOMKilled)")


def test_failed_job_without_pods_gives_its_condition() -> None:
    release = ingress_release(objects(job=job_json(failed=True)))
    assert release.state == "failed"
    assert release.helm_job is not None
    assert release.helm_job.message == (
        "BackoffLimitExceeded: Job has reached the specified backoff limit")


def test_the_newest_pod_decides() -> None:
    old = pod_json("old01", {"state": {"terminated": {"exitCode": 1, "reason": "Error"}}},
                   created="2026-07-01T11:58:01Z", phase="Failed")
    new = pod_json("new02", RUNNING, created="2026-07-01T11:59:30Z")
    release = ingress_release(objects(job=job_json(active=1), pods=[new, old]))
    assert release.state == "installing"
    assert release.helm_job == HelmJob(phase="running")
    # and the other way round: a fresh failure after an earlier success-less run
    failed_new = pod_json("new02", {"state": {"terminated": {"exitCode": 1}}},
                          created="2026-07-01T11:59:30Z", phase="Failed")
    old_running = pod_json("old01", RUNNING)
    assert ingress_release(objects(job=job_json(active=1), pods=[old_running, failed_new])
                           ).state == "failed"


def test_zero_exit_is_no_message() -> None:
    waiting = {"state": {"waiting": {"reason": "ContainerCreating"}},
               "lastState": {"terminated": {"exitCode": 0}}}
    release = ingress_release(objects(job=job_json(active=1),
                                      pods=[pod_json("x1a2b", waiting, phase="Pending")]))
    assert release.helm_job == HelmJob(phase="running")


# -- the DaemonSet ---------------------------------------------------------------------------


def test_daemon_set_null_until_helm_created_it() -> None:
    assert ingress_release(objects(job=job_json(complete=True))).daemon_set is None


@pytest.mark.parametrize(("nodes", "entry_ready"), [
    ([entry_node(True)], True), ([entry_node(False)], False), ([], False),
])
def test_daemon_set_counts_and_entry_node(nodes: list[ObservedNode], entry_ready: bool) -> None:
    release = ingress_release(objects(job=job_json(complete=True),
                                      daemon_sets=[daemon_set_json(desired=1, ready=0)],
                                      entry_nodes=nodes))
    assert release.daemon_set == IngressDaemonSet(desired=1, ready=0,
                                                  entry_node_ready=entry_ready)


def test_daemon_set_labelled_for_the_pool_is_preferred() -> None:
    other = daemon_set_json(desired=3, ready=3, name="aaa-other", labels={})
    ours = daemon_set_json(desired=1, ready=1)
    release = ingress_release(objects(job=job_json(complete=True), daemon_sets=[other, ours],
                                      entry_nodes=[entry_node(True)]))
    assert release.daemon_set == IngressDaemonSet(desired=1, ready=1, entry_node_ready=True)


def test_daemon_set_without_status_counts_zero() -> None:
    bare = daemon_set_json()
    del bare["status"]
    release = ingress_release(objects(job=job_json(complete=True), daemon_sets=[bare]))
    assert release.daemon_set == IngressDaemonSet(desired=0, ready=0, entry_node_ready=False)


# -- lastEvent -------------------------------------------------------------------------------


def test_last_event_is_the_newest_on_the_job_and_its_pods() -> None:
    pod = pod_json("x1a2b", CRASH_LOOP)
    events = [
        event_json("kube-system", "Job", JOB, "SuccessfulCreate",
                   f"Created pod: {JOB}-x1a2b", "2026-07-01T11:58:01Z", seq=1),
        event_json("kube-system", "Pod", f"{JOB}-x1a2b", "BackOff",
                   "Back-off restarting failed container helm in pod",
                   "2026-07-01T11:59:20Z", type_="Warning", seq=2),
        # newer, but about something else in kube-system
        event_json("kube-system", "Pod", "coredns-7b98449c4-abcde", "Unhealthy",
                   "Readiness probe failed", "2026-07-01T12:05:00Z", seq=3),
        event_json("kube-system", "Job", "helm-install-traefik", "Completed",
                   "Job completed", "2026-07-01T12:06:00Z", seq=4),
        event_json("kube-system", "Pod", f"{JOB}-x1a2b", "Pulled",
                   "Container image already present", "2026-07-01T11:59:00Z", seq=5),
    ]
    release = ingress_release(objects(job=job_json(active=1), pods=[pod], events=events))
    assert release.last_event == "BackOff: Back-off restarting failed container helm in pod"


def test_last_event_counts_pods_of_earlier_tries() -> None:
    events = [
        event_json("kube-system", "Job", JOB, "SuccessfulCreate", "Created pod",
                   "2026-07-01T11:58:01Z", seq=1),
        event_json("kube-system", "Pod", f"{JOB}-gone1", "Failed",
                   "Error: ImagePullBackOff", "2026-07-01T11:58:30Z", type_="Warning", seq=2),
    ]
    release = ingress_release(objects(job=job_json(active=1), events=events))
    assert release.last_event == "Failed: Error: ImagePullBackOff"


def test_last_event_in_the_release_namespace_once_the_daemon_set_exists() -> None:
    events = [
        event_json(RELEASE, "DaemonSet", RELEASE, "SuccessfulCreate",
                   f"Created pod: {RELEASE}-4kq9z", "2026-07-01T11:58:31Z", seq=1),
        event_json(RELEASE, "Pod", f"{RELEASE}-4kq9z", "FailedScheduling",
                   "0/3 nodes are available: 1 node(s) had untolerated taint",
                   "2026-07-01T11:58:32Z", type_="Warning", seq=2),
    ]
    release = ingress_release(objects(job=job_json(complete=True),
                                      daemon_sets=[daemon_set_json(ready=0)], events=events))
    assert release.last_event == (
        "FailedScheduling: 0/3 nodes are available: 1 node(s) had untolerated taint")


def test_last_event_none_without_events() -> None:
    assert ingress_release(objects(job=job_json(active=1))).last_event is None


def test_event_time_takes_whichever_field_is_set() -> None:
    modern = event_json("kube-system", "Job", JOB, "Started", "x", "2026-07-01T11:00:00Z")
    modern.update(lastTimestamp=None, firstTimestamp=None,
                  eventTime="2026-07-01T12:10:00.123456Z")
    series = event_json("kube-system", "Job", JOB, "BackOff", "y", "2026-07-01T11:00:00Z")
    series["series"] = {"count": 4, "lastObservedTime": "2026-07-01T12:20:00.000001Z"}
    assert event_time(modern) == datetime(2026, 7, 1, 12, 10, 0, 123456, tzinfo=UTC)
    assert event_time(series) > event_time(modern)
    release = ingress_release(objects(job=job_json(active=1), events=[series, modern]))
    assert release.last_event == "BackOff: y"


def test_last_event_within_one_second_is_the_last_written() -> None:
    """The scheduler's Event carries microseconds, the kubelet's (legacy) whole seconds: in
    the same second the one the API server wrote last (resourceVersion) is the newer, not
    the one its list (ordered by name) gives last."""
    pod = f"{JOB}-x1a2b"
    scheduled = event_json("kube-system", "Pod", pod, "Scheduled", "assigned", "", seq=7)
    scheduled.update(lastTimestamp=None, firstTimestamp=None,
                     eventTime="2026-07-01T11:58:01.734211Z")
    backoff = event_json("kube-system", "Pod", pod, "BackOff", "restarting",
                         "2026-07-01T11:58:01Z", type_="Warning", seq=9)
    created = event_json("kube-system", "Job", JOB, "SuccessfulCreate", "Created pod",
                         "2026-07-01T11:58:01Z", seq=3)
    for listed in ([backoff, scheduled, created], [created, scheduled, backoff]):
        release = ingress_release(objects(job=job_json(active=1), events=listed))
        assert release.last_event == "BackOff: restarting"
    later = event_json("kube-system", "Job", JOB, "Completed", "done", "2026-07-01T11:58:02Z",
                       seq=1)  # a later second wins whatever its resourceVersion
    assert ingress_release(objects(job=job_json(active=1), events=[later, backoff])
                           ).last_event == "Completed: done"


def test_unavailable_note() -> None:
    release = unavailable("cannot reach https://203.0.113.10:6443 (get helmcharts/x): refused")
    assert release.state is None and release.helm_job is None and release.daemon_set is None
    # The model shows no endpoint, whoever built it (automation.models.ShownText).
    assert release.last_event == (
        "cluster unavailable: cannot reach <endpoint> (get helmcharts/x): refused")


def test_json_keys_are_camel_case() -> None:
    release = ingress_release(objects(job=job_json(active=1),
                                      pods=[pod_json("x1a2b", CRASH_LOOP)],
                                      daemon_sets=[daemon_set_json(desired=1, ready=0)],
                                      entry_nodes=[entry_node(False)]))
    assert release.model_dump(mode="json") == {
        "state": "failed", "helmJob": {"phase": "retrying", "message": "exit code 1"},
        "daemonSet": {"desired": 1, "ready": 0, "entryNodeReady": False}, "lastEvent": None,
    }


# -- the adapter against the real control plane ----------------------------------------------
# Each test works on a pool id of its own; the objects are really created on the API server,
# and the Job, DaemonSet and scheduler controllers and kwok act on them (see ingress_objects).


def api_paths(pool_id: str) -> dict[str, str]:
    """The paths the adapter reads for a pool's release."""
    release = ingress_release_name(pool_id)
    return {"chart": f"/apis/helm.cattle.io/v1/namespaces/kube-system/helmcharts/{release}",
            "job": f"/apis/batch/v1/namespaces/kube-system/jobs/helm-install-{release}",
            "pods": PODS_PATH, "daemonsets": f"/apis/apps/v1/namespaces/{release}/daemonsets",
            "nodes": "/api/v1/nodes", "system events": SYSTEM_EVENTS,
            "release events": f"/api/v1/namespaces/{release}/events"}


def requested(sent: Recorder, pool_id: str) -> list[str]:
    """The requests sent, as the names of ``api_paths`` (all GETs)."""
    names = {path: name for name, path in api_paths(pool_id).items()}
    assert {c.method for c in sent.calls} == {"GET"}
    return [names.get(c.path, c.path) for c in sent.calls]


@pytest.mark.kube
def test_adapter_reads_only_the_helm_chart_when_absent(kube: KubernetesCluster, sent: Recorder,
                                                       suffix: str) -> None:
    pool = f"np-{suffix}"
    found = kube.ingress_objects(pool)
    assert found == IngressObjects(pool_id=pool, release=ingress_release_name(pool))
    assert requested(sent, pool) == ["chart"]
    assert ingress_release(found).state == "absent"


@pytest.mark.kube
def test_adapter_before_the_daemon_set(control_plane: ControlPlane, kube: KubernetesCluster,
                                       sent: Recorder, suffix: str) -> None:
    """The install Pod runs on a Node the test plays the kubelet of: its helm container
    exits 1 and waits in CrashLoopBackOff; the Job controller keeps the Job active."""
    pool, server = f"np-{suffix}", f"server-{suffix}"
    with pool_release(control_plane, pool, server) as rel:
        plain_node(control_plane, server)
        rel.helm_chart()
        rel.install_job(server)
        pod = rel.bound_pod()["metadata"]["name"]
        wait_for("the Job controller's SuccessfulCreate event",
                 lambda: rel.has_event("SuccessfulCreate", rel.job))
        wait_for("the scheduler's Scheduled event", lambda: rel.has_event("Scheduled", pod))
        rel.kubelet_status(pod, CRASH_LOOP)
        wait_for("the Job to count the Pod active",
                 lambda: (rel.job_object().get("status") or {}).get("active") == 1)
        rel.event("Pod", pod, "BackOff", "Back-off restarting failed container helm in pod",
                  type_="Warning", host=server)
        sent.clear()
        found = kube.ingress_objects(pool)

    assert requested(sent, pool) == ["chart", "job", "pods", "daemonsets", "system events"]
    assert sent.calls[2].query["labelSelector"] == [f"batch.kubernetes.io/job-name={rel.job}"]
    assert found.helm_chart is not None and found.helm_chart["kind"] == "HelmChart"
    assert found.helm_chart["status"]["jobName"] == rel.job
    assert found.job is not None and found.job["metadata"]["name"] == rel.job
    assert [p["metadata"]["name"] for p in found.pods] == [pod]
    assert found.daemon_sets == () and found.entry_nodes == ()
    reasons = {(e["involvedObject"]["name"], e["reason"]) for e in found.events}
    assert {(rel.job, "SuccessfulCreate"), (pod, "Scheduled"), (pod, "BackOff")} <= reasons
    release = ingress_release(found)
    assert release.state == "failed"
    assert release.helm_job == HelmJob(phase="retrying", message="exit code 1")
    # The kubelet's Event is the newest, even in the second the scheduler's (timed to the
    # microsecond) was written in.
    assert release.last_event == "BackOff: Back-off restarting failed container helm in pod"


@pytest.mark.kube
def test_adapter_job_failed_past_its_backoff_limit(control_plane: ControlPlane,
                                                   kube: KubernetesCluster,
                                                   suffix: str) -> None:
    """Once the install container restarted backoffLimit times the Job controller fails the
    Job and deletes its Pod. No kubelet confirms that deletion, so the Job carries
    FailureTarget (not yet Failed) and the terminating Pod still tells the exit."""
    pool, server = f"np-{suffix}", f"server-{suffix}"
    with pool_release(control_plane, pool, server) as rel:
        plain_node(control_plane, server)
        rel.helm_chart()
        rel.install_job(server, backoff_limit=3)
        pod = rel.bound_pod()["metadata"]["name"]
        rel.kubelet_status(pod, CRASH_LOOP)  # restartCount 3
        wait_for("the Job controller to fail the Job",
                 lambda: rel.job_condition("FailureTarget"))
        wait_for("the Job controller's SuccessfulDelete event",
                 lambda: rel.has_event("SuccessfulDelete", rel.job))
        found = kube.ingress_objects(pool)

    assert found.job is not None
    conditions = {c["type"]: c for c in found.job["status"]["conditions"]}
    assert conditions["FailureTarget"]["reason"] == "BackoffLimitExceeded"
    assert "Failed" not in conditions
    (terminating,) = found.pods
    assert terminating["metadata"]["deletionTimestamp"]
    release = ingress_release(found)
    assert release.state == "failed"
    assert release.helm_job == HelmJob(phase="failed", message="exit code 1")
    assert release.last_event == f"SuccessfulDelete: Deleted pod: {pod}"


@pytest.mark.kube
def test_adapter_once_the_daemon_set_exists(control_plane: ControlPlane,
                                            kube: KubernetesCluster, sent: Recorder,
                                            suffix: str) -> None:
    """kwok plays every kubelet: the install Pod runs and succeeds, the Job completes, and
    the DaemonSet's Pod on the entry Node goes Ready."""
    pool, server = f"np-{suffix}", f"server-{suffix}"
    entry, other = f"anycloud-{suffix}-a1", f"anycloud-{suffix}-a2"
    with pool_release(control_plane, pool, server, entry, other) as rel:
        kube_objects.node(control_plane, server)
        kube_objects.node(control_plane, entry, {"anycloud.sh/node-pool": pool,
                                                 "anycloud.sh/ingress-entry": pool})
        plain_node(control_plane, other, {"anycloud.sh/node-pool": pool})
        rel.helm_chart()
        rel.install_job(server)
        rel.traefik()  # what Helm creates while the install Pod runs
        wait_for("the install Job to complete", lambda: rel.job_condition("Complete"))
        wait_for("the Traefik Pod to be Ready",
                 lambda: rel.daemon_set_status().get("numberReady") == 1)
        traefik = wait_for("the scheduler's Scheduled event for the Traefik Pod", lambda: [
            e["involvedObject"]["name"] for e in rel.events(rel.release)
            if e["reason"] == "Scheduled"])[0]
        rel.event("Pod", traefik, "Started", "Started container traefik",
                  namespace=rel.release, host=entry)
        sent.clear()
        found = kube.ingress_objects(pool)

    assert requested(sent, pool) == ["chart", "job", "pods", "daemonsets", "nodes",
                                     "release events"]
    assert sent.calls[4].query["labelSelector"] == [f"anycloud.sh/ingress-entry={pool}"]
    assert [n.name for n in found.entry_nodes] == [entry]
    assert [p["status"]["phase"] for p in found.pods] == ["Succeeded"]
    assert [d["metadata"]["name"] for d in found.daemon_sets] == [rel.release]
    assert {e["metadata"]["namespace"] for e in found.events} == {rel.release}
    assert ingress_release(found) == IngressRelease(
        state="installed", helm_job=HelmJob(phase="succeeded"),
        daemon_set=IngressDaemonSet(desired=1, ready=1, entry_node_ready=True),
        last_event="Started: Started container traefik")


@pytest.mark.kube
def test_adapter_job_not_created_yet(control_plane: ControlPlane, kube: KubernetesCluster,
                                     sent: Recorder, suffix: str) -> None:
    pool = f"np-{suffix}"
    with pool_release(control_plane, pool) as rel:
        rel.helm_chart(job_created=False)
        found = kube.ingress_objects(pool)  # the Job 404s, the lists are empty: no error
    assert requested(sent, pool) == ["chart", "job", "pods", "daemonsets", "system events"]
    assert found.helm_chart is not None and "status" not in found.helm_chart
    assert found.job is None and found.pods == ()
    release = ingress_release(found)  # kube-system's other Events are not about this Job
    assert release == IngressRelease(state="installing", helm_job=HelmJob(phase="pending"))


@pytest.mark.kube
def test_adapter_rbac_denial_names_the_request(control_plane: ControlPlane, tmp_path: Path,
                                               suffix: str) -> None:
    """As a ServiceAccount that may get one pool's HelmChart and nothing else."""
    granted, other = f"np-{suffix}", f"np-{suffix}-other"
    namespace, role = f"ingress-rbac-{suffix}", f"anycloud-test-ingress-{suffix}"
    account = f"system:serviceaccount:{namespace}:reader"
    path = control_plane.token_kubeconfig(tmp_path / "kubeconfig", "reader", namespace)
    restricted = KubernetesCluster(path, timeout_seconds=10)
    try:
        control_plane.kubectl("create", "role", role, "-n", HELM_NAMESPACE, "--verb=get",
                              "--resource=helmcharts.helm.cattle.io",
                              f"--resource-name={ingress_release_name(granted)}")
        control_plane.kubectl("create", "rolebinding", role, "-n", HELM_NAMESPACE,
                              f"--role={role}", f"--serviceaccount={namespace}:reader")
        wait_for("the authorizer to see the grant", lambda: control_plane.kubectl(
            "auth", "can-i", "get",
            f"helmcharts.helm.cattle.io/{ingress_release_name(granted)}", "-n",
            HELM_NAMESPACE, f"--as={account}", check=False).stdout.strip() == "yes")
        with pool_release(control_plane, granted) as rel:
            rel.helm_chart()
            with pytest.raises(ClusterForbidden) as chart_denied:
                restricted.ingress_objects(other)
            with pytest.raises(ClusterForbidden) as job_denied:
                restricted.ingress_objects(granted)
    finally:
        restricted.close()
        control_plane.kubectl("delete", "rolebinding,role", role, "-n", HELM_NAMESPACE,
                              "--ignore-not-found")
        kube_objects.delete(control_plane, "namespace", namespace)
    denied = chart_denied.value
    assert (denied.verb, denied.resource, denied.namespace) == ("get", "helmcharts",
                                                                HELM_NAMESPACE)
    assert account in str(denied)
    denied = job_denied.value
    assert (denied.verb, denied.resource, denied.namespace) == ("get", "jobs", HELM_NAMESPACE)
    assert f'"{rel.job}"' in str(denied)


def test_adapter_server_error_is_unavailable(api: FakeKubeApi,
                                             cluster: KubernetesCluster) -> None:
    """(The local JSON server: a real API server gives no 500 on demand.)"""
    api.routes[CHART_PATH] = (200, helm_chart_json())
    api.fail[("GET", JOB_PATH)] = (500, status(500, "InternalError", "etcdserver: timeout"))
    with pytest.raises(ClusterUnavailable, match="500 Internal Server Error to get jobs/"):
        cluster.ingress_objects(POOL)
    assert [(c.method, c.path) for c in api.calls] == [("GET", CHART_PATH), ("GET", JOB_PATH)]


def test_adapter_unreachable(tmp_path: Path) -> None:
    kc = KubernetesCluster(write_kubeconfig(tmp_path / "kc", "http://127.0.0.1:9"), "test",
                           timeout_seconds=2)
    with pytest.raises(ClusterUnavailable, match="cannot reach"):
        kc.ingress_objects(POOL)
    kc.close()


# -- the simulator ---------------------------------------------------------------------------


def test_simulator_stages_the_release(tmp_path: Path) -> None:
    sim = SimulatedCluster(ManualClock())
    assert ingress_release(sim.ingress_objects(POOL)).state == "absent"
    assert sim.reads == [Access("get", "helmcharts", f"kube-system/{RELEASE}")]
    sim.set_helm_chart(POOL, helm_chart_json())
    sim.set_helm_job(POOL, job_json(active=1))
    sim.set_helm_pods(POOL, [pod_json("x1a2b", CRASH_LOOP)])
    sim.add_kube_event("kube-system", event_json("kube-system", "Job", JOB, "SuccessfulCreate",
                                                 "Created pod", "2026-07-01T11:58:01Z"))
    release = ingress_release(sim.ingress_objects(POOL))
    assert release.state == "failed" and release.last_event == "SuccessfulCreate: Created pod"
    sim.add_foreign_node("anycloud-a-1", {"anycloud.sh/ingress-entry": POOL}, ready=True)
    sim.set_helm_job(POOL, job_json(complete=True))
    sim.set_helm_pods(POOL, [pod_json("x1a2b", TERMINATED_OK)])
    sim.set_ingress_daemon_set(POOL, daemon_set_json(desired=1, ready=0))
    sim.reads.clear()
    release = ingress_release(sim.ingress_objects(POOL))
    assert release.state == "installed" and release.last_event is None  # release ns: quiet
    assert release.daemon_set == IngressDaemonSet(desired=1, ready=0, entry_node_ready=True)
    assert [r.resource for r in sim.reads] == ["helmcharts", "jobs", "pods", "daemonsets",
                                               "nodes", "events"]
    assert sim.reads[-1] == Access("list", "events", RELEASE)
    # persisted, and restored
    sim.save(tmp_path / "sim.json")
    again = SimulatedCluster.load(tmp_path / "sim.json", ManualClock())
    assert ingress_release(again.ingress_objects(POOL)) == release
    sim.set_helm_chart(POOL, None)
    assert ingress_release(sim.ingress_objects(POOL)).state == "absent"


def test_simulator_unreachable_and_denied() -> None:
    sim = SimulatedCluster(ManualClock())
    sim.set_unreachable(True)
    with pytest.raises(ClusterUnavailable, match="connection refused"):
        sim.ingress_objects(POOL)
    sim.set_unreachable(False)
    sim.deny("get", "helmcharts")
    with pytest.raises(ClusterForbidden):
        sim.ingress_objects(POOL)
