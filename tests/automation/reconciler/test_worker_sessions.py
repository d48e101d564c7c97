"""A control loop whose workers keep dying keeps no processes behind: each worker leads a
session, and a dead worker's session (its engine, its plugins) is ended with it."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from automation.reconciler.workers import RunnerSpec, WorkerDied, WorkerRunner
from tests.automation.engine.test_pulumi_driver import pool_target
from tests.conftest import SESSION
from tests.processes import marked

HERE = "tests.automation.reconciler.test_worker_sessions"
KILLS = 50


class DyingEngine:
    """In a worker: start a stand-in for a provider plugin in a process group of its own (as
    the Pulumi CLI does), then die as the OOM killer would make the worker die."""

    engine = "mock"

    def __init__(self, home: str) -> None:
        self.home = home

    def up(self, target: Any, on_progress: Any = None) -> Any:
        subprocess.Popen(["sleep", "300"], process_group=0)
        os.kill(os.getpid(), signal.SIGKILL)


class _Inner:
    engine = "mock"


def _ours() -> set[int]:
    return set(marked(SESSION))


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
        after = _ours()
    finally:
        runner.close()
    assert after - before == set(), f"{len(after - before)} processes more after {KILLS} kills"
