"""Ending an engine's session ends its plugins too (automation.engine.processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from automation.engine.processes import end_session

# A stand-in for the Pulumi CLI: it starts a "plugin" in a process group of its own (as the
# CLI does), prints the plugin's pid, and waits.
_ENGINE = """
import subprocess, sys, time
plugin = subprocess.Popen(["sleep", "300"], process_group=0)
print(plugin.pid, flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _engine() -> tuple[subprocess.Popen[str], int]:
    engine = subprocess.Popen([sys.executable, "-c", _ENGINE], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    assert engine.stdout is not None
    return engine, int(engine.stdout.readline())


def test_ending_the_group_leaves_the_plugin_ending_the_session_does_not() -> None:
    engine, plugin = _engine()
    try:
        os.killpg(engine.pid, 9)  # what a process-group kill reaches
        engine.wait(timeout=10)
        time.sleep(0.2)
        assert _alive(plugin), "the plugin's own group kept it out of the engine's group"
        assert plugin in end_session(engine.pid)  # the session the engine led
        deadline = time.monotonic() + 5
        while _alive(plugin) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(plugin)
    finally:
        end_session(engine.pid)


def test_a_worker_never_ends_its_own_session() -> None:
    assert end_session(os.getsid(0)) == []
    assert end_session(0) == [] and end_session(1) == []


# A stand-in for a reconciler: it starts a worker with the workers' initializer, has the
# worker start an "engine" with a plugin of its own, prints their pids, and waits, until it
# is SIGKILLed.
_PARENT = """
import os, subprocess, sys, time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from automation.engine.processes import worker_session

def start_engine():
    engine = subprocess.Popen(["sleep", "300"])
    plugin = subprocess.Popen(["sleep", "300"], process_group=0)
    return os.getpid(), engine.pid, plugin.pid

if __name__ == "__main__":
    pool = ProcessPoolExecutor(1, mp_context=get_context("spawn"), initializer=worker_session)
    print(*pool.submit(start_engine).result(), flush=True)
    time.sleep(300)
"""


def test_a_worker_ends_its_session_when_its_parent_dies(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    root = str(Path(__file__).resolve().parents[3])
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": root}, start_new_session=True)
    assert parent.stdout is not None
    pids = [int(p) for p in parent.stdout.readline().split()]
    assert len(pids) == 3 and all(_alive(p) for p in pids)
    os.kill(parent.pid, 9)  # an OOM kill of the reconciler
    parent.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "the worker, its engine or plugin outlived it"
