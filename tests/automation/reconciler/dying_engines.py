"""Engines that die or hang inside a reconciler worker process
(tests/automation/reconciler/test_worker_sessions.py). Kept apart from the test module so a
worker imports only these few lines, not the test suite: each of that test's fifty workers
starts in a fraction of the time."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any


class DyingEngine:
    """In a worker: start a stand-in for a provider plugin in a process group of its own (as
    the Pulumi CLI does), then die as the OOM killer would make the worker die."""

    engine = "mock"

    def __init__(self, home: str) -> None:
        self.home = home

    def up(self, target: Any, on_progress: Any = None) -> Any:
        subprocess.Popen(["sleep", "300"], process_group=0)
        os.kill(os.getpid(), signal.SIGKILL)


class HangingEngine:
    """In a worker: start a stand-in for a provider plugin, then hang, as an engine waiting
    on a provider that never answers."""

    engine = "mock"

    def __init__(self, home: str) -> None:
        self.home = home

    def up(self, target: Any, on_progress: Any = None) -> Any:
        subprocess.Popen(["sleep", "300"], process_group=0)
        time.sleep(300)
