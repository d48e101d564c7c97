"""Recorded engine events replayed through EngineEvent.from_json into progress and JSON lines."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from pulumi.automation.events import EngineEvent

from automation.engine.events import (
    describe,
    json_lines_sink,
    progress_from_engine_event,
    run_with_events,
    text_sink,
)
from automation.engine.runner import ChangeSummary, ProgressEvent

RECORDED = json.loads((Path(__file__).with_name("recorded_events.json")).read_text())


def _events() -> list[EngineEvent]:
    return [EngineEvent.from_json(raw) for raw in RECORDED]


def test_replay_maps_each_kind() -> None:
    progress = [p for e in _events() if (p := progress_from_engine_event(e)) is not None]
    # prelude, debug and ephemeral diagnostics are dropped
    assert [p.kind for p in progress] == [
        "resource", "resource", "policy", "resource", "diagnostic", "summary"
    ]
    start, done, policy, failed, diag, summary = progress
    assert (start.op, start.type, start.name, start.state) == (
        "create", "aws:ec2/vpc:Vpc", "network-vpc", "started"
    )
    assert done.state == "done" and failed.state == "failed" and failed.name == "vm-at-1"
    assert policy.severity == "mandatory" and policy.name == "pool-no-ingress"
    assert "TCP 22" in (policy.message or "")
    assert diag.severity == "error" and diag.message == "error: InsufficientInstanceCapacity"
    assert json.loads(summary.message or "") == {"create": 7, "same": 2}


def test_json_lines_are_one_object_per_event() -> None:
    out = io.StringIO()
    sink = json_lines_sink(out)
    for e in _events():
        if (p := progress_from_engine_event(e)) is not None:
            sink(p)
    lines = [json.loads(ln) for ln in out.getvalue().splitlines()]
    assert len(lines) == 6
    assert lines[0]["event"] == {
        "kind": "resource", "op": "create", "type": "aws:ec2/vpc:Vpc", "name": "network-vpc",
        "state": "started", "urn": RECORDED[1]["resourcePreEvent"]["metadata"]["urn"],
    }


def test_text_display_has_a_line_per_step() -> None:
    err = io.StringIO()
    sink = text_sink(err)
    for e in _events():
        if (p := progress_from_engine_event(e)) is not None:
            sink(p)
    text = err.getvalue()
    assert "… create   aws:ec2/vpc:Vpc  network-vpc" in text
    assert "✓ create   aws:ec2/vpc:Vpc  network-vpc" in text
    assert "✗ create   aws:ec2/instance:Instance  vm-at-1" in text
    assert "policy mandatory: pool-no-ingress" in text
    assert "\x1b[" not in text  # nothing animated or coloured off a TTY


def test_run_with_events_renders_on_the_calling_thread_and_returns() -> None:
    import threading

    seen: list[tuple[str, ProgressEvent]] = []

    def work(on_event: Any) -> str:
        for e in _events():
            on_event(e)
        return "result"

    result = run_with_events(work, lambda p: seen.append((threading.current_thread().name, p)))
    assert result == "result"
    assert {name for name, _ in seen} == {threading.current_thread().name}
    assert len(seen) == 6


def test_run_with_events_reraises_the_engines_error() -> None:
    def work(on_event: Any) -> None:
        on_event(_events()[1])
        raise RuntimeError("engine blew up")

    seen: list[ProgressEvent] = []
    with pytest.raises(RuntimeError, match="engine blew up"):
        run_with_events(work, seen.append)
    assert len(seen) == 1


def test_change_summary_from_engine_counts() -> None:
    from pulumi.automation.events import OpType

    s = ChangeSummary.from_op_counts({OpType.CREATE: 3, "same": 4, "replace": 1, "read": 2})
    assert (s.create, s.same, s.replace, s.update, s.delete, s.changes) == (3, 4, 1, 0, 0, 4)


def test_describe_diagnostic() -> None:
    assert describe(ProgressEvent(kind="diagnostic", severity="warning", message="x")) == (
        "warning: x"
    )
