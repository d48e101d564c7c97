"""Locks the file backend keeps for a ``pulumi`` run that no longer exists.

For the length of an update the diy (file) backend keeps a lock file,
``.pulumi/locks/<org>/<project>/<stack>/<uuid>.json``, naming the process that holds it
(``pid``, ``hostname``), and removes it when the update ends. A ``pulumi`` that is SIGKILLed
(with the reconciler, or the worker that drove it) cannot, and every later run then fails
"the stack is currently locked" until someone runs ``pulumi cancel``. A lock held by a
process of this host that is gone, or is no longer ``pulumi`` (its pid reused), is provably
stale and removed here; the caller already holds the pool's lease, so no live run of ours
can be behind it. A lock of a live ``pulumi``, of another host, or in a backend that is not
a file is left alone: ``STACK_LOCKED``, and ``anycloud node-pool unlock`` after a look.
"""

from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path
from urllib.parse import urlparse


def _alive_pulumi(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(argv) and Path(argv[0].decode(errors="replace")).name == "pulumi"


def stale_locks(backend_url: str, project: str, stack: str) -> list[Path]:
    """The stack's lock files whose holder is provably gone (none unless ``file://``)."""
    url = urlparse(backend_url)
    if url.scheme != "file":
        return []
    folder = Path(url.path) / ".pulumi" / "locks" / "organization" / project / stack
    here = socket.gethostname()
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            holder = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being written, or already gone: not ours to judge
        if holder.get("hostname") == here and not _alive_pulumi(int(holder.get("pid") or 0)):
            found.append(path)
    return found


def remove_stale_locks(backend_url: str, project: str, stack: str) -> list[Path]:
    """Remove the stack's stale locks (``stale_locks``); the ones removed."""
    removed = stale_locks(backend_url, project, stack)
    for path in removed:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return removed
