"""Drift check time per pool (issue 23): the real engine versus the mock engine, in one run.

Real engine: ``AutomationRunner.check_drift`` (``pulumi refresh --preview-only`` through the
Automation API: the kubernetes provider reads every object from the local control plane) on
the cluster add-on stack (RuntimeClass + DaemonSet), with its DaemonSet edited by hand so
there is a change to report; a no-change ``preview`` of the same stack for reference. (A
node-pool stack cannot run on the real engine here: the aws, gcp and azure-native plugins
cannot be built.) Mock engine, the baseline: ``MockEngineRunner.check_drift`` of an AWS
node-pool stack (2 VMs, its network and tokens) applied to the simulated cloud, one VM's type
changed at its console; and a mock ``preview`` of it. BENCH_RUNS runs each (median, default
5), after one warm-up run of each that is not counted.

    .venv/bin/python benchmarks/bench_drift.py [--smoke]

--smoke: one run of each, no warm-up; the drifted changes in the table are those of that
run (the full run takes them from its warm-up run). The mock engine's part runs while the
control plane starts (the full run times it before starting anything). Not timed and left
out of both modes, as the control plane is thrown away at the end: the real stack's
``destroy`` and the removal of its objects.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, print_table

MARKS = ("kube", "engine", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
WARMUP = True
T = TypeVar("T")


def runs(fn: Callable[[], T]) -> tuple[list[float], T]:
    """Seconds of each of RUNS runs (after a warm-up run, when WARMUP); and what the first
    run, warm-up or not, returned."""
    returned: list[T] = []

    def once() -> float:
        began = time.perf_counter()
        returned.append(fn())
        return time.perf_counter() - began

    if WARMUP:
        once()
    return [once() for _ in range(RUNS)], returned[0]


def mock_part(tmp: Path) -> tuple[int, int, list[float], list[float]]:
    """The mock engine's baseline: resources, drifted, check_drift and preview seconds."""
    from automation.clock import ManualClock
    from automation.engine.mock.runner import MockEngineRunner
    from automation.simulators.cloud import CloudSimulator
    from tests.automation.engine.test_mock_runner import with_attempts
    from tests.automation.engine.test_pulumi_driver import pool_target

    cloud = CloudSimulator(ManualClock(), tmp / "cloud.json")
    mock = MockEngineRunner(tmp / "mock-home", cloud)
    pool = with_attempts(pool_target("aws"), "at-1", "at-2")
    mock.up(pool)
    cloud.console_change_vm_type("at-2", "m7i.4xlarge")
    drift, found = runs(lambda: mock.check_drift(pool))
    preview, _ = runs(lambda: mock.preview(pool))
    resources = sum(1 for r in mock.load_state(pool)["resources"].values() if r["custom"])
    return resources, len(found), drift, preview


def main() -> None:
    global RUNS, WARMUP
    smoke = _cli.parse(__doc__, MARKS).smoke
    if smoke:
        RUNS, WARMUP = 1, False
    from benchmarks.bench_engine import engine_plane


    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        if not smoke:  # timed with nothing else running
            mock_resources, mock_found, mock_drift, mock_preview = mock_part(tmp)
        # In smoke, the mock part runs while the control plane starts.
        with engine_plane(tmp, (lambda: mock_part(tmp)) if smoke else None) as (plane, mocked):
            if mocked is not None:
                mock_resources, mock_found, mock_drift, mock_preview = mocked
            from automation.engine.pulumi_driver import AutomationRunner
            from tests.automation.engine.test_pending_recovery import state_file
            from tests.automation.engine.test_real_engine import DS, addons_target

            target = addons_target(plane, "cl-bench-drift")
            real = AutomationRunner(tmp / "real-home")
            real.up(target)
            plane.kubectl("set", "env", f"daemonset/{DS}", "-n", "kube-system",
                          "FAIL_ON_INIT_ERROR=true")
            real_drift, real_found = runs(lambda: real.check_drift(target))
            real_preview, _ = runs(lambda: real.preview(target))
            # The state the file backend holds (what ``stack export`` prints).
            state: dict[str, Any] = json.loads(state_file(real.home, target).read_text())
            real_resources = sum(1 for r in state["checkpoint"]["latest"]["resources"]
                                 if r.get("custom"))

    base = median(mock_drift)

    def row(name: str, resources: int, found: int | str, took: list[float]) -> tuple[str, ...]:
        return (name, str(resources), str(found), f"{median(took):.3f}",
                f"{median(took) / base:.0f}x" if base else "-")

    print_table(f"Drift check per pool, seconds, median of {RUNS}",
                ["run", "resources", "drifted", "seconds", "vs mock check"],
                [row("mock engine: check_drift (AWS pool, 2 VMs, simulated cloud)",
                     mock_resources, mock_found, mock_drift),
                 row("mock engine: preview (same pool)", mock_resources, "-", mock_preview),
                 row("real engine: check_drift (add-on stack, control plane)",
                     real_resources, len(real_found), real_drift),
                 row("real engine: preview, no refresh (same stack)", real_resources, "-",
                     real_preview)])


if __name__ == "__main__":
    main()
