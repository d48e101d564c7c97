"""Which file-backend locks a run may remove: only those of a ``pulumi`` of this host that
is gone (``automation.engine.stale_locks``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from types import SimpleNamespace

from automation.engine.stale_locks import remove_stale_locks, stale_locks


def _lock(state: Path, name: str, pid: int, host: str | None = None) -> Path:
    folder = state / ".pulumi" / "locks" / "organization" / "anycloud" / "node-pool-np-1"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"pid": pid, "username": "root", "hostname":
                                host or socket.gethostname(), "timestamp": "2026-12-08T00:00Z"}))
    return path


def test_only_a_gone_or_reused_pid_of_this_host_is_stale(tmp_path: Path) -> None:
    state = tmp_path / "state"
    url = f"file://{state}?metadata=skip"
    # A pid no process can have (above the kernel's pid_max): one that merely exited may be
    # reused at once by a busy machine's next process.
    gone = SimpleNamespace(pid=int(Path("/proc/sys/kernel/pid_max").read_text()) + 1)
    # A live process named pulumi (a sleep under that name) holds a lock it may still need.
    fake = tmp_path / "bin" / "pulumi"
    fake.parent.mkdir()
    fake.symlink_to("/bin/sleep")
    live = subprocess.Popen([str(fake), "30"])
    try:
        dead = _lock(state, "dead", gone.pid)
        reused = _lock(state, "reused", os.getpid())  # alive, but not pulumi
        held = _lock(state, "held", live.pid)
        elsewhere = _lock(state, "elsewhere", gone.pid, host="another-host")
        assert stale_locks(url, "anycloud", "node-pool-np-1") == sorted([dead, reused])
        assert stale_locks("s3://bucket/state", "anycloud", "node-pool-np-1") == []
        assert sorted(remove_stale_locks(url, "anycloud", "node-pool-np-1")) == sorted(
            [dead, reused])
        assert not dead.exists() and not reused.exists()
        assert held.exists() and elsewhere.exists()
    finally:
        live.kill()
        live.wait()
