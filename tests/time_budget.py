"""The suite's time budget, a pytest plugin (loaded by tests/conftest.py).

A run that takes longer than ``time_budget_minutes`` (pyproject.toml) fails, so a growing
suite is caught by the tests rather than by CI's time limit. Wall time also grows when the
machine is slower, and this one is not always equally fast: on 2026-12-06 the same suite and
the same Go build took twice as long in the afternoon as in the morning. So the budget is
stated for a reference machine and stretched by how much slower this one is: a fixed
pure-Python workload is timed before the run and after it, and the budget is multiplied by
the slower of the two timings over ``time_budget_reference_seconds`` (never shrunk below
the written budget on a faster machine).

Judged by the process that reports (xdist's controller, not its workers), inside the
terminal reporter's own sessionfinish, before it prints the summary.
"""

from __future__ import annotations

import time

import pytest

STARTED = pytest.StashKey[float]()
CALIBRATED = pytest.StashKey[float]()
VERDICT = pytest.StashKey[tuple[bool, str]]()


def workload_seconds(repeats: int = 5) -> float:
    """The best of ``repeats`` timings of a fixed CPU-bound loop (the best, because a
    moment's contention only ever makes one slower)."""
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        total = 0
        for i in range(1_000_000):
            total += i * i % 7
        best = min(best, time.perf_counter() - began)
    return best


def budget_seconds(minutes: float, reference: float, measured: float) -> float:
    """The written budget, stretched by this machine's slowness against the reference."""
    return minutes * 60 * max(1.0, measured / reference if reference > 0 else 1.0)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("time_budget_minutes", "a run of the suite that takes longer fails (0: none)",
                  default="0")
    parser.addini("time_budget_reference_seconds",
                  "the calibration workload's time on the machine the budget is written for",
                  default="0")


def _judges(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput") and bool(
        float(config.getini("time_budget_minutes") or 0))


def pytest_configure(config: pytest.Config) -> None:
    # Before xdist starts its workers, so the timing is taken on a quiet machine.
    if _judges(config):
        config.stash[CALIBRATED] = workload_seconds()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[STARTED] = time.monotonic()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if not _judges(config):
        return
    took = time.monotonic() - config.stash[STARTED]
    minutes = float(config.getini("time_budget_minutes"))
    reference = float(config.getini("time_budget_reference_seconds") or 0)
    measured = max(config.stash[CALIBRATED], workload_seconds())
    allowed = budget_seconds(minutes, reference, measured)
    machine = (f"calibration {measured:.3f} s against the reference {reference:g} s"
               if reference > 0 else "no reference: not stretched")
    over = took > allowed
    config.stash[VERDICT] = (over, (
        f"the suite took {took / 60:.1f} min, "
        + ("over" if over else "within")
        + f" its budget of {allowed / 60:.1f} min ({minutes:g} min written in "
        f"pyproject.toml, {machine})"
        + (": make it faster, or raise the budget with the reason in the commit"
           if over else "")))
    if over and exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    if VERDICT in config.stash:
        over, text = config.stash[VERDICT]
        terminalreporter.write_line(f"TIME BUDGET: {text}", red=over, bold=over)
