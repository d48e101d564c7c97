"""The local control plane's own guarantees: nothing left running after a stop, a failed
start or the death of the process that started it; a missing tool named with the fix."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from automation.devcluster import binaries, control_plane
from tests.conftest import missing

STARTER = """
import sys, time
from pathlib import Path
from automation.devcluster import control_plane
plane = control_plane.start(Path(sys.argv[1]))
print(" ".join(str(p.pid) for p in plane.processes.values()), flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead but not yet reaped by its parent.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.split(")")[-1].split()[0] != "Z"


def need_tools() -> None:
    try:
        for name in control_plane.COMPONENTS:
            binaries.find(name)
    except binaries.ToolMissing as exc:
        missing(exc.message)


@pytest.mark.kube
def test_components_die_with_the_process_that_started_them(tmp_path: Path) -> None:
    need_tools()
    proc = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path / "cp")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == len(control_plane.COMPONENTS) and all(map(alive, pids))
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)]


@pytest.mark.kube
def test_stop_leaves_nothing_running(tmp_path: Path) -> None:
    need_tools()
    plane = control_plane.start(tmp_path / "cp")
    pids = [p.pid for p in plane.processes.values()]
    began = time.monotonic()
    plane.stop()
    assert time.monotonic() - began < 10  # components stop in order, none is killed late
    assert not [p for p in pids if alive(p)]


@pytest.mark.kube
def test_a_component_that_fails_stops_the_others_and_shows_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    need_tools()
    broken = tmp_path / "bin"
    broken.mkdir()
    apiserver = broken / "kube-apiserver"
    apiserver.write_text("#!/bin/sh\necho 'flag provided but not defined: --oops' >&2\nexit 1\n")
    apiserver.chmod(0o755)
    monkeypatch.setenv("ANYCLOUD_TOOLS_BIN", os.pathsep.join(
        [str(broken), os.environ.get("ANYCLOUD_TOOLS_BIN", "")]))
    with pytest.raises(control_plane.ControlPlaneFailed) as failed:
        control_plane.start(tmp_path / "cp")
    assert "kube-apiserver exited with 1" in failed.value.message
    assert "flag provided but not defined: --oops" in failed.value.message
    assert _running_under(tmp_path) == []  # etcd, started first, was stopped


def _running_under(root: Path) -> list[str]:
    """Command lines of live processes that name a path under ``root``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(root) in cmdline and proc.name.isdigit() and alive(int(proc.name)):
            found.append(cmdline)
    return found


def test_a_missing_tool_is_named_with_how_to_build_it(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYCLOUD_TOOLS_BIN", str(tmp_path))
    monkeypatch.setenv("ANYCLOUD_TOOLS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(binaries.ToolMissing) as caught:
        control_plane.start(tmp_path / "cp")
    assert "`etcd` was not found" in caught.value.message
    assert "python3 tools/build.py" in caught.value.message
    assert caught.value.code == "TOOL_MISSING"
    assert not (tmp_path / "cp").exists()  # nothing started, nothing written
