"""Every benchmark still runs: ``--smoke`` (one small iteration of every code path it
measures, its table printed) and ``--help`` (its options, nothing run).

Parametrized over ``benchmarks/bench_*.py``, so a new benchmark is covered without being
listed here. Each script's marks come from its ``MARKS`` (see ``benchmarks/_cli.py``), read
from its source without importing it: ``kube`` and ``engine`` for the tools ``tools/build.py``
builds, ``postgres`` for the test PostgreSQL, ``slow`` for a smoke run of more than a few
seconds. A missing tool skips the test, or fails it under CI=true (``tests.conftest.missing``;
the script itself exits 1 there).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _cli
from tests.conftest import missing

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "benchmarks").glob("bench_*.py"))
# No provider SDK (nor the Pulumi SDK) is imported for --help.
HEAVY = ("pulumi",)


def marks_of(script: Path) -> tuple[str, ...]:
    """The script's module-level ``MARKS`` literal; () when it has none."""
    for node in ast.parse(script.read_text(), str(script)).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "MARKS" for t in targets):
                assert node.value is not None
                marks = tuple(ast.literal_eval(node.value))
                unknown = set(marks) - set(_cli.MARKERS)
                assert not unknown, f"{script.name}: MARKS names {sorted(unknown)}"
                return marks
    return ()


def _param(script: Path) -> object:
    return pytest.param(script, id=script.stem,
                        marks=[getattr(pytest.mark, m) for m in marks_of(script)])


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _tail(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-5000:]}"


def test_the_benchmarks_are_found() -> None:
    # Guards the parametrization below: an empty list would pass vacuously.
    assert SCRIPTS, f"no bench_*.py under {ROOT / 'benchmarks'}"


@pytest.mark.parametrize("script", [_param(s) for s in SCRIPTS])
def test_smoke_run_prints_its_table(script: Path) -> None:
    marks = marks_of(script)
    needs = [m for m in marks if m in _cli.TOOLS]
    if needs:
        # tests/conftest.py has put the built tool sets on ANYCLOUD_TOOLS_BIN.
        reason = _cli.tool_missing(*needs)
        if reason is not None:
            missing(reason)
    done = _run(str(script), "--smoke", timeout=600 if "slow" in marks else 120)
    if done.returncode == _cli.EXIT_MISSING:  # outside CI only: under CI=true it exits 1
        missing(done.stderr.strip().splitlines()[-1])
    assert done.returncode == 0, _tail(done)
    assert done.stdout.strip(), f"{script.name} --smoke printed no table\n{_tail(done)}"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_help_prints_the_options_and_runs_nothing(script: Path) -> None:
    # -X importtime lists every module imported (on stderr): none of the heavy ones.
    done = _run("-X", "importtime", str(script), "--help", timeout=60)
    assert done.returncode == 0, _tail(done)
    assert "usage:" in done.stdout and "--smoke" in done.stdout, done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    heavy = sorted(m for m in imported if m.split(".")[0].startswith(HEAVY))
    assert not heavy, f"{script.name} --help imports {heavy[:5]}"
