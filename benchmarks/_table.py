"""Shared helpers for benchmark scripts: timing subprocesses and printing a table."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Callable, Sequence


def time_command(args: Sequence[str], runs: int, env: dict[str, str] | None = None,
                 warmup: bool = True) -> list[float]:
    """Wall-clock seconds of each run (one warm-up run first, not counted, unless not
    ``warmup``: the smoke runs of benchmarks/_cli.py)."""
    if warmup:
        subprocess.run(args, env=env, check=True, capture_output=True)
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, env=env, check=True, capture_output=True)
        out.append(time.perf_counter() - start)
    return out


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [list(map(str, header))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(title)
    for n, row in enumerate(cells):
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                        enumerate(zip(row, widths, strict=True))))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def latency(call: Callable[[], object], n: int) -> tuple[float, float]:
    """Median and p99 seconds of ``n`` calls, one after another."""
    took = []
    for _ in range(n):
        began = time.perf_counter()
        call()
        took.append(time.perf_counter() - began)
    took.sort()
    return statistics.median(took), took[min(n - 1, int(n * 0.99))]
