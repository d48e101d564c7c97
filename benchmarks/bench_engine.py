"""The cluster add-on stack on the real engine (Pulumi CLI and kubernetes provider built from
source, against the local control plane) versus the SDK's mock engine evaluating the same
program, in one run.

Real engine: ``up`` of a fresh stack (the objects created on the API server), a no-change
``preview``, and ``destroy``. Mock engine: ``evaluate`` of the same target (what ``plan`` and
``policy check`` do). BENCH_RUNS runs each (median). Needs the tools built by
``python3 tools/build.py``.

    .venv/bin/python benchmarks/bench_engine.py [--smoke]     (BENCH_RUNS=3 by default)

--smoke: one run of each, no warm-up evaluation.
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

from benchmarks import _cli
from benchmarks._table import median, print_table

MARKS = ("kube", "engine", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
WARMUP = True


def timed(fn: Callable[[], object]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def engine_env(tmp: Path) -> None:
    """What the test suite's pulumi_engine fixture does: tools on PATH, a PULUMI_HOME of
    our own with the kubernetes plugin built from source installed (the tools found as
    ``_cli.parse`` checked them, given the ``engine`` mark)."""
    from automation.devcluster import binaries

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
    global RUNS, WARMUP
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, WARMUP = 1, False
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
            if WARMUP:
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
