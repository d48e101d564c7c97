"""Fixtures of the AgentPool tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.automation.agentpools.session_dirs import reachable_dir


@pytest.fixture
def agent_data() -> Iterator[Path]:
    """Where a test's agents keep their data dirs: reachable by the session user."""
    with reachable_dir() as data:
        yield data
