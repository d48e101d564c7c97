"""Which StackRunner a command gets: the real engine when installed, else the mock engine."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from automation.engine.runner import StackRunner
from automation.errors import InvalidInput

ENGINES = ("pulumi", "mock")


def engine_name(requested: str | None) -> str:
    name = requested or os.environ.get("ANYCLOUD_ENGINE") or (
        "pulumi" if shutil.which("pulumi") else "mock"
    )
    if name not in ENGINES:
        raise InvalidInput("--engine", name, "must be pulumi or mock")
    return name


def make_runner(home: Path, requested: str | None = None, *, cloud: Any = None) -> StackRunner:
    if engine_name(requested) == "pulumi":
        from automation.engine.pulumi_driver import AutomationRunner

        return AutomationRunner(home)
    from automation.engine.mock_runner import MockEngineRunner

    return MockEngineRunner(home, cloud=cloud)
