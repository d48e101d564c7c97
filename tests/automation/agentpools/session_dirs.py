"""Where test agents keep session directories, and the sandbox config they need here.

A session runs as another user (nobody) when the agent may switch user (the tests run as
root): its directory must be reachable by that user, and pytest's ``tmp_path`` is not (its
ancestors are 0700). Where the agent cannot switch (a test run as an ordinary user), a session
runs only with the unsafe opt-in, which the tests of session mechanics take."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from automation.agentpools.sandbox import can_switch_user


@contextmanager
def reachable_dir() -> Iterator[Path]:
    """A fresh directory the session user may search through (mode 0711), removed after."""
    path = Path(tempfile.mkdtemp(prefix="anycloud-agents-"))
    path.chmod(0o711)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def sandbox_section(**fields: object) -> dict[str, object]:
    """The ``sandbox_config`` a test agent that runs sessions needs on this machine, with
    ``fields``."""
    return fields if can_switch_user() else {"unsafe_same_user_sessions": True, **fields}


def write_config(path: Path, **sections: object) -> Path:
    """An agent config file of these sections (``sandbox_config`` as ``sandbox_section``'s,
    unless given)."""
    import yaml

    sections.setdefault("sandbox_config", sandbox_section())
    path.write_text(yaml.safe_dump(sections))
    return path
