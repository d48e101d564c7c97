"""Crash recovery with the real engine: a real ``pulumi up`` of the cluster add-on stack is
SIGKILLed while the engine has the DaemonSet's create in flight; the next ``up`` removes
the killed run's lock (its holder is gone), looks the object up through the provider
(``pulumi import`` by its ``namespace/name``), imports it when it exists (the same object:
its uid is unchanged, and the continued update does not create it), clears the record when
it does not, and goes on.

The VM path needs the aws/gcp/azure plugins, which cannot be built here: on the real engine
it fails naming the missing plugin (below); its lookup logic is tested under the mock engine
(``test_recovery_lookup.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from automation.devcluster.control_plane import ControlPlane
from automation.engine.errors import EngineFailed
from automation.engine.processes import end_session
from automation.engine.pulumi_driver import AutomationRunner
from automation.engine.recovery import PendingCreate, pending_creates_in
from automation.engine.runner import ProgressEvent, StackTarget
from tests.automation.engine.test_real_engine import (  # noqa: F401  (the fixture)
    DRIVER,
    DS,
    addons,
    deployment_resources,
)
from tests.automation.kube import objects

pytestmark = [pytest.mark.kube, pytest.mark.engine, pytest.mark.slow]

DS_TYPE = "kubernetes:apps/v1:DaemonSet"


def state_file(home: Path, target: StackTarget) -> Path:
    return home / "state" / ".pulumi" / "stacks" / "anycloud" / f"{target.stack_name}.json"


def pending_in(path: Path) -> list[PendingCreate]:
    try:
        latest = json.loads(path.read_text())["checkpoint"].get("latest") or {}
    except (OSError, ValueError, KeyError):
        return []
    return pending_creates_in(latest)


@pytest.fixture
def gpu_node(control_plane: ControlPlane,
             addons: tuple[AutomationRunner, StackTarget]) -> Iterator[str]:  # noqa: F811
    """A Node of this cluster's GPU pool with no kubelet: the device plugin's Pod never runs,
    so the engine waits on the DaemonSet's rollout with its create in flight, long enough
    to be killed there."""
    _, target = addons
    name = f"gpu-{target.key}"[:63]
    objects.node(control_plane, name, {"anycloud.sh/cluster": target.key,
                                       "anycloud.sh/accelerator": "nvidia"}, kwok=False)
    yield name
    objects.delete(control_plane, "node", name)


def kill_with_the_daemonset_in_flight(control_plane: ControlPlane, runner: AutomationRunner,
                                      target: StackTarget, tmp_path: Path) -> str:
    """Run ``up`` in a process of its own and SIGKILL it (and the engine under it) once the
    engine has recorded the DaemonSet's create in flight and the API server has the object.
    Returns the DaemonSet's URN."""
    spec = tmp_path / "config.json"
    spec.write_text(target.config.model_dump_json())
    state = state_file(runner.home, target)
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(runner.home), str(spec)],
                            env=dict(os.environ), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        urn = None
        while time.monotonic() < deadline and proc.poll() is None:
            urn = next((p.urn for p in pending_in(state) if p.type == DS_TYPE), None)
            if urn and objects.get(control_plane, "daemonset", DS, "kube-system"):
                break
            time.sleep(0.05)
        assert proc.poll() is None, (
            "the update ended before the kill: "
            + (proc.stderr.read().decode()[-2000:] if proc.stderr else ""))
        assert urn is not None, "the DaemonSet's create was never in flight"
    finally:
        if proc.poll() is None:
            end_session(proc.pid)  # a crashed machine: the engine's plugins too
        proc.wait(timeout=30)
    return urn


def recorded(runner: AutomationRunner, target: StackTarget, urn: str) -> dict[str, Any] | None:
    return next((r for r in deployment_resources(runner, target) if r["urn"] == urn), None)


def ds_steps(events: list[ProgressEvent], urn: str) -> set[str]:
    return {e.op or "" for e in events if e.kind == "resource" and e.urn == urn}


def recovery_notes(events: list[ProgressEvent]) -> list[str]:
    return [e.message or "" for e in events
            if e.kind == "diagnostic" and (e.message or "").startswith("crash recovery")]


def test_a_daemonset_left_in_flight_is_imported_not_created_again(
    control_plane: ControlPlane, addons: tuple[AutomationRunner, StackTarget],  # noqa: F811
    gpu_node: str, tmp_path: Path, engine_env: dict[str, str],
) -> None:
    runner, target = addons
    urn = kill_with_the_daemonset_in_flight(control_plane, runner, target, tmp_path)
    before = objects.get(control_plane, "daemonset", DS, "kube-system")
    assert before is not None
    assert recorded(runner, target, urn) is None  # the state does not know it exists
    # The rollout can finish once the Node without a kubelet is gone.
    objects.delete(control_plane, "node", gpu_node)

    # The killed run's lock: its holder (this host, a pid that is gone) is provably dead, so
    # the next run removes it rather than stopping with STACK_LOCKED.
    events: list[ProgressEvent] = []
    result = runner.up(target, on_progress=events.append)

    (note,) = recovery_notes(events)
    assert f"imported {urn} (id kube-system/{DS})" in note
    # Imported, not created: the continued update does not create it, the state holds it
    # under the id the provider read, and it is the same object.
    assert "create" not in ds_steps(events, urn)
    assert not result.mandatory_violations
    state = recorded(runner, target, urn)
    assert state is not None and state["id"] == f"kube-system/{DS}"
    after = objects.get(control_plane, "daemonset", DS, "kube-system")
    assert after is not None and after["metadata"]["uid"] == before["metadata"]["uid"]
    listed = json.loads(control_plane.kubectl(
        "get", "daemonsets", "-A", "-l", f"anycloud.sh/cluster={target.key}", "-o", "json",
    ).stdout)["items"]
    assert [d["metadata"]["name"] for d in listed] == [DS]  # exactly once
    assert pending_in(state_file(runner.home, target)) == []
    again = runner.up(target)
    assert again.summary.changes == 0


def test_a_daemonset_left_in_flight_and_gone_is_cleared_and_created(
    control_plane: ControlPlane, addons: tuple[AutomationRunner, StackTarget],  # noqa: F811
    gpu_node: str, tmp_path: Path, engine_env: dict[str, str],
) -> None:
    runner, target = addons
    urn = kill_with_the_daemonset_in_flight(control_plane, runner, target, tmp_path)
    objects.delete(control_plane, "node", gpu_node)
    # The object never made it (or was removed since): the provider must say so.
    objects.delete(control_plane, "daemonset", DS, namespace="kube-system", wait=True)

    events: list[ProgressEvent] = []
    runner.up(target, on_progress=events.append)

    (note,) = recovery_notes(events)
    assert f"cleared {urn}" in note and "imported" not in note
    assert "create" in ds_steps(events, urn)  # the continued update made it
    assert objects.get(control_plane, "daemonset", DS, "kube-system") is not None
    assert recorded(runner, target, urn) is not None
    assert pending_in(state_file(runner.home, target)) == []
    assert runner.up(target).summary.changes == 0


def test_the_vm_lookup_on_the_real_engine_names_the_missing_plugin(
    tmp_path: Path, engine_env: dict[str, str]
) -> None:
    """The aws plugin cannot be built here and is never downloaded in tests: the lookup
    through the provider fails, saying which plugin it needs, and nothing is guessed."""
    from tests.automation.engine.test_pulumi_driver import pool_target

    target = pool_target("aws")
    vm = PendingCreate(
        urn="urn:pulumi:node-pool-np-1::anycloud::anycloud:vm:AwsPoolVM$aws:ec2/instance:"
            "Instance::vm-at-1-instance",
        type="aws:ec2/instance:Instance", custom=True,
        inputs={"tags": {"anycloud.sh/attempt": "at-1"}})
    runner = AutomationRunner(tmp_path / "home")
    with pytest.raises(EngineFailed) as failed:
        runner._lookup_cloud(target, [vm], None)
    assert failed.value.code == "PENDING_CREATES"
    message = failed.value.message
    assert "pulumi-resource-aws" in message and vm.urn in message
    assert "Nothing was imported or cleared" in message


def test_an_import_whose_outputs_were_never_read_is_refreshed_before_the_next_run(
    control_plane: ControlPlane, addons: tuple[AutomationRunner, StackTarget],  # noqa: F811
) -> None:
    """A recovery killed between its ``stack import`` and the refresh of what it imported
    leaves the object recorded without outputs: the next run reads them first."""
    runner, target = addons
    runner.up(target)
    stack = runner._stack(target)
    exported = stack.export_stack()
    ds = next(r for r in exported.deployment["resources"] if r["type"] == DS_TYPE)
    uid = ds["outputs"]["metadata"]["uid"]
    del ds["outputs"]  # as ``adopted`` records it
    stack.import_stack(exported)

    runner.up(target)

    state = recorded(runner, target, ds["urn"])
    assert state is not None and state["outputs"]["metadata"]["uid"] == uid
