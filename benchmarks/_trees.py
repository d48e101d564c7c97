"""Another revision of the project beside this checkout, for before/after benchmarks: its
tree exported with ``git archive``, and its CLI run cold in it (``python -c`` from the tree's
own directory, first on sys.path)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = "import sys; from automation.cli import cli; sys.exit(cli())"


def export(commit: str, dest: Path) -> Path:
    """``commit``'s tree in ``dest`` (created)."""
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True,
                             capture_output=True).stdout
    dest.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def run_cli(tree: Path, env: dict[str, str], *args: str) -> float:
    """Seconds for one cold ``anycloud ARGS`` run from ``tree``."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", CLI, *args], cwd=tree, env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - began
