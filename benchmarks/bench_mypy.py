"""mypy with the full provider SDKs (the [tool.mypy] config as is, what `make lint` runs)
against the trimmed SDK stubs of `make typecheck` (tools/mypy/), on a snapshot of HEAD.

For each configuration: a cold run (fresh --cache-dir), a warm run (cache present, nothing
changed) and a run after editing one of our modules (components/vm/aws.py, which imports
pulumi_aws); then the trimmed configuration through the mypy daemon. Wall time, CPU time
and the peak RSS of the mypy process, median of --runs runs; the old cold run is slow
(minutes, ~7.6 GB) so it runs --old-cold-runs times (default 1). The last column counts the
type errors each run found in the snapshot: it must be the same for every configuration.
The snapshot is HEAD exported with ``git archive`` into a temporary directory (neither the
working tree nor .git is touched).

    python benchmarks/bench_mypy.py [--runs 3] [--old-cold-runs 1] [--skip-daemon] [--smoke]

--smoke checks only the cheapest path: the stub build (first and cached, into a temporary
stub cache; the first one takes the SDK reads from the user's stub cache, reading them there
once per SDK version, as ``make typecheck`` does) and the trimmed configuration over one
small module of ours, automation/crash.py (cold, warm, edit; one run each), no daemon, no
floor. The old configuration is left out because even over one file it reads pulumi_aws
whole (about 2 minutes); the daemon and the floor repeat a cold run and compare with the
old one. The trimmed run still goes through ``typecheck.prepare``, the stubs mypy reads
and the cache: what breaks when the stub tooling or the config moves.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import _cli  # noqa: E402
from benchmarks._table import median, print_table  # noqa: E402

MARKS = ("slow",)

EDITED = Path("components/vm/aws.py")
# The smoke's module: one that imports only the standard library, so that its cold run reads
# no SDK stub (the script's paths are the same; the figures mean nothing in a smoke run).
SMOKE_EDITED = Path("automation/crash.py")
# What the run costs without the provider SDKs at all: how much of the rest is our own code
# and its other dependencies. It loses every check of our SDK calls, hence only a reference.
FLOOR_OVERRIDE = ("\n[mypy-pulumi_aws.*,pulumi_gcp.*,pulumi_azure_native.*,pulumi_kubernetes.*]\n"
                  "follow_imports = skip\n")


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float
    peak_mb: float
    errors: tuple[str, ...] = ()  # the type errors found: the same for every configuration


def run_measured(cmd: Sequence[str], cwd: Path) -> Sample:
    """One mypy run; its peak RSS from the kernel's rusage of that very child."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):  # 1: type errors found; anything else: mypy failed
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output.decode()}")
    errors = tuple(line for line in output.decode().splitlines() if ": error:" in line)
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, errors)


def export_head(dest: Path) -> Path:
    """HEAD's tracked files in ``dest`` (``git archive``: nothing in the repository changes)."""
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=REPO, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def edit(snapshot: Path, n: int, edited: Path = EDITED) -> None:
    path = snapshot / edited
    path.write_text(path.read_text() + f"# bench edit {n}\n")


def measure(cmd: list[str], snapshot: Path, caches: Path, cold_runs: int,
            runs: int, edited: Path = EDITED) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {"cold": [], "warm": [], "edit": []}
    for i in range(cold_runs):
        cache = caches / f"cold-{i}"
        out["cold"].append(run_measured([*cmd, "--cache-dir", str(cache)], snapshot))
        print(f"  cold {i + 1}/{cold_runs}: {out['cold'][-1]}", file=sys.stderr)
    cache = caches / "cold-0"
    for _ in range(runs):
        out["warm"].append(run_measured([*cmd, "--cache-dir", str(cache)], snapshot))
    for i in range(runs):
        edit(snapshot, i, edited)
        out["edit"].append(run_measured([*cmd, "--cache-dir", str(cache)], snapshot))
    return out


def daemon_peak_mb(status_file: Path) -> float:
    pid = json.loads(status_file.read_text())["pid"]
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure_daemon(config: Path, snapshot: Path, caches: Path,
                   runs: int) -> dict[str, list[Sample]]:
    status = caches / "dmypy.json"
    dmypy = [sys.executable, "-m", "mypy.dmypy", "--status-file", str(status)]
    out: dict[str, list[Sample]] = {"daemon start": [], "daemon edit": []}
    try:
        run = [*dmypy, "run", "--", "--config-file", str(config),
               "--cache-dir", str(caches / "daemon")]
        start = run_measured(run, snapshot)
        out["daemon start"].append(
            Sample(start.wall, float("nan"), daemon_peak_mb(status), start.errors))
        for i in range(runs):
            edit(snapshot, 100 + i)
            sample = run_measured(run, snapshot)
            out["daemon edit"].append(
                Sample(sample.wall, float("nan"), daemon_peak_mb(status), sample.errors))
    finally:
        subprocess.run([*dmypy, "stop"], cwd=snapshot, capture_output=True)
    return out


def main() -> None:
    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--runs", type=int, default=3, help="runs of each warm/edit figure "
                       "and of the trimmed cold run (median)")
        p.add_argument("--old-cold-runs", type=int, default=1,
                       help="cold runs of the full-SDK configuration (minutes, ~7.6 GB each)")
        p.add_argument("--skip-daemon", action="store_true", help="leave out the dmypy rows")

    args = _cli.parse(__doc__, MARKS, options)
    if args.smoke:
        args.runs, args.skip_daemon = 1, True
    from tools.mypy import stubs, typecheck

    mypy = str(Path(sys.executable).with_name("mypy"))
    # Smoke: mypy checks one small module (and what it imports), not the config's packages.
    edited = SMOKE_EDITED if args.smoke else EDITED
    only = [str(edited)] if args.smoke else []
    old: dict[str, list[Sample]] = {}
    floor: Sample | None = None
    with tempfile.TemporaryDirectory(prefix="bench-mypy-") as tmp:
        root = Path(tmp)
        snapshot = export_head(root / "snapshot")
        original = (snapshot / edited).read_text()
        stub_root = root / "stubs"
        if args.smoke:  # the SDK reads come from the user's stub cache (read there once)
            stubs.seed_sdk_reads(stub_root)
        t0 = time.perf_counter()
        config, plan = typecheck.prepare(snapshot, cache_root=stub_root)
        first_build = time.perf_counter() - t0
        shutil.rmtree(stub_root / plan.key())  # keep the premise markers: a later build
        t0 = time.perf_counter()
        typecheck.prepare(snapshot, cache_root=stub_root)
        cached_build = time.perf_counter() - t0
        print("stubs:", sorted(plan.files), "whole:", sorted(plan.whole), file=sys.stderr)
        if not args.smoke:
            print("old configuration", file=sys.stderr)
            old = measure([mypy], snapshot, root / "old", args.old_cold_runs, args.runs)
            (snapshot / edited).write_text(original)
        print("trimmed configuration", file=sys.stderr)
        new = measure([mypy, "--config-file", str(config), *only], snapshot, root / "new",
                      args.runs, args.runs, edited)
        (snapshot / edited).write_text(original)
        if not args.skip_daemon:
            new |= measure_daemon(config, snapshot, root / "new", args.runs)
        if not args.smoke:
            floor_config = root / "floor.ini"
            floor_config.write_text("".join(
                line for line in config.read_text().splitlines(keepends=True)
                if not line.startswith("mypy_path")) + FLOOR_OVERRIDE)
            floor = run_measured([mypy, "--config-file", str(floor_config), "--cache-dir",
                                  str(root / "floor")], snapshot)

    def versus_old(value: float, scenario: str, attr: str) -> str:
        if scenario not in old:
            return "-"
        return f"{value / median([getattr(s, attr) for s in old[scenario]]):.2f}x"

    rows: list[list[object]] = []
    for scenario in ("cold", "warm", "edit"):
        for name, results in (("full SDKs (old)", old), ("trimmed stubs (new)", new)):
            if scenario not in results:
                continue
            samples = results[scenario]
            wall, cpu = median([s.wall for s in samples]), median([s.cpu for s in samples])
            rows.append([f"{scenario}: {name}", len(samples), f"{wall:.1f}",
                         f"{min(s.wall for s in samples):.1f}", f"{cpu:.1f}",
                         f"{median([s.peak_mb for s in samples]):.0f}",
                         versus_old(wall, scenario, "wall"), versus_old(cpu, scenario, "cpu"),
                         "/".join(sorted({str(len(s.errors)) for s in samples}))])
    if floor is not None:
        rows.append(["cold: SDKs skipped (floor, not a valid config)", 1, f"{floor.wall:.1f}",
                     f"{floor.wall:.1f}", f"{floor.cpu:.1f}", f"{floor.peak_mb:.0f}",
                     versus_old(floor.wall, "cold", "wall"),
                     versus_old(floor.cpu, "cold", "cpu"), "-"])
    for scenario in ("daemon start", "daemon edit"):
        if scenario in new:
            samples = new[scenario]
            wall = median([s.wall for s in samples])
            rows.append([f"{scenario}: trimmed (dmypy)", len(samples), f"{wall:.1f}",
                         f"{min(s.wall for s in samples):.1f}", "-",
                         f"{median([s.peak_mb for s in samples]):.0f}",
                         f"{versus_old(wall, 'edit', 'wall')} vs old edit", "-",
                         "/".join(sorted({str(len(s.errors)) for s in samples}))])
    if old:
        same = old["cold"][0].errors == new["cold"][0].errors
        what = (f"mypy on a snapshot of HEAD (old cold: {args.old_cold_runs} run(s); others "
                f"median of {args.runs})")
        verdict = f"old and new report the same type errors: {'yes' if same else 'NO'}"
    else:
        what = f"mypy on a snapshot of HEAD, trimmed stubs over {edited} only (--smoke)"
        verdict = "old configuration not run"
    print_table(
        f"{what}; stub build {first_build:.1f} s first "
        f"({'SDK reads from the user cache' if args.smoke else 'reads the SDKs once'}), "
        f"{cached_build:.1f} s after; {verdict}",
        ["run", "n", "wall s", "min s", "cpu s", "peak MB", "wall vs old", "cpu vs old",
         "type errors"], rows)


if __name__ == "__main__":
    main()
