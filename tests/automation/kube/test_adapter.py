"""KubernetesCluster (official client) against a local server answering real Kubernetes JSON.

Assertions hang on the requests the client actually sent (method, path, query, body) and on
the server's store afterwards.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from automation.kube.adapter import MAX_NAME_LOOKUPS, KubernetesCluster, parse_quantity_int
from automation.kube.port import (
    AddonKind,
    ClusterForbidden,
    ClusterPort,
    ClusterUnavailable,
    ObservedNode,
)
from tests.automation.kube_api_server import (
    FakeKubeApi,
    bootstrap_token_json,
    daemonset_json,
    namespace_json,
    node_json,
    runtime_class_json,
    serve,
    status,
    write_kubeconfig,
)

POOL = "np-gpu1"
OURS = {"anycloud.sh/cluster": "c-1", "anycloud.sh/node-pool": POOL,
        "anycloud.sh/provider": "aws", "anycloud.sh/accelerator": "nvidia"}
NODES = "/api/v1/nodes"
RC_PATH = "/apis/node.k8s.io/v1/runtimeclasses/nvidia"
RC_ONLY: tuple[AddonKind, ...] = ("runtimeclass",)
DS_ONLY: tuple[AddonKind, ...] = ("daemonset",)
DS_PATH = "/apis/apps/v1/namespaces/kube-system/daemonsets/anycloud-nvidia-device-plugin"




def test_it_is_a_cluster_port(cluster: KubernetesCluster) -> None:
    port: ClusterPort = cluster  # mypy checks the protocol; this checks nothing is missing
    assert callable(port.delete_addon_object)


# -- nodes ----------------------------------------------------------------------------------


def test_nodes_claiming_by_label_and_by_issued_name(api: FakeKubeApi,
                                                    cluster: KubernetesCluster) -> None:
    api.put(node_json("anycloud-a1", {**OURS, "anycloud.sh/attempt": "a1"}, gpus=8,
                      created="2026-07-01T11:40:00Z"))
    api.put(node_json("anycloud-a2", {**OURS, "anycloud.sh/attempt": "a2"}, ready=False))
    api.put(node_json("anycloud-a3"))  # our issued name, registered without our labels
    api.put(node_json("other-pool", {"anycloud.sh/node-pool": "np-other"}))
    api.put(node_json("management"))
    api.calls.clear()

    nodes = cluster.nodes_claiming(POOL, {"anycloud-a1", "anycloud-a3", "anycloud-a4"})

    assert [n.name for n in nodes] == ["anycloud-a1", "anycloud-a2", "anycloud-a3"]
    a1, a2, a3 = nodes
    assert a1 == ObservedNode(
        name="anycloud-a1", labels=a1.labels, ready=True, gpu_allocatable=8,
        unschedulable=False, created_at=datetime(2026, 7, 1, 11, 40, tzinfo=UTC))
    assert a1.labels["anycloud.sh/attempt"] == "a1"
    assert a1.labels["kubernetes.io/hostname"] == "anycloud-a1"
    assert (a2.ready, a2.gpu_allocatable) == (False, 0)
    assert a3.labels.get("anycloud.sh/node-pool") is None
    sent = [(c.method, c.path, c.query) for c in api.calls]
    # One labelled list, then a GET only for issued names the list did not return.
    assert sent == [
        ("GET", NODES, {"labelSelector": [f"anycloud.sh/node-pool={POOL}"]}),
        ("GET", f"{NODES}/anycloud-a3", {}),
        ("GET", f"{NODES}/anycloud-a4", {}),
    ]


def test_many_unlabelled_issued_names_cost_one_full_list(api: FakeKubeApi,
                                                         cluster: KubernetesCluster) -> None:
    names = {f"anycloud-x{i:02d}" for i in range(MAX_NAME_LOOKUPS + 1)}
    api.put(node_json("anycloud-x03"))
    api.put(node_json("management"))
    api.calls.clear()
    nodes = cluster.nodes_claiming(POOL, names)
    assert [n.name for n in nodes] == ["anycloud-x03"]
    assert [(c.method, c.path, c.query) for c in api.calls] == [
        ("GET", NODES, {"labelSelector": [f"anycloud.sh/node-pool={POOL}"]}),
        ("GET", NODES, {}),
    ]


def test_readiness_comes_only_from_a_true_ready_condition(api: FakeKubeApi,
                                                          cluster: KubernetesCluster) -> None:
    api.put(node_json("no-condition", OURS, ready=None))
    unknown = node_json("unknown", OURS)
    unknown["status"]["conditions"][-1]["status"] = "Unknown"
    api.put(unknown)
    api.put(node_json("ready", OURS))
    got = {n.name: n.ready for n in cluster.nodes_claiming(POOL, set())}
    assert got == {"no-condition": False, "unknown": False, "ready": True}


def test_observed_node_view_for_the_decision_step() -> None:
    node = ObservedNode("anycloud-a1", {**OURS, "anycloud.sh/attempt": "a1"}, True, 4, False,
                        None)
    view = node.to_view()
    assert (view.name, view.pool_label, view.attempt_label, view.ready, view.gpus) == (
        "anycloud-a1", POOL, "a1", True, 4)
    assert ("anycloud.sh/accelerator", "nvidia") in view.labels
    bare = ObservedNode("n", {}, False, 0, False, None).to_view()
    assert (bare.pool_label, bare.attempt_label, bare.labels) == (None, None, frozenset())


@pytest.mark.parametrize(("value", "count"), [
    (None, 0), ("0", 0), ("1", 1), ("8", 8), ("2k", 2000), ("1Ki", 1024), ("junk", 0),
])
def test_gpu_quantities(value: str | None, count: int) -> None:
    assert parse_quantity_int(value) == count


def test_cordon_sends_a_merge_patch_of_spec_unschedulable(api: FakeKubeApi,
                                                          cluster: KubernetesCluster) -> None:
    api.put(node_json("anycloud-a1", OURS))
    api.calls.clear()
    cluster.cordon_node("anycloud-a1")
    (call,) = api.calls
    assert (call.method, call.path) == ("PATCH", f"{NODES}/anycloud-a1")
    assert call.content_type == "application/merge-patch+json"
    assert call.body == {"spec": {"unschedulable": True}}
    assert call.query["fieldManager"] == ["anycloud"]
    stored = api.get(f"{NODES}/anycloud-a1")
    assert stored is not None and stored["spec"]["unschedulable"] is True
    assert cluster.nodes_claiming(POOL, set())[0].unschedulable is True


def test_label_node_sets_and_removes_one_label(api: FakeKubeApi,
                                               cluster: KubernetesCluster) -> None:
    api.put(node_json("anycloud-a1", {"anycloud.sh/node-pool": POOL}))
    api.calls.clear()
    cluster.label_node("anycloud-a1", "anycloud.sh/accelerator", "nvidia")
    stored = api.get(f"{NODES}/anycloud-a1")
    assert stored is not None
    assert stored["metadata"]["labels"]["anycloud.sh/accelerator"] == "nvidia"
    assert stored["metadata"]["labels"]["kubernetes.io/hostname"] == "anycloud-a1"  # kept
    cluster.label_node("anycloud-a1", "anycloud.sh/accelerator", None)
    stored = api.get(f"{NODES}/anycloud-a1")
    assert stored is not None and "anycloud.sh/accelerator" not in stored["metadata"]["labels"]
    assert [c.body for c in api.calls] == [
        {"metadata": {"labels": {"anycloud.sh/accelerator": "nvidia"}}},
        {"metadata": {"labels": {"anycloud.sh/accelerator": None}}},  # null removes
    ]
    assert {c.content_type for c in api.calls} == {"application/merge-patch+json"}


def test_writes_to_a_vanished_node_are_no_ops(api: FakeKubeApi,
                                              cluster: KubernetesCluster) -> None:
    cluster.cordon_node("gone")
    cluster.label_node("gone", "k", "v")
    cluster.delete_node("gone")
    assert [(c.method, c.path) for c in api.calls] == [
        ("PATCH", f"{NODES}/gone"), ("PATCH", f"{NODES}/gone"), ("DELETE", f"{NODES}/gone")]


def test_delete_node(api: FakeKubeApi, cluster: KubernetesCluster) -> None:
    api.put(node_json("anycloud-a1", OURS))
    cluster.delete_node("anycloud-a1")
    assert api.get(f"{NODES}/anycloud-a1") is None
    assert api.calls[-1].method == "DELETE"


# -- secrets, namespaces ---------------------------------------------------------------------


def test_delete_bootstrap_token_secret(api: FakeKubeApi, cluster: KubernetesCluster) -> None:
    path = "/api/v1/namespaces/kube-system/secrets/bootstrap-token-abc123"
    api.put(bootstrap_token_json("abc123"))
    api.put(bootstrap_token_json("zzz999"))
    cluster.delete_bootstrap_token("abc123")
    assert api.get(path) is None
    assert api.get("/api/v1/namespaces/kube-system/secrets/bootstrap-token-zzz999") is not None
    cluster.delete_bootstrap_token("abc123")  # absent: success
    assert [(c.method, c.path) for c in api.calls] == [("DELETE", path)] * 2


@pytest.mark.parametrize(("labels", "owner"), [
    ({"app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/node-pool": POOL}, "ours"),
    ({"app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/node-pool": "np-x"}, "foreign"),
    ({"app.kubernetes.io/managed-by": "helm", "anycloud.sh/node-pool": POOL}, "foreign"),
    ({}, "foreign"),
])
def test_namespace_owner(api: FakeKubeApi, cluster: KubernetesCluster,
                         labels: dict[str, str], owner: str) -> None:
    api.put(namespace_json("np-gpu1", labels))
    assert cluster.namespace_owner("np-gpu1", POOL) == owner
    assert cluster.namespace_owner("missing", POOL) == "absent"


def test_namespace_deletion_is_confirmed_only_when_it_is_gone(
    api: FakeKubeApi, cluster: KubernetesCluster
) -> None:
    api.put(namespace_json("svc-1"))
    assert cluster.service_objects_removed("svc-1") is False
    cluster.delete_namespace("svc-1")
    assert cluster.service_objects_removed("svc-1") is False  # Terminating
    cluster.delete_namespace("svc-1")  # the server answers 409 while Terminating
    api.finish_namespace_deletion("svc-1")
    assert cluster.service_objects_removed("svc-1") is True
    cluster.delete_namespace("svc-1")  # absent: success
    deletes = api.calls_to("DELETE")
    assert [c.path for c in deletes] == ["/api/v1/namespaces/svc-1"] * 3


# -- add-ons ---------------------------------------------------------------------------------


def test_addon_objects_are_returned_as_stored(api: FakeKubeApi,
                                             cluster: KubernetesCluster) -> None:
    assert cluster.addon_objects("c-1").runtime_class is None
    rc = api.put(runtime_class_json(labels={"objectset.rio.cattle.io/hash": "d1a2"}))
    ds = api.put(daemonset_json({"app.kubernetes.io/managed-by": "anycloud",
                                 "anycloud.sh/cluster": "c-1"}))
    api.calls.clear()
    seen = cluster.addon_objects("c-1")
    assert seen.cluster_id == "c-1"
    assert seen.runtime_class == rc
    assert seen.daemonset == ds
    assert seen.get("daemonset") == ds
    assert [(c.method, c.path) for c in api.calls] == [("GET", RC_PATH), ("GET", DS_PATH)]


def test_adoption_relabels_through_merge_patches(api: FakeKubeApi,
                                                 cluster: KubernetesCluster) -> None:
    old = {"app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/cluster": "c-old"}
    api.put(runtime_class_json(labels=old))
    api.put(daemonset_json(old))
    api.calls.clear()
    cluster.write_addon_labels("c-new", DS_ONLY)
    want = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "anycloud",
                                    "anycloud.sh/cluster": "c-new"}}}
    assert [(c.method, c.path, c.body, c.content_type) for c in api.calls] == [
        ("PATCH", DS_PATH, want, "application/merge-patch+json")]
    cluster.write_addon_labels("c-new", ("runtimeclass", "daemonset"))
    assert [(c.method, c.path) for c in api.calls[1:]] == [("PATCH", RC_PATH),
                                                           ("PATCH", DS_PATH)]
    stored = api.get(RC_PATH)
    assert stored is not None and stored["metadata"]["labels"]["anycloud.sh/cluster"] == "c-new"


def test_recreate_deletes_the_daemonset_in_the_background(api: FakeKubeApi,
                                                          cluster: KubernetesCluster) -> None:
    api.put(daemonset_json())
    cluster.delete_addon_object("daemonset")
    cluster.delete_addon_object("runtimeclass")  # absent: success
    assert api.get(DS_PATH) is None
    ds_call, rc_call = api.calls
    assert (ds_call.method, ds_call.path) == ("DELETE", DS_PATH)
    assert ds_call.query["propagationPolicy"] == ["Background"]
    assert (rc_call.method, rc_call.path) == ("DELETE", RC_PATH)


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "act", "verb", "resource", "namespace"), [
    ("DELETE", f"{NODES}/n1", lambda c: c.delete_node("n1"), "delete", "nodes", None),
    ("PATCH", f"{NODES}/n1", lambda c: c.cordon_node("n1"), "patch", "nodes", None),
    ("GET", NODES, lambda c: c.nodes_claiming(POOL, set()), "list", "nodes", None),
    ("DELETE", "/api/v1/namespaces/kube-system/secrets/bootstrap-token-t1",
     lambda c: c.delete_bootstrap_token("t1"), "delete", "secrets", "kube-system"),
    ("GET", "/api/v1/namespaces/np-gpu1", lambda c: c.namespace_owner("np-gpu1", POOL),
     "get", "namespaces", None),
    ("PATCH", RC_PATH, lambda c: c.write_addon_labels("c-1", RC_ONLY),
     "patch", "runtimeclasses", None),
    ("GET", DS_PATH, lambda c: c.addon_objects("c-1"), "get", "daemonsets", "kube-system"),
])
def test_rbac_denial_names_the_verb_and_resource(
    api: FakeKubeApi, cluster: KubernetesCluster, method: str, path: str, act: object,
    verb: str, resource: str, namespace: str | None,
) -> None:
    api.put(node_json("n1"))
    api.put(runtime_class_json())
    api.deny(method, path)
    with pytest.raises(ClusterForbidden) as caught:
        act(cluster)  # type: ignore[operator]
    assert (caught.value.verb, caught.value.resource) == (verb, resource)
    assert f"the cluster's RBAC denies `{verb}` on `{resource}`" in str(caught.value)
    assert (f"in namespace {namespace}" in str(caught.value)) == (namespace is not None)
    assert isinstance(caught.value, ClusterUnavailable)  # callers may treat it as unavailable


def test_other_api_errors_are_unavailable_with_the_status(api: FakeKubeApi,
                                                          cluster: KubernetesCluster) -> None:
    api.fail[("DELETE", f"{NODES}/n1")] = (500, status(500, "InternalError",
                                                        "etcdserver: request timed out"))
    with pytest.raises(ClusterUnavailable, match=r"500 .*delete nodes/n1.*etcdserver"):
        cluster.delete_node("n1")
    api.fail[("GET", NODES)] = (401, status(401, "Unauthorized", "Unauthorized"))
    with pytest.raises(ClusterUnavailable, match="rejected the registered credentials"):
        cluster.nodes_claiming(POOL, set())


def test_an_answer_that_is_not_kubernetes_json_is_unavailable(
    api: FakeKubeApi, cluster: KubernetesCluster
) -> None:
    api.fail[("GET", NODES)] = (200, b"<html><body>Bad gateway</body></html>")
    with pytest.raises(ClusterUnavailable, match="answer to list nodes is not Kubernetes JSON"):
        cluster.nodes_claiming(POOL, set())
    api.fail[("GET", NODES)] = (200, ["not", "an", "object"])
    with pytest.raises(ClusterUnavailable, match="expected an object, got list"):
        cluster.nodes_claiming(POOL, set())
    api.fail[("GET", NODES)] = (404, status(404, "NotFound", "the server could not find it"))
    with pytest.raises(ClusterUnavailable, match=r"404 .*list nodes"):
        cluster.nodes_claiming(POOL, set())  # only a missing object is fine, not the API


def test_closed_port_is_unavailable(tmp_path: Path) -> None:
    with serve() as api:
        url = api.url
    kc = KubernetesCluster(write_kubeconfig(tmp_path / "kc", url), None, timeout_seconds=2)
    with pytest.raises(ClusterUnavailable, match=r"cannot reach .*list nodes"):
        kc.nodes_claiming(POOL, set())


def test_broken_kubeconfig_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(ClusterUnavailable, match="cannot load kubeconfig"):
        KubernetesCluster(path).delete_node("n1")
