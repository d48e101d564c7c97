"""What is wrong with a pool's worker pods, read from their status: pure, no I/O.

Each problem is one condition type of the AgentPool's status, True while any pod has it,
naming the pods and the cause as the kubelet, the scheduler or the broker reports it:

- ``ImagePullFailed``: a container waits on its image (``ErrImagePull``, ``ImagePullBackOff``,
  ``InvalidImageName``, ``ErrImageNeverPull``);
- ``CrashLooping``: a container waits in ``CrashLoopBackOff`` (its last exit is quoted);
- ``Unschedulable``: the scheduler found no node (its message says why);
- ``AgentsNotRegistering``: a pod has been Ready for ``REGISTER_GRACE`` and its agent has not
  registered with the broker (a wrong broker address or token: the pod looks healthy to
  Kubernetes while serving nothing).

A pod being deleted has none of these: it is going anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from automation.agentpools.autoscaler import Worker

REGISTER_GRACE = timedelta(seconds=60)
IMAGE_PULL = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                        "ErrImageNeverPull"})
# In the order the Ready condition names them: the first cause blocks the rest.
TYPES = ("ImagePullFailed", "CrashLooping", "Unschedulable", "AgentsNotRegistering")


@dataclass(frozen=True)
class Problem:
    type: str
    pods: tuple[str, ...]
    message: str


def _ts(value: Any) -> datetime | None:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


def _waiting(pod: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(container name, its waiting state, its status) for each waiting container."""
    status = pod.get("status") or {}
    out = []
    for c in [*(status.get("initContainerStatuses") or []),
              *(status.get("containerStatuses") or [])]:
        waiting = (c.get("state") or {}).get("waiting")
        if waiting:
            out.append((str(c.get("name")), dict(waiting), dict(c)))
    return out


def _crash(name: str, waiting: dict[str, Any], status: dict[str, Any]) -> str:
    last = (status.get("lastState") or {}).get("terminated") or {}
    said = f"container {name} restarted {status.get('restartCount', 0)} times"
    if last:
        said += f", last exit code {last.get('exitCode')} ({last.get('reason') or 'Error'})"
        if last.get("message"):
            said += f": {str(last['message']).strip()[:200]}"
    return said


def _summary(what: str, found: list[tuple[str, str]]) -> str:
    first, why = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return f"{len(found)} worker pod(s) {what}: {first}: {why}{more}"


def problems(pods: Sequence[dict[str, Any]], workers: Sequence[Worker],
             now: datetime) -> list[Problem]:
    """The problems of ``pods`` (live, same order as ``workers``, ``reconcile.as_workers``)."""
    pulls: list[tuple[str, str]] = []
    crashes: list[tuple[str, str]] = []
    stuck: list[tuple[str, str]] = []
    silent: list[tuple[str, str]] = []
    for pod, worker in zip(pods, workers, strict=True):
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        name = meta["name"]
        for container, waiting, status in _waiting(pod):
            reason = waiting.get("reason")
            if reason in IMAGE_PULL:
                image = status.get("image") or "its image"
                pulls.append((name, f"container {container}: {reason} for {image}: "
                              f"{waiting.get('message') or 'no message'}"))
                break
            if reason == "CrashLoopBackOff":
                crashes.append((name, _crash(container, waiting, status)))
                break
        scheduled = _condition(pod, "PodScheduled")
        if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            stuck.append((name, str(scheduled.get("message") or "no node fits")))
        ready = _condition(pod, "Ready")
        since = _ts(ready.get("lastTransitionTime"))
        if worker.state == "starting" and ready.get("status") == "True" and since \
                and now - since >= REGISTER_GRACE:
            silent.append((name, f"Ready for {int((now - since).total_seconds())} s and its "
                           "agent has not registered with the broker: check the broker "
                           "address and token the pod is given and `kubectl logs` of it"))
    found = [
        ("ImagePullFailed", pulls, "cannot pull their image"),
        ("CrashLooping", crashes, "are crash-looping"),
        ("Unschedulable", stuck, "cannot be scheduled"),
        ("AgentsNotRegistering", silent, "run agents that do not register"),
    ]
    return [Problem(kind, tuple(n for n, _ in hits), _summary(what, hits))
            for kind, hits, what in found if hits]
