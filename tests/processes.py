"""Processes this test session started and left behind.

Every process the suite starts inherits ``ANYCLOUD_TEST_SESSION`` (set once, in
``tests/conftest.py``), and keeps it down the tree: the Pulumi CLI, its language host, the
provider plugins and the policy-pack analyzer it starts. One that outlives its parent is
re-parented (to PID 1, or a subreaper) and keeps running: memory that nothing gives back.
Read from ``/proc``: Linux only, as the suite is.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from automation.engine.processes import stat_fields

MARK = "ANYCLOUD_TEST_SESSION"


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter), or None for a process that is gone."""
    fields = stat_fields(pid)
    return (int(fields[1]), fields[0]) if fields else None


def _ancestors(pid: int) -> set[int]:
    out = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        stat = _stat(pid)
        if stat is None:
            break
        pid = stat[0]
    return out


def marked(session: str) -> dict[int, str]:
    """Live processes carrying this session's mark (not this one, not zombies: their parent
    will reap them), each with its command line."""
    mark = f"{MARK}={session}".encode()
    me = os.getpid()
    found: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if stat is None or stat[1] == "Z":
            continue
        try:
            if mark not in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                continue
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        found[pid] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    return found


def leftovers(session: str) -> dict[int, str]:
    """Marked processes whose ancestry no longer reaches this process (a server a fixture
    runs, a test's child still do)."""
    me = os.getpid()
    return {pid: cmd for pid, cmd in marked(session).items() if me not in _ancestors(pid)}


def wait_for_exit(session: str, before: set[int], seconds: float, *,
                  orphans_only: bool = True) -> dict[int, str]:
    """What is still left after ``seconds`` (plugins exit a moment after their engine, a
    SIGKILLed session a moment after the signal), not counting ``before``: the leftovers, or
    with ``orphans_only=False`` every marked process, this one's children included."""
    find = leftovers if orphans_only else marked
    deadline = time.monotonic() + seconds
    while True:
        left = {p: c for p, c in find(session).items() if p not in before}
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)
