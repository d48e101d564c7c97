"""Where anycloud keeps its state.

Read straight from the environment: this runs on every command, and pydantic-settings
costs ~150 ms to import, half the start-up budget of ``node-pool list``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str

    @classmethod
    def from_env(cls, home: str | os.PathLike[str] | None = None) -> Settings:
        root = Path(home or os.environ.get("ANYCLOUD_HOME") or Path.home() / ".anycloud")
        root = root.expanduser()
        url = os.environ.get("ANYCLOUD_DATABASE_URL") or f"sqlite:///{root / 'anycloud.db'}"
        return cls(home=root, database_url=url)
