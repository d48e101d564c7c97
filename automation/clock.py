"""Time comes from an injected clock so that logic and tests never read the wall clock."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

# Where a home keeps its simulated world's clock (``automation.simulators.world``).
SIMULATED_CLOCK = Path("sim") / "clock.json"


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to; shared by simulators and tests."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> None:
        self._now += delta


class PersistedClock(ManualClock):
    """A manual clock whose time lives in a file, shared by every process of the world."""

    def __init__(self, path: Path | None, start: datetime | None = None) -> None:
        self.path = path
        if path is not None and path.exists():
            start = datetime.fromisoformat(json.loads(path.read_text())["now"])
        super().__init__(start)

    def advance(self, delta: timedelta) -> None:
        super().advance(delta)
        self.save()

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".clock-")
        with os.fdopen(fd, "w") as fh:
            json.dump({"now": self.now().isoformat()}, fh)
        os.replace(tmp, self.path)


def home_clock(home: Path) -> Clock:
    """The clock a command on ``home`` records time with: the simulated world's, once the
    home holds one (``--simulate``), so that every event of a simulated pool (its creation,
    its passes, its adoption) is on one clock and ``history`` reads in order; otherwise
    the wall clock."""
    path = home / SIMULATED_CLOCK
    return PersistedClock(path) if path.exists() else SystemClock()
