"""The generated VM catalog (data/catalog.sqlite) against the hand-picked TOML it replaced.

Measured in one run, medians of BENCH_RUNS fresh processes each:
- cold ``anycloud catalog list --gpu H100 --json`` (the old tree had no such command: its
  baseline loads the old TOML catalog with the old code and prints its H100 types as JSON);
- one ``create``-style validation (open the catalog + ``check_placement`` of m7i.large in
  us-east-1, timed inside a fresh process after its imports, both trees' own code);
- ``node-pool list --json`` start-up, which must not open the catalog (both trees);
- size on disk, with the storage alternative the generator's README weighs: the same rows as
  sorted, gzip-compressed columns (and its cold open + one lookup).

The old tree is ``git archive`` of the last commit holding data/catalog.toml, exported to a
temporary directory (the working tree is not touched); benchmarks/fixtures/
catalog-handpicked.toml is that file, kept for reference.

    .venv/bin/python benchmarks/bench_catalog.py [--smoke]     (BENCH_RUNS=7 by default)

--smoke: every measure once, no warm-up run.
"""

from __future__ import annotations

import bisect
import gzip
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import _cli  # noqa: E402
from benchmarks._table import median, ms, print_table, time_command  # noqa: E402
from benchmarks._trees import export  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "7"))
WARMUP = True
NEW_DB = ROOT / "data" / "catalog.sqlite"

# Runs in the old tree only, where the catalog was one module (automation/catalog.py).
_OLD_LIST = """
import json
from automation.catalog import load_catalog
cat = load_catalog()
print(json.dumps([dict(provider=k, **t.model_dump()) for k, p in cat.providers.items()
                  for t in p.vm_types if t.gpu_model and "H100" in t.gpu_model]))
"""

# Runs in both trees: the catalog module (old) or package (new), whichever the tree has.
_LOOKUP = """
import time
t0 = time.perf_counter()
try:
    from automation.catalog.store import load_catalog
except ImportError:
    from automation.catalog import load_catalog
from automation.validation import check_placement
import stacks.pins  # the data-dir rule: an import, timed by neither side
t1 = time.perf_counter()
placed = check_placement(load_catalog(), "aws", "us-east-1", None, "m7i.large")
t2 = time.perf_counter()
assert placed.vm_type.vcpus == 2
print(t2 - t1)
"""


def old_tree(dest: Path) -> Path:
    """Export the newest commit that still has data/catalog.toml (HEAD, or the parent of the
    commit that removed it), read-only, into ``dest``."""
    head_has = subprocess.run(["git", "cat-file", "-e", "HEAD:data/catalog.toml"], cwd=ROOT,
                              capture_output=True).returncode == 0
    removed = subprocess.run(["git", "rev-list", "-1", "HEAD", "--", "data/catalog.toml"],
                             cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    return export("HEAD" if head_has else f"{removed}^", dest)


def timed_inside(tree: Path, code: str, env: dict[str, str]) -> list[float]:
    out = []
    for _ in range(RUNS):
        run = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True,
                             capture_output=True, text=True)
        out.append(float(run.stdout.strip().splitlines()[-1]))
    return out


def time_in(tree: Path, args: list[str], env: dict[str, str]) -> list[float]:
    """Like ``time_command``, run in ``tree``: ``python -c`` puts the working directory first
    on sys.path, so the tree's own packages are the ones imported."""
    if WARMUP:
        subprocess.run(args, cwd=tree, env=env, check=True, capture_output=True)
    out = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(args, cwd=tree, env=env, check=True, capture_output=True)
        out.append(time.perf_counter() - start)
    return out


def columns_file(dest: Path) -> Path:
    """The alternative layout: every table's rows as sorted columns, gzip-compressed JSON."""
    con = sqlite3.connect(f"file:{NEW_DB}?mode=ro&immutable=1", uri=True)
    tables = {}
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        cur = con.execute(f"SELECT * FROM {table} ORDER BY 1, 2")
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        tables[table] = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    con.close()
    dest.write_bytes(gzip.compress(json.dumps(tables).encode(), mtime=0))
    return dest


def columns_lookup(path: Path) -> float:
    start = time.perf_counter()
    tables = json.loads(gzip.decompress(path.read_bytes()))
    types = tables["vm_types"]
    keys = list(zip(types["provider"], types["name"], strict=True))
    i = bisect.bisect_left(keys, ("aws", "m7i.large"))
    assert types["vcpus"][i] == 2
    return time.perf_counter() - start


def sqlite_lookup() -> float:
    start = time.perf_counter()
    con = sqlite3.connect(f"file:{NEW_DB}?mode=ro&immutable=1", uri=True)
    row = con.execute("SELECT vcpus FROM vm_types WHERE provider = 'aws' AND name = ?",
                      ("m7i.large",)).fetchone()
    con.close()
    assert row == (2,)
    return time.perf_counter() - start


def main() -> None:
    global RUNS, WARMUP
    if _cli.parse(__doc__).smoke:
        RUNS, WARMUP = 1, False
    anycloud = str(Path(sys.executable).with_name("anycloud"))
    with tempfile.TemporaryDirectory() as tmp:
        old = old_tree(Path(tmp) / "old")
        home = Path(tmp) / "home"
        env = {**os.environ, "ANYCLOUD_HOME": str(home)}
        env.pop("ANYCLOUD_DATABASE_URL", None)
        env.pop("PYTHONPATH", None)
        old_toml = old / "data" / "catalog.toml"
        cli = "from automation.cli import cli; cli()"
        rows: list[tuple[object, ...]] = []

        def row(name: str, new: list[float], base: list[float]) -> None:
            rows.append((name, ms(median(new)), ms(median(base)),
                         f"{median(new) / median(base):.2f}"))

        row("catalog list --gpu H100 --json (cold, ms)",
            time_command([anycloud, "catalog", "list", "--gpu", "H100", "--json"], RUNS, env,
                         WARMUP),
            time_in(old, [sys.executable, "-c", _OLD_LIST], env))
        lookups_new = timed_inside(ROOT, _LOOKUP, env)
        lookups_old = timed_inside(old, _LOOKUP, env)
        rows.append(("create validation: open + check_placement (us)",
                     f"{median(lookups_new) * 1e6:.0f}", f"{median(lookups_old) * 1e6:.0f}",
                     f"{median(lookups_new) / median(lookups_old):.2f}"))
        # Separate homes: each tree migrates its own ledger schema.
        old_env = {**env, "ANYCLOUD_HOME": str(Path(tmp) / "old-home")}
        row("node-pool list --json start-up (ms)",
            time_command([anycloud, "node-pool", "list", "--json"], RUNS, env, WARMUP),
            time_in(old, [sys.executable, "-c", cli, "node-pool", "list", "--json"], old_env))
        new_size, old_size = NEW_DB.stat().st_size, old_toml.stat().st_size
        rows.append(("size on disk (KiB)", f"{new_size / 1024:.0f}", f"{old_size / 1024:.1f}",
                     f"{new_size / old_size:.0f}"))
        con = sqlite3.connect(f"file:{NEW_DB}?mode=ro&immutable=1", uri=True)
        n_types, n_offers = (con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                             for t in ("vm_types", "offerings"))
        con.close()
        print_table(
            f"Catalog: {n_types} types, {n_offers} offerings (new) vs the hand-picked TOML "
            f"(old), medians of {RUNS} runs",
            ["measure", "new", "old", "new/old"], rows)
        print()
        alt = columns_file(Path(tmp) / "catalog.columns.json.gz")
        sq = [sqlite_lookup() for _ in range(RUNS)]
        co = [columns_lookup(alt) for _ in range(RUNS)]
        print_table(
            "Storage choice: the same rows, SQLite (chosen) vs sorted gzip columns",
            ["layout", "size KiB", "open + one lookup (us)", "vs SQLite"],
            [("SQLite, read-only immutable", f"{new_size / 1024:.0f}",
              f"{median(sq) * 1e6:.0f}", "1.00"),
             ("sorted columns, gzip JSON", f"{alt.stat().st_size / 1024:.0f}",
              f"{median(co) * 1e6:.0f}", f"{median(co) / median(sq):.0f}")])


if __name__ == "__main__":
    main()
