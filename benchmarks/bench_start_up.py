"""Where a start-up path's time goes: `node-pool list --json`, `status --json` and `create
--json` with 1,000 pools in the ledger (SQLite), each a fresh process; and `list --json` and
`status --json` in remote mode, against `anycloud serve` over the same ledger on loopback.

Per command, medians of several runs: the wall time of the real `anycloud` subprocess, and,
from a driver process that runs the same command in-process, the split of that time into
interpreter start-up (`python -c pass`), imports (every module the command loads, imported
before it runs), and the command itself, divided by cProfile's own-time shares into the
database (our ledger code, sqlite3, SQLAlchemy), rendering (our output helpers, json,
pydantic serialisation, rich) and the rest (for a remote command: the wait for the server).

Each command is compared with its floor, measured in the same run: what no command of its
kind can start faster than (issue 35). Embedded list and status: click + pydantic with one
model built; embedded create: click + pydantic + SQLAlchemy; remote list and status: click +
httpx2 + one GET of the same route (the server's time included). Goals: embedded <= 1.15x
its floor, remote <= 1.2x its floor and remote list below embedded list. Our packages are
byte-compiled first, as `pip install` leaves them (the table says so).

    .venv/bin/python benchmarks/bench_start_up.py [--smoke] [--runs N]

--smoke: 3 pools, one run of each command, of its floor and of its driver (no warm-up run):
every row above, each from one process of each kind.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from automation.client.remote import PAGE
from benchmarks import _cli
from benchmarks._table import median, ms, print_table

MARKS: tuple[str, ...] = ()
# Each floor ends as the anycloud script does (automation/cli/gc_mode.py): what is alive is
# frozen, so the interpreter's last collection does not walk it.
_EXIT = "\nimport gc\ngc.freeze()"
# What no command of this CLI can start faster than: click (the command line), pydantic with
# one model built and dumped (every answer is one), and SQLAlchemy (every write).
_ONE_MODEL = ("from pydantic import BaseModel\nclass A(BaseModel):\n    x: int\n"
              "A(x=1).model_dump_json()")
# A thin client's: click and one GET of the route with httpx2 (argv: URL, token).
_ONE_GET = ("import sys, click, httpx2\nhttpx2.get(sys.argv[1], headers={'Authorization': "
            "'Bearer ' + sys.argv[2]}).raise_for_status()" + _EXIT)
FLOORS = {
    "models": ("click + pydantic, one model", f"import click\n{_ONE_MODEL}{_EXIT}"),
    "writes": ("click + pydantic + sqlalchemy",
               f"import click, sqlalchemy\n{_ONE_MODEL}{_EXIT}"),
}
EMBEDDED_GOAL, REMOTE_GOAL = 1.15, 1.2

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
    from benchmarks.bench_api import _address, _launch, _stop, bootstrap_admin, local_env
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

    def wall_of(argv: list[str], env: dict[str, str]) -> float:
        walls = [_wall(argv, env) for _ in range(runs + int(warmup))]
        return median(walls[int(warmup):])

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        pool = seed(home)
        env = local_env(home)
        base = wall_of([sys.executable, "-c", "pass"], env)
        quiet = {**env, "PYDANTIC_DISABLE_PLUGINS": "__all__"}  # as the anycloud script sets
        floor = {key: wall_of([sys.executable, "-c", code], quiet)
                 for key, (_, code) in FLOORS.items()}
        names = itertools.count()
        create = ["--cluster", "bench", "--credentials", "bench", "--region", "us-east-1",
                  "--vm-type", "m7i.large", "--min-vms", "1", "--max-vms", "1", "--json"]
        cases: list[tuple[str, Callable[[], list[str]], dict[str, str], str]] = [
            ("node-pool list --json", lambda: ["node-pool", "list", "--json"], env, "models"),
            ("node-pool status --json", lambda: ["node-pool", "status", pool, "--json"], env,
             "models"),
            ("node-pool create --json",
             lambda: ["node-pool", "create", f"bench-new-{next(names)}", *create], env,
             "writes"),
        ]
        server = _launch(env)  # it starts while the token is made: it reads tokens per call
        try:
            token = bootstrap_admin(env)
            url = _address(server)
            remote = {**env, "ANYCLOUD_API_URL": url, "ANYCLOUD_TOKEN": token}
            for route, label in ((f"/v1/node-pools?pageSize={PAGE}", "list"),
                                 (f"/v1/node-pools/{pool}", "status")):
                floor[f"get {label}"] = wall_of(
                    [sys.executable, "-c", _ONE_GET, url + route, token], env)
            cases += [
                ("node-pool list --json, remote", lambda: ["node-pool", "list", "--json"],
                 remote, "get list"),
                ("node-pool status --json, remote",
                 lambda: ["node-pool", "status", pool, "--json"], remote, "get status"),
            ]
            measured = {name: measure(argv, case_env, anycloud, runs, warmup)
                        for name, argv, case_env, _ in cases}
        finally:
            _stop(server)
    rows = [_row(name, measured[name], base, floor[key], _goal(key)) for name, _, _, key in cases]
    embedded, thin = measured[cases[0][0]]["wall"], measured[cases[3][0]]["wall"]
    print_table(f"Start-up paths, {pools} pools in SQLite, median of {runs} runs (ms); "
                f"python -c pass: {ms(base)} ms; bytecode present (compiled first, as pip "
                "install leaves it)",
                ["command", "wall", "imports", "database", "rendering", "other", "floor",
                 "vs floor", "goal", "met"], rows)
    print_table(f"The floors under them (median of {runs}, ms)", ["floor", "wall", "vs pass"],
                [(_floor_name(key), ms(t), f"{t / base:.1f}x") for key, t in floor.items()])
    print(f"remote list --json below embedded list --json: "
          f"{'yes' if thin < embedded else 'no'} ({ms(thin)} vs {ms(embedded)} ms)")


def _goal(floor_key: str) -> float:
    return REMOTE_GOAL if floor_key.startswith("get ") else EMBEDDED_GOAL


def _floor_name(key: str) -> str:
    if key.startswith("get "):
        return f"click + httpx2 + one GET ({key.removeprefix('get ')} route)"
    return FLOORS[key][0]


def _row(name: str, m: dict[str, float], base: float, floor: float, goal: float
         ) -> tuple[str, ...]:
    ratio = m["wall"] / floor
    return (name, ms(m["wall"]), ms(m["imports"]), ms(m["db"]), ms(m["render"]),
            ms(m["other"]), ms(floor), f"{ratio:.2f}x", f"<= {goal:.2f}x",
            "yes" if ratio <= goal else "no")


if __name__ == "__main__":
    main()
