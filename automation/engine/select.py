"""Which StackRunner a command gets: always the one it asked for.

The Pulumi engine by default (``--engine`` or ``ANYCLOUD_ENGINE`` choose); the SDK's mock
engine only when named (``--engine mock``, ``--simulate``, ``demo``). A missing engine is an
error that says how to install it, raised before anything is read or written: a control
loop that quietly fell back to the mock engine would record invented VMs as running.
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


def check_simulated(requested: str | None) -> None:
    """``--simulate`` runs the simulated cloud and the simulated cluster. The real engine can
    drive the simulated cloud (through stand-in provider plugins), but a node pool's stack
    also writes bootstrap-token Secrets through the kubernetes provider, and the simulated
    cluster has no API server: an engine the user names is the one that runs, so ``--engine
    pulumi`` with it is refused rather than quietly replaced, naming where it does run.
    (ANYCLOUD_ENGINE, the server's default, is not a choice made for this command.)"""
    if requested not in (None, "mock"):
        raise InvalidInput("--engine", requested, "must be mock, or left out, with --simulate: "
                           "the simulated cluster has no API server for the pools' "
                           "bootstrap-token Secrets; `anycloud demo --cluster local` runs node "
                           "pools on the real engine against a local one, their cloud "
                           "simulated by stand-in plugins")


def simulated_runner(home: Path, requested: str | None, cloud: Any) -> StackRunner:
    """The runner of the simulated cloud ``cloud``: the mock engine (``check_simulated``)."""
    check_simulated(requested)
    return make_runner(home, "mock", cloud=cloud)
