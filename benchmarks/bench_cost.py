"""`node-pool list --json` with 1,000 pools, before and after each pool shows its cost.

"Before" is the code of the commit before cost per pool (the parent of the commit that added
automation/services/cost.py), unpacked with ``git archive`` into a temporary directory; "after"
is this checkout. Both run as real subprocesses over the same ledger: 1,000 pools with two
billed VMs each, over DISTINCT (cloud, type, region) offerings (1 = every pool the same type,
1,000 = every pool a different one: one price lookup each, the worst case). Issue 10 asks that
list is no slower.

    .venv/bin/python benchmarks/bench_cost.py [--smoke]     (BENCH_RUNS=5 by default)

--smoke: 3 pools over 2 distinct offerings (two pools share one: a repeated and a distinct
key), one run of each tree's ``list``, no warm-up run; that run is also the check that the
subprocess runs the tree it is meant to (a separate run in the full mode). The full run's
spreads (1, 50 and 1,000 offerings) are one spread in smoke: the same code over other data
(``lookup_prices`` looks up the distinct keys, however many).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._seed import seed
from benchmarks._table import median, ms, print_table, time_command

ROOT = Path(__file__).resolve().parent.parent
POOLS = 1000
VMS_PER_POOL = 2
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
WARMUP = True
_CLI = "import sys; from automation.cli import cli; sys.exit(cli())"


def offerings(n: int) -> list[tuple[str, str, str]]:
    """``n`` priced (provider, type, region) offerings of the catalog, spread over clouds."""
    import sqlite3

    from automation.catalog.store import CATALOG_FILE, data_dir

    con = sqlite3.connect(f"file:{data_dir() / CATALOG_FILE}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT t.provider, t.name, r.region FROM offerings o JOIN vm_types t ON t.id = o.type_id "
        "JOIN regions r ON r.id = o.region_id WHERE o.price_usd_hour IS NOT NULL "
        "AND t.arch = 'x86_64' ORDER BY (o.type_id * 7919 + o.region_id) % 104729 LIMIT ?",
        (n,)).fetchall()
    con.close()
    return [(str(p), str(t), str(r)) for p, t, r in rows]


def unpack_before(into: Path) -> str:
    """The tree of the commit before cost per pool; returns its short id."""
    added = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--diff-filter=A", "--format=%H", "--",
         "automation/services/cost.py"], check=True, capture_output=True, text=True,
    ).stdout.split()[-1]
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", f"{added}^"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return added[:9] + "^"


def _env(home: Path, code: Path) -> dict[str, str]:
    env = {**os.environ, "ANYCLOUD_HOME": str(home), "PYTHONPATH": str(code)}
    env.pop("ANYCLOUD_DATABASE_URL", None)
    return env


def _check_code(env: dict[str, str], code: Path, has_cost: bool) -> float:
    """The subprocess runs the tree it is meant to (an editable install must not win);
    the seconds that run of ``node-pool list --json`` took."""
    began = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _CLI, "node-pool", "list", "--json"], env=env,
                         check=True, capture_output=True, text=True).stdout
    took = time.perf_counter() - began
    assert ('"cost"' in out) == has_cost, f"{code}: wrong tree on the path"
    return took


def main() -> None:
    global RUNS, POOLS, WARMUP
    spreads = (1, 50, POOLS)
    smoke = _cli.parse(__doc__).smoke
    if smoke:
        RUNS, POOLS, WARMUP = 1, 3, False
        spreads = (2,)
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # python -c puts the working directory first on sys.path
        before = Path(tmp) / "before"
        commit = unpack_before(before)
        results: list[tuple[str, list[float]]] = [
            ("python -c pass", time_command([sys.executable, "-c", "pass"], RUNS, warmup=WARMUP)),
        ]
        for distinct in spreads:
            for label, code, has_cost in (("before", before, False), ("after", ROOT, True)):
                # Each tree seeds its own ledger: the old code refuses a newer schema.
                home = Path(tmp) / f"home-{distinct}-{label}"
                seed(code, home, offerings(distinct), POOLS, VMS_PER_POOL)
                env = _env(home, code)
                checked = _check_code(env, code, has_cost)
                args = [sys.executable, "-c", _CLI, "node-pool", "list", "--json"]
                # Smoke: its one run is the check's (the same command).
                times = [checked] if smoke else time_command(args, RUNS, env, WARMUP)
                results.append((f"{label}: {distinct} distinct offerings", times))
    rows = []
    for i, (name, times) in enumerate(results):
        ratio = "-" if i == 0 or name.startswith("before") else (
            f"{median(times) / median(results[i - 1][1]):.2f}x")
        rows.append((name, ms(median(times)), ms(min(times)), ms(max(times)), ratio))
    print_table(f"node-pool list --json, {POOLS} pools x {VMS_PER_POOL} billed VMs, {RUNS} runs "
                f"each (ms); before = {commit}",
                ["case", "median", "min", "max", "after / before"], rows)


if __name__ == "__main__":
    main()
