"""Reports of unexpected errors: the full traceback goes to a file, one line to the user.

``write_crash_report(home, doing)`` is called inside an ``except`` block; it writes the
exception being handled to ``$ANYCLOUD_HOME/reports/<UTC time>-<pid>.txt`` (mode 0600: a
traceback may quote values) and returns the path, which the caller names in its one line.
"""

from __future__ import annotations

import os
import traceback
from datetime import UTC, datetime
from pathlib import Path


def write_crash_report(home: Path, doing: str) -> Path:
    folder = home / "reports"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    path = folder / f"{stamp}-{os.getpid()}.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"anycloud: unexpected error while {doing}\n\n{traceback.format_exc()}")
    return path
