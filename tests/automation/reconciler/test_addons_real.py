"""AddonEnsurer for real: the NVIDIA add-on step with its default apply (refresh, then up)
on the real Pulumi engine, against the real control plane, through the official-client port.

test_addons_step.py runs the same step against a SimulatedCluster and the mock engine; here
every case asserts what the API server holds afterwards (kubectl get) and what the step
reported. The cluster records are registered in a SQLite ledger with the real probe, so
they carry the control plane's kube-system UID (what adoption keys on).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import RowMapping

from automation.app import App
from automation.clock import ManualClock
from automation.devcluster.control_plane import ControlPlane
from automation.engine.pulumi_driver import AutomationRunner
from automation.engine.runner import ProgressSink, RunResult, StackTarget
from automation.kube.adapter import KubernetesCluster
from automation.kube.port import (
    CLUSTER_LABEL,
    DAEMONSET_NAME,
    DAEMONSET_NAMESPACE,
    MANAGED_BY,
    MANAGER,
    RUNTIME_CLASS_NAME,
)
from automation.kube.probe import KubernetesProbe
from automation.ledger import open_ledger, schema
from automation.reconciler.addons_step import AddonEnsurer, AddonResult
from automation.services import clusters
from tests.automation.kube import objects

pytestmark = [pytest.mark.kube, pytest.mark.engine, pytest.mark.slow]

PUBLIC = "https://203.0.113.10:6443"  # what agents would join (TEST-NET-3: never dialled)
NS = DAEMONSET_NAMESPACE
DS = DAEMONSET_NAME
RC = RUNTIME_CLASS_NAME
RC_STATE = f"RuntimeClass {RC}"
DS_STATE = f"DaemonSet {NS}/{DS}"
# Server-set metadata: dropped when a test writes an object back under another shape.
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")


class SpyRunner(AutomationRunner):
    """The real engine, recording each stack operation."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.calls: list[tuple[str, StackTarget]] = []

    def up(self, target: StackTarget, *, on_progress: ProgressSink | None = None) -> RunResult:
        self.calls.append(("up", target))
        return super().up(target, on_progress=on_progress)

    def refresh(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        self.calls.append(("refresh", target))
        return super().refresh(target, on_progress=on_progress)

    def preview(self, target: StackTarget, *, diff: bool = False,
                on_progress: ProgressSink | None = None) -> RunResult:
        self.calls.append(("preview", target))
        return super().preview(target, diff=diff, on_progress=on_progress)

    def destroy(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        self.calls.append(("destroy", target))
        return super().destroy(target, on_progress=on_progress)

    @property
    def ops(self) -> list[str]:
        return [op for op, _ in self.calls]

    @property
    def ups(self) -> list[StackTarget]:
        return [t for op, t in self.calls if op == "up"]


def remove_addons(plane: ControlPlane) -> None:
    """The stack retains its objects on delete; the session's control plane is shared."""
    objects.delete(plane, "runtimeclass", RC, wait=True)
    objects.delete(plane, "daemonset", DS, namespace=NS, wait=True)


@dataclass
class World:
    plane: ControlPlane
    app: App
    runner: SpyRunner
    ensurer: AddonEnsurer

    def register(self, name: str = "prod", kubeconfig: Path | None = None) -> str:
        """A cluster record read from the control plane by the real probe."""
        record = clusters.register_cluster(self.app, clusters.RegisterCluster(
            name=name, kubeconfig=kubeconfig or self.plane.kubeconfig, server_url=PUBLIC))
        assert record.state == "ready" and record.kube_system_uid, record
        return record.id

    def row(self, cluster_id: str) -> RowMapping:
        with self.app.ledger.read() as conn:
            return conn.execute(sa.select(schema.clusters).where(
                schema.clusters.c.id == cluster_id)).mappings().one()

    def ensure(self, cluster_id: str) -> AddonResult:
        """One reconcile run's add-on step, through the port of the record's kubeconfig."""
        self.ensurer.new_run()
        row = self.row(cluster_id)
        port = KubernetesCluster(Path(row["kubeconfig_path"]), row["kube_context"],
                                 timeout_seconds=10)
        try:
            result = self.ensurer.ensure(row, port)
        finally:
            port.close()
        assert result is not None, "the step skipped the cluster as unavailable"
        return result

    def rc(self) -> dict[str, Any] | None:
        return objects.get(self.plane, "runtimeclass", RC)

    def ds(self) -> dict[str, Any] | None:
        return objects.get(self.plane, "daemonset", DS, NS)

    def versions(self) -> tuple[str | None, str | None]:
        """The objects' resourceVersions: unchanged means nothing was written."""
        rc, ds = self.rc(), self.ds()
        return (rc["metadata"]["resourceVersion"] if rc else None,
                ds["metadata"]["resourceVersion"] if ds else None)


@pytest.fixture
def world(control_plane: ControlPlane, engine_env: dict[str, str], sqlite_url: str,
          tmp_path: Path) -> Iterator[World]:
    remove_addons(control_plane)
    ledger = open_ledger(sqlite_url)
    app = App(ledger=ledger, clock=ManualClock(), probe=KubernetesProbe(),
              home=tmp_path / "home")
    runner = SpyRunner(tmp_path / "home")
    yield World(control_plane, app, runner, AddonEnsurer(app, runner))
    remove_addons(control_plane)
    ledger.dispose()


def ours(obj: dict[str, Any] | None, cluster_id: str) -> dict[str, Any]:
    """The object exists and carries this record's ownership labels."""
    assert obj is not None
    labels = obj["metadata"].get("labels") or {}
    assert labels.get(MANAGED_BY) == MANAGER and labels.get(CLUSTER_LABEL) == cluster_id, labels
    return obj


def pod_spec(ds: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = ds["spec"]["template"]["spec"]
    return spec


def installed(world: World, cluster_id: str) -> AddonResult:
    result = world.ensure(cluster_id)
    assert result.diagnostic is None, result.diagnostic
    assert result.actions == ("apply runtimeclass", "apply daemonset")
    return result


def unchanged(world: World, cluster_id: str, rc: str = "ours-unchanged") -> None:
    """A new run finds nothing to do: no write, no stack operation."""
    versions, calls = world.versions(), len(world.runner.calls)
    result = world.ensure(cluster_id)
    assert (result.diagnostic, result.actions) == (None, ())
    assert result.state == f"{RC_STATE}: {rc}, {DS_STATE}: ours-unchanged"
    assert world.versions() == versions
    assert world.runner.calls[calls:] == []


def written_back(world: World, obj: dict[str, Any], mutate: Callable[[dict[str, Any]], None],
                 resource: str, namespace: str | None = None) -> dict[str, Any]:
    """Delete an object and create it again changed (how an immutable field is changed)."""
    meta = obj["metadata"]
    for key in SERVER_FIELDS:
        meta.pop(key, None)
    obj.pop("status", None)
    mutate(obj)
    objects.delete(world.plane, resource, meta["name"], namespace=namespace, wait=True)
    world.plane.kubectl("create", "-f", "-", input=json.dumps(obj))
    created = objects.get(world.plane, resource, meta["name"], namespace)
    assert created is not None
    return created


# -- 1. absent -> installed; a second run writes nothing ---------------------------------------


def test_absent_objects_are_installed_by_the_engine_then_left_alone(world: World) -> None:
    cl = world.register()
    assert world.rc() is None and world.ds() is None

    result = installed(world, cl)
    assert result.state == (f"{RC_STATE}: absent, installed, {DS_STATE}: absent, installed")
    # One add-on stack for the cluster: refreshed first, then up.
    assert world.runner.ops == ["refresh", "up"]
    (target,) = world.runner.ups
    assert target.key == cl and target.config.manage_runtime_class is True

    rc, ds = ours(world.rc(), cl), ours(world.ds(), cl)
    assert rc["handler"] == "nvidia"
    assert rc["metadata"]["labels"] == {MANAGED_BY: MANAGER, CLUSTER_LABEL: cl}
    assert ds["metadata"]["labels"] == {MANAGED_BY: MANAGER, CLUSTER_LABEL: cl}
    desired = world.ensurer.desired(world.row(cl)).daemonset
    assert desired is not None
    image = pod_spec(desired)["containers"][0]["image"]
    assert "@sha256:" in image and pod_spec(ds)["containers"][0]["image"] == image
    assert pod_spec(ds)["nodeSelector"][CLUSTER_LABEL] == cl
    assert pod_spec(ds)["runtimeClassName"] == "nvidia"
    assert ds["spec"]["template"]["metadata"]["labels"][CLUSTER_LABEL] == cl

    # The API server's defaults (dnsPolicy, terminationMessagePath, revisionHistoryLimit,
    # rollingUpdate, hostPath type, ...) are not edits: a new run writes nothing.
    unchanged(world, cl)

    # Deleted behind the engine's back: the refresh before the up lets it see the deletion
    # (a plain up would diff against its state and write nothing).
    objects.delete(world.plane, "daemonset", DS, namespace=NS, wait=True)
    rc_version, calls = world.versions()[0], len(world.runner.calls)
    result = world.ensure(cl)
    assert (result.diagnostic, result.actions) == (None, ("apply daemonset",))
    assert result.state == f"{RC_STATE}: ours-unchanged, {DS_STATE}: absent, installed"
    assert world.runner.ops[calls:] == ["refresh", "up"]
    ours(world.ds(), cl)
    assert world.versions()[0] == rc_version


# -- 2. an edited DaemonSet is rewritten -------------------------------------------------------


def test_an_edited_daemonset_is_rewritten_by_the_engine(world: World) -> None:
    cl = world.register()
    installed(world, cl)
    world.plane.kubectl("set", "env", f"daemonset/{DS}", "-n", NS, "FAIL_ON_INIT_ERROR=true")
    world.plane.kubectl("patch", "daemonset", DS, "-n", NS, "--type=json", "-p", json.dumps([
        {"op": "remove", "path": "/spec/template/metadata/labels/anycloud.sh~1cluster"}]))
    edited = world.ds()
    assert edited is not None
    assert CLUSTER_LABEL not in edited["spec"]["template"]["metadata"]["labels"]
    rc_version = world.versions()[0]

    calls = len(world.runner.calls)
    result = world.ensure(cl)
    assert result.diagnostic is None
    assert result.actions == ("apply daemonset",)
    assert result.state == f"{RC_STATE}: ours-unchanged, {DS_STATE}: ours-edited, rewritten"
    assert world.runner.ops[calls:] == ["refresh", "up"]

    ds = ours(world.ds(), cl)
    assert pod_spec(ds)["containers"][0]["env"] == [
        {"name": "FAIL_ON_INIT_ERROR", "value": "false"}]
    assert ds["spec"]["template"]["metadata"]["labels"][CLUSTER_LABEL] == cl
    assert ds["metadata"]["uid"] == edited["metadata"]["uid"]  # updated in place
    assert world.versions()[0] == rc_version  # the RuntimeClass was not written
    unchanged(world, cl)


def test_additions_the_engine_does_not_take_back_are_recreated(world: World) -> None:
    """Regression: the engine applies server-side with force, which takes back the fields
    it sets but keeps what another field manager added. An extra env var, an operator-Exists
    toleration (the plugin would then run on the management Node too) or RuntimeClass
    scheduling stayed after the rewrite, every run reported them rewritten and ran the
    stack again. The step now reads the objects after the rewrite and recreates them."""
    cl = world.register()
    installed(world, cl)
    world.plane.kubectl("set", "env", f"daemonset/{DS}", "-n", NS, "EXTRA=1")
    world.plane.kubectl("patch", "daemonset", DS, "-n", NS, "--type=json", "-p", json.dumps([
        {"op": "add", "path": "/spec/template/spec/tolerations/-",
         "value": {"operator": "Exists"}}]))
    world.plane.kubectl("patch", "runtimeclass", RC, "--type=merge", "-p", json.dumps(
        {"scheduling": {"nodeSelector": {"gpu": "yes"}}}))
    edited_ds, edited_rc = world.ds(), world.rc()
    assert edited_ds is not None and edited_rc is not None
    assert len(pod_spec(edited_ds)["tolerations"]) == 2 and "scheduling" in edited_rc

    calls = len(world.runner.calls)
    result = world.ensure(cl)
    assert result.diagnostic is None
    assert result.actions == ("apply runtimeclass", "apply daemonset", "delete runtimeclass",
                              "delete daemonset", "apply runtimeclass", "apply daemonset")
    assert result.state == (
        f"{RC_STATE}: ours-edited, recreated, {DS_STATE}: ours-edited, recreated")
    assert world.runner.ops[calls:] == ["refresh", "up", "refresh", "up"]

    ds, rc = ours(world.ds(), cl), ours(world.rc(), cl)
    assert ds["metadata"]["uid"] != edited_ds["metadata"]["uid"]
    assert pod_spec(ds)["tolerations"] == [
        {"key": "anycloud.sh/node-pool", "operator": "Exists", "effect": "NoSchedule"}]
    assert pod_spec(ds)["containers"][0]["env"] == [
        {"name": "FAIL_ON_INIT_ERROR", "value": "false"}]
    assert "scheduling" not in rc and rc["handler"] == "nvidia"
    unchanged(world, cl)


# -- 3. an immutable field differs: delete, then the engine recreates ---------------------------


def test_a_daemonset_selector_that_differs_is_deleted_and_recreated(world: World) -> None:
    cl = world.register()
    installed(world, cl)
    ds = world.ds()
    assert ds is not None

    def reselect(obj: dict[str, Any]) -> None:
        obj["spec"]["selector"]["matchLabels"][CLUSTER_LABEL] = cl  # template carries it

    replaced = written_back(world, ds, reselect, "daemonset", NS)
    calls = len(world.runner.calls)
    result = world.ensure(cl)
    assert result.diagnostic is None
    assert result.actions == ("delete daemonset", "apply daemonset")
    assert result.state == (
        f"{RC_STATE}: ours-unchanged, {DS_STATE}: ours-immutable-differs, recreated")
    assert world.runner.ops[calls:] == ["refresh", "up"]
    recreated = ours(world.ds(), cl)
    assert recreated["metadata"]["uid"] != replaced["metadata"]["uid"]
    assert recreated["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": DS}}
    unchanged(world, cl)


def test_a_runtime_class_handler_that_differs_is_deleted_and_recreated(world: World) -> None:
    cl = world.register()
    installed(world, cl)
    rc = world.rc()
    assert rc is not None
    replaced = written_back(world, rc, lambda o: o.update(handler="runc"), "runtimeclass")
    ds_version = world.versions()[1]

    result = world.ensure(cl)
    assert result.diagnostic is None
    assert result.actions == ("delete runtimeclass", "apply runtimeclass")
    assert result.state == (
        f"{RC_STATE}: ours-immutable-differs, recreated, {DS_STATE}: ours-unchanged")
    recreated = ours(world.rc(), cl)
    assert recreated["handler"] == "nvidia"
    assert recreated["metadata"]["uid"] != replaced["metadata"]["uid"]
    assert world.versions()[1] == ds_version
    unchanged(world, cl)


# -- 4. K3s's own RuntimeClass is used as is ---------------------------------------------------


def k3s_runtime_class() -> dict[str, Any]:
    """What K3s's deploy controller writes when it finds the NVIDIA container runtime."""
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": RC,
                         "labels": {"objectset.rio.cattle.io/hash": "b4a5ee1c0d4b9f0e"},
                         "annotations": {
                             "objectset.rio.cattle.io/id": "",
                             "objectset.rio.cattle.io/owner-gvk": "k3s.cattle.io/v1, Kind=Addon",
                             "objectset.rio.cattle.io/owner-name": "runtimes",
                             "objectset.rio.cattle.io/owner-namespace": "kube-system"}},
            "handler": "nvidia"}


def test_the_k3s_runtime_class_is_used_as_is_while_the_daemonset_is_installed(
    world: World,
) -> None:
    cl = world.register()
    world.plane.apply(k3s_runtime_class())
    k3s = world.rc()
    assert k3s is not None

    result = world.ensure(cl)
    assert result.diagnostic is None
    assert result.actions == ("apply daemonset",)
    assert result.state == f"{RC_STATE}: k3s-builtin, {DS_STATE}: absent, installed"
    (target,) = world.runner.ups
    assert target.config.manage_runtime_class is False

    after = world.rc()
    assert after is not None
    assert after["metadata"]["resourceVersion"] == k3s["metadata"]["resourceVersion"]
    assert after["metadata"]["labels"] == k3s["metadata"]["labels"]  # never labelled ours
    ds = ours(world.ds(), cl)
    assert pod_spec(ds)["runtimeClassName"] == "nvidia"
    # The stack only reads K3s's object: it is external in the engine's state.
    deployment = world.runner._stack(target).export_stack().deployment or {}
    read = [r for r in deployment.get("resources") or []
            if r["type"] == "kubernetes:node.k8s.io/v1:RuntimeClass"]
    assert [r.get("external") for r in read] == [True]
    unchanged(world, cl, rc="k3s-builtin")



# -- 5. a foreign DaemonSet under our name ------------------------------------------------------


def test_a_foreign_daemonset_fails_with_the_kubectl_delete_to_run(world: World) -> None:
    cl = world.register()
    world.plane.apply(objects.daemon_set(DS, NS, labels={MANAGED_BY: "Helm"}))
    versions = world.versions()

    result = world.ensure(cl)
    assert result.diagnostic is not None
    assert f"{DS_STATE} exists but Anycloud does not own it (managed by Helm)" in (
        result.diagnostic)
    assert f"`kubectl -n {NS} delete daemonset {DS}`" in result.diagnostic
    assert result.actions == ()
    assert result.state == f"{RC_STATE}: absent, {DS_STATE}: foreign"
    assert world.runner.calls == []  # no stack ran
    assert world.rc() is None  # the other half is not installed alone either
    assert world.versions() == versions
    theirs = world.ds()
    assert theirs is not None and theirs["metadata"]["labels"] == {MANAGED_BY: "Helm"}


# -- 6. RBAC denial -----------------------------------------------------------------------------


@pytest.fixture
def reader(world: World, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A ServiceAccount's kubeconfig that may read the add-on objects (and the kube-system
    namespace, for the probe) but not write them; and its user name."""
    plane = world.plane
    namespace = f"addons-{secrets.token_hex(3)}"
    path = plane.token_kubeconfig(tmp_path / "reader.kubeconfig", "reader", namespace)
    user = f"system:serviceaccount:{namespace}:reader"
    grant = f"anycloud-test-{namespace}"
    plane.apply({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": grant},
        "rules": [
            {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["kube-system"],
             "verbs": ["get"]},
            {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"],
             "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["apps"], "resources": ["daemonsets"],
             "verbs": ["get", "list", "watch"]},
        ]}, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": grant},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": grant},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
    })

    def may(*what: str) -> Callable[[], bool]:
        return lambda: plane.kubectl("auth", "can-i", *what, f"--as={user}",
                                     check=False).stdout.strip() == "yes"

    # The authorizer sees the binding once its informer has it.
    for what in (("get", "namespaces/kube-system"), ("get", "runtimeclasses/nvidia"),
                 ("get", "daemonsets", "-n", NS)):
        objects.wait_for(f"{user} may {' '.join(what)}", may(*what))
    assert not may("patch", "daemonsets", "-n", NS)()
    yield path, user
    plane.kubectl("delete", "clusterrolebinding", grant, "--ignore-not-found")
    plane.kubectl("delete", "clusterrole", grant, "--ignore-not-found")
    plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_a_write_the_engine_is_denied_names_the_verb_and_resource(
    world: World, reader: tuple[Path, str],
) -> None:
    kubeconfig, _ = reader
    cl = world.register("read-only", kubeconfig)
    result = world.ensure(cl)
    # The engine creates both objects at once and stops at the first denial: either may be
    # the one its error names.
    grant = "; grant it to the identity in the registered kubeconfig"
    assert result.diagnostic in (
        f"installing the NVIDIA add-ons failed: the cluster's RBAC denies `patch` on "
        f"`runtimeclasses`{grant}",
        f"installing the NVIDIA add-ons failed: the cluster's RBAC denies `patch` on "
        f"`daemonsets` in namespace {NS}{grant}",
    ), result.diagnostic
    assert result.state == f"{RC_STATE}: absent, {DS_STATE}: absent"
    assert world.runner.ops == ["refresh", "up"]
    assert result.actions == ()
    assert world.rc() is None and world.ds() is None


def test_a_write_the_port_is_denied_names_the_verb_and_resource(
    world: World, reader: tuple[Path, str],
) -> None:
    """Adoption relabels through the port before any stack runs: the port's 403."""
    kubeconfig, user = reader
    old = world.register("admin")
    installed(world, old)
    clusters.delete_cluster(world.app, old)
    versions, calls = world.versions(), len(world.runner.calls)

    cl = world.register("read-only", kubeconfig)
    result = world.ensure(cl)
    assert result.diagnostic == (
        "installing the NVIDIA add-ons failed: the cluster's RBAC denies `patch` on "
        "`runtimeclasses`; grant it to the identity in the registered kubeconfig "
        f"(runtimeclasses.node.k8s.io \"{RC}\" is forbidden: User \"{user}\" "
        "cannot patch resource \"runtimeclasses\" in API group \"node.k8s.io\" at the "
        "cluster scope)")
    assert result.actions == ()
    assert world.runner.calls[calls:] == []
    assert result.state == f"{RC_STATE}: adoptable, {DS_STATE}: adoptable"
    assert world.versions() == versions  # still the destroyed record's
    ours(world.rc(), old)
    ours(world.ds(), old)


# -- 7. a re-registered control plane adopts its objects ----------------------------------------


def test_a_reregistered_control_plane_adopts_and_relabels(world: World) -> None:
    old = world.register()
    installed(world, old)
    before = world.ds()
    assert before is not None
    clusters.delete_cluster(world.app, old)

    new = world.register("prod-again")
    assert world.row(new)["kube_system_uid"] == world.row(old)["kube_system_uid"]
    calls = len(world.runner.calls)
    result = world.ensure(new)
    assert result.diagnostic is None
    assert result.actions == ("relabel runtimeclass", "relabel daemonset",
                              "apply runtimeclass", "apply daemonset")
    assert result.state == (f"{RC_STATE}: adoptable, adopted, {DS_STATE}: adoptable, adopted")
    assert world.runner.ops[calls:] == ["refresh", "up"]
    (_, target) = world.runner.ups
    assert target.key == new and target.config.adopt_from_cluster_ids == (old,)

    rc, ds = ours(world.rc(), new), ours(world.ds(), new)
    assert rc["metadata"]["labels"] == {MANAGED_BY: MANAGER, CLUSTER_LABEL: new}
    assert ds["metadata"]["uid"] == before["metadata"]["uid"]  # adopted, not recreated
    # The DaemonSet now selects the new record's Nodes.
    assert pod_spec(ds)["nodeSelector"][CLUSTER_LABEL] == new
    assert ds["spec"]["template"]["metadata"]["labels"][CLUSTER_LABEL] == new
    terms = pod_spec(ds)["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": CLUSTER_LABEL, "operator": "In", "values": [new]} in (
        terms[0]["matchExpressions"])
    unchanged(world, new)
