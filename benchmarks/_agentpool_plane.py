"""The local control plane as the AgentPool benchmarks use it: started while the operator's
modules are imported, the AgentPool CRD made as soon as the API server answers (its
AgentPools listable before the start returns), and one big kwok Node for the worker pods."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from benchmarks import _kube_plane

REPO = Path(__file__).resolve().parent.parent
CRD = REPO / "k8s/crd/agentpool-crd.yaml"
T = TypeVar("T")
# What the operator needs imported (kopf, the Kubernetes client, the ledger's migrations):
# seconds, done while the control plane starts (_kube_plane.start).
OPERATOR_MODULES = ("kopf", "kubernetes.client", "alembic.command",
                    "automation.agentpools.operator", "automation.agentpools.kubeapi",
                    "automation.agentpools.reconcile", "automation.agentpools.registry",
                    "automation.ledger")


def start(root: Path, meanwhile: Callable[[], T]) -> tuple[Any, T]:
    """The control plane started under ``root`` (with ``meanwhile`` beside it, see
    _kube_plane.start), the AgentPool CRD created as soon as the API server answers, and
    one big Node; what ``meanwhile`` returned."""
    plane, value = _kube_plane.start(
        root, meanwhile, early=lambda api: _kube_plane.crd(api, CRD))
    try:
        _kube_plane.big_node(plane)
    except BaseException:
        plane.stop()
        raise
    return plane, value


def imports() -> None:
    """Import OPERATOR_MODULES (a ``meanwhile`` for _kube_plane.start)."""
    _kube_plane.import_modules(*OPERATOR_MODULES)


def handled(plane: Any, namespace: str, name: str, timeout: float = 60.0) -> None:
    """Wait until the operator has been through the pool's create handler (kopf records
    it in an annotation, after the timer it starts for the pool). Stopping the operator
    before that races kopf's shutdown: the timer it starts a moment after is never told to
    stop, and kopf waits 5 s for it (the "hung tasks" of kopf._core.reactor.running)."""
    import time

    from automation.agentpools.operator import ANNOTATIONS_PREFIX

    key = f"{ANNOTATIONS_PREFIX}/last-handled-configuration"
    path = f"/apis/anycloud.sh/v1/namespaces/{namespace}/agentpools/{name}"
    deadline = time.monotonic() + timeout
    while key not in (plane.get(path)["metadata"].get("annotations") or {}):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the operator never handled {namespace}/{name}")
        time.sleep(0.02)
