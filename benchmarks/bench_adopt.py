"""``node-pool adopt`` under the mock engine: what rebuilding a lost state from the cloud
costs for a pool of N VMs on each cloud, against a no-change ``up`` of the same stack
measured in the same run (the baseline), and the first ``up`` after the adopt (which must
change nothing and buy nothing: checked, not timed into a verdict).

Each run: a simulated cloud, ``up`` of a pool stack with N attempts, the state file removed,
``adopt`` timed (two program evaluations plus the VM lookup program through the providers'
lookups, answered by the simulated cloud). BENCH_RUNS runs per cloud (median; default 3),
BENCH_VMS VMs per pool (default 10).

    .venv/bin/python benchmarks/bench_adopt.py [--smoke]

--smoke: one run per cloud, a pool of one VM.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, print_table

MARKS = ()
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
VMS = int(os.environ.get("BENCH_VMS", "10"))


def main() -> None:
    global RUNS, VMS
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, VMS = 1, 1
    from automation.clock import ManualClock
    from automation.engine.mock.runner import MockEngineRunner
    from automation.simulators.cloud import CloudSimulator
    from tests.automation.engine.test_mock_runner import with_attempts
    from tests.automation.engine.test_pulumi_driver import pool_target

    rows = []
    for provider in ("aws", "gcp", "azure"):
        adopt, noop = [], []
        for i in range(RUNS):
            with tempfile.TemporaryDirectory() as tmp_str:
                tmp = Path(tmp_str)
                cloud = CloudSimulator(ManualClock(), tmp / "cloud.json")
                runner = MockEngineRunner(tmp / "home", cloud)
                target = with_attempts(pool_target(provider),
                                       *(f"at-{i}-{n}" for n in range(VMS)))
                runner.up(target)
                began = time.perf_counter()
                runner.up(target)
                noop.append(time.perf_counter() - began)
                (tmp / "home" / "mock-engine" / f"{target.stack_name}.json").unlink()
                began = time.perf_counter()
                result = runner.adopt(target)
                adopt.append(time.perf_counter() - began)
                after = runner.up(target)
                bought = sum(1 for verb, _ in cloud.journal if verb == "create")
                if result.summary.create or after.summary.changes or bought != VMS:
                    raise SystemExit(f"{provider}: adopt left changes or bought again "
                                     f"({result.summary}, {after.summary}, {bought} creates)")
        base = median(noop)
        rows.append((provider, VMS, f"{base:.2f}", f"{median(adopt):.2f}",
                     f"{median(adopt) / base:.1f}x"))
    print_table(f"node-pool adopt, mock engine over the simulated cloud (median of {RUNS})",
                ("cloud", "VMs", "no-change up s (baseline)", "adopt s", "ratio"), rows)


if __name__ == "__main__":
    main()
