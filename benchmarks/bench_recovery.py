"""Crash recovery on the real engine: what the first ``up`` after a killed one costs, against
a plain no-change ``up`` of the same stack measured in the same run.

Each run SIGKILLs a real ``up`` of the cluster add-on stack while the engine has the
DaemonSet's create in flight (the object on the API server, as in
``tests/automation/engine/test_pending_recovery.py``), unlocks the stack, and times the next
``up``, split into its phases: export and decision, the lookup through the provider (a
scratch-stack read), the import (``stack import`` of the settled state plus a refresh of
what was imported), and the continued update. Two cases: the object exists (imported) and
the object is gone (record cleared, the update creates it). BENCH_RUNS runs of each
(median; default 3). Needs the tools built by ``python3 tools/build.py``.

    .venv/bin/python benchmarks/bench_recovery.py [--smoke]     (BENCH_RUNS=3 by default)

--smoke: one run of the first case. The second differs in one deletion before the timed
``up``; both cases run in full in tests/automation/engine/test_pending_recovery.py. The
baseline is not an ``up`` of its own: smoke reads it off the continued update of that run
(the same ``AutomationRunner.up`` of the same stack, after its recovery; it updates the
imported DaemonSet where the baseline changes nothing). A no-change ``up`` of a recovered
stack ends both tests named above (the path with nothing in flight is also run by
bench_engine.py and bench_drift.py). As in the full run, the control plane starts while the
plugin is installed and the modules imported, and is thrown away at the end (its objects
left, its components SIGKILLed).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, print_table
from benchmarks.bench_engine import engine_plane, timed

MARKS = ("kube", "engine", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "3"))


def timed_runner_class() -> Any:
    from automation.engine.pulumi_driver import AutomationRunner

    class TimedRunner(AutomationRunner):
        """Records how long the recovery and its lookup take inside an ``up``."""

        settle_s = 0.0
        lookup_s = 0.0

        def _settle_pending_creates(self, *args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return super()._settle_pending_creates(*args, **kwargs)
            finally:
                self.settle_s += time.perf_counter() - began

        def _lookup_objects(self, *args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return super()._lookup_objects(*args, **kwargs)
            finally:
                self.lookup_s += time.perf_counter() - began

    return TimedRunner


def main() -> None:
    global RUNS
    cases: tuple[str, ...] = ("found", "gone")
    smoke = _cli.parse(__doc__, MARKS).smoke
    if smoke:
        RUNS, cases = 1, cases[:1]

    results: dict[str, dict[str, list[float]]] = {}
    noop: list[float] = []
    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        with engine_plane(tmp, timed_runner_class) as (plane, runner_class):
            from tests.automation.engine.test_pending_recovery import (
                DS,
                kill_with_the_daemonset_in_flight,
            )
            from tests.automation.engine.test_real_engine import addons_target, remove_addons
            from tests.automation.kube import objects

            fresh = True  # a new control plane holds no add-on objects
            for case in cases:
                phases = results.setdefault(case, {k: [] for k in (
                    "total", "settle", "lookup", "continue")})
                for i in range(RUNS):
                    key = f"cl-bench-{case}-{i}"
                    target = addons_target(plane, key)
                    runner = runner_class(tmp / f"home-{case}-{i}")
                    if not fresh:
                        remove_addons(plane)
                    fresh = False
                    node = f"gpu-{key}"
                    objects.node(plane, node, {"anycloud.sh/cluster": key,
                                               "anycloud.sh/accelerator": "nvidia"}, kwok=False)
                    scratch = tmp / f"kill-{case}-{i}"
                    scratch.mkdir()
                    kill_with_the_daemonset_in_flight(plane, runner, target, scratch)
                    objects.delete(plane, "node", node)
                    if case == "gone":
                        objects.delete(plane, "daemonset", DS, namespace="kube-system", wait=True)
                    runner.unlock(target)
                    total = timed(lambda r=runner, t=target: r.up(t))
                    phases["total"].append(total)
                    phases["settle"].append(runner.settle_s)
                    phases["lookup"].append(runner.lookup_s)
                    phases["continue"].append(total - runner.settle_s)
                    if case == "found":
                        noop.append(total - runner.settle_s if smoke else
                                    timed(lambda r=runner, t=target: r.up(t)))
    base = median(noop)
    baseline = "plain up, no change (baseline)" + (
        " [smoke: the continued update]" if smoke else "")
    rows: list[tuple[str, str, str]] = [(baseline, f"{base:.2f}", "1.0x")]
    for case, label in (("found", "object there: imported"),
                        ("gone", "object gone: cleared, created")):
        if case not in results:
            continue
        p = results[case]
        for phase, what in (("total", "first up after the kill, in all"),
                            ("settle", "  recovery (export, lookup, import, refresh)"),
                            ("lookup", "    of which the lookup (scratch-stack read)"),
                            ("continue", "  the continued update")):
            value = median(p[phase])
            rows.append((f"{label}: {what}" if phase == "total" else what, f"{value:.2f}",
                         f"{value / base:.1f}x"))
    print_table(f"Crash recovery, cluster add-on stack on the real engine, seconds, "
                f"median of {RUNS}", ["run", "seconds", "vs no-change up"], rows)


if __name__ == "__main__":
    main()
