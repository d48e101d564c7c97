"""The suite's time budget (tests/time_budget.py): a run over it fails, and a slower machine
stretches it by its calibration, never a faster one shrinks it."""

from __future__ import annotations

import pytest

from tests.time_budget import budget_seconds, workload_seconds

pytest_plugins = ["pytester"]


def test_the_budget_stretches_on_a_slower_machine_and_never_shrinks() -> None:
    assert budget_seconds(30, reference=0.1, measured=0.2) == 3600
    assert budget_seconds(30, reference=0.1, measured=0.05) == 1800
    assert budget_seconds(30, reference=0, measured=0.2) == 1800


def test_the_calibration_is_a_positive_timing() -> None:
    assert 0 < workload_seconds(repeats=1) < 60


def _run(pytester: pytest.Pytester, minutes: str, reference: str) -> pytest.RunResult:
    pytester.makeini(f"""
        [pytest]
        time_budget_minutes = {minutes}
        time_budget_reference_seconds = {reference}
    """)
    pytester.makepyfile("import time\n\ndef test_takes_a_while():\n    time.sleep(0.3)\n")
    return pytester.runpytest_inprocess("-p", "tests.time_budget")


def test_a_run_over_its_budget_fails_and_says_so(pytester: pytest.Pytester) -> None:
    result = _run(pytester, minutes="0.001", reference="0")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["TIME BUDGET: the suite took * min, over its budget of *"])


def test_a_slow_machine_stretches_the_budget_past_the_run(pytester: pytest.Pytester) -> None:
    # A reference a million times faster than any machine: the 0.06 s written here becomes
    # far more than the run takes.
    result = _run(pytester, minutes="0.001", reference="0.000000001")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["TIME BUDGET: the suite took * min, within its budget of *"])
