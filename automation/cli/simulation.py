"""The stack runner of a ``--simulate`` command: the mock engine over the simulated cloud,
or with ``--engine pulumi`` the real engine with the stand-in cloud plugins
(``automation.devcluster.simulated_engine``), stopped when the command ends."""

from __future__ import annotations

from typing import Any

import click

from automation.engine.select import simulated_engine


def check_engine(requested: str | None) -> None:
    """Refuse an unknown engine, and for the real one a missing tool (naming how to build
    it), before anything is opened."""
    if simulated_engine(requested) == "pulumi":
        from automation.devcluster.engine_env import local_tools

        local_tools()


def simulated_runner(app: Any, world: Any, requested: str | None) -> Any:
    if simulated_engine(requested) == "mock":
        from automation.engine.mock.runner import MockEngineRunner

        return MockEngineRunner(app.home, cloud=world.cloud)
    from automation.devcluster.simulated_engine import SimulatedEngine

    engine = SimulatedEngine(app.home / "sim")
    runner = engine.open(world.cloud)
    click.get_current_context().call_on_close(engine.close)
    return runner
