"""The server's engine for the API routes and dashboard pages that run one (preview,
unlock): ``ANYCLOUD_ENGINE`` on the server, made once per app when first needed. A client's
``--engine`` is refused in remote mode: which engine holds a stack's state is the server's
business."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from automation.engine.runner import StackRunner


def stack_runner(state: Any) -> StackRunner:
    """The engine of the app whose ``state`` this is."""
    if getattr(state, "runner", None) is None:
        from automation.engine.select import make_runner

        state.runner = make_runner(state.ctx.home)
    found: StackRunner = state.runner
    return found
