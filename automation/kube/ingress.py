"""A pool's ingress release as ``node-pool status`` shows it, from the raw cluster objects.

Pure: ``IngressObjects`` (HelmChart, install Job and its Pods, DaemonSet, entry Nodes, Events,
as the API server returned them) in, ``IngressRelease`` out.

* state: ``absent`` without a HelmChart; ``installed`` once the install Job completed;
  ``failed`` when the Job failed or its install container last exited non-zero (the
  helm-controller retries it, so a broken chart stays failed rather than installing);
  otherwise ``installing``.
* helmJob: None without a HelmChart; ``pending`` until the Job exists and runs.
* daemonSet: None until Helm created it; entryNodeReady is the Ready condition of the Node
  labelled anycloud.sh/ingress-entry=<pool>.
* lastEvent: the newest Event on the install Job and its Pods, or, once the DaemonSet exists,
  in the release namespace, as ``reason: message``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from automation.kube.port import HELM_NAMESPACE, POOL_LABEL, IngressObjects
from automation.models import (
    HelmJob,
    HelmJobPhase,
    IngressDaemonSet,
    IngressRelease,
    ReleaseState,
)

INSTALL_CONTAINER = "helm"  # the helm-controller's install container
UNAVAILABLE_PREFIX = "cluster unavailable: "
_EPOCH = datetime.min.replace(tzinfo=UTC)


def unavailable(reason: str) -> IngressRelease:
    """The release when the cluster could not be read: state unknown, the reason as event."""
    return IngressRelease(state=None, last_event=f"{UNAVAILABLE_PREFIX}{reason}")


def ingress_release(objects: IngressObjects) -> IngressRelease:
    if objects.helm_chart is None:
        return IngressRelease(state="absent")
    job = _helm_job(objects.job, objects.pods)
    if job.phase == "succeeded":
        state: ReleaseState = "installed"
    elif job.phase in ("failed", "retrying"):
        state = "failed"
    else:
        state = "installing"
    daemon_set = _daemon_set(objects)
    return IngressRelease(state=state, helm_job=job, daemon_set=daemon_set,
                          last_event=_last_event(objects, daemon_set is not None))


def job_name(objects: IngressObjects) -> str:
    """The install Job's name: as the HelmChart's status records it, else the convention."""
    status = (objects.helm_chart or {}).get("status") or {}
    return str(status.get("jobName") or f"helm-install-{objects.release}")


# -- the install Job -------------------------------------------------------------------------


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


def _timestamp(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        stamp = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def _created(obj: dict[str, Any]) -> datetime:
    return _timestamp((obj.get("metadata") or {}).get("creationTimestamp")) or _EPOCH


def _install_container(pod: dict[str, Any]) -> dict[str, Any] | None:
    statuses = list((pod.get("status") or {}).get("containerStatuses") or [])
    for s in statuses:
        if s.get("name") == INSTALL_CONTAINER:
            return dict(s)
    return dict(statuses[0]) if statuses else None


def _exit(terminated: dict[str, Any] | None) -> str | None:
    """A non-zero exit as shown to people: ``exit code 1`` (plus the reason if not Error)."""
    if not terminated:
        return None
    code = terminated.get("exitCode")
    if not isinstance(code, int) or code == 0:
        return None
    reason = terminated.get("reason")
    return f"exit code {code}" + (f" ({reason})" if reason and reason != "Error" else "")


def _last_exit(pods: tuple[dict[str, Any], ...]) -> tuple[str | None, bool]:
    """(the newest Pod's install container's last non-zero exit, whether it is running now)."""
    if not pods:
        return None, False
    newest = max(pods, key=_created)
    container = _install_container(newest)
    if container is None:
        return None, False
    state = container.get("state") or {}
    if "running" in state:
        return None, True
    if "terminated" in state:
        return _exit(state.get("terminated")), False
    # waiting (CrashLoopBackOff, ContainerCreating): what the previous run ended with
    return _exit((container.get("lastState") or {}).get("terminated")), False


def _helm_job(job: dict[str, Any] | None, pods: tuple[dict[str, Any], ...]) -> HelmJob:
    if job is None:
        return HelmJob(phase="pending")
    if _condition(job, "Complete") or _condition(job, "SuccessCriteriaMet"):
        return HelmJob(phase="succeeded")
    exit_message, running = _last_exit(pods)
    failed = _condition(job, "Failed") or _condition(job, "FailureTarget")
    if failed:
        why = ": ".join(filter(None, (failed.get("reason"), failed.get("message"))))
        return HelmJob(phase="failed", message=exit_message or why or None)
    phase: HelmJobPhase
    if exit_message:
        phase = "retrying"
    elif running or int((job.get("status") or {}).get("active") or 0) > 0:
        phase = "running"
    else:
        phase = "pending"
    return HelmJob(phase=phase, message=exit_message)


# -- the DaemonSet ---------------------------------------------------------------------------


def _pick_daemon_set(objects: IngressObjects) -> dict[str, Any] | None:
    """The release namespace holds this release only: prefer the one labelled for the pool."""
    if not objects.daemon_sets:
        return None
    for ds in objects.daemon_sets:
        if ((ds.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL) == objects.pool_id:
            return ds
    return min(objects.daemon_sets, key=lambda d: str((d.get("metadata") or {}).get("name")))


def _daemon_set(objects: IngressObjects) -> IngressDaemonSet | None:
    ds = _pick_daemon_set(objects)
    if ds is None:
        return None
    status = ds.get("status") or {}
    return IngressDaemonSet(
        desired=int(status.get("desiredNumberScheduled") or 0),
        ready=int(status.get("numberReady") or 0),
        entry_node_ready=any(n.ready for n in objects.entry_nodes),
    )


# -- events ----------------------------------------------------------------------------------


def _subject(event: dict[str, Any]) -> dict[str, Any]:
    # core/v1 Events name it involvedObject; events.k8s.io/v1 name it regarding.
    return dict(event.get("involvedObject") or event.get("regarding") or {})


def _about_install(event: dict[str, Any], name: str,
                   pod_names: set[str]) -> bool:
    subject = _subject(event)
    if subject.get("namespace", HELM_NAMESPACE) != HELM_NAMESPACE:
        return False
    kind, who = subject.get("kind"), str(subject.get("name") or "")
    if kind == "Job":
        return who == name
    # Pods of earlier tries may be gone: they still carry the Job's name as prefix.
    return kind == "Pod" and (who in pod_names or who.startswith(f"{name}-"))


def event_time(event: dict[str, Any]) -> datetime:
    """When an Event last happened, whichever of its time fields the server filled."""
    series = event.get("series") or {}
    for value in (series.get("lastObservedTime"), event.get("lastTimestamp"),
                  event.get("eventTime"), event.get("firstTimestamp"),
                  event.get("deprecatedLastTimestamp")):
        stamp = _timestamp(value)
        if stamp is not None:
            return stamp
    return _created(event)


def _recency(event: dict[str, Any]) -> tuple[datetime, int]:
    """Which Event is newer: by time to the whole second, then in the order the API server
    wrote them.

    client-go's legacy recorder (the kubelet's and most controllers' Events) stores whole
    seconds while events.k8s.io Events (the scheduler's) carry microseconds, so within one
    second the finer time would put a later kubelet Event before an earlier scheduler one.
    The server lists Events by name, not in the order they were written; their
    resourceVersion (the etcd or kine revision of the last write) gives that order.
    """
    version = str((event.get("metadata") or {}).get("resourceVersion") or "")
    return (event_time(event).replace(microsecond=0),
            int(version) if version.isdigit() else -1)


def _last_event(objects: IngressObjects, daemon_set_exists: bool) -> str | None:
    if daemon_set_exists:
        candidates = list(objects.events)
    else:
        name = job_name(objects)
        pod_names = {str((p.get("metadata") or {}).get("name")) for p in objects.pods}
        candidates = [e for e in objects.events if _about_install(e, name, pod_names)]
    if not candidates:
        return None
    _, newest = max(enumerate(candidates), key=lambda ie: (*_recency(ie[1]), ie[0]))
    reason = str(newest.get("reason") or "").strip()
    message = " ".join(str(newest.get("message") or newest.get("note") or "").split())
    return ": ".join(filter(None, (reason, message))) or None
