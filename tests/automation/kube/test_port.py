"""The port's plain data and errors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from automation.kube.port import (
    AddonObservation,
    ClusterForbidden,
    ClusterUnavailable,
    ObservedNode,
    addon_display,
    parse_forbidden,
    token_secret_name,
)
from tests.automation.kube_api_server import FORBIDDEN


def test_forbidden_names_verb_resource_and_namespace() -> None:
    err = ClusterForbidden("delete", "nodes")
    assert str(err).startswith("the cluster's RBAC denies `delete` on `nodes`;")
    scoped = ClusterForbidden("delete", "secrets", "kube-system")
    assert "`delete` on `secrets` in namespace kube-system" in str(scoped)
    assert isinstance(scoped, ClusterUnavailable)
    assert (scoped.verb, scoped.resource, scoped.namespace) == ("delete", "secrets",
                                                                 "kube-system")


@pytest.mark.parametrize(("message", "verb", "resource", "namespace"), [
    (str(FORBIDDEN["message"]), "get", "namespaces", "kube-system"),
    ('error: resource "nvidia" was not found or access denied: runtimeclasses.node.k8s.io '
     '"nvidia" is forbidden: User "anycloud" cannot create resource "runtimeclasses" in API '
     'group "node.k8s.io" at the cluster scope', "create", "runtimeclasses", None),
])
def test_forbidden_text_from_elsewhere_is_parsed(message: str, verb: str, resource: str,
                                                 namespace: str | None) -> None:
    err = parse_forbidden(message)
    assert err is not None
    assert (err.verb, err.resource, err.namespace) == (verb, resource, namespace)


def test_other_text_is_not_a_denial() -> None:
    assert parse_forbidden("connection refused") is None


def test_observed_nodes_can_be_set_members() -> None:
    when = datetime(2026, 7, 1, tzinfo=UTC)
    a = ObservedNode("n", {"k": "v"}, True, 0, False, when)
    b = ObservedNode("n", {"k": "v"}, True, 0, False, when)
    assert {a, b} == {a}
    assert a != ObservedNode("n", {"k": "w"}, True, 0, False, when)


def test_names() -> None:
    assert token_secret_name("abc123") == "bootstrap-token-abc123"
    assert addon_display("runtimeclass") == "RuntimeClass nvidia"
    assert addon_display("daemonset") == "DaemonSet kube-system/anycloud-nvidia-device-plugin"
    seen = AddonObservation("c-1", runtime_class={"handler": "nvidia"})
    assert seen.get("runtimeclass") == {"handler": "nvidia"} and seen.get("daemonset") is None
