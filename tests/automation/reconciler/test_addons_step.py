"""AddonEnsurer: the NVIDIA add-on step against a SimulatedCluster and the mock engine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import RowMapping

from automation.app import App
from automation.engine.errors import EngineFailed
from automation.engine.mock.runner import MockEngineRunner
from automation.engine.runner import ProgressSink, RunResult, StackKind, StackTarget
from automation.kube.port import (
    ADDON_KINDS,
    CLUSTER_LABEL,
    DAEMONSET_NAME,
    MANAGED_BY,
    MANAGER,
    RUNTIME_CLASS_NAME,
    AddonKind,
)
from automation.kube.probe import ClusterFacts
from automation.ledger import schema
from automation.reconciler.addons_step import (
    AddonEnsurer,
    AddonRunCache,
    DesiredAddons,
    planned_writes,
    simulated_apply,
)
from automation.reconciler.reconcile import Ports
from automation.services import clusters
from automation.simulators.cluster import Access, SimulatedCluster
from stacks.config import ClusterAddonsStackConfig
from tests.automation.conftest import DEMO_CA, ScriptedProbe

UID = "6c3a4b0e-2f1d-4e8a-9b7c-1d2e3f4a5b6c"
OTHER_UID = "0f0e0d0c-0b0a-4908-8706-050403020100"
RC = Access("create", "runtimeclasses", RUNTIME_CLASS_NAME)
DS_NAME = f"kube-system/{DAEMONSET_NAME}"
DS = Access("create", "daemonsets", DS_NAME)


class SpyRunner(MockEngineRunner):
    """The mock engine, recording each stack operation; ``fail`` makes ``up`` raise."""

    def __init__(self, home: Path) -> None:
        super().__init__(home)
        self.calls: list[tuple[str, StackTarget]] = []
        self.fail: EngineFailed | None = None

    def up(self, target: StackTarget, *, on_progress: ProgressSink | None = None) -> RunResult:
        self.calls.append(("up", target))
        if self.fail is not None:
            raise self.fail
        return super().up(target, on_progress=on_progress)

    def refresh(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        self.calls.append(("refresh", target))
        return super().refresh(target, on_progress=on_progress)

    @property
    def ups(self) -> list[StackTarget]:
        return [t for op, t in self.calls if op == "up"]


class World:
    def __init__(self, app: App, probe: ScriptedProbe, kubeconfig: Path, home: Path) -> None:
        self.app, self.probe, self.kubeconfig = app, probe, kubeconfig
        self.sim = SimulatedCluster(app.clock, kube_system_uid=UID)
        self.runner = SpyRunner(home)
        self.cache = AddonRunCache()
        self.ensurer = AddonEnsurer(app, self.runner, self.cache,
                                    apply=simulated_apply(self.runner, self.sim))

    def register(self, name: str = "prod", uid: str = UID) -> str:
        self.probe.facts = ClusterFacts(kubernetes_version="v1.36.2+k3s1", kube_system_uid=uid)
        return clusters.register_cluster(self.app, clusters.RegisterCluster(
            name=name, kubeconfig=self.kubeconfig, ca_file=DEMO_CA)).id

    def row(self, cluster_id: str) -> RowMapping:
        with self.app.ledger.read() as conn:
            return conn.execute(sa.select(schema.clusters).where(
                schema.clusters.c.id == cluster_id)).mappings().one()

    def ensure(self, cluster_id: str, *, new_run: bool = True) -> str | None:
        if new_run:
            self.ensurer.new_run()
        return self.ensurer(self.row(cluster_id), self.sim)

    def desired(self, cluster_id: str) -> DesiredAddons:
        return self.ensurer.desired(self.row(cluster_id))

    def labels(self, kind: AddonKind) -> dict[str, str]:
        obj = self.sim.addons[kind]
        assert obj is not None
        return dict(obj["metadata"].get("labels") or {})


@pytest.fixture
def world(app: App, probe: ScriptedProbe, kubeconfig: Path, tmp_path: Path) -> World:
    return World(app, probe, kubeconfig, tmp_path / "home")


def ours(world: World, cluster_id: str, kind: AddonKind = "daemonset") -> dict[str, Any]:
    obj = world.sim.addons[kind]
    assert obj is not None
    assert obj["metadata"]["labels"][CLUSTER_LABEL] == cluster_id
    return obj


# -- install, leave alone, rewrite, recreate -------------------------------------------------


def test_installs_when_absent(world: World) -> None:
    cl = world.register()
    assert world.ensure(cl) is None
    assert world.sim.journal == [RC, DS]
    desired = world.desired(cl).daemonset
    assert desired is not None
    image = desired["spec"]["template"]["spec"]["containers"][0]["image"]
    stored = ours(world, cl)["spec"]["template"]["spec"]["containers"][0]["image"]
    assert stored == image and "@sha256:" in image
    assert ours(world, cl, "runtimeclass")["handler"] == "nvidia"
    # One add-on stack for the cluster, refreshed first, then up.
    (target,) = world.runner.ups
    assert target.kind is StackKind.CLUSTER_ADDONS and target.key == cl
    assert [op for op, _ in world.runner.calls] == ["refresh", "up"]
    assert isinstance(target.config, ClusterAddonsStackConfig)
    assert target.config.manage_runtime_class is True
    state = world.runner.load_state(target)["resources"]
    assert {r["type"] for r in state.values()} >= {
        "kubernetes:node.k8s.io/v1:RuntimeClass", "kubernetes:apps/v1:DaemonSet"}


def test_second_pass_writes_nothing_and_runs_no_stack(world: World) -> None:
    cl = world.register()
    world.ensure(cl)
    journal, calls = list(world.sim.journal), list(world.runner.calls)
    assert world.ensure(cl) is None  # a new run: read again, nothing to do
    assert world.sim.journal == journal
    assert world.runner.calls == calls
    assert world.ensurer.addons_state(world.row(cl), world.sim) == (
        f"RuntimeClass nvidia: ours-unchanged, DaemonSet {DS_NAME}: ours-unchanged")


def test_at_most_once_per_run(world: World) -> None:
    """The reconciler calls it for every GPU pool; one run checks a cluster once."""
    cl = world.register()
    world.ensure(cl)
    reads = len(world.sim.reads)
    for _ in range(3):  # more GPU pools on the same cluster, same run
        assert world.ensure(cl, new_run=False) is None
    assert len(world.sim.reads) == reads
    assert "installed" in world.ensurer.addons_state(world.row(cl), world.sim)
    world.cache.reset()  # the next run reads again
    world.ensure(cl, new_run=False)
    assert len(world.sim.reads) > reads


def test_edited_object_is_rewritten(world: World) -> None:
    cl = world.register()
    world.ensure(cl)

    def edit(obj: dict[str, Any]) -> None:
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "nvcr.io/evil:latest"

    world.sim.edit_addon("daemonset", edit)
    before = len(world.sim.journal)
    assert world.ensure(cl) is None
    assert world.sim.journal[before:] == [Access("patch", "daemonsets", DS_NAME)]
    image = ours(world, cl)["spec"]["template"]["spec"]["containers"][0]["image"]
    assert "@sha256:" in image


def test_object_that_lost_its_cluster_label_is_foreign(world: World) -> None:
    cl = world.register()
    world.ensure(cl)
    world.sim.edit_addon("runtimeclass", lambda o: o["metadata"]["labels"].pop(CLUSTER_LABEL))
    # Without its cluster label the object is no longer provably ours: foreign.
    diag = world.ensure(cl)
    assert diag is not None and "kubectl delete runtimeclass nvidia" in diag


def test_immutable_field_differs_delete_then_create(world: World) -> None:
    cl = world.register()
    world.ensure(cl)

    def reselect(obj: dict[str, Any]) -> None:
        obj["spec"]["selector"] = {"matchLabels": {"app": "other"}}

    world.sim.edit_addon("daemonset", reselect)
    before = len(world.sim.journal)
    assert world.ensure(cl) is None
    assert world.sim.journal[before:] == [Access("delete", "daemonsets", DS_NAME), DS]
    assert ours(world, cl)["spec"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/name": DAEMONSET_NAME}}


def test_runtime_class_handler_differs_is_recreated(world: World) -> None:
    cl = world.register()
    world.ensure(cl)
    world.sim.edit_addon("runtimeclass", lambda o: o.update(handler="runc"))
    before = len(world.sim.journal)
    assert world.ensure(cl) is None
    assert world.sim.journal[before:] == [Access("delete", "runtimeclasses", "nvidia"), RC]
    assert ours(world, cl, "runtimeclass")["handler"] == "nvidia"


def test_k3s_builtin_runtime_class_is_used_as_is(world: World) -> None:
    cl = world.register()
    world.sim.add_k3s_runtime_class()
    k3s = dict(world.sim.addons["runtimeclass"] or {})
    assert world.ensure(cl) is None
    assert world.sim.journal == [DS]  # the DaemonSet only
    assert world.sim.addons["runtimeclass"] == k3s
    (target,) = world.runner.ups
    assert target.config.manage_runtime_class is False
    # The stack reads K3s's object, it never registers (writes) one.
    state = world.runner.load_state(target)["resources"]
    assert "kubernetes:node.k8s.io/v1:RuntimeClass" not in {r["type"] for r in state.values()}
    assert world.ensure(cl) is None
    assert world.sim.journal == [DS] and len(world.runner.ups) == 1


# -- foreign, denied ------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "command"), [
    ("daemonset", f"kubectl -n kube-system delete daemonset {DAEMONSET_NAME}"),
    ("runtimeclass", "kubectl delete runtimeclass nvidia"),
])
def test_foreign_object_fails_with_kubectl_delete(
    world: World, kind: AddonKind, command: str,
) -> None:
    cl = world.register()
    world.sim.add_foreign_addon(kind)
    diag = world.ensure(cl)
    assert diag is not None
    assert command in diag and "managed by Helm" in diag
    assert world.sim.journal == [] and world.runner.calls == []
    world.sim.set_addon(kind, None)  # a person removed it
    assert world.ensure(cl) is None
    assert world.sim.journal == [RC, DS]


def test_rbac_denial_names_verb_and_resource(world: World) -> None:
    cl = world.register()
    world.sim.deny("create", "daemonsets")
    diag = world.ensure(cl)
    assert diag is not None
    assert "`create` on `daemonsets`" in diag and "kube-system" in diag


def test_rbac_denial_from_the_engine(world: World) -> None:
    cl = world.register()
    world.runner.fail = EngineFailed(
        "pulumi failed on stack cluster-addons-x:\n  kubernetes:apps/v1:DaemonSet "
        f'(nvidia-device-plugin): error: daemonsets.apps "{DAEMONSET_NAME}" is forbidden: '
        'User "system:serviceaccount:anycloud:anycloud" cannot patch resource "daemonsets" '
        'in API group "apps" in the namespace "kube-system"')
    diag = world.ensure(cl)
    assert diag is not None
    assert "`patch` on `daemonsets` in namespace kube-system" in diag
    assert world.sim.journal == []


def test_denied_read_and_engine_failure_are_diagnostics(world: World) -> None:
    cl = world.register()
    world.sim.deny("get", "runtimeclasses")
    diag = world.ensure(cl)
    assert diag is not None and "`get` on `runtimeclasses`" in diag
    world.sim.allow("get", "runtimeclasses")
    world.runner.fail = EngineFailed("pulumi failed on stack cluster-addons-x: timeout")
    diag = world.ensure(cl)
    assert diag is not None and "timeout" in diag


def test_unreachable_cluster_is_not_cached_and_fails_nothing(world: World) -> None:
    cl = world.register()
    world.sim.set_unreachable(True)
    assert world.ensure(cl) is None
    assert world.cache.results == {}
    world.sim.set_unreachable(False)
    assert world.ensure(cl, new_run=False) is None
    assert world.sim.journal == [RC, DS]


# -- adoption -------------------------------------------------------------------------------


def test_reregistered_control_plane_adopts_and_relabels(world: World) -> None:
    old = world.register()
    world.ensure(old)
    clusters.delete_cluster(world.app, old)
    new = world.register("prod-again")
    before = len(world.sim.journal)
    assert world.ensure(new) is None
    relabel = [Access("patch", "runtimeclasses", "nvidia"), Access("patch", "daemonsets", DS_NAME)]
    assert world.sim.journal[before:before + 2] == relabel
    for kind in ADDON_KINDS:
        assert world.labels(kind)[CLUSTER_LABEL] == new
        assert world.labels(kind)[MANAGED_BY] == MANAGER
    (_, target) = world.runner.ups
    assert target.key == new and target.config.adopt_from_cluster_ids == (old,)
    # The objects now select this record's Nodes.
    assert ours(world, new)["spec"]["template"]["spec"]["nodeSelector"][CLUSTER_LABEL] == new
    after = len(world.sim.journal)
    assert world.ensure(new) is None
    assert len(world.sim.journal) == after


@pytest.mark.parametrize("case", ["live-same-uid", "deleted-other-uid", "unknown-record"])
def test_other_clusters_objects_stay_foreign(world: World, case: str) -> None:
    if case == "live-same-uid":
        other = world.register("other")  # same control plane, but a live record
    elif case == "deleted-other-uid":
        other = world.register("other", uid=OTHER_UID)
    else:
        other = "cl-somewhere-else"
    labels = {MANAGED_BY: MANAGER, CLUSTER_LABEL: other}
    world.sim.add_foreign_addon("daemonset", labels)
    if case == "deleted-other-uid":
        clusters.delete_cluster(world.app, other)
    cl = world.register("prod")
    diag = world.ensure(cl)
    assert diag is not None
    assert f"labelled for cluster record {other}" in diag
    assert f"kubectl -n kube-system delete daemonset {DAEMONSET_NAME}" in diag
    assert world.sim.journal == [] and world.runner.calls == []


def test_offline_registration_adopts_nothing(world: World) -> None:
    old = world.register()
    world.ensure(old)
    clusters.delete_cluster(world.app, old)
    new = clusters.register_cluster(world.app, clusters.RegisterCluster(
        name="offline", kubeconfig=world.kubeconfig, ca_file=DEMO_CA,
        kubernetes_version="v1.36.2+k3s1", offline=True)).id
    diag = world.ensure(new)
    assert diag is not None and f"labelled for cluster record {old}" in diag


# -- the contract with the reconciler -------------------------------------------------------


def test_plugs_into_ports(world: World) -> None:
    ensure: Callable[[RowMapping, Any], str | None] = world.ensurer
    ports = Ports(runner=world.runner, cluster_for=lambda row: world.sim,
                  vm_lookup=lambda pool, ids: dict.fromkeys(ids, "absent"), ensure_addons=ensure)
    assert ports.ensure_addons is world.ensurer


def test_planned_writes_never_include_the_k3s_runtime_class(world: World) -> None:
    cl = world.register()
    world.sim.add_k3s_runtime_class()
    plan, _, _ = world.ensurer.plan(world.row(cl), world.sim)
    assert plan.manage_runtime_class is False
    assert planned_writes(plan) == ("daemonset",)
    assert world.sim.journal == []  # planning reads only


def test_reconciler_checks_gpu_clusters_once_per_run_and_cpu_clusters_never(
    world: World, tmp_path: Path,
) -> None:
    """Caller contract: only GPU pool passes call the step (CPU pools never do, so a cluster
    with no GPU pool is never checked), and the run cache makes it once per cluster."""
    from automation.reconciler.reconcile import Reconciler
    from automation.services import node_pools
    from tests.automation.conftest import credential

    gpu_cluster = world.register("gpu")
    cpu_cluster = world.register("cpu", uid=OTHER_UID)
    cpu_sim = SimulatedCluster(world.app.clock, kube_system_uid=OTHER_UID)
    credential(world.app)
    for name, cluster, vm in (("a", "gpu", "g5.xlarge"), ("b", "gpu", "g5.xlarge"),
                              ("c", "gpu", "m7i.large"), ("d", "cpu", "m7i.large")):
        node_pools.create_node_pool(world.app, node_pools.CreateNodePool(
            name=name, cluster=cluster, credentials="team-aws", region="us-east-1",
            zone="us-east-1a", vm_type=vm, min_vms=1, max_vms=1))
    seen: list[str] = []

    def ensure(row: RowMapping, port: Any) -> str | None:
        seen.append(row["id"])
        return world.ensurer(row, port)

    sims = {gpu_cluster: world.sim, cpu_cluster: cpu_sim}
    reconciler = Reconciler(world.app, Ports(
        runner=world.runner, cluster_for=lambda row: sims[row["id"]],
        vm_lookup=lambda pool, ids: dict.fromkeys(ids, "absent"), ensure_addons=ensure))
    for _ in range(2):
        world.ensurer.new_run()  # what run_once's caller does before each run
        reads = len(world.sim.reads)
        reconciler.run_once()
        # Both GPU pools asked (a pool that acts asks again under its lease) ...
        assert seen.count(gpu_cluster) >= 2
        assert [r for r in world.sim.reads[reads:] if r.resource == "daemonsets"] == [
            Access("get", "daemonsets", DS_NAME)]  # ... the cluster was read once
        seen.clear()
    assert cpu_cluster not in seen
    assert not [r for r in cpu_sim.reads if r.resource in ("daemonsets", "runtimeclasses")]
    assert cpu_sim.journal == []
    assert world.sim.writes_to("daemonsets") == [DS]


def test_unbuildable_objects_are_a_diagnostic(world: World) -> None:
    """A plain mapping works as the row; without a kubeconfig the stack cannot be built."""
    cl = world.register()
    row = {**dict(world.row(cl)), "kubeconfig_path": None}
    diag = world.ensurer(row, world.sim)
    assert diag is not None and "kubeconfig_path is required" in diag
    assert world.sim.journal == [] and world.sim.reads == []


def test_a_preview_of_a_cluster_not_read_does_not_say_where_it_is(
        app: App, probe: ScriptedProbe, tmp_path: Path) -> None:
    """The add-on preview reads the cluster first; when that fails, the error its caller
    sees (any reader, through the API) names neither the API server nor the kubeconfig."""
    import base64

    from automation.errors import AnycloudError
    from automation.services.rollout import preview_addons

    server = "https://k3s-prod.example.invalid:6443"  # never resolves: fails at once
    probe.server_url = server
    kubeconfig = tmp_path / "secret-place" / "prod.yaml"
    kubeconfig.parent.mkdir()
    ca = base64.b64encode(DEMO_CA.read_bytes()).decode()
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
        f"clusters:\n- name: prod\n  cluster:\n    server: {server}\n"
        f"    certificate-authority-data: {ca}\n"
        "contexts:\n- name: prod\n  context:\n    cluster: prod\n    user: admin\n"
        "users:\n- name: admin\n  user:\n    token: t0ken\n")
    clusters.register_cluster(app, clusters.RegisterCluster(
        name="prod", kubeconfig=kubeconfig, kubernetes_version="v1.36.2+k3s1",
        ca_file=DEMO_CA, offline=True))
    runner = MockEngineRunner(tmp_path / "home")
    with pytest.raises(AnycloudError) as caught:
        preview_addons(app, lambda: runner, "prod")
    shown = str(caught.value)
    assert caught.value.code == "CLUSTER_UNAVAILABLE" and "cluster not read" in shown, shown
    for where in ("k3s-prod", "example.invalid", "6443", "secret-place"):
        assert where not in shown, shown
    assert "<api-server>" in shown or "<host>" in shown, shown
