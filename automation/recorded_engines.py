"""The engines a run is recorded with, and how the user reads them. Light on purpose: the
CLI's remote mode shows them without loading the models."""

from __future__ import annotations

from typing import Any, Literal

# The engine a run is recorded with: the real one, the mock one, or ``standin``: the real
# engine whose cloud calls stand-in plugins answered from the simulated cloud
# (``--simulate --engine pulumi``, ``demo --cluster local``). Neither simulated one bought
# anything, and a real engine's pass must leave what they recorded alone.
RecordedEngine = Literal["pulumi", "mock", "standin"]
SIMULATED_ENGINES = ("mock", "standin")


def recorded_engine(runner: Any) -> RecordedEngine:
    """The engine a pass over ``runner`` records: ``standin`` when a stand-in plugin answers
    its cloud calls (the runner names it in ``cloud_label``)."""
    engine: RecordedEngine = "standin" if getattr(runner, "cloud_label", None) else runner.engine
    return engine


def engine_label(engine: str | None) -> str:
    """How the user reads a recorded engine: whether anything was bought."""
    return {"mock": "mock (simulated VMs: nothing was bought)",
            "standin": "pulumi, stand-in cloud (simulated VMs: nothing was bought)",
            "pulumi": "pulumi"}.get(engine or "", "")
