"""The engine's processes, ended together.

The Pulumi CLI starts its language host, provider plugins and policy-pack analyzer as
children in process groups of their own, so ending the CLI's group leaves them running, each
holding a few hundred MB, until a restart. What they keep is the session: a process that
drives the engine starts a session of its own (``new_session``), and whoever ends it early
(a worker that died, an operation cancelled or timed out) ends every process of that session
(``end_session``). Linux reads the session from ``/proc``; elsewhere the group is all we end.

A worker also ends its own session when the process that started it dies (``worker_session``):
nobody would read its answer, and an engine left running without its caller acts on a stack
that no lease covers any more.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path


def new_session() -> None:
    """Make this process the leader of a new session."""
    with contextlib.suppress(PermissionError):  # already a session leader
        os.setsid()


def worker_session(interval: float = 0.5) -> None:
    """A worker's initializer: lead a new session, and end all of it (the worker, its engine
    and the engine's plugins) once the parent is gone, which Linux shows as this process
    being handed to another parent (init or a subreaper)."""
    new_session()
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        for pid in _members(os.getsid(0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...;
    the name may hold spaces and parentheses), or None for a process that is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _session_of(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[3]) if fields and len(fields) > 3 else None


def end_session(sid: int) -> list[int]:
    """SIGKILL every process of session ``sid`` but this one; the pids signalled. Never
    this process's own session (a worker that failed to start one has none to end)."""
    if sid <= 1 or sid == os.getsid(0):
        return []
    if not Path("/proc").is_dir():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(sid, signal.SIGKILL)
        return []
    ended = []
    for pid in _members(sid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            ended.append(pid)
    return ended


def end_leftovers() -> list[int]:
    """In a worker, once its operation returned: SIGKILL every other process of the session
    it leads (none when it leads none); the pids signalled. Between operations nothing of
    ours runs there, but an engine that was killed mid-run leaves its plugins behind, handed
    to init, each holding its memory (the kubernetes plugin waits minutes for the engine's
    health check to fail)."""
    if os.getsid(0) != os.getpid():
        return []
    ended = []
    for pid in _members(os.getpid()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            ended.append(pid)
    return ended


def _members(sid: int) -> Iterator[int]:
    """The processes of session ``sid`` but this one (Linux: from /proc)."""
    if not Path("/proc").is_dir():
        return
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != me and _session_of(int(entry.name)) == sid:
            yield int(entry.name)
