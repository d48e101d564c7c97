"""Drift on the real engine: the cluster add-on stack applied against the real control plane,
its DaemonSet edited by hand with the kubernetes client, and ``check_drift`` (``pulumi
refresh --preview-only`` through the Automation API) reporting the edited property."""

from __future__ import annotations

from typing import Any

import pytest

from automation.devcluster.control_plane import ControlPlane
from automation.engine.pulumi_driver import AutomationRunner
from automation.engine.runner import StackTarget
from tests.automation.engine.test_real_engine import DS, addons  # noqa: F401  (fixture)

pytestmark = [pytest.mark.kube, pytest.mark.engine, pytest.mark.slow]


def _apps(plane: ControlPlane) -> Any:
    from kubernetes import client, config

    return client.AppsV1Api(config.new_client_from_config(str(plane.kubeconfig)))


def test_a_daemonset_edited_by_hand_is_reported_with_its_property(
    control_plane: ControlPlane, addons: tuple[AutomationRunner, StackTarget]  # noqa: F811
) -> None:
    runner, target = addons
    runner.up(target)
    assert runner.check_drift(target) == []  # just applied: nothing differs

    apps = _apps(control_plane)
    apps.patch_namespaced_daemon_set(DS, "kube-system", {"spec": {"template": {"spec": {
        "containers": [{"name": "nvidia-device-plugin-ctr",
                        "image": "registry.example/hand-edited:1"}]}}}})
    changes = runner.check_drift(target)
    assert [(c.type, c.op, c.properties) for c in changes] == [
        ("kubernetes:apps/v1:DaemonSet", "update", ["spec.template.spec.containers[0].image"])]
    assert changes[0].urn.endswith("::nvidia-device-plugin")
    assert "hand-edited" not in changes[0].model_dump_json()  # names, never values

    # The check wrote nothing: the state still records the applied image, so the check
    # repeats. A plain up does not see it either (the program and the state agree); a
    # refresh takes the edit into the state, and the up after it puts the image back.
    assert runner.check_drift(target) == changes
    runner.up(target)
    assert runner.check_drift(target) == changes
    runner.refresh(target)
    runner.up(target)
    assert runner.check_drift(target) == []


def test_a_deleted_object_is_reported_gone(
    control_plane: ControlPlane, addons: tuple[AutomationRunner, StackTarget]  # noqa: F811
) -> None:
    runner, target = addons
    runner.up(target)
    from kubernetes import client, config

    nodes = client.NodeV1Api(config.new_client_from_config(str(control_plane.kubeconfig)))
    nodes.delete_runtime_class("nvidia")
    changes = runner.check_drift(target)
    assert [(c.type, c.op) for c in changes] == [
        ("kubernetes:node.k8s.io/v1:RuntimeClass", "delete")]
