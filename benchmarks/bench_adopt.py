"""``node-pool adopt`` under the mock engine, in two tables.

1. Per stack: what rebuilding a lost state from the cloud costs for a pool of N VMs on each
   cloud, against a no-change ``up`` of the same stack measured in the same run (the
   baseline), and the first ``up`` after the adopt (which must change nothing and buy
   nothing: checked, not timed into a verdict). Each run: a simulated cloud, ``up`` of a
   pool stack with N attempts, the state file removed, ``adopt`` timed (two program
   evaluations plus the VM lookup program through the providers' lookups, answered by the
   simulated cloud). BENCH_VMS VMs per pool (default 10).
2. To the end (issue 34): a ready pool of 3 and of 50 VMs (AWS) loses its state and is
   deleted; the passes that then end in STATE_MISSING, ``adopt`` (its time per VM), and the
   passes from adopt to ``deleted``, with 0 VMs left in the simulated cloud (checked). The
   baseline is a no-change ``up`` of the ready pool's stack, in the same run. Passes are a
   simulated minute apart; a VM takes 30 simulated seconds to terminate.

BENCH_RUNS runs of each (median; default 3).

    .venv/bin/python benchmarks/bench_adopt.py [--smoke]

--smoke: one run per cloud of a pool of one VM, and one run to the end of a pool of 3.
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
TO_THE_END = (3, 50)


def main() -> None:
    global RUNS, VMS, TO_THE_END
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, VMS, TO_THE_END = 1, 1, (3,)
    per_stack()
    to_the_end()


def per_stack() -> None:
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


def to_the_end() -> None:
    rows = []
    for vms in TO_THE_END:
        runs = [one_deletion(vms) for _ in range(RUNS)]
        noop, adopt_s = median([r[0] for r in runs]), median([r[1] for r in runs])
        passes = sorted({r[2] for r in runs})
        rows.append((vms, f"{noop:.2f}", f"{adopt_s:.2f}", f"{adopt_s / vms * 1000:.0f}",
                     f"{adopt_s / noop:.1f}x", "/".join(map(str, passes))))
    print_table(f"lost state, delete, adopt, passes to deleted: AWS, mock engine over the "
                f"simulated cloud (median of {RUNS})",
                ("VMs", "no-change up s (baseline)", "adopt s", "adopt ms per VM", "ratio",
                 "passes adopt -> deleted"), rows)


def one_deletion(vms: int) -> tuple[float, float, int]:
    """(no-change up s, adopt s, passes from adopt to deleted) for a pool of ``vms``."""
    import shutil
    from datetime import timedelta

    from automation.services import node_pools, pool_status
    from automation.services.pool_adopt import adopt_pool
    from automation.stack_targets import pool_target
    from tests.automation.reconciler.conftest import make_rig

    minute = timedelta(minutes=1)
    with tempfile.TemporaryDirectory() as tmp_str:
        rig = make_rig(Path(tmp_str))
        runner = rig.reconciler.ports.runner
        pool = rig.pool("cpu", count=vms)

        def state() -> str:
            return pool_status.node_pool_status(rig.app.ledger, pool).state

        for _ in range(20):
            rig.passes(1, step=minute)
            if state() == "ready":
                break
        else:
            raise SystemExit(f"a pool of {vms} did not become ready")
        began = time.perf_counter()
        runner.up(pool_target(rig.app, pool, planned=False))
        noop = time.perf_counter() - began
        shutil.rmtree(rig.app.home / "mock-engine")
        node_pools.delete_node_pool(rig.app, "cpu")
        rig.passes(2, step=minute)
        code = pool_status.node_pool_status(rig.app.ledger, pool).last_error_code
        if code != "STATE_MISSING":
            raise SystemExit(f"expected STATE_MISSING after the loss, got {code}")
        began = time.perf_counter()
        adopt_pool(rig.app, lambda: runner, pool)
        adopt_s = time.perf_counter() - began
        passes = 0
        while state() != "deleted":
            if passes == 20:
                raise SystemExit(f"a pool of {vms} was not deleted 20 passes after adopt")
            rig.passes(1, step=minute)
            passes += 1
        left = rig.world.cloud.vms_of_pool(pool)
        if left:
            raise SystemExit(f"{len(left)} VM(s) left running after the delete")
        rig.app.ledger.dispose()
    return noop, adopt_s, passes


if __name__ == "__main__":
    main()
