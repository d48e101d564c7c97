"""AgentPool operator reaction time (issue 11, "Measure"): from ``kubectl apply`` of a pool
to its first worker pod created, and to its pods Running, on the local control plane (kwok
plays the kubelets).

The operator runs in-process (kopf in a thread, as ``anycloud operator`` runs it) with its
timer at 10 s, so what is measured is the watch -> create handler -> pod create path, not a
timer tick. Each run applies the seed's shell pool under a new name (minIdle 2 here, so two
pods) and polls the API server every 10 ms; the first run waits until the API server no
longer holds creates of the just-made CRD (2 s after it is Established). Needs the tools
built by ``python3 tools/build.py``.

    .venv/bin/python benchmarks/bench_operator.py [--smoke]     (BENCH_RUNS=9 by default)

--smoke: one run, no warm-up run.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _agentpool_plane, _cli, _kube_plane
from benchmarks._table import median, ms, print_table

MARKS = ("kube", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "9"))
WARMUP = 1  # runs first, not counted
REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    global RUNS, WARMUP
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, WARMUP = 1, 0
    with tempfile.TemporaryDirectory() as tmp:
        def meanwhile() -> Any:  # while the control plane starts
            _agentpool_plane.imports()
            from automation.ledger import open_ledger

            return open_ledger(f"sqlite:///{Path(tmp) / 'ledger.db'}")

        plane, ledger = _agentpool_plane.start(Path(tmp) / "cp", meanwhile)
        try:
            from automation.agentpools.operator import ControlPlaneConfig, assemble

            _kube_plane.namespace(plane, "bench")
            config_map = yaml.safe_load((REPO / "k8s/examples/agent-config.yaml").read_text())
            config_map["metadata"]["namespace"] = "bench"
            _kube_plane.api(plane, "POST", "/api/v1/namespaces/bench/configmaps", config_map)
            config = ControlPlaneConfig.model_validate(
                {"provisioners": [{"kubernetes": {"namespace": "bench"}}]})
            op = assemble(config, ledger, kubeconfig=plane.kubeconfig, interval=10.0)
            op.start()
            try:
                # Not the API server's pause for a CRD created a moment ago, in the first
                # run (a warm-up one but in --smoke).
                _kube_plane.creates_served(plane, "agentpools.anycloud.sh")
                rows = [run(plane, i) for i in range(RUNS + WARMUP)][WARMUP:]
                _agentpool_plane.handled(plane, "bench", f"shell-{RUNS + WARMUP - 1}")
            finally:
                op.stop()
        finally:
            plane.stop()
    applied = [r[0] for r in rows]
    first = [r[1] for r in rows]
    running = [r[2] for r in rows]
    warmed = "after one warm-up" if WARMUP else "no warm-up"
    print_table(f"AgentPool operator reaction, {RUNS} runs ({warmed}), ms",
                ["from kubectl apply to", "median", "min", "max"],
                [(name, ms(median(v)), ms(min(v)), ms(max(v))) for name, v in (
                    ("kubectl apply returned", applied),
                    ("first worker pod created", first),
                    ("both pods Running (kwok)", running))])


def run(plane: object, i: int) -> tuple[float, float, float]:
    from automation.devcluster.control_plane import ControlPlane

    assert isinstance(plane, ControlPlane)
    doc = yaml.safe_load((REPO / "k8s/examples/shell-pool.yaml").read_text())
    name = f"shell-{i}"
    doc["metadata"].update({"name": name, "namespace": "bench"})
    doc["spec"]["autoscaler"].update({"minIdle": 2, "maxIdle": 3})
    doc["spec"]["template"]["spec"]["containers"][0]["args"] = [f"--pool={name}"]
    path = f"/api/v1/namespaces/bench/pods?labelSelector=anycloud.sh/agent-pool%3D{name}"
    start = time.perf_counter()
    plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
    applied = time.perf_counter() - start
    first = None
    while True:
        items = plane.get(path)["items"]
        if items and first is None:
            first = time.perf_counter() - start
        if len(items) == 2 and all(p.get("status", {}).get("phase") == "Running"
                                   for p in items):
            return applied, first or 0.0, time.perf_counter() - start
        if time.perf_counter() - start > 60:
            raise SystemExit(f"{name}: no two Running pods within 60 s")
        time.sleep(0.01)


if __name__ == "__main__":
    main()
