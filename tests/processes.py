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

MARK = "ANYCLOUD_TEST_SESSION"


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state letter), or None for a process that is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), fields[0]


def _ancestors(pid: int) -> set[int]:
    out = set()
    while pid > 1 and pid not in out:
        out.add(pid)
        stat = _stat(pid)
        if stat is None:
            break
        pid = stat[0]
    return out


def leftovers(session: str) -> dict[int, str]:
    """Live processes of this session whose ancestry no longer reaches this process: each
    with its command line. Zombies are not counted (their parent will reap them)."""
    mark = f"{MARK}={session}".encode()
    me = os.getpid()
    found: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if pid == me or stat is None or stat[1] == "Z":
            continue
        try:
            if mark not in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
                continue
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if me in _ancestors(pid):
            continue  # still one of ours (a server a fixture runs, a test's child)
        found[pid] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    return found


def wait_for_exit(session: str, before: set[int], seconds: float) -> dict[int, str]:
    """What is still left after ``seconds`` (plugins exit a moment after their engine), not
    counting ``before``."""
    deadline = time.monotonic() + seconds
    while True:
        left = {p: c for p, c in leftovers(session).items() if p not in before}
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)
