"""Engine events into progress: a pure mapping, a JSON-lines writer and a live display.

The Automation API calls ``on_event`` on another thread and swallows what it raises, so the
driver only queues events there; ``drain`` renders them on the calling thread.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

from automation.engine.runner import ProgressEvent, ProgressSink

_DONE = object()


def _name_from_urn(urn: str) -> str:
    return urn.rsplit("::", 1)[-1] if urn else ""


def progress_from_engine_event(event: Any) -> ProgressEvent | None:
    """One ``pulumi.automation.events.EngineEvent`` → a progress line (or nothing)."""
    if event.resource_pre_event is not None:
        m = event.resource_pre_event.metadata
        return ProgressEvent(kind="resource", op=str(m.op.value), type=m.type,
                             name=_name_from_urn(m.urn), state="started", urn=m.urn)
    if event.res_outputs_event is not None:
        m = event.res_outputs_event.metadata
        return ProgressEvent(kind="resource", op=str(m.op.value), type=m.type,
                             name=_name_from_urn(m.urn), state="done", urn=m.urn)
    if event.res_op_failed_event is not None:
        m = event.res_op_failed_event.metadata
        return ProgressEvent(kind="resource", op=str(m.op.value), type=m.type,
                             name=_name_from_urn(m.urn), state="failed", urn=m.urn)
    if event.diagnostic_event is not None:
        d = event.diagnostic_event
        if d.ephemeral or d.severity == "debug":
            return None
        return ProgressEvent(kind="diagnostic", severity=d.severity,
                             message=d.message.strip(), urn=d.urn)
    if event.policy_event is not None:
        p = event.policy_event
        return ProgressEvent(kind="policy", severity=p.enforcement_level, name=p.policy_name,
                             message=p.message.strip(), urn=p.resource_urn)
    if event.summary_event is not None:
        changes = {str(getattr(k, "value", k)): v
                   for k, v in event.summary_event.resource_changes.items()}
        return ProgressEvent(kind="summary", message=json.dumps(changes, sort_keys=True))
    return None


def run_with_events(
    work: Callable[[Callable[[Any], None]], Any], sink: ProgressSink | None
) -> Any:
    """Run ``work(on_event)`` on a worker thread and hand every event to ``sink`` here."""
    events: queue.Queue[Any] = queue.Queue()
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = work(events.put)
        except BaseException as exc:  # re-raised on the calling thread below
            outcome["error"] = exc
        finally:
            events.put(_DONE)

    worker = threading.Thread(target=target, name="pulumi-engine", daemon=True)
    worker.start()
    while (item := events.get()) is not _DONE:
        progress = progress_from_engine_event(item)
        if progress is not None and sink is not None:
            sink(progress)
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


def json_lines_sink(stream: TextIO | None = None) -> ProgressSink:
    """``--json``: one JSON object a line."""
    out = stream or sys.stdout

    def sink(event: ProgressEvent) -> None:
        out.write(json.dumps({"event": event.model_dump(exclude_none=True)}) + "\n")
        out.flush()

    return sink


def describe(event: ProgressEvent) -> str:
    """One readable line, the same on a TTY and in a log."""
    if event.kind == "resource":
        mark = {"started": "…", "done": "✓", "failed": "✗"}[event.state or "started"]
        return f"{mark} {event.op:<8} {event.type}  {event.name}"
    if event.kind == "policy":
        return f"policy {event.severity}: {event.name}: {event.message}"
    if event.kind == "summary":
        return f"summary {event.message}"
    return f"{event.severity}: {event.message}"


def text_sink(stream: TextIO | None = None) -> ProgressSink:
    """Plain lines on stderr: what a log or a non-TTY gets (nothing animated)."""
    err = stream or sys.stderr

    def sink(event: ProgressEvent) -> None:
        err.write(describe(event) + "\n")
        err.flush()

    return sink


class LiveDisplay:
    """On a TTY: one line per resource, updated in place, under a title."""

    def __init__(self, title: str) -> None:
        from rich.console import Console
        from rich.live import Live

        self.title = title
        self.lines: dict[str, str] = {}
        self.notes: list[str] = []
        self.live = Live(console=Console(stderr=True), refresh_per_second=8, transient=False)

    def __enter__(self) -> LiveDisplay:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.update(self._render())
        self.live.__exit__(None, None, None)

    def _render(self) -> Any:
        from rich.text import Text

        body = "\n".join([self.title, *self.lines.values(), *self.notes])
        return Text(body)

    def __call__(self, event: ProgressEvent) -> None:
        if event.kind == "resource" and event.urn:
            self.lines[event.urn] = describe(event)
        else:
            self.notes.append(describe(event))
        self.live.update(self._render())


def progress_sink(as_json: bool, title: str) -> tuple[ProgressSink, Callable[[], None]]:
    """The sink for a command: JSON lines, a live display on a TTY, or plain lines.

    Returns the sink and a function to call when the run is over.
    """
    if as_json:
        return json_lines_sink(), lambda: None
    if sys.stderr.isatty():
        display = LiveDisplay(title).__enter__()
        return display, lambda: display.__exit__(None, None, None)
    return text_sink(), lambda: None
