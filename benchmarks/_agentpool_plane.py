"""The local control plane as the AgentPool benchmarks use it: the CRD established and one
big kwok Node for the worker pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks import _kube_plane

REPO = Path(__file__).resolve().parent.parent


def prepare(plane: Any) -> None:
    plane.kubectl("apply", "-f", str(REPO / "k8s/crd/agentpool-crd.yaml"))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                  "crd/agentpools.anycloud.sh")
    _kube_plane.big_node(plane)
