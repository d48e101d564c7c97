"""`anycloud policy check` for a 100-VM pool: wall time, and the share of the mock-engine run
versus the rules.

In-process phases (after one warm-up, so imports are not counted): evaluating the pool's
stack program under the mock engine, then the policy pack over what it registered. Then the
whole command as a subprocess, beside `python -c pass` and `anycloud --help` measured in the
same run.

    .venv/bin/python benchmarks/bench_policy_check.py [--smoke]   (BENCH_VMS=100, BENCH_RUNS=3)

--smoke: a 2-VM pool, one run of each phase and command, no warm-up run.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, ms, print_table, time_command

VMS = int(os.environ.get("BENCH_VMS", "100"))
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
WARMUP = 1  # in-process runs first, not counted (they pay the imports)


def setup(home: Path) -> str:
    from automation.app import App
    from automation.ledger import open_ledger
    from automation.services import credentials, node_pools
    from automation.simulators.world import register_simulated_cluster

    app = App(ledger=open_ledger(f"sqlite:///{home / 'anycloud.db'}"), home=home)
    register_simulated_cluster(app, home)
    credentials.new_credential(app, credentials.NewCredential("aws", "aws", {"profile": "p"}))
    pool = node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name="big", credentials="aws", region="us-east-1", vm_type="m7i.large",
        min_vms=VMS, max_vms=VMS))
    app.ledger.dispose()
    return pool.id


def main() -> None:
    global VMS, RUNS, WARMUP
    if _cli.parse(__doc__).smoke:
        VMS, RUNS, WARMUP = 2, 1, 0
    from automation.app import App
    from automation.engine.mock.runner import MockEngineRunner
    from automation.ledger import open_ledger
    from automation.stack_targets import pool_target

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        pool = setup(home)
        app = App(ledger=open_ledger(f"sqlite:///{home / 'anycloud.db'}"), home=home)
        target = pool_target(app, pool)
        runner = MockEngineRunner(home)
        evals, rules, violations = [], [], 0
        for i in range(RUNS + WARMUP):
            t0 = time.perf_counter()
            run = runner.evaluate(target, reveal_secrets=True)
            t1 = time.perf_counter()
            findings = runner.check_policy(run)
            t2 = time.perf_counter()
            if i >= WARMUP:  # the first run pays the imports
                evals.append(t1 - t0)
                rules.append(t2 - t1)
            violations = len([f for f in findings if f.enforcement == "mandatory"])
        resources = len(run.resources)
        anycloud = str(Path(sys.executable).with_name("anycloud"))
        env = {**os.environ, "ANYCLOUD_HOME": str(home)}
        env.pop("ANYCLOUD_DATABASE_URL", None)
        cli = time_command([anycloud, "policy", "check", pool], RUNS, env, bool(WARMUP))
        base = time_command([sys.executable, "-c", "pass"], RUNS, env, bool(WARMUP))
        helped = time_command([anycloud, "--help"], RUNS, env, bool(WARMUP))
        app.ledger.dispose()
    total = median(evals) + median(rules)
    print_table(
        f"policy check, {VMS}-VM AWS pool ({resources} resources, {violations} mandatory "
        f"violations), median of {RUNS}",
        ["phase", "ms", "share / ratio"],
        [
            ("mock-engine run of the stack program", ms(median(evals)),
             f"{median(evals) / total:.0%} of in-process"),
            ("policy rules over the registered resources", ms(median(rules)),
             f"{median(rules) / total:.0%} of in-process"),
            ("in-process total", ms(total), "100%"),
            ("`anycloud policy check` (subprocess, imports included)", ms(median(cli)),
             f"{median(cli) / median(base):.0f}x python -c pass"),
            ("baseline: python -c pass", ms(median(base)), "1x"),
            ("baseline: anycloud --help", ms(median(helped)),
             f"{median(helped) / median(base):.0f}x python -c pass"),
        ],
    )


if __name__ == "__main__":
    main()
