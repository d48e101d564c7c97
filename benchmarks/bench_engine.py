"""The cluster add-on stack on the real engine (Pulumi CLI and kubernetes provider built from
source, against the local control plane) versus the SDK's mock engine evaluating the same
program, in one run.

Real engine: ``up`` of a fresh stack (the objects created on the API server), a no-change
``preview``, and ``destroy``. Mock engine: ``evaluate`` of the same target (what ``plan`` and
``policy check`` do). BENCH_RUNS runs each (median).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._table import median, print_table

RUNS = int(os.environ.get("BENCH_RUNS", "3"))


def timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def engine_env(tmp: Path) -> None:
    """What the test suite's pulumi_engine fixture does: tools on PATH, a PULUMI_HOME of
    our own with the kubernetes plugin built from source installed."""
    from automation.devcluster import binaries
    from benchmarks.bench_control_plane import point_at_tools

    point_at_tools()
    pulumi = binaries.find("pulumi")
    provider = binaries.find("pulumi-resource-kubernetes")
    version = binaries.plugin_version(provider)
    os.environ.update({
        "PULUMI_HOME": str(tmp / "pulumi-home"),
        "PATH": f"{pulumi.parent}{os.pathsep}{os.environ['PATH']}",
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "ANYCLOUD_PULUMI_PLUGINS": f"kubernetes={version}",
    })
    subprocess.run([str(pulumi), "plugin", "install", "resource", "kubernetes", version,
                    "--file", str(provider)], check=True, capture_output=True)


def main() -> None:
    from automation.devcluster import control_plane
    from automation.engine.mock.runner import MockEngineRunner
    from automation.engine.pulumi_driver import AutomationRunner
    from tests.automation.engine.test_real_engine import addons_target, remove_addons

    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        engine_env(tmp)
        plane = control_plane.start(tmp / "cp")
        try:
            target = addons_target(plane, "cl-bench")
            mock = MockEngineRunner(tmp / "mock-home")
            mock.evaluate(target)  # warm-up: imports
            mock_eval = [timed(lambda: mock.evaluate(target)) for _ in range(RUNS)]
            ups, previews, destroys = [], [], []
            for i in range(RUNS):
                runner = AutomationRunner(tmp / f"home-{i}")
                ups.append(timed(lambda r=runner: r.up(target)))
                previews.append(timed(lambda r=runner: r.preview(target)))
                destroys.append(timed(lambda r=runner: r.destroy(target)))
                remove_addons(plane)
        finally:
            plane.stop()
    base = median(mock_eval)
    print_table(f"Cluster add-on stack (RuntimeClass + DaemonSet), seconds, median of {RUNS}",
                ["run", "seconds", "vs mock evaluate"],
                [("mock engine: evaluate", f"{base:.2f}", "1.0x"),
                 ("real engine: up (fresh stack)", f"{median(ups):.2f}",
                  f"{median(ups) / base:.1f}x"),
                 ("real engine: preview, no change", f"{median(previews):.2f}",
                  f"{median(previews) / base:.1f}x"),
                 ("real engine: destroy", f"{median(destroys):.2f}",
                  f"{median(destroys) / base:.1f}x")])


if __name__ == "__main__":
    main()
