"""Where a start-up path's time goes: `node-pool list --json`, `status --json` and `create
--json` with 1,000 pools in the ledger (SQLite), each a fresh process.

Per command, medians of several runs: the wall time of the real `anycloud` subprocess, and,
from a driver process that runs the same command in-process, the split of that time into
interpreter start-up (`python -c pass`), imports (every module the command loads, imported
before it runs), and the command itself, divided by cProfile's own-time shares into the
database (our ledger code, sqlite3, SQLAlchemy), rendering (our output helpers, json,
pydantic serialisation, rich) and the rest. The ratio column is the command's median over
`python -c pass` measured in the same run. Goals (issue 18): list and status <= 150 ms,
create <= 300 ms on an idle machine. Our packages are byte-compiled first, as an install
would leave them.

    .venv/bin/python benchmarks/bench_start_up.py [--smoke] [--runs N]
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, ms, print_table

MARKS: tuple[str, ...] = ()
# What no command of this CLI can start faster than: click (the command line), pydantic with
# one model built and dumped (every answer is one), and SQLAlchemy (every write).
_ONE_MODEL = ("from pydantic import BaseModel\nclass A(BaseModel):\n    x: int\n"
              "A(x=1).model_dump_json()")
FLOORS = [
    ("python: import click", "import click"),
    ("python: click + pydantic, one model", f"import click\n{_ONE_MODEL}"),
    ("python: click + pydantic + sqlalchemy", f"import click, sqlalchemy\n{_ONE_MODEL}"),
]

# Runs the command in-process as the anycloud script would: its process settings, the imports
# (the modules a probe run of the same command loaded), then the command under cProfile, whose
# own-time is split by where it was spent.
_DRIVER = r"""
import cProfile, importlib, io, json, pstats, sys, time
modules, argv = json.loads(sys.argv[1]), sys.argv[2:]
t0 = time.perf_counter()
from automation.cli import short_lived_process
short_lived_process()  # as the anycloud script does before anything else
for m in modules:
    try:
        importlib.import_module(m)
    except Exception:
        pass
t1 = time.perf_counter()
from automation.cli import cli
profile = cProfile.Profile()
out = io.StringIO()
real_stdout, sys.stdout = sys.stdout, out
profile.enable()
try:
    cli(argv, standalone_mode=False)
except SystemExit:
    pass
profile.disable()
sys.stdout = real_stdout
t2 = time.perf_counter()
shares = {"db": 0.0, "render": 0.0, "other": 0.0}
DB = ("automation/ledger/", "sqlite3", "sqlalchemy", "psycopg", "alembic")
RENDER = ("automation/cli/output.py", "json/", "pydantic", "rich/", "click/utils.py",
          "method 'write'", "to_json", "model_dump")
for (path, _, name), (_, _, tottime, _, _) in pstats.Stats(profile).stats.items():
    where = f"{path} {name}"
    key = ("db" if any(k in where for k in DB) else
           "render" if any(k in where for k in RENDER) else "other")
    shares[key] += tottime
total = sum(shares.values()) or 1.0
run = t2 - t1
print(json.dumps({"imports": t1 - t0, **{k: run * v / total for k, v in shares.items()}}),
      file=sys.stderr)
"""

_PROBE = r"""
import json, sys
from automation.cli import cli
try:
    cli(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if not m.startswith("__"))), file=sys.stderr)
"""


def _env(home: Path) -> dict[str, str]:
    env = {**os.environ, "ANYCLOUD_HOME": str(home)}
    env.pop("ANYCLOUD_DATABASE_URL", None)
    return env


def _wall(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(args, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def _last_json(stderr: str) -> object:
    return json.loads(stderr.strip().splitlines()[-1])


def measure(argv: Callable[[], list[str]], env: dict[str, str], anycloud: str, runs: int,
            warmup: bool) -> dict[str, float]:
    """Median wall time of ``anycloud <argv()>`` and the median split of the driver's runs
    (``argv`` is called once per process: a create needs a new name each time)."""
    probe = subprocess.run([sys.executable, "-c", _PROBE, *argv()], env=env, check=True,
                           capture_output=True, text=True)
    modules = json.dumps(_last_json(probe.stderr))
    if warmup:
        _wall([anycloud, *argv()], env)
    walls = [_wall([anycloud, *argv()], env) for _ in range(runs)]
    splits: list[dict[str, float]] = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", _DRIVER, modules, *argv()], env=env,
                              check=True, capture_output=True, text=True)
        splits.append(_last_json(done.stderr))  # type: ignore[arg-type]
    return {"wall": median(walls),
            **{k: median([s[k] for s in splits]) for k in ("imports", "db", "render",
                                                             "other")}}


def compile_sources() -> None:
    """Byte-compile our packages first, as ``pip install`` does: with
    PYTHONDONTWRITEBYTECODE set (as on some CI machines) an editable install would otherwise
    compile every module on every run, and the figures would measure that."""
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("automation", "components", "stacks", "policies"):
        compileall.compile_dir(root / package, quiet=1)


def main() -> None:
    from benchmarks.bench_cli_list import seed

    def options(p: object) -> None:
        p.add_argument("--runs", type=int, default=9,  # type: ignore[attr-defined]
                       help="runs of each command (default 9)")

    args = _cli.parse(__doc__, MARKS, options)
    runs, warmup = (1, False) if args.smoke else (args.runs, True)
    compile_sources()
    pools = 3 if args.smoke else 1000
    import benchmarks.bench_cli_list as cli_list

    cli_list.POOLS = pools
    anycloud = str(Path(sys.executable).with_name("anycloud"))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        pool = seed(home)
        env = _env(home)
        base = median([_wall([sys.executable, "-c", "pass"], env)
                       for _ in range(runs + int(warmup))][int(warmup):])
        names = itertools.count()
        create = ["--cluster", "bench", "--credentials", "bench", "--region", "us-east-1",
                  "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1", "--json"]
        cases = [
            ("node-pool list --json", lambda: ["node-pool", "list", "--json"], 0.150),
            ("node-pool status --json", lambda: ["node-pool", "status", pool, "--json"], 0.150),
            ("node-pool create --json",
             lambda: ["node-pool", "create", f"bench-new-{next(names)}", *create], 0.300),
        ]
        rows = [_row(name, measure(argv, env, anycloud, runs, warmup), base, goal)
                for name, argv, goal in cases]
        quiet = {**env, "PYDANTIC_DISABLE_PLUGINS": "__all__"}  # as the anycloud script sets
        floors = [(name, median([_wall([sys.executable, "-c", code], quiet)
                                 for _ in range(runs + int(warmup))][int(warmup):]))
                  for name, code in FLOORS]
    print_table(f"Start-up paths, {pools} pools in SQLite, median of {runs} runs (ms); "
                f"python -c pass: {ms(base)} ms",
                ["command", "wall", "vs pass", "imports", "database", "rendering", "other",
                 "goal", "met"], rows)
    print_table("The floor under them: a process that only loads the stack the CLI is built "
                f"on (median of {runs}, ms)", ["process", "wall", "vs pass"],
                [(name, ms(t), f"{t / base:.1f}x") for name, t in floors])


def _row(name: str, m: dict[str, float], base: float, goal: float) -> tuple[str, ...]:
    return (name, ms(m["wall"]), f"{m['wall'] / base:.1f}x", ms(m["imports"]), ms(m["db"]),
            ms(m["render"]), ms(m["other"]), ms(goal), "yes" if m["wall"] <= goal else "no")


if __name__ == "__main__":
    main()
