"""`node-pool create` and `node-pool list --json` with 1,000 pools, before and after the big
catalog (issue 10 asks: no slower).

"Before" is the newest commit that still read the hand-picked data/catalog.toml (exported with
``git archive`` by ``bench_catalog.old_tree``); "after" is this checkout. Each tree gets its
own ledger, seeded by that tree's own schema module with 1,000 ready pools of two running VMs
(m7i.large in us-east-1, a type both catalogs know; ``benchmarks._seed``), and runs as a
real subprocess whose working directory is the tree (``python -c`` puts it first on
sys.path). ``create`` adds a new pool per run (distinct names), validated against the catalog
and written to the ledger.

    .venv/bin/python benchmarks/bench_catalog_pools.py [--smoke]     (BENCH_RUNS=7 by default)

--smoke: 3 pools, one run of each command, no warm-up run.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import _cli  # noqa: E402
from benchmarks._seed import seed  # noqa: E402
from benchmarks._table import median, ms, print_table  # noqa: E402
from benchmarks._trees import run_cli  # noqa: E402
from benchmarks.bench_catalog import old_tree  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "7"))
POOLS = 1000
WARMUP = 1  # runs first, not counted

def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "ANYCLOUD_HOME": str(home), "ANYCLOUD_ENGINE": "mock"}
    env.pop("ANYCLOUD_DATABASE_URL", None)
    env.pop("PYTHONPATH", None)
    return env


def measure(tree: Path, home: Path) -> dict[str, list[float]]:
    seed(tree, home, [("aws", "m7i.large", "us-east-1")], POOLS, 2)
    env = _env(home)
    listed = [run_cli(tree, env, "node-pool", "list", "--json")
              for _ in range(RUNS + WARMUP)][WARMUP:]
    created = [run_cli(tree, env, "node-pool", "create", f"new-{i}", "--cluster", "bench",
                    "--credentials", "aws", "--region", "us-east-1", "--vm-type", "m7i.large",
                    "--min-vms", "1", "--max-vms", "1", "--json")
               for i in range(RUNS + WARMUP)][WARMUP:]
    return {"node-pool list --json": listed, "node-pool create --json": created}


def main() -> None:
    global RUNS, POOLS, WARMUP
    if _cli.parse(__doc__).smoke:
        RUNS, POOLS, WARMUP = 1, 3, 0
    with tempfile.TemporaryDirectory() as tmp:
        before = measure(old_tree(Path(tmp) / "old"), Path(tmp) / "home-before")
        after = measure(ROOT, Path(tmp) / "home-after")
    rows = [(case, ms(median(before[case])), ms(median(after[case])),
             f"{median(after[case]) / median(before[case]):.2f}x") for case in before]
    print_table(f"{POOLS} pools x 2 VMs in the ledger, {RUNS} runs each, median wall ms "
                "(subprocess; before = hand-picked catalog.toml, after = catalog.sqlite)",
                ["command", "before", "after", "after / before"], rows)


if __name__ == "__main__":
    main()
