"""Engine events recorded from the real engine (record_events.py) replayed through
EngineEvent.from_json into progress and JSON lines."""

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


def _progress() -> list[ProgressEvent]:
    return [p for e in _events() if (p := progress_from_engine_event(e)) is not None]


FIRST_STEP = next(i for i, raw in enumerate(RECORDED) if "resourcePreEvent" in raw)
DAEMONSET = ("kubernetes:apps/v1:DaemonSet", "nvidia-device-plugin")
RUNTIME_CLASS = ("kubernetes:node.k8s.io/v1:RuntimeClass", "nvidia-runtimeclass")


def test_the_recording_is_the_engines_own() -> None:
    """Recorded from the real engine (record_events.py): three runs of the add-on stack."""
    kinds = {next(k for k in raw if k.endswith("Event")) for raw in RECORDED}
    assert {"preludeEvent", "resourcePreEvent", "resOutputsEvent", "resOpFailedEvent",
            "policyEvent", "diagnosticEvent", "summaryEvent", "cancelEvent"} <= kinds


def test_replay_maps_each_kind() -> None:
    progress = _progress()
    # preludes, policy summaries, debug and ephemeral diagnostics are dropped
    assert {p.kind for p in progress} == {"resource", "policy", "diagnostic", "summary"}
    raw_diagnostics = [raw["diagnosticEvent"] for raw in RECORDED if "diagnosticEvent" in raw]
    assert any(d.get("ephemeral") or d.get("severity") == "debug" for d in raw_diagnostics)
    assert all(p.severity == "error" for p in progress if p.kind == "diagnostic")

    first = progress[0]
    assert (first.kind, first.op, first.type, first.state) == (
        "resource", "create", "pulumi:pulumi:Stack", "started")
    steps = [(p.op, p.type, p.name, p.state) for p in progress if p.kind == "resource"]
    assert ("create", *DAEMONSET, "started") in steps
    assert ("create", *DAEMONSET, "done") in steps
    assert ("same", "anycloud:cluster:NvidiaAddons", "nvidia", "done") in steps
    assert ("create", *RUNTIME_CLASS, "failed") in steps

    (policy,) = [p for p in progress if p.kind == "policy"]
    assert (policy.severity, policy.name) == ("mandatory", "daemonset-image-digest")
    assert "is not pinned by digest" in (policy.message or "")
    assert policy.urn is not None and policy.urn.endswith("nvidia-device-plugin")

    denied = [p for p in progress if p.kind == "diagnostic" and "forbidden" in (p.message or "")]
    assert denied and "system:serviceaccount:anycloud-recorder:recorder" in (
        denied[0].message or "")
    summaries = [json.loads(p.message or "") for p in progress if p.kind == "summary"]
    assert summaries[0] == {"create": 5} and summaries[-1] == {"create": 3}


def test_json_lines_are_one_object_per_event() -> None:
    out = io.StringIO()
    sink = json_lines_sink(out)
    for p in _progress():
        sink(p)
    lines = [json.loads(ln) for ln in out.getvalue().splitlines()]
    assert len(lines) == len(_progress())
    assert lines[0]["event"] == {
        "kind": "resource", "op": "create", "type": "pulumi:pulumi:Stack",
        "name": "anycloud-cluster-addons-cl-recorded", "state": "started",
        "urn": RECORDED[FIRST_STEP]["resourcePreEvent"]["metadata"]["urn"],
    }


def test_text_display_has_a_line_per_step() -> None:
    err = io.StringIO()
    sink = text_sink(err)
    for p in _progress():
        sink(p)
    text = err.getvalue()
    assert "… create   kubernetes:apps/v1:DaemonSet  nvidia-device-plugin" in text
    assert "✓ create   kubernetes:apps/v1:DaemonSet  nvidia-device-plugin" in text
    assert "✗ create   kubernetes:node.k8s.io/v1:RuntimeClass  nvidia-runtimeclass" in text
    assert "policy mandatory: daemonset-image-digest" in text
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
    assert len(seen) == len(_progress())


def test_run_with_events_reraises_the_engines_error() -> None:
    def work(on_event: Any) -> None:
        on_event(_events()[FIRST_STEP])
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
