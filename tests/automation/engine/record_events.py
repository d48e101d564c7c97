"""Record a real engine event stream into ``recorded_events.json`` (test data).

Runs the cluster add-on stack on the real engine against a local control plane: a
successful ``up``; an ``up`` whose DaemonSet image lost its digest (a regression the policy
pack stops); an ``up`` of a second stack whose kubeconfig is a ServiceAccount RBAC refuses
(a create that fails). So the stream has resource steps, outputs, a mandatory policy
finding, a failed step, the engine's error diagnostics and the summaries. Each event is
kept as the engine's JSON, exactly as ``EngineEvent.from_json`` received it.

    .venv/bin/python tests/automation/engine/record_events.py

Needs the tools of ``python3 tools/build.py``. Timestamps and temporary paths in the
output are the recording run's own.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
OUT = Path(__file__).with_name("recorded_events.json")
UNPINNED = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"


def unpinned_pins() -> Any:
    """The real pins with the device-plugin image's digest dropped, past the validator."""
    from components.pins import DevicePluginPin
    from stacks.pins import load_pins

    pins = load_pins()
    return pins.model_copy(update={"device_plugin": DevicePluginPin.model_construct(
        image=UNPINNED, verified=True)})


def main() -> None:
    from pulumi.automation.events import EngineEvent

    import stacks.cluster_addons
    from automation.devcluster import control_plane
    from automation.engine.errors import EngineFailed
    from automation.engine.pulumi_driver import AutomationRunner
    from benchmarks.bench_engine import engine_env
    from stacks.pins import load_pins
    from tests.automation.engine.test_real_engine import addons_target, remove_addons

    recorded: list[dict[str, Any]] = []
    original = EngineEvent.__dict__["from_json"]
    parse = EngineEvent.from_json

    def record(data: dict[str, Any]) -> EngineEvent:
        recorded.append(data)
        return parse(data)

    with tempfile.TemporaryDirectory() as tmp_str:
        tmp = Path(tmp_str)
        engine_env(tmp)
        plane = control_plane.start(tmp / "cp")
        try:
            target = addons_target(plane, "cl-recorded")
            runner = AutomationRunner(tmp / "home")
            EngineEvent.from_json = staticmethod(record)  # type: ignore[method-assign]
            runner.up(target)
            stacks.cluster_addons.load_pins = unpinned_pins  # type: ignore[assignment]
            result = runner.up(target)
            assert result.mandatory_violations, "the unpinned image was not refused"
            stacks.cluster_addons.load_pins = load_pins  # type: ignore[assignment]
            denied = addons_target(plane, "cl-denied", plane.token_kubeconfig(
                tmp / "denied.kubeconfig", "recorder", "anycloud-recorder"))
            try:
                runner.up(denied)
            except EngineFailed as exc:
                assert "forbidden" in str(exc.__cause__), str(exc.__cause__)
            else:
                raise AssertionError("the ServiceAccount was allowed to install the add-ons")
        finally:
            setattr(EngineEvent, "from_json", original)  # noqa: B010
            remove_addons(plane)
            plane.stop()
    OUT.write_text(json.dumps(recorded, indent=1) + "\n")
    print(f"{len(recorded)} events written to {OUT}")


if __name__ == "__main__":
    main()
