"""What the benchmarks on the local control plane share: one big kwok Node for their pods,
and the runtime templates without the data claim (no storage provisioner runs here)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def big_node(plane: Any, name: str = "bench-node") -> None:
    from automation.devcluster.control_plane import KWOK_ANNOTATION

    plane.apply({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {KWOK_ANNOTATION: "fake"}}})
    res = {"cpu": "1000", "memory": "4Ti", "pods": "1000"}
    plane.patch_status("node", name, {"capacity": res, "allocatable": res})


def templates_without_claim(root: Path) -> None:
    """k8s/runtime-templates copied to ``root``/templates, the Deployment's volumes cut."""
    shutil.copytree(REPO / "k8s/runtime-templates", root / "templates")
    deployment = root / "templates/deployment.yaml"
    text = deployment.read_text()
    deployment.write_text(text[:text.index("          volumeMounts:")])


@contextmanager
def plane_with_templates() -> Iterator[tuple[Path, Any]]:
    """A temporary directory holding the claim-less templates, and a local control plane
    with one big Node started under it (stopped on the way out)."""
    from automation.devcluster import control_plane

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        templates_without_claim(root)
        plane = control_plane.start(root / "cp")
        try:
            big_node(plane)
            yield root, plane
        finally:
            plane.stop()
