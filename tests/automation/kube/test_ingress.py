"""The ingress release view: raw objects -> IngressRelease (pure), the adapter against the
local server answering real Kubernetes JSON, and the simulator's staging.

The builders below are real-shaped Kubernetes JSON for a pool's ingress release: the K3s
HelmChart, the helm-controller's install Job and its Pods, the Traefik DaemonSet and core/v1
Events (tests/automation/test_ingress_status.py uses them too).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from automation.clock import ManualClock
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
from tests.automation.kube_api_server import FakeKubeApi, node_json, status, write_kubeconfig

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


def lst(kind: str, api_version: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    """A list answer (items carry no kind/apiVersion on the wire)."""
    stripped = [{k: v for k, v in i.items() if k not in ("kind", "apiVersion")} for i in items]
    return {"kind": f"{kind}List", "apiVersion": api_version,
            "metadata": {"resourceVersion": "90300"}, "items": stripped}


CHART_PATH = f"/apis/helm.cattle.io/v1/namespaces/kube-system/helmcharts/{RELEASE}"
JOB_PATH = f"/apis/batch/v1/namespaces/kube-system/jobs/{JOB}"
PODS_PATH = "/api/v1/namespaces/kube-system/pods"
DS_LIST_PATH = f"/apis/apps/v1/namespaces/{RELEASE}/daemonsets"
SYSTEM_EVENTS = "/api/v1/namespaces/kube-system/events"
RELEASE_EVENTS = f"/api/v1/namespaces/{RELEASE}/events"


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


def test_unavailable_note() -> None:
    release = unavailable("cannot reach https://203.0.113.10:6443 (get helmcharts/x): refused")
    assert release.state is None and release.helm_job is None and release.daemon_set is None
    assert release.last_event == (
        "cluster unavailable: cannot reach https://203.0.113.10:6443 (get helmcharts/x): refused")


def test_json_keys_are_camel_case() -> None:
    release = ingress_release(objects(job=job_json(active=1),
                                      pods=[pod_json("x1a2b", CRASH_LOOP)],
                                      daemon_sets=[daemon_set_json(desired=1, ready=0)],
                                      entry_nodes=[entry_node(False)]))
    assert release.model_dump(mode="json") == {
        "state": "failed", "helmJob": {"phase": "retrying", "message": "exit code 1"},
        "daemonSet": {"desired": 1, "ready": 0, "entryNodeReady": False}, "lastEvent": None,
    }


# -- the adapter against the local server ----------------------------------------------------




def test_adapter_reads_only_the_helm_chart_when_absent(api: FakeKubeApi,
                                                       cluster: KubernetesCluster) -> None:
    found = cluster.ingress_objects(POOL)
    assert found == IngressObjects(pool_id=POOL, release=RELEASE)
    assert [(c.method, c.path) for c in api.calls] == [("GET", CHART_PATH)]
    assert ingress_release(found).state == "absent"


def test_adapter_before_the_daemon_set(api: FakeKubeApi, cluster: KubernetesCluster) -> None:
    pod = pod_json("x1a2b", CRASH_LOOP)
    event = event_json("kube-system", "Pod", f"{JOB}-x1a2b", "BackOff",
                       "Back-off restarting failed container helm", "2026-07-01T11:59:20Z")
    api.routes[CHART_PATH] = (200, helm_chart_json())
    api.routes[JOB_PATH] = (200, job_json(active=1))
    api.routes[PODS_PATH] = (200, lst("Pod", "v1", [pod]))
    api.routes[SYSTEM_EVENTS] = (200, lst("Event", "v1", [event]))
    found = cluster.ingress_objects(POOL)
    assert [(c.method, c.path) for c in api.calls] == [
        ("GET", CHART_PATH), ("GET", JOB_PATH), ("GET", PODS_PATH), ("GET", DS_LIST_PATH),
        ("GET", SYSTEM_EVENTS)]
    pods_call = api.calls[2]
    assert pods_call.query["labelSelector"] == [f"batch.kubernetes.io/job-name={JOB}"]
    assert found.helm_chart is not None and found.helm_chart["kind"] == "HelmChart"
    assert found.job is not None and found.pods[0]["metadata"]["name"] == f"{JOB}-x1a2b"
    assert found.daemon_sets == () and found.entry_nodes == ()
    release = ingress_release(found)
    assert release.state == "failed"
    assert release.helm_job == HelmJob(phase="retrying", message="exit code 1")
    assert release.last_event == "BackOff: Back-off restarting failed container helm"


def test_adapter_once_the_daemon_set_exists(api: FakeKubeApi,
                                            cluster: KubernetesCluster) -> None:
    api.routes[CHART_PATH] = (200, helm_chart_json())
    api.routes[JOB_PATH] = (200, job_json(complete=True))
    api.routes[PODS_PATH] = (200, lst("Pod", "v1", [pod_json("x1a2b", TERMINATED_OK)]))
    api.put(daemon_set_json(desired=1, ready=1))
    api.put(node_json("anycloud-a-1", {"anycloud.sh/node-pool": POOL,
                                       "anycloud.sh/ingress-entry": POOL}))
    api.put(node_json("anycloud-a-2", {"anycloud.sh/node-pool": POOL}, ready=False))
    api.routes[RELEASE_EVENTS] = (200, lst("Event", "v1", [event_json(
        RELEASE, "Pod", f"{RELEASE}-4kq9z", "Started", "Started container traefik",
        "2026-07-01T11:58:45Z")]))
    found = cluster.ingress_objects(POOL)
    assert [(c.method, c.path) for c in api.calls] == [
        ("GET", CHART_PATH), ("GET", JOB_PATH), ("GET", PODS_PATH), ("GET", DS_LIST_PATH),
        ("GET", "/api/v1/nodes"), ("GET", RELEASE_EVENTS)]
    assert api.calls[4].query["labelSelector"] == [f"anycloud.sh/ingress-entry={POOL}"]
    assert [n.name for n in found.entry_nodes] == ["anycloud-a-1"]
    assert ingress_release(found) == IngressRelease(
        state="installed", helm_job=HelmJob(phase="succeeded"),
        daemon_set=IngressDaemonSet(desired=1, ready=1, entry_node_ready=True),
        last_event="Started: Started container traefik")


def test_adapter_job_not_created_yet(api: FakeKubeApi, cluster: KubernetesCluster) -> None:
    api.routes[CHART_PATH] = (200, helm_chart_json(job_name=None))
    found = cluster.ingress_objects(POOL)  # the Job, pods and events 404/empty: no error
    assert found.job is None and found.pods == () and found.events == ()
    assert ingress_release(found).helm_job == HelmJob(phase="pending")


def test_adapter_maps_forbidden_and_failures(api: FakeKubeApi,
                                             cluster: KubernetesCluster) -> None:
    api.fail[("GET", CHART_PATH)] = (403, status(
        403, "Forbidden", f'helmcharts.helm.cattle.io "{RELEASE}" is forbidden: User '
        '"anycloud" cannot get resource "helmcharts" in API group "helm.cattle.io" in the '
        'namespace "kube-system"', RELEASE, "helmcharts"))
    with pytest.raises(ClusterForbidden) as denied:
        cluster.ingress_objects(POOL)
    assert (denied.value.verb, denied.value.resource) == ("get", "helmcharts")
    assert denied.value.namespace == "kube-system"
    api.fail[("GET", CHART_PATH)] = (200, helm_chart_json())
    api.fail[("GET", JOB_PATH)] = (500, status(500, "InternalError", "etcdserver: timeout"))
    with pytest.raises(ClusterUnavailable, match="500 Internal Server Error to get jobs/"):
        cluster.ingress_objects(POOL)


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
