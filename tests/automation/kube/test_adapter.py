"""KubernetesCluster (official client) against the real control plane: etcd, kube-apiserver,
controller-manager and kwok playing the kubelets.

Assertions hang on the requests the client actually sent (recorded around its ApiClient)
and on what the API server stores afterwards. The local JSON server stays only for the
faults a real server will not produce on demand: a 500 from etcd and a body that is not
Kubernetes JSON.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from automation.devcluster.control_plane import ControlPlane, kubeconfig_document
from automation.kube.adapter import MAX_NAME_LOOKUPS, KubernetesCluster, parse_quantity_int
from automation.kube.port import (
    AddonKind,
    ClusterForbidden,
    ClusterPort,
    ClusterUnavailable,
    ObservedNode,
)
from tests.automation.kube import objects
from tests.automation.kube.conftest import Recorder
from tests.automation.kube.objects import wait_for
from tests.automation.kube_api_server import FakeKubeApi, serve, status, write_kubeconfig

pytestmark = pytest.mark.kube

NODES = "/api/v1/nodes"
RC_PATH = "/apis/node.k8s.io/v1/runtimeclasses/nvidia"
DS_PATH = "/apis/apps/v1/namespaces/kube-system/daemonsets/anycloud-nvidia-device-plugin"
RC_ONLY: tuple[AddonKind, ...] = ("runtimeclass",)
DS_ONLY: tuple[AddonKind, ...] = ("daemonset",)
MERGE = "application/merge-patch+json"


def ours(pool: str) -> dict[str, str]:
    return {"anycloud.sh/cluster": "c-1", "anycloud.sh/node-pool": pool,
            "anycloud.sh/provider": "aws", "anycloud.sh/accelerator": "nvidia"}


@pytest.fixture
def pool(control_plane: ControlPlane, suffix: str):  # type: ignore[no-untyped-def]
    """A pool id of this test's own; its Nodes are removed afterwards."""
    pool_id = f"np-{suffix}"
    yield pool_id
    control_plane.kubectl("delete", "nodes", "-l", f"anycloud.sh/node-pool={pool_id}",
                          "--wait=false")


def test_it_is_a_cluster_port(kube: KubernetesCluster) -> None:
    port: ClusterPort = kube  # mypy checks the protocol; this checks nothing is missing
    assert callable(port.delete_addon_object)


# -- nodes ----------------------------------------------------------------------------------


def test_nodes_claiming_by_label_and_by_issued_name(control_plane: ControlPlane,
                                                    kube: KubernetesCluster, sent: Recorder,
                                                    pool: str, suffix: str) -> None:
    a1, a2, a3, a4 = (f"anycloud-{suffix}-a{i}" for i in range(1, 5))
    objects.node(control_plane, a1, {**ours(pool), "anycloud.sh/attempt": "a1"}, gpus=8)
    objects.node(control_plane, a2, {**ours(pool), "anycloud.sh/attempt": "a2"}, kwok=False)
    objects.node(control_plane, a3)  # our issued name, registered without our labels
    objects.node(control_plane, f"other-{suffix}", {"anycloud.sh/node-pool": "np-other"})
    wait_for(f"{a1} Ready", lambda: objects.ready(control_plane, a1))
    sent.clear()

    try:
        nodes = kube.nodes_claiming(pool, {a1, a3, a4})
    finally:
        objects.delete(control_plane, "node", a3, f"other-{suffix}")

    assert [n.name for n in nodes] == [a1, a2, a3]
    first, second, third = nodes
    assert (first.ready, first.gpu_allocatable, first.unschedulable) == (True, 8, False)
    assert first.labels["anycloud.sh/attempt"] == "a1"
    assert first.labels["kubernetes.io/hostname"] == a1
    assert first.created_at is not None
    assert abs(datetime.now(UTC) - first.created_at) < timedelta(minutes=5)
    assert (second.ready, second.gpu_allocatable) == (False, 0)  # no kubelet reported
    assert third.labels.get("anycloud.sh/node-pool") is None
    # One labelled list, then a GET only for issued names the list did not return.
    assert [(c.method, c.path, c.query) for c in sent.calls] == [
        ("GET", NODES, {"labelSelector": [f"anycloud.sh/node-pool={pool}"]}),
        ("GET", f"{NODES}/{a3}", {}),
        ("GET", f"{NODES}/{a4}", {}),
    ]


def test_many_unlabelled_issued_names_cost_one_full_list(control_plane: ControlPlane,
                                                         kube: KubernetesCluster,
                                                         sent: Recorder, pool: str,
                                                         suffix: str) -> None:
    names = {f"anycloud-{suffix}-x{i:02d}" for i in range(MAX_NAME_LOOKUPS + 1)}
    present = f"anycloud-{suffix}-x03"
    objects.node(control_plane, present, kwok=False)
    sent.clear()
    try:
        nodes = kube.nodes_claiming(pool, names)
    finally:
        objects.delete(control_plane, "node", present)
    assert [n.name for n in nodes] == [present]
    assert [(c.method, c.path, c.query) for c in sent.calls] == [
        ("GET", NODES, {"labelSelector": [f"anycloud.sh/node-pool={pool}"]}),
        ("GET", NODES, {}),
    ]


def test_readiness_comes_only_from_a_true_ready_condition(control_plane: ControlPlane,
                                                          kube: KubernetesCluster,
                                                          pool: str, suffix: str) -> None:
    silent, unknown, kubelet = (f"{n}-{suffix}" for n in ("silent", "unknown", "ready"))
    objects.node(control_plane, silent, ours(pool), kwok=False)
    objects.node(control_plane, unknown, ours(pool), kwok=False)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    control_plane.patch_status("node", unknown, {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
         "message": "Kubelet stopped posting node status.", "lastHeartbeatTime": now,
         "lastTransitionTime": now}]})
    objects.node(control_plane, kubelet, ours(pool))
    wait_for(f"{kubelet} Ready", lambda: objects.ready(control_plane, kubelet))
    got = {n.name: n.ready for n in kube.nodes_claiming(pool, set())}
    assert got == {silent: False, unknown: False, kubelet: True}


def test_observed_node_view_for_the_decision_step() -> None:
    node = ObservedNode("anycloud-a1", {**ours("np-gpu1"), "anycloud.sh/attempt": "a1"}, True,
                        4, False, None)
    view = node.to_view()
    assert (view.name, view.pool_label, view.attempt_label, view.ready, view.gpus) == (
        "anycloud-a1", "np-gpu1", "a1", True, 4)
    assert ("anycloud.sh/accelerator", "nvidia") in view.labels
    bare = ObservedNode("n", {}, False, 0, False, None).to_view()
    assert (bare.pool_label, bare.attempt_label, bare.labels) == (None, None, frozenset())


@pytest.mark.parametrize(("value", "count"), [
    (None, 0), ("0", 0), ("1", 1), ("8", 8), ("2k", 2000), ("1Ki", 1024), ("junk", 0),
])
def test_gpu_quantities(value: str | None, count: int) -> None:
    assert parse_quantity_int(value) == count


def test_cordon_sends_a_merge_patch_of_spec_unschedulable(control_plane: ControlPlane,
                                                          kube: KubernetesCluster,
                                                          sent: Recorder, pool: str,
                                                          suffix: str) -> None:
    name = f"anycloud-{suffix}"
    objects.node(control_plane, name, ours(pool))
    sent.clear()
    kube.cordon_node(name)
    (call,) = sent.calls
    assert (call.method, call.path, call.content_type) == ("PATCH", f"{NODES}/{name}", MERGE)
    assert call.body == {"spec": {"unschedulable": True}}
    assert call.query["fieldManager"] == ["anycloud"]
    stored = objects.get(control_plane, "node", name)
    assert stored is not None and stored["spec"]["unschedulable"] is True

    # The controller-manager's reaction (node lifecycle controller): the unschedulable taint.
    def tainted() -> bool:
        node = objects.get(control_plane, "node", name) or {}
        return {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"} in [
            {k: t.get(k) for k in ("key", "effect")} for t in node["spec"].get("taints", [])]

    wait_for("the unschedulable taint", tainted, timeout=30)
    assert kube.nodes_claiming(pool, set())[0].unschedulable is True


def test_label_node_sets_and_removes_one_label(control_plane: ControlPlane,
                                               kube: KubernetesCluster, sent: Recorder,
                                               pool: str, suffix: str) -> None:
    name = f"anycloud-{suffix}"
    objects.node(control_plane, name, {"anycloud.sh/node-pool": pool})
    sent.clear()
    kube.label_node(name, "anycloud.sh/accelerator", "nvidia")
    stored = objects.get(control_plane, "node", name)
    assert stored is not None
    assert stored["metadata"]["labels"]["anycloud.sh/accelerator"] == "nvidia"
    assert stored["metadata"]["labels"]["kubernetes.io/hostname"] == name  # kept
    kube.label_node(name, "anycloud.sh/accelerator", None)
    stored = objects.get(control_plane, "node", name)
    assert stored is not None and "anycloud.sh/accelerator" not in stored["metadata"]["labels"]
    assert [c.body for c in sent.calls] == [
        {"metadata": {"labels": {"anycloud.sh/accelerator": "nvidia"}}},
        {"metadata": {"labels": {"anycloud.sh/accelerator": None}}},  # null removes
    ]
    assert {c.content_type for c in sent.calls} == {MERGE}


def test_writes_to_a_vanished_node_are_no_ops(kube: KubernetesCluster, sent: Recorder,
                                              suffix: str) -> None:
    gone = f"gone-{suffix}"
    kube.cordon_node(gone)
    kube.label_node(gone, "k", "v")
    kube.delete_node(gone)
    assert [(c.method, c.path) for c in sent.calls] == [
        ("PATCH", f"{NODES}/{gone}"), ("PATCH", f"{NODES}/{gone}"), ("DELETE", f"{NODES}/{gone}")]


def test_delete_node(control_plane: ControlPlane, kube: KubernetesCluster, sent: Recorder,
                     pool: str, suffix: str) -> None:
    name = f"anycloud-{suffix}"
    objects.node(control_plane, name, ours(pool))
    kube.delete_node(name)
    assert objects.get(control_plane, "node", name) is None
    assert sent.calls[-1].method == "DELETE"


# -- bootstrap tokens, namespaces -----------------------------------------------------------


def token_secret(token_id: str, secret: str, expires: datetime) -> dict[str, object]:
    """A bootstrap token as the node-pool stack writes it (type bootstrap.kubernetes.io/token)."""
    data = {"token-id": token_id, "token-secret": secret,
            "usage-bootstrap-authentication": "true", "usage-bootstrap-signing": "true",
            "expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}
    return {"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def test_delete_bootstrap_token_secret(control_plane: ControlPlane, kube: KubernetesCluster,
                                       sent: Recorder, suffix: str) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    keep = f"k{suffix}"
    control_plane.apply(token_secret(suffix, "0123456789abcdef", later),
                        token_secret(keep, "0123456789abcdef", later))
    sent.clear()
    kube.delete_bootstrap_token(suffix)
    assert objects.get(control_plane, "secret", f"bootstrap-token-{suffix}", "kube-system") is None
    assert objects.get(control_plane, "secret", f"bootstrap-token-{keep}", "kube-system")
    kube.delete_bootstrap_token(suffix)  # absent: success
    path = f"/api/v1/namespaces/kube-system/secrets/bootstrap-token-{suffix}"
    assert [(c.method, c.path) for c in sent.calls] == [("DELETE", path)] * 2
    objects.delete(control_plane, "secret", f"bootstrap-token-{keep}", namespace="kube-system")


def test_a_bootstrap_token_authenticates_until_the_token_cleaner_removes_it(
    control_plane: ControlPlane, tmp_path: Path, suffix: str
) -> None:
    """The token format a joining VM uses is accepted by the API server, and the
    controller-manager's token cleaner deletes the Secret once its expiration passes."""
    secret = "0123456789abcdef"
    control_plane.apply(token_secret(suffix, secret, datetime.now(UTC) + timedelta(seconds=8)))
    kubeconfig = tmp_path / "token.kubeconfig"
    kubeconfig.write_text(json.dumps(kubeconfig_document(
        control_plane.server, control_plane.pki.ca_cert, token=f"{suffix}.{secret}")))
    whoami = control_plane.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig)
    user = json.loads(whoami.stdout)["status"]["userInfo"]
    assert user["username"] == f"system:bootstrap:{suffix}"
    assert "system:bootstrappers" in user["groups"]
    wait_for("the token cleaner to delete the expired token", lambda: objects.get(
        control_plane, "secret", f"bootstrap-token-{suffix}", "kube-system") is None,
        timeout=45)

    def refused() -> bool:  # the authenticator reads Secrets through an informer cache
        done = control_plane.kubectl("auth", "whoami", kubeconfig=kubeconfig, check=False)
        return done.returncode != 0 and "Unauthorized" in done.stderr

    wait_for("the API server to refuse the deleted token", refused, timeout=15)


@pytest.mark.parametrize(("labels", "owner"), [
    ({"app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/node-pool": "POOL"}, "ours"),
    ({"app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/node-pool": "np-x"}, "foreign"),
    ({"app.kubernetes.io/managed-by": "helm", "anycloud.sh/node-pool": "POOL"}, "foreign"),
    ({}, "foreign"),
])
def test_namespace_owner(control_plane: ControlPlane, kube: KubernetesCluster, pool: str,
                         suffix: str, labels: dict[str, str], owner: str) -> None:
    name = f"ns-{suffix}"
    objects.namespace(control_plane, name, {k: v.replace("POOL", pool)
                                            for k, v in labels.items()})
    try:
        assert kube.namespace_owner(name, pool) == owner
        assert kube.namespace_owner(f"missing-{suffix}", pool) == "absent"
    finally:
        objects.delete(control_plane, "namespace", name)


def test_namespace_deletion_is_confirmed_only_when_it_is_gone(
    control_plane: ControlPlane, kube: KubernetesCluster, sent: Recorder, suffix: str
) -> None:
    """The controller-manager finalises the namespace: while an object inside still has a
    finalizer it stays Terminating, and a second delete is answered 409."""
    name = f"svc-{suffix}"
    objects.namespace(control_plane, name)
    control_plane.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "held", "namespace": name, "finalizers": ["test.anycloud.sh/hold"]}})
    assert kube.service_objects_removed(name) is False
    kube.delete_namespace(name)
    wait_for("the namespace to be Terminating", lambda: (objects.get(
        control_plane, "namespace", name) or {}).get("status", {}).get("phase") == "Terminating")
    assert kube.service_objects_removed(name) is False  # Terminating is not removed
    kube.delete_namespace(name)  # already Terminating: success
    control_plane.kubectl("patch", "configmap", "held", "-n", name, "--type=merge",
                          "-p", '{"metadata":{"finalizers":null}}')
    wait_for("the namespace controller to finish", lambda: kube.service_objects_removed(name))
    kube.delete_namespace(name)  # absent: success
    deletes = [c.path for c in sent.calls if c.method == "DELETE"]
    assert deletes == [f"/api/v1/namespaces/{name}"] * 3


# -- add-ons ---------------------------------------------------------------------------------
# The add-on objects have fixed names: each test removes what it made.


@pytest.fixture
def addon_names(control_plane: ControlPlane):  # type: ignore[no-untyped-def]
    yield
    objects.delete(control_plane, "runtimeclass", "nvidia")
    objects.delete(control_plane, "daemonset", "anycloud-nvidia-device-plugin",
                   namespace="kube-system", wait=True)


def runtime_class(labels: dict[str, str] | None = None) -> dict[str, object]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "nvidia", "labels": labels or {}}, "handler": "nvidia"}


def device_plugin(labels: dict[str, str] | None = None) -> dict[str, object]:
    return objects.daemon_set("anycloud-nvidia-device-plugin", "kube-system", labels,
                              app="nvidia-device-plugin")


@pytest.mark.usefixtures("addon_names")
def test_addon_objects_are_returned_as_stored(control_plane: ControlPlane,
                                             kube: KubernetesCluster, sent: Recorder) -> None:
    assert kube.addon_objects("c-1").runtime_class is None
    control_plane.apply(runtime_class({"objectset.rio.cattle.io/hash": "d1a2"}),
                        device_plugin({"app.kubernetes.io/managed-by": "anycloud",
                                       "anycloud.sh/cluster": "c-1"}))
    stored_rc = objects.get(control_plane, "runtimeclass", "nvidia")
    stored_ds = objects.get(control_plane, "daemonset", "anycloud-nvidia-device-plugin",
                            "kube-system")
    assert stored_rc is not None and stored_ds is not None
    sent.clear()
    seen = kube.addon_objects("c-1")
    assert seen.cluster_id == "c-1"
    assert seen.runtime_class is not None and seen.daemonset is not None
    for got, want in ((seen.runtime_class, stored_rc), (seen.daemonset, stored_ds)):
        assert got["metadata"]["uid"] == want["metadata"]["uid"]
        assert got["metadata"]["labels"] == want["metadata"]["labels"]
    assert seen.daemonset["spec"]["template"] == stored_ds["spec"]["template"]
    assert seen.get("daemonset") == seen.daemonset
    assert [(c.method, c.path) for c in sent.calls] == [("GET", RC_PATH), ("GET", DS_PATH)]


@pytest.mark.usefixtures("addon_names")
def test_adoption_relabels_through_merge_patches(control_plane: ControlPlane,
                                                 kube: KubernetesCluster,
                                                 sent: Recorder) -> None:
    old = {"app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/cluster": "c-old"}
    control_plane.apply(runtime_class(old), device_plugin(old))
    sent.clear()
    kube.write_addon_labels("c-new", DS_ONLY)
    want = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "anycloud",
                                    "anycloud.sh/cluster": "c-new"}}}
    assert [(c.method, c.path, c.body, c.content_type) for c in sent.calls] == [
        ("PATCH", DS_PATH, want, MERGE)]
    kube.write_addon_labels("c-new", ("runtimeclass", "daemonset"))
    assert [(c.method, c.path) for c in sent.calls[1:]] == [("PATCH", RC_PATH),
                                                            ("PATCH", DS_PATH)]
    stored = objects.get(control_plane, "runtimeclass", "nvidia")
    assert stored is not None and stored["metadata"]["labels"]["anycloud.sh/cluster"] == "c-new"


@pytest.mark.usefixtures("addon_names")
def test_recreate_deletes_the_daemonset_in_the_background(control_plane: ControlPlane,
                                                          kube: KubernetesCluster,
                                                          sent: Recorder) -> None:
    control_plane.apply(device_plugin())
    kube.delete_addon_object("daemonset")
    kube.delete_addon_object("runtimeclass")  # absent: success
    assert objects.get(control_plane, "daemonset", "anycloud-nvidia-device-plugin",
                       "kube-system") is None  # gone at once: the stack can create it again
    ds_call, rc_call = sent.calls
    assert (ds_call.method, ds_call.path) == ("DELETE", DS_PATH)
    assert ds_call.query["propagationPolicy"] == ["Background"]
    assert (rc_call.method, rc_call.path) == ("DELETE", RC_PATH)


# -- errors ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def restricted(control_plane: ControlPlane,
               tmp_path_factory: pytest.TempPathFactory) -> KubernetesCluster:
    """The adapter as a ServiceAccount that may only list Nodes: RBAC denies the rest."""
    path = control_plane.token_kubeconfig(tmp_path_factory.mktemp("rbac") / "kubeconfig",
                                          "reader", "anycloud-rbac-test")
    control_plane.kubectl("create", "clusterrole", "anycloud-test-node-lister",
                          "--verb=list", "--resource=nodes", check=False)
    control_plane.kubectl("create", "clusterrolebinding", "anycloud-test-node-lister",
                          "--clusterrole=anycloud-test-node-lister",
                          "--serviceaccount=anycloud-rbac-test:reader", check=False)
    return KubernetesCluster(path, timeout_seconds=10)


@pytest.mark.parametrize(("act", "verb", "resource", "namespace"), [
    (lambda c: c.delete_node("n1"), "delete", "nodes", None),
    (lambda c: c.cordon_node("n1"), "patch", "nodes", None),
    (lambda c: c.nodes_claiming("np-x", {"n1"}), "get", "nodes", None),
    (lambda c: c.delete_bootstrap_token("t1"), "delete", "secrets", "kube-system"),
    (lambda c: c.namespace_owner("np-gpu1", "np-x"), "get", "namespaces", None),
    (lambda c: c.write_addon_labels("c-1", RC_ONLY), "patch", "runtimeclasses", None),
    (lambda c: c.addon_objects("c-1"), "get", "runtimeclasses", None),
])
def test_rbac_denial_names_the_verb_and_resource(
    restricted: KubernetesCluster, act: object, verb: str, resource: str,
    namespace: str | None,
) -> None:
    with pytest.raises(ClusterForbidden) as caught:
        act(restricted)  # type: ignore[operator]
    assert (caught.value.verb, caught.value.resource) == (verb, resource)
    assert f"the cluster's RBAC denies `{verb}` on `{resource}`" in str(caught.value)
    assert (f"in namespace {namespace}" in str(caught.value)) == (namespace is not None)
    assert "system:serviceaccount:anycloud-rbac-test:reader" in str(caught.value)
    assert isinstance(caught.value, ClusterUnavailable)  # callers may treat it as unavailable


def test_rejected_credentials_are_unavailable(control_plane: ControlPlane,
                                              tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(kubeconfig_document(
        control_plane.server, control_plane.pki.ca_cert, token="abcdef.0123456789abcdef")))
    with pytest.raises(ClusterUnavailable, match="rejected the registered credentials"):
        KubernetesCluster(path, timeout_seconds=10).nodes_claiming("np-x", set())


def test_a_server_error_is_unavailable_with_the_status(api: FakeKubeApi,
                                                       cluster: KubernetesCluster) -> None:
    """(The local JSON server: a real API server gives no 500 on demand.)"""
    api.fail[("DELETE", f"{NODES}/n1")] = (500, status(500, "InternalError",
                                                        "etcdserver: request timed out"))
    with pytest.raises(ClusterUnavailable, match=r"500 .*delete nodes/n1.*etcdserver"):
        cluster.delete_node("n1")


def test_an_answer_that_is_not_kubernetes_json_is_unavailable(
    api: FakeKubeApi, cluster: KubernetesCluster
) -> None:
    """(The local JSON server: what a proxy in front of the API server may answer.)"""
    api.fail[("GET", NODES)] = (200, b"<html><body>Bad gateway</body></html>")
    with pytest.raises(ClusterUnavailable, match="answer to list nodes is not Kubernetes JSON"):
        cluster.nodes_claiming("np-x", set())
    api.fail[("GET", NODES)] = (200, ["not", "an", "object"])
    with pytest.raises(ClusterUnavailable, match="expected an object, got list"):
        cluster.nodes_claiming("np-x", set())
    api.fail[("GET", NODES)] = (404, status(404, "NotFound", "the server could not find it"))
    with pytest.raises(ClusterUnavailable, match=r"404 .*list nodes"):
        cluster.nodes_claiming("np-x", set())  # only a missing object is fine, not the API


def test_closed_port_is_unavailable(tmp_path: Path) -> None:
    with serve() as api:
        url = api.url
    kc = KubernetesCluster(write_kubeconfig(tmp_path / "kc", url), None, timeout_seconds=2)
    with pytest.raises(ClusterUnavailable, match=r"cannot reach .*list nodes"):
        kc.nodes_claiming("np-x", set())


def test_broken_kubeconfig_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text("apiVersion: v1\nkind: Config\n")
    with pytest.raises(ClusterUnavailable, match="cannot load kubeconfig"):
        KubernetesCluster(path).delete_node("n1")
