"""Which StackRunner a command gets: always the one it asked for.

The Pulumi engine by default (``--engine`` or ``ANYCLOUD_ENGINE`` choose); the SDK's mock
engine only when named (``--engine mock``, ``--simulate`` without ``--engine pulumi``,
``demo``). A missing engine is an error that says how to install it, raised before anything
is read or written: a control loop that quietly fell back to the mock engine would record
invented VMs as running.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from automation.engine.errors import EngineMissing
from automation.engine.runner import StackRunner
from automation.errors import InvalidInput

ENGINES = ("pulumi", "mock")


def engine_name(requested: str | None) -> str:
    name = requested or os.environ.get("ANYCLOUD_ENGINE") or "pulumi"
    if name not in ENGINES:
        field = "--engine" if requested else "ANYCLOUD_ENGINE"
        raise InvalidInput(field, name, "must be pulumi or mock")
    return name


def make_runner(home: Path, requested: str | None = None, *, cloud: Any = None) -> StackRunner:
    if engine_name(requested) == "pulumi":
        if shutil.which("pulumi") is None:
            raise EngineMissing()
        from automation.engine.pulumi_driver import AutomationRunner

        return AutomationRunner(home)
    from automation.engine.mock.runner import MockEngineRunner

    return MockEngineRunner(home, cloud=cloud)


def simulated_engine(requested: str | None) -> str:
    """The engine of ``--simulate``: the mock engine unless the command names ``--engine
    pulumi`` (the real engine, its cloud calls answered by the stand-in plugins). The
    server's default (ANYCLOUD_ENGINE) is not a choice made for this command."""
    return "mock" if requested is None else engine_name(requested)
