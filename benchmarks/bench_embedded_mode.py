"""Embedded mode must not get slower with the API (issue 20): ``node-pool list --json`` and
``status --json`` with 1,000 pools, cold processes, in the tree before the API work and in
this checkout, measured in the same run (goal: this / before <= 1.1).

"Before" is BENCH_BASE (default: the last commit before issue 20's first commit, found by
its message), exported with ``git archive``; each tree seeds its own ledger with its own
schema (``benchmarks._seed``; the two seeds run side by side, while this process
byte-compiles both trees' modules, as an install leaves them) and runs as ``python -c`` in
its own directory (first on sys.path). The runs alternate between the trees, so a busy
machine slows both alike.

    .venv/bin/python benchmarks/bench_embedded_mode.py [--smoke]   (BENCH_RUNS=9)

--smoke: 3 pools, one run of each command in each tree, no warm-up round.
"""

from __future__ import annotations

import compileall
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import _cli  # noqa: E402
from benchmarks._seed import seed  # noqa: E402
from benchmarks._table import median, ms, print_table  # noqa: E402
from benchmarks._trees import export, run_cli  # noqa: E402

MARKS = ("slow",)
RUNS = int(os.environ.get("BENCH_RUNS", "9"))
POOLS = 1000
_FIRST_API_COMMIT = "API tokens and roles; the agent broker behind them"


def base_commit() -> str:
    if os.environ.get("BENCH_BASE"):
        return os.environ["BENCH_BASE"]
    found = subprocess.run(["git", "log", "--format=%H", "-F", f"--grep={_FIRST_API_COMMIT}"],
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    return f"{found[-1]}^" if found else "HEAD"


def main() -> None:
    global RUNS, POOLS
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, POOLS = 1, 3
    with tempfile.TemporaryDirectory() as tmp:
        commit = base_commit()
        trees = {"before": export(commit, Path(tmp) / "before"), "this checkout": ROOT}
        homes = {name: Path(tmp) / f"home-{name.replace(' ', '-')}" for name in trees}
        with ThreadPoolExecutor(len(trees)) as side:  # each seed is a subprocess
            seeding = [side.submit(seed, tree, homes[name], [("aws", "m7i.large", "us-east-1")],
                                   POOLS, 2) for name, tree in trees.items()]
            for tree in trees.values():
                compileall.compile_dir(tree / "automation", quiet=1)
            for done in seeding:
                done.result()
        envs = {}
        for name, home in homes.items():
            env = {**os.environ, "ANYCLOUD_HOME": str(home),
                   "ANYCLOUD_CLI_CONFIG": str(home / "cli.json")}
            for var in ("ANYCLOUD_DATABASE_URL", "PYTHONPATH", "ANYCLOUD_API_URL",
                        "ANYCLOUD_TOKEN"):
                env.pop(var, None)
            envs[name] = env
        commands = {"node-pool list --json": ("node-pool", "list", "--json"),
                    "node-pool status --json": ("node-pool", "status", "np-000001", "--json")}
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(RUNS + (1 if RUNS > 1 else 0)):  # the first round warms the caches
            for command, args in commands.items():
                for name, tree in trees.items():
                    times.setdefault((command, name), []).append(run_cli(tree, envs[name], *args))
    skip = 1 if RUNS > 1 else 0
    rows = []
    for command in commands:
        before = median(times[(command, "before")][skip:])
        after = median(times[(command, "this checkout")][skip:])
        rows.append((command, ms(before), ms(after), f"{after / before:.2f}x",
                     "yes" if after / before <= 1.1 else "NO"))
    print_table(f"embedded mode, {POOLS} pools, cold process, median of {RUNS} (ms); before = "
                f"{commit}", ("command", "before", "this checkout", "ratio", "<= 1.1"), rows)


if __name__ == "__main__":
    main()
