"""The NVIDIA add-on rules, one test (or a few) per sentence of the seed's add-on paragraphs.

Observed objects are shaped as the API server returns them: our fields plus server defaults,
uid, resourceVersion, managedFields and status.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from automation.kube.addons import AddonPlan, classify, plan_addons, plan_from_observation
from automation.kube.port import AddonObservation

CLUSTER = "c-new"
OURS = {"app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/cluster": CLUSTER}
IMAGE = ("nvcr.io/nvidia/k8s-device-plugin@sha256:"
         "3f1b7c0a9d2e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c")


def desired_rc(cluster: str = CLUSTER) -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "nvidia", "labels": {**OURS, "anycloud.sh/cluster": cluster}},
            "handler": "nvidia"}


def desired_ds(cluster: str = CLUSTER) -> dict[str, Any]:
    labels = {**OURS, "anycloud.sh/cluster": cluster}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "anycloud-nvidia-device-plugin", "namespace": "kube-system",
                     "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name":
                                         "anycloud-nvidia-device-plugin"}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name":
                                        "anycloud-nvidia-device-plugin", **labels}},
                "spec": {
                    "nodeSelector": {"anycloud.sh/cluster": cluster,
                                     "anycloud.sh/accelerator": "nvidia"},
                    "tolerations": [{"key": "anycloud.sh/node-pool", "operator": "Exists",
                                     "effect": "NoSchedule"}],
                    "priorityClassName": "system-node-critical",
                    "runtimeClassName": "nvidia",
                    "containers": [{
                        "name": "nvidia-device-plugin-ctr", "image": IMAGE,
                        "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
                        "securityContext": {"allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "device-plugin",
                                          "mountPath": "/var/lib/kubelet/device-plugins"}],
                    }],
                    "volumes": [{"name": "device-plugin",
                                 "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}],
                },
            },
        },
    }


def served_rc(desired: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(desired)
    obj["metadata"].update({
        "uid": "9b1f", "resourceVersion": "812", "creationTimestamp": "2026-06-21T08:00:00Z",
        "managedFields": [{"manager": "pulumi-kubernetes-4f8a", "operation": "Apply",
                           "apiVersion": "node.k8s.io/v1", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:handler": {}}}],
    })
    return obj


def served_ds(desired: dict[str, Any]) -> dict[str, Any]:
    """The DaemonSet as the API server stores it: ours plus every server default."""
    obj = copy.deepcopy(desired)
    obj["metadata"].update({
        "uid": "51c0", "resourceVersion": "9001", "generation": 1,
        "creationTimestamp": "2026-06-21T08:00:01Z",
        "annotations": {"deprecated.daemonset.template.generation": "1"},
    })
    spec = obj["spec"]
    spec["revisionHistoryLimit"] = 10
    spec["updateStrategy"]["rollingUpdate"] = {"maxSurge": 0, "maxUnavailable": 1}
    spec["template"]["metadata"]["creationTimestamp"] = None
    pod = spec["template"]["spec"]
    pod.update({"dnsPolicy": "ClusterFirst", "restartPolicy": "Always",
                "schedulerName": "default-scheduler", "securityContext": {},
                "terminationGracePeriodSeconds": 30, "priority": 2000001000,
                "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"})
    for c in pod["containers"]:
        c.update({"imagePullPolicy": "IfNotPresent", "resources": {},
                  "terminationMessagePath": "/dev/termination-log",
                  "terminationMessagePolicy": "File"})
    pod["volumes"][0]["hostPath"]["type"] = ""
    obj["status"] = {"currentNumberScheduled": 2, "desiredNumberScheduled": 2,
                     "numberAvailable": 2, "numberMisscheduled": 0, "numberReady": 2,
                     "observedGeneration": 1, "updatedNumberScheduled": 2}
    return obj


def k3s_rc() -> dict[str, Any]:
    """The RuntimeClass K3s's deploy controller writes when it finds the NVIDIA runtime."""
    return {
        "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {
            "name": "nvidia", "uid": "77aa", "resourceVersion": "310",
            "creationTimestamp": "2026-06-20T08:00:05Z",
            "labels": {"objectset.rio.cattle.io/hash": "b4a5ee1c0d4b9f0e"},
            "annotations": {"objectset.rio.cattle.io/applied": "H4sIAAAA",
                            "objectset.rio.cattle.io/id": "",
                            "objectset.rio.cattle.io/owner-gvk": "k3s.cattle.io/v1, Kind=Addon",
                            "objectset.rio.cattle.io/owner-name": "runtimes",
                            "objectset.rio.cattle.io/owner-namespace": "kube-system"},
        },
        "handler": "nvidia",
    }


def plan(rc: dict[str, Any] | None, ds: dict[str, Any] | None,
         adoptable: tuple[str, ...] = ()) -> AddonPlan:
    return plan_addons(rc, ds, cluster_id=CLUSTER, adoptable_cluster_ids=adoptable,
                       desired_runtime_class=desired_rc(), desired_daemonset=desired_ds())


def fine(p: AddonPlan) -> bool:
    return p.diagnostic is None


# "Anycloud installs them ... the first time a GPU node pool is reconciled, before any VM is
# bought": nothing there -> install both.
def test_absent_objects_are_installed() -> None:
    p = plan(None, None)
    assert (p.runtime_class.classification, p.daemonset.classification) == ("absent", "absent")
    assert p.apply and p.manage_runtime_class and fine(p)
    assert (p.relabel, p.recreate) == ((), ())


def test_one_missing_object_is_installed_alone() -> None:
    p = plan(served_rc(desired_rc()), None)
    assert (p.runtime_class.classification, p.daemonset.classification) == (
        "ours-unchanged", "absent")
    assert p.apply and fine(p)


# "an object it owns is left alone while unchanged" (server defaults are not edits).
def test_owned_unchanged_objects_are_left_alone() -> None:
    p = plan(served_rc(desired_rc()), served_ds(desired_ds()))
    assert (p.runtime_class.classification, p.daemonset.classification) == (
        "ours-unchanged", "ours-unchanged")
    assert not p.apply and fine(p)
    assert (p.relabel, p.recreate) == ((), ())
    assert p.summary == ("RuntimeClass nvidia: ours-unchanged, DaemonSet "
                         "kube-system/anycloud-nvidia-device-plugin: ours-unchanged")


# "rewritten if something else edited it"
def _edit_image(ds: dict[str, Any]) -> None:
    ds["spec"]["template"]["spec"]["containers"][0]["image"] = "nvidia/k8s-device-plugin:latest"


def _add_toleration(ds: dict[str, Any]) -> None:
    ds["spec"]["template"]["spec"]["tolerations"].append({"operator": "Exists"})


def _widen_node_selector(ds: dict[str, Any]) -> None:
    del ds["spec"]["template"]["spec"]["nodeSelector"]["anycloud.sh/accelerator"]


def _extra_node_selector_key(ds: dict[str, Any]) -> None:
    ds["spec"]["template"]["spec"]["nodeSelector"]["zone"] = "a"


def _add_container(ds: dict[str, Any]) -> None:
    ds["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})


def _drop_runtime_class(ds: dict[str, Any]) -> None:
    del ds["spec"]["template"]["spec"]["runtimeClassName"]


def _change_pod_label(ds: dict[str, Any]) -> None:
    ds["spec"]["template"]["metadata"]["labels"]["team"] = "ml"


@pytest.mark.parametrize("edit", [_edit_image, _add_toleration, _widen_node_selector,
                                  _extra_node_selector_key, _add_container,
                                  _drop_runtime_class, _change_pod_label])
def test_an_edited_daemonset_is_rewritten(edit: Any) -> None:
    ds = served_ds(desired_ds())
    edit(ds)
    p = plan(served_rc(desired_rc()), ds)
    assert p.daemonset.classification == "ours-edited"
    assert p.apply and fine(p) and p.recreate == ()


@pytest.mark.parametrize("extra", [
    {"overhead": {"podFixed": {"memory": "120Mi"}}},
    {"scheduling": {"nodeSelector": {"gpu": "yes"}}},
])
def test_an_edited_runtime_class_is_rewritten(extra: dict[str, Any]) -> None:
    p = plan({**served_rc(desired_rc()), **extra}, served_ds(desired_ds()))
    assert p.runtime_class.classification == "ours-edited"
    assert p.apply and p.manage_runtime_class and fine(p)


def test_server_added_metadata_is_not_an_edit() -> None:
    ds = served_ds(desired_ds())
    ds["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"] = "x"  # extra object label
    ds["metadata"]["annotations"]["deprecated.daemonset.template.generation"] = "7"
    assert plan(served_rc(desired_rc()), ds).daemonset.classification == "ours-unchanged"


# "and recreated if a field the API server treats as immutable differs"
def test_a_different_daemonset_selector_means_recreate() -> None:
    ds = served_ds(desired_ds())
    ds["spec"]["selector"] = {"matchLabels": {"name": "nvidia-device-plugin-ds"}}
    p = plan(served_rc(desired_rc()), ds)
    assert p.daemonset.classification == "ours-immutable-differs"
    assert p.recreate == ("daemonset",) and p.apply and fine(p)


def test_a_different_runtime_class_handler_means_recreate() -> None:
    rc = served_rc(desired_rc())
    rc["handler"] = "nvidia-cdi"
    p = plan(rc, served_ds(desired_ds()))
    assert p.runtime_class.classification == "ours-immutable-differs"
    assert p.recreate == ("runtimeclass",) and p.apply


# "A RuntimeClass that K3s installed itself with the nvidia handler and no overrides is used
# as is."
def test_k3s_runtime_class_is_used_as_is_and_never_written() -> None:
    p = plan(k3s_rc(), served_ds(desired_ds()))
    assert p.runtime_class.classification == "k3s-builtin"
    assert p.manage_runtime_class is False
    assert "runtimeclass" not in p.relabel + p.recreate
    assert not p.apply and fine(p)


def test_k3s_runtime_class_with_our_daemonset_missing_installs_only_the_daemonset() -> None:
    p = plan(k3s_rc(), None)
    assert (p.manage_runtime_class, p.apply, p.daemonset.classification) == (
        False, True, "absent")


@pytest.mark.parametrize("override", [
    {"overhead": {"podFixed": {"cpu": "250m"}}},
    {"scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}},
    {"handler": "nvidia-experimental"},
])
def test_a_k3s_like_runtime_class_with_overrides_is_foreign(override: dict[str, Any]) -> None:
    p = plan({**k3s_rc(), **override}, None)
    assert p.runtime_class.classification == "foreign"
    assert p.diagnostic is not None and "kubectl delete runtimeclass nvidia" in p.diagnostic


def test_a_runtime_class_another_tool_manages_is_foreign_even_with_the_k3s_shape() -> None:
    theirs = k3s_rc()
    theirs["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "gpu-operator"}
    p = plan(theirs, None)
    assert p.runtime_class.classification == "foreign"
    assert p.runtime_class.detail == "managed by gpu-operator"


# "Any other object with the same name that Anycloud does not own marks the GPU node pool
# failed with a diagnostic naming the object and the kubectl delete that removes it"
def test_a_foreign_daemonset_fails_with_its_kubectl_delete() -> None:
    theirs = served_ds(desired_ds())
    theirs["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "Helm"}
    p = plan(served_rc(desired_rc()), theirs)
    assert p.daemonset.classification == "foreign"
    assert p.diagnostic == (
        "DaemonSet kube-system/anycloud-nvidia-device-plugin exists but Anycloud does not own "
        "it (managed by Helm); Anycloud never adopts or replaces foreign objects: remove it "
        "with `kubectl -n kube-system delete daemonset anycloud-nvidia-device-plugin` and the "
        "next pass installs Anycloud's")


def test_an_unlabelled_runtime_class_with_another_handler_is_foreign() -> None:
    p = plan({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
              "metadata": {"name": "nvidia"}, "handler": "runc"}, None)
    assert p.runtime_class.classification == "foreign"
    assert p.diagnostic is not None
    assert p.diagnostic.startswith("RuntimeClass nvidia exists but Anycloud does not own it")
    assert "`kubectl delete runtimeclass nvidia`" in p.diagnostic


def test_two_foreign_objects_name_both_deletes() -> None:
    p = plan({"metadata": {"name": "nvidia"}, "handler": "runc"},
             {"metadata": {"name": "anycloud-nvidia-device-plugin"}, "spec": {}})
    assert p.diagnostic is not None
    assert "kubectl delete runtimeclass nvidia" in p.diagnostic
    assert "kubectl -n kube-system delete daemonset anycloud-nvidia-device-plugin" in p.diagnostic


# "Anycloud never adopts or replaces foreign objects": no write at all while one is there.
def test_foreign_objects_are_never_written() -> None:
    theirs = {"metadata": {"name": "nvidia", "labels": {"team": "ml"}}, "handler": "runc"}
    p = plan(theirs, None)
    assert (p.apply, p.relabel, p.recreate) == (False, (), ())


# "When the same control plane ... is registered again, Anycloud adopts the add-on objects the
# destroyed cluster installed and relabels them for the new record"
def test_objects_of_a_destroyed_record_of_this_control_plane_are_adopted() -> None:
    rc = served_rc(desired_rc("c-old"))
    ds = served_ds(desired_ds("c-old"))
    p = plan(rc, ds, adoptable=("c-old",))
    assert (p.runtime_class.classification, p.daemonset.classification) == (
        "adoptable", "adoptable")
    assert p.relabel == ("runtimeclass", "daemonset")
    # The DaemonSet still selects the old record's Nodes: the stack rewrites it.
    assert p.daemonset.drift == "edited" and p.apply and fine(p)
    assert p.recreate == ()
    assert p.manage_runtime_class


def test_an_adopted_object_whose_immutable_field_differs_is_also_recreated() -> None:
    ds = served_ds(desired_ds("c-old"))
    ds["spec"]["selector"] = {"matchLabels": {"app": "old"}}
    p = plan(None, ds, adoptable=("c-old",))
    assert p.relabel == ("daemonset",) and p.recreate == ("daemonset",)


# "objects labelled for any other cluster remain foreign"
def test_objects_labelled_for_another_cluster_stay_foreign() -> None:
    p = plan(served_rc(desired_rc("c-elsewhere")), served_ds(desired_ds("c-old")),
             adoptable=("c-old",))
    assert p.runtime_class.classification == "foreign"
    assert p.runtime_class.detail == "labelled for cluster record c-elsewhere"
    assert p.daemonset.classification == "adoptable"
    assert not p.apply and p.relabel == ()  # nothing is written while one is foreign
    assert p.diagnostic is not None and "c-elsewhere" in p.diagnostic


def test_this_records_own_id_in_the_adoptable_list_changes_nothing() -> None:
    p = plan(served_rc(desired_rc()), None, adoptable=(CLUSTER,))
    assert p.runtime_class.classification == "ours-unchanged"


def test_managed_by_anycloud_without_a_cluster_label_is_foreign() -> None:
    rc = served_rc(desired_rc())
    del rc["metadata"]["labels"]["anycloud.sh/cluster"]
    assert classify("runtimeclass", rc, CLUSTER, (), desired_rc()).classification == "foreign"


def test_an_owned_object_whose_managed_by_label_was_removed_is_foreign() -> None:
    ds = served_ds(desired_ds())
    del ds["metadata"]["labels"]["app.kubernetes.io/managed-by"]
    assert plan(None, ds).daemonset.classification == "foreign"


def test_plan_from_an_observation_uses_its_cluster_id() -> None:
    seen = AddonObservation(cluster_id=CLUSTER, runtime_class=k3s_rc(),
                            daemonset=served_ds(desired_ds()))
    p = plan_from_observation(seen, adoptable_cluster_ids=(),
                              desired_runtime_class=desired_rc(),
                              desired_daemonset=desired_ds())
    assert (p.runtime_class.classification, p.daemonset.classification) == (
        "k3s-builtin", "ours-unchanged")
