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

--smoke: one run of each, no warm-up.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, print_table

MARKS = ("kube", "engine", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
WARMUP = True


def timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def runs(fn: Callable[[], object]) -> list[float]:
    if WARMUP:
        fn()
    return [timed(fn) for _ in range(RUNS)]


def main() -> None:
    global RUNS, WARMUP
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, WARMUP = 1, False
    from automation.clock import ManualClock
    from automation.devcluster import control_plane
    from automation.engine.mock.runner import MockEngineRunner
    from automation.engine.pulumi_driver import AutomationRunner
    from automation.simulators.cloud import CloudSimulator
    from benchmarks.bench_engine import engine_env
    from tests.automation.engine.test_mock_runner import with_attempts
    from tests.automation.engine.test_pulumi_driver import pool_target
    from tests.automation.engine.test_real_engine import DS, addons_target, remove_addons

    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        cloud = CloudSimulator(ManualClock(), tmp / "cloud.json")
        mock = MockEngineRunner(tmp / "mock-home", cloud)
        pool = with_attempts(pool_target("aws"), "at-1", "at-2")
        mock.up(pool)
        cloud.console_change_vm_type("at-2", "m7i.4xlarge")
        mock_found = mock.check_drift(pool)
        mock_resources = sum(1 for r in mock.load_state(pool)["resources"].values()
                             if r["custom"])
        mock_drift = runs(lambda: mock.check_drift(pool))
        mock_preview = runs(lambda: mock.preview(pool))

        engine_env(tmp)
        plane = control_plane.start(tmp / "cp")
        try:
            remove_addons(plane)
            target = addons_target(plane, "cl-bench-drift")
            real = AutomationRunner(tmp / "real-home")
            real.up(target)
            plane.kubectl("set", "env", f"daemonset/{DS}", "-n", "kube-system",
                          "FAIL_ON_INIT_ERROR=true")
            real_found = real.check_drift(target)
            real_resources = sum(
                1 for r in real._stack(target).export_stack().deployment["resources"]
                if r.get("custom"))
            real_drift = runs(lambda: real.check_drift(target))
            real_preview = runs(lambda: real.preview(target))
            real.destroy(target)
            remove_addons(plane)
        finally:
            plane.stop()

    base = median(mock_drift)

    def row(name: str, resources: int, found: int | str, took: list[float]) -> tuple[str, ...]:
        return (name, str(resources), str(found), f"{median(took):.3f}",
                f"{median(took) / base:.0f}x" if base else "-")

    print_table(f"Drift check per pool, seconds, median of {RUNS}",
                ["run", "resources", "drifted", "seconds", "vs mock check"],
                [row("mock engine: check_drift (AWS pool, 2 VMs, simulated cloud)",
                     mock_resources, len(mock_found), mock_drift),
                 row("mock engine: preview (same pool)", mock_resources, "-", mock_preview),
                 row("real engine: check_drift (add-on stack, control plane)",
                     real_resources, len(real_found), real_drift),
                 row("real engine: preview, no refresh (same stack)", real_resources, "-",
                     real_preview)])


if __name__ == "__main__":
    main()
