"""The local control plane as the AgentPool benchmarks use it: the CRD established and one
big kwok Node for the worker pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def prepare(plane: Any) -> None:
    from automation.devcluster.control_plane import KWOK_ANNOTATION

    plane.kubectl("apply", "-f", str(REPO / "k8s/crd/agentpool-crd.yaml"))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                  "crd/agentpools.anycloud.sh")
    plane.apply({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "bench-node", "annotations": {KWOK_ANNOTATION: "fake"}}})
    res = {"cpu": "1000", "memory": "4Ti", "pods": "1000"}
    plane.patch_status("node", "bench-node", {"capacity": res, "allocatable": res})
