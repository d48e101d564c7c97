"""A control loop whose workers keep dying keeps no processes behind: each worker leads a
session, and a dead worker's session (its engine, its plugins) is ended with it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from automation.engine.errors import StackTimeout
from automation.reconciler.workers import RunnerSpec, WorkerDied, WorkerRunner
from tests.automation.engine.test_pulumi_driver import pool_target
from tests.conftest import SESSION
from tests.processes import marked, wait_for_exit

HERE = "tests.automation.reconciler.dying_engines"
KILLS = 50


class _Inner:
    engine = "mock"


def _ours() -> set[int]:
    return set(marked(SESSION))


def _left_after(before: set[int]) -> set[int]:
    """Ours that are not in ``before``, once they have had 10 s to go: a dead worker's
    session is sent SIGKILL, not awaited."""
    return set(wait_for_exit(SESSION, before, 10, orphans_only=False))


@pytest.mark.slow
def test_fifty_dead_workers_leave_no_process_behind(tmp_path: Path) -> None:
    runner = WorkerRunner(_Inner(), 1, spec=RunnerSpec(f"{HERE}:DyingEngine",
                                                       {"home": str(tmp_path)}))
    target = pool_target()
    try:
        with pytest.raises(WorkerDied):  # the first also starts multiprocessing's helpers
            runner.up(target)
        before = _ours()
        for _ in range(KILLS - 1):
            with pytest.raises(WorkerDied):
                runner.up(target)
        left = _left_after(before)
    finally:
        runner.close()
    assert left == set(), f"{len(left)} processes more after {KILLS} kills"


def test_an_operation_past_its_time_is_ended_with_its_engine(tmp_path: Path) -> None:
    runner = WorkerRunner(_Inner(), 1, spec=RunnerSpec(f"{HERE}:HangingEngine",
                                                       {"home": str(tmp_path)}), timeout=2.0)
    target = pool_target()
    try:
        began = time.monotonic()
        with pytest.raises(StackTimeout, match="took more than 2 s") as err:
            runner.up(target)
        assert time.monotonic() - began < 30 and err.value.code == "STACK_TIMEOUT"
        before = _ours()
        with pytest.raises(StackTimeout):  # the next operation gets a new worker
            runner.up(target)
        assert _left_after(before) == set()  # nothing of the first or second left running
    finally:
        runner.close()


def test_a_bad_stack_timeout_names_the_variable() -> None:
    from automation.errors import InvalidInput
    from automation.settings import Settings

    for raw in ("soon", "0", "-5"):
        with pytest.raises(InvalidInput, match=r"ANYCLOUD_STACK_TIMEOUT .*must be a number"):
            Settings(home=Path("/nonexistent"), database_url="sqlite://",
                     stack_timeout=raw).limits()
    assert Settings(home=Path("/x"), database_url="sqlite://",
                    stack_timeout="90").limits().stack_timeout == 90.0
