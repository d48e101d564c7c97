"""The local control plane: how long it takes to start, and the Kubernetes adapter's
operations against it versus against the JSON test server it replaces, in one run.

Needs the tools built by ``python3 tools/build.py``. BENCH_RUNS starts (median) and
BENCH_OPS operations per measurement; the operations run on the plane the last start
brought up (a start of its own for them would measure nothing more).

    .venv/bin/python benchmarks/bench_control_plane.py [--smoke]   (BENCH_RUNS=3, BENCH_OPS=200)

--smoke: one start (the Kubernetes client imported while it runs), 3 operations of each
kind on that plane and on the test server, no warm-up operation.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli, _kube_plane
from benchmarks._table import median, print_table

MARKS = ("kube", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
OPS = int(os.environ.get("BENCH_OPS", "200"))
WARMUP = True


def start_times(root: Path, meanwhile: Callable[[], object] | None = None
                ) -> tuple[list[dict[str, float]], Any]:
    """RUNS starts, each under a fresh directory: each one's timings, and the last plane,
    left running (the adapter's operations are measured on it). ``meanwhile`` (--smoke:
    the Kubernetes client's imports) runs during the last start."""
    from automation.devcluster import control_plane

    out = []
    for run in range(RUNS):
        if run < RUNS - 1 or meanwhile is None:
            plane = control_plane.start(root / f"cp{run}")
        else:
            plane, _ = _kube_plane.start(root / f"cp{run}", meanwhile)
        out.append(dict(plane.timings))
        if run < RUNS - 1:
            plane.stop()
    return out, plane


def ops_per_second(fn: Callable[[], object]) -> float:
    if WARMUP:
        fn()  # warm-up: connection pool, imports
    began = time.perf_counter()
    for _ in range(OPS):
        fn()
    return OPS / (time.perf_counter() - began)


def adapter_rates(kubeconfig: Path, node: str, put_node: Callable[[], None]) -> list[float]:
    from automation.kube.adapter import KubernetesCluster

    kube = KubernetesCluster(kubeconfig, timeout_seconds=10)
    put_node()
    flip = iter(range(10**9))
    rates = [
        ops_per_second(lambda: kube.nodes_claiming("np-bench", {node})),
        ops_per_second(lambda: kube.label_node(node, "bench", str(next(flip) % 2))),
        ops_per_second(lambda: kube.namespace_owner("kube-system", "np-bench")),
    ]
    kube.close()
    return rates


def main() -> None:
    global RUNS, OPS, WARMUP
    smoke = _cli.parse(__doc__, MARKS).smoke
    if smoke:
        RUNS, OPS, WARMUP = 1, 3, False

    def imports() -> None:
        _kube_plane.import_modules(
            "kubernetes.client.api.core_v1_api", "kubernetes.config", "automation.kube.adapter",
            "tests.automation.kube.objects", "tests.automation.kube_api_server")

    with tempfile.TemporaryDirectory() as tmp:
        starts, plane = start_times(Path(tmp), imports if smoke else None)
        try:
            from tests.automation.kube import objects
            from tests.automation.kube_api_server import node_json, serve, write_kubeconfig

            with serve() as fake:
                real = adapter_rates(plane.kubeconfig, "bench-node", lambda: objects.node(
                    plane, "bench-node", {"anycloud.sh/node-pool": "np-bench"}, kwok=False))
                plane.stop()
                fake_kc = write_kubeconfig(Path(tmp) / "fake-kubeconfig", fake.url)
                fake_rates = adapter_rates(fake_kc, "bench-node", lambda: fake.put(
                    node_json("bench-node", {"anycloud.sh/node-pool": "np-bench"})))
        finally:
            plane.stop()
    components = list(starts[0])
    print_table(f"Control plane start, seconds from launch until each answered "
                f"(median of {RUNS})", ["component", "ready at (s)"],
                [(c, f"{median([s[c] for s in starts]):.2f}") for c in components])
    print()

    names = ["nodes_claiming (list by label + GET)", "label_node (merge patch)",
             "namespace_owner (GET)"]
    print_table(f"Kubernetes adapter, operations per second ({OPS} each)",
                ["operation", "real API server", "JSON test server", "real / test server"],
                [(n, f"{r:.0f}", f"{f:.0f}", f"{r / f:.2f}x")
                 for n, r, f in zip(names, real, fake_rates, strict=True)])


if __name__ == "__main__":
    main()
