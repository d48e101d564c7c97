"""A pool's ingress release through the add-on mechanism (seed, "Ingress entry").

The reconciler with the simulated ports (mock engine, simulated cloud and cluster): the
Traefik HelmChart is a stack of its own, installed after the pool's network admits port 80,
left alone while unchanged, rewritten when edited, recreated when its namespace changed,
never adopted when foreign (that pool alone fails, with the object and the kubectl delete),
kept while the pool lives and removed when it is deleted — after its VMs are released and
before its network. The pure rules (``plan_release``) and the decision (``decide``) are tested
here too, and the last tests (markers kube, engine) run the step and a reconciler pass on the
real Pulumi engine against the real API server.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from automation.kube.ingress_release import plan_release
from automation.ledger import schema
from automation.models import WorkloadKind
from automation.reconciler import decide as d
from automation.reconciler.reconcile import Reconciler
from automation.services import node_pools, pool_status, workloads
from automation.simulators.ports import simulated_ports
from automation.stack_targets import pool_target
from tests.automation.reconciler.conftest import Rig

M = timedelta(minutes=1)
HELMCHART = "kubernetes:helm.cattle.io/v1:HelmChart"


@pytest.fixture
def sim(rig: Rig) -> Reconciler:
    """The rig's world with the simulated ports: add-on and ingress steps included."""
    return Reconciler(rig.app, simulated_ports(rig.app, rig.world),
                      report=lambda kind, msg, data: rig.log.append((kind, msg)))


def passes(rig: Rig, reconciler: Reconciler, n: int, step: timedelta = M) -> None:
    for _ in range(n):
        reconciler.run_once()
        rig.world.advance(step)


def chart(rig: Rig, pool: str) -> dict[str, Any] | None:
    found = (rig.world.cluster.helm.get(pool) or {}).get("chart")
    return found if isinstance(found, dict) else None


def release_name(pool: str) -> str:
    return f"anycloud-ingress-{pool}"


def release_log(rig: Rig) -> list[str]:
    return [m for k, m in rig.log if k == "ingress" and "ingress release" in m]


def events(rig: Rig, pool: str) -> list[str]:
    with rig.app.ledger.read() as conn:
        return list(conn.execute(sa.select(schema.events.c.kind).where(
            schema.events.c.subject_id == pool).order_by(schema.events.c.id)).scalars())


def pool_row(rig: Rig, pool: str) -> Any:
    with rig.app.ledger.read() as conn:
        return conn.execute(sa.select(schema.node_pools).where(
            schema.node_pools.c.id == pool)).mappings().one()


def port_80_rule(rig: Rig, reconciler: Reconciler, pool: str) -> bool:
    """Does the pool's applied stack hold the security group's HTTP rule (mock state)?"""
    state = reconciler.ports.runner.load_state(  # type: ignore[attr-defined]
        pool_target(rig.app, pool, planned=False))
    (sg,) = [r for u, r in state["resources"].items() if "$aws:ec2/securityGroup:" in u]
    return any(rule["protocol"] == "tcp" and rule["fromPort"] == rule["toPort"] == 80
               and "173.245.48.0/20" in rule["cidrBlocks"]  # a Cloudflare edge range
               for rule in sg["inputs"].get("ingress") or [])


def service_pool(rig: Rig, sim: Reconciler, name: str = "web", count: int = 1) -> str:
    pool = rig.pool(name, count=count)
    workloads.create_workload(rig.app, f"{name}-site", name, WorkloadKind.SERVICE)
    passes(rig, sim, 6)
    return pool


# -- install, converge -------------------------------------------------------------------


def test_the_release_is_installed_after_the_port_80_rule_then_left_alone(
    rig: Rig, sim: Reconciler,
) -> None:
    pool = rig.pool("web", count=1)
    passes(rig, sim, 6)
    assert chart(rig, pool) is None and not port_80_rule(rig, sim, pool)
    workloads.create_workload(rig.app, "site", "web", WorkloadKind.SERVICE)
    rig.log.clear()
    outcome = sim.run_once()[0]
    # One pass: the pool's stack (the rule) first, then the release's own stack.
    assert outcome.actions[:2] == ["ApplyStack", "EnsureIngressRelease"], outcome.actions
    assert port_80_rule(rig, sim, pool)
    found = chart(rig, pool)
    assert found is not None and found["metadata"]["name"] == release_name(pool)
    assert found["spec"]["bootstrap"] is True
    assert release_log(rig) == [
        "web: ingress release: apply helmchart"]
    assert events(rig, pool)[-1] == "ingress_release"
    # The release is the ingress-release stack's, not the pool's.
    runner = sim.ports.runner
    assert not [u for u in runner.load_state(  # type: ignore[attr-defined]
        pool_target(rig.app, pool))["resources"] if HELMCHART in u]
    from automation.reconciler.ingress_step import release_target

    cluster = sim._cluster_row(pool_row(rig, pool))
    assert [u for u in runner.load_state(  # type: ignore[attr-defined]
        release_target(cluster, pool))["resources"] if HELMCHART in u]

    # Converged: read, nothing written (no stack run, no cluster write, no ledger write).
    journal = len(rig.world.cluster.journal)
    assert sim.run_once()[0].actions == []
    assert len(rig.world.cluster.journal) == journal
    assert rig.world.cluster.reads[-1].resource in ("helmcharts", "nodes")


def test_pools_without_a_service_install_and_read_nothing(rig: Rig, sim: Reconciler) -> None:
    cpu = rig.pool("cpu", count=1)
    gpu = rig.pool("gpu", vm_type="g6.xlarge", count=1)
    passes(rig, sim, 6)
    assert pool_status.node_pool_status(rig.app.ledger, cpu).state == "ready"
    assert pool_status.node_pool_status(rig.app.ledger, gpu).state == "ready"
    assert rig.world.cluster.helm == {}
    assert not [r for r in rig.world.cluster.reads if r.resource == "helmcharts"]
    assert not [w for w in rig.world.cluster.journal if w.resource == "helmcharts"]
    # The NVIDIA add-ons still went in for the GPU pool, as before.
    assert rig.world.cluster.addons["daemonset"] is not None


# -- the port-80 rule and the release outlive the last Service ---------------------------


def test_the_port_80_rule_survives_the_last_services_removal(rig: Rig, sim: Reconciler) -> None:
    pool = service_pool(rig, sim)
    assert port_80_rule(rig, sim, pool) and chart(rig, pool) is not None
    workloads.delete_workload(rig.app, "web-site")
    passes(rig, sim, 3)
    with rig.app.ledger.read() as conn:
        (state,) = conn.execute(sa.select(schema.workloads.c.state)).scalars()
    assert state == "removed"  # the last Service is gone from the cluster and the ledger
    passes(rig, sim, 3)
    # Never removed while the pool lives: the rule in the applied stack and in the program,
    # and the release on the cluster.
    assert port_80_rule(rig, sim, pool)
    assert pool_target(rig.app, pool, planned=False).config.hosts_service is True
    assert chart(rig, pool) is not None
    assert pool_status.node_pool_status(rig.app.ledger, pool).state == "ready"


# -- deletion ------------------------------------------------------------------------------


def test_deleting_the_pool_removes_its_release_after_its_vms_before_its_network(
    rig: Rig, sim: Reconciler,
) -> None:
    pool = service_pool(rig, sim)
    other = service_pool(rig, sim, "keep")
    workloads.delete_workload(rig.app, "web-site")
    passes(rig, sim, 3)
    node_pools.delete_node_pool(rig.app, pool)
    passes(rig, sim, 8)
    assert pool_status.node_pool_status(rig.app.ledger, pool).state == "deleted"
    assert chart(rig, pool) is None
    assert [w for w in rig.world.cluster.journal if w.resource == "helmcharts"][-1].verb == (
        "delete")
    kinds = events(rig, pool)
    released = max(i for i, k in enumerate(kinds) if k == "attempt_released")
    removed = kinds.index("ingress_release_removed")
    assert released < removed < kinds.index("network_removed")
    # The other pool's release is untouched.
    assert chart(rig, other) is not None
    assert pool_status.node_pool_status(rig.app.ledger, other).state == "ready"


def test_a_failed_release_removal_keeps_the_network_and_the_pool_deleting(
    rig: Rig, sim: Reconciler,
) -> None:
    from automation.engine.errors import EngineFailed

    pool = service_pool(rig, sim)
    workloads.delete_workload(rig.app, "web-site")
    passes(rig, sim, 3)
    step = sim.ports.ensure_ingress
    assert step is not None
    destroy = step.destroy

    def refused(target: Any) -> None:
        raise EngineFailed("pulumi failed: the cluster did not answer", code="ENGINE_FAILED")

    step.destroy = refused
    node_pools.delete_node_pool(rig.app, pool)
    passes(rig, sim, 8)
    row = pool_row(rig, pool)
    assert row["state"] == "deleting" and not row["network_removed"]
    assert row["last_error_code"] == "ENGINE_FAILED"
    assert chart(rig, pool) is not None
    step.destroy = destroy
    passes(rig, sim, 2)
    assert pool_row(rig, pool)["state"] == "deleted" and chart(rig, pool) is None


# -- foreign, edited, immutable, denied -------------------------------------------------


def foreign_chart(pool: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
            "metadata": {"name": release_name(pool), "namespace": "kube-system",
                         "labels": labels},
            "spec": {"chart": "traefik", "repo": "https://example.test/charts"}}


def test_a_foreign_helmchart_fails_only_that_pool_and_is_never_adopted(
    rig: Rig, sim: Reconciler,
) -> None:
    keep = service_pool(rig, sim, "keep")
    pool = rig.pool("web", count=1)
    passes(rig, sim, 6)
    theirs = foreign_chart(pool, {"app.kubernetes.io/managed-by": "Helm"})
    rig.world.cluster.set_helm_chart(pool, theirs)
    workloads.create_workload(rig.app, "site", "web", WorkloadKind.SERVICE)
    passes(rig, sim, 3)
    s = pool_status.node_pool_status(rig.app.ledger, pool)
    assert s.state == "failed" and pool_row(rig, pool)["last_error_code"] == d.ADDONS_FAILED
    assert s.last_error == (
        f"HelmChart kube-system/{release_name(pool)} exists but Anycloud does not own it "
        "(managed by Helm); Anycloud never adopts or replaces foreign objects: remove it with "
        f"`kubectl -n kube-system delete helmchart {release_name(pool)}` and the next pass "
        "installs the pool's ingress release")
    found = chart(rig, pool)
    assert found is not None and found["spec"] == theirs["spec"]  # untouched
    assert found["metadata"]["labels"] == theirs["metadata"]["labels"]
    assert not [w for w in rig.world.cluster.journal
                if w.resource == "helmcharts" and pool in w.name]
    # The sibling pool goes on.
    assert pool_status.node_pool_status(rig.app.ledger, keep).state == "ready"
    # Removed by a person: the next pass installs ours and the failure clears.
    rig.world.cluster.set_helm_chart(pool, None)
    passes(rig, sim, 2)
    assert pool_status.node_pool_status(rig.app.ledger, pool).state == "ready"
    found = chart(rig, pool)
    assert found is not None and found["spec"]["bootstrap"] is True


def test_deleting_a_pool_leaves_a_foreign_helmchart_in_place(rig: Rig, sim: Reconciler) -> None:
    pool = rig.pool("web", count=1)
    theirs = foreign_chart(pool, {"app.kubernetes.io/managed-by": "Helm"})
    rig.world.cluster.set_helm_chart(pool, theirs)
    workloads.create_workload(rig.app, "site", "web", WorkloadKind.SERVICE)
    passes(rig, sim, 3)
    assert pool_status.node_pool_status(rig.app.ledger, pool).state == "failed"
    workloads.delete_workload(rig.app, "site")
    passes(rig, sim, 2)
    node_pools.delete_node_pool(rig.app, pool)
    passes(rig, sim, 8)
    assert pool_status.node_pool_status(rig.app.ledger, pool).state == "deleted"
    found = chart(rig, pool)
    assert found is not None and found["metadata"]["labels"] == theirs["metadata"]["labels"]
    assert not [w for w in rig.world.cluster.journal if w.resource == "helmcharts"]


def test_a_release_labelled_for_another_pool_is_foreign(rig: Rig, sim: Reconciler) -> None:
    pool = rig.pool("web", count=1)
    cluster = pool_row(rig, pool)["cluster_id"]
    rig.world.cluster.set_helm_chart(pool, foreign_chart(pool, {
        "app.kubernetes.io/managed-by": "anycloud", "anycloud.sh/cluster": cluster,
        "anycloud.sh/node-pool": "np-other"}))
    workloads.create_workload(rig.app, "site", "web", WorkloadKind.SERVICE)
    passes(rig, sim, 3)
    s = pool_status.node_pool_status(rig.app.ledger, pool)
    assert s.state == "failed"
    assert f"labelled for cluster record {cluster} and node pool np-other" in (s.last_error or "")


def test_an_edited_release_is_rewritten(rig: Rig, sim: Reconciler) -> None:
    pool = service_pool(rig, sim)
    found = chart(rig, pool)
    assert found is not None
    ours = dict(found["spec"])
    found["spec"]["version"] = "0.0.1"
    found["spec"]["set"] = {"image.tag": "latest"}
    rig.log.clear()
    outcome = sim.run_once()[0]
    assert "EnsureIngressRelease" in outcome.actions
    assert chart(rig, pool)["spec"] == ours  # type: ignore[index]
    assert release_log(rig) == ["web: ingress release: apply helmchart"]
    assert sim.run_once()[0].actions == []


def test_a_changed_release_namespace_is_recreated(rig: Rig, sim: Reconciler) -> None:
    pool = service_pool(rig, sim)
    found = chart(rig, pool)
    assert found is not None
    found["spec"]["targetNamespace"] = "somewhere-else"
    rig.log.clear()
    sim.run_once()
    assert release_log(rig) == [
        "web: ingress release: delete helmchart, apply helmchart"]
    writes = [w.verb for w in rig.world.cluster.journal if w.resource == "helmcharts"]
    assert writes[-2:] == ["delete", "create"]
    assert chart(rig, pool)["spec"]["targetNamespace"] == release_name(pool)  # type: ignore[index]


def test_a_denied_write_fails_the_pool_naming_verb_and_resource(
    rig: Rig, sim: Reconciler,
) -> None:
    pool = rig.pool("web", count=1)
    passes(rig, sim, 6)
    rig.world.cluster.deny("create", "helmcharts")
    workloads.create_workload(rig.app, "site", "web", WorkloadKind.SERVICE)
    passes(rig, sim, 2)
    s = pool_status.node_pool_status(rig.app.ledger, pool)
    assert s.state == "failed"
    assert s.last_error is not None and s.last_error.startswith(
        "installing the ingress release failed: the cluster's RBAC denies `create` on "
        "`helmcharts`")
    rig.world.cluster.allow("create", "helmcharts")
    passes(rig, sim, 2)
    assert pool_status.node_pool_status(rig.app.ledger, pool).state == "ready"
    assert chart(rig, pool) is not None


def test_a_denied_read_fails_the_pool_naming_verb_and_resource(
    rig: Rig, sim: Reconciler,
) -> None:
    pool = service_pool(rig, sim)
    rig.world.cluster.deny("get", "helmcharts")
    passes(rig, sim, 1)
    s = pool_status.node_pool_status(rig.app.ledger, pool)
    assert s.state == "failed" and (s.last_error or "").startswith(
        "checking the ingress release failed: the cluster's RBAC denies `get` on `helmcharts`")


# -- the pure rules --------------------------------------------------------------------------


DESIRED = {"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
           "metadata": {"name": "anycloud-ingress-np-1", "namespace": "kube-system",
                        "labels": {"app.kubernetes.io/managed-by": "anycloud",
                                   "anycloud.sh/cluster": "cl-1",
                                   "anycloud.sh/node-pool": "np-1"}},
           "spec": {"chart": "traefik", "version": "37.1.1", "bootstrap": True,
                    "targetNamespace": "anycloud-ingress-np-1", "createNamespace": True,
                    "valuesContent": "a: 1\n"}}


def observed(**spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {**DESIRED, "metadata": {
        **DESIRED["metadata"], "uid": "u", "resourceVersion": "7",
        "finalizers": ["wrangler.cattle.io/on-helm-chart-remove"]},
        "spec": {**DESIRED["spec"], **spec}, "status": {"jobName": "helm-install-x"}}
    return obj


def plan(obj: dict[str, Any] | None) -> Any:
    return plan_release(obj, DESIRED, cluster_id="cl-1", pool_id="np-1")


def test_plan_ours_unchanged_with_server_fields_and_crd_defaults() -> None:
    p = plan(observed(failurePolicy="reinstall"))
    assert (p.classification, p.apply, p.diagnostic) == ("ours-unchanged", False, None)


@pytest.mark.parametrize("spec", [
    {"version": "1.0.0"}, {"bootstrap": False}, {"failurePolicy": "abort"},
    {"set": {"image.tag": "x"}}, {"valuesContent": "a: 2\n"}, {"jobImage": "mine:1"},
])
def test_plan_any_spec_change_is_an_edit(spec: dict[str, Any]) -> None:
    p = plan(observed(**spec))
    assert (p.classification, p.apply, p.recreate) == ("ours-edited", True, False)


def test_plan_a_new_target_namespace_recreates() -> None:
    p = plan(observed(targetNamespace="elsewhere"))
    assert (p.classification, p.apply, p.recreate) == ("ours-immutable-differs", True, True)


def test_plan_a_lost_ownership_label_is_foreign_not_rewritten() -> None:
    obj = observed()
    obj["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "anycloud"}
    p = plan(obj)
    assert p.classification == "foreign" and not p.apply
    assert "labelled as Anycloud's without a cluster record" in (p.diagnostic or "")


def test_plan_absent_installs() -> None:
    assert (plan(None).classification, plan(None).apply) == ("absent", True)


# -- the decision ----------------------------------------------------------------------------

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def ready_pool(**kw: Any) -> tuple[d.PoolView, list[d.AttemptView], list[d.NodeView]]:
    attempt = d.AttemptView(id="at-1", state="running", node_name="anycloud-at-1",
                            vm_created_at=NOW - 10 * M, token_present=False, node_state="Ready")
    node = d.NodeView("anycloud-at-1", "np-1", "at-1", True,
                      labels=frozenset({(d.INGRESS_ENTRY_LABEL, "np-1")}))
    digest = d.stack_digest(True, [attempt])
    view = d.PoolView(id="np-1", state="ready", vm_count=1, gpus=0, hosts_service=True,
                      ingress_entry="at-1", applied_digest=digest, **kw)
    return view, [attempt], [node]


@pytest.mark.parametrize("found", ["absent", "ours-edited", "ours-immutable-differs"])
def test_decide_installs_once_the_stack_holds_the_rule(found: str) -> None:
    view, attempts, nodes = ready_pool(ingress_release=found)
    decision = d.decide(view, attempts, nodes, NOW)
    assert decision.actions == [d.EnsureIngressRelease(found)] and decision.state == "ready"
    # The first Service: the stack must take the rule first, in the same pass.
    stale = d.decide(d.PoolView(**{**view.__dict__, "applied_digest": "old"}), attempts,
                     nodes, NOW)
    assert stale.actions == [d.ApplyStack(), d.EnsureIngressRelease(found)]
    # Backing off (the stack cannot be applied): no release before the rule.
    waiting = d.decide(d.PoolView(**{**view.__dict__, "applied_digest": "old",
                                     "backoff_until": NOW + M}), attempts, nodes, NOW)
    assert not waiting.of(d.EnsureIngressRelease)


def test_decide_a_foreign_release_fails_the_pool_as_an_addon_failure() -> None:
    view, attempts, nodes = ready_pool(ingress_release="foreign", ingress_diagnostic="boom")
    decision = d.decide(view, attempts, nodes, NOW)
    assert (decision.state, decision.last_error, decision.error_code) == (
        "failed", "boom", d.ADDONS_FAILED)
    assert not decision.of(d.EnsureIngressRelease)


@pytest.mark.parametrize("hosts_service", [True, False])
def test_decide_deletion_removes_the_release_before_the_network(hosts_service: bool) -> None:
    view = d.PoolView(id="np-1", state="deleting", vm_count=1, gpus=0,
                      hosts_service=hosts_service)
    gone = d.AttemptView(id="at-1", state="released", node_name="anycloud-at-1")
    decision = d.decide(view, [gone], [], NOW)
    expected: list[d.Action] = [d.DeleteNamespace()]
    if hosts_service:
        expected.append(d.RemoveIngressRelease())
    assert decision.actions == [*expected, d.DestroyStack()]
    # While a VM is still open, the release stays.
    open_ = d.decide(view, [d.AttemptView(id="at-1", state="releasing",
                                          node_name="anycloud-at-1")], [], NOW)
    assert not open_.of(d.RemoveIngressRelease)


# -- the real engine on the real API server ------------------------------------------------
#
# The step with its default hooks (refresh then up, destroy) on the Pulumi CLI and the
# kubernetes provider built from source, through the official-client port, against the
# session's control plane (which serves K3s's HelmChart CRD; no helm-controller runs there,
# so no finalizer holds a deleted HelmChart). Every assertion is on what the API server holds.

PUBLIC = "https://203.0.113.10:6443"  # what agents would join (TEST-NET-3: never dialled)


def _check(classification: str) -> Any:
    from automation.reconciler.ingress_step import ReleaseCheck

    return ReleaseCheck(classification)  # type: ignore[arg-type]


@pytest.fixture
def real(control_plane: Any, engine_env: dict[str, str], sqlite_url: str,
         tmp_path: Any) -> Any:
    from automation.app import App
    from automation.clock import ManualClock
    from automation.engine.pulumi_driver import AutomationRunner
    from automation.kube.adapter import KubernetesCluster
    from automation.kube.probe import KubernetesProbe
    from automation.ledger import open_ledger
    from automation.reconciler.ingress_step import IngressReleaseStep
    from automation.services import clusters

    ledger = open_ledger(sqlite_url)
    app = App(ledger=ledger, clock=ManualClock(), probe=KubernetesProbe(),
              home=tmp_path / "home")
    record = clusters.register_cluster(app, clusters.RegisterCluster(
        name="prod", kubeconfig=control_plane.kubeconfig, server_url=PUBLIC))
    with ledger.read() as conn:
        row = conn.execute(sa.select(schema.clusters).where(
            schema.clusters.c.id == record.id)).mappings().one()
    port = KubernetesCluster(control_plane.kubeconfig, timeout_seconds=10)
    pools: list[str] = []

    class Real:
        plane, cluster = control_plane, row
        step = IngressReleaseStep(AutomationRunner(tmp_path / "home"))

        def pool(self, suffix: str) -> str:
            pool_id = f"np-{suffix}-{record.id[-6:]}"
            pools.append(pool_id)
            return pool_id

        def get(self, pool_id: str) -> dict[str, Any] | None:
            from tests.automation.kube import objects

            return objects.get(control_plane, "helmchart", release_name(pool_id), "kube-system")

        port_ = port

    yield Real()
    for pool_id in pools:
        control_plane.kubectl("delete", "helmchart", release_name(pool_id), "-n",
                              "kube-system", "--ignore-not-found")
    port.close()
    ledger.dispose()


@pytest.mark.kube
@pytest.mark.engine
@pytest.mark.slow
def test_real_engine_installs_rewrites_and_removes_the_release(real: Any) -> None:
    pool = real.pool("real")
    row, port, step = real.cluster, real.port_, real.step
    assert step.check(row, pool, port).classification == "absent"
    result = step.install(row, pool, port, "absent")
    assert (result.diagnostic, result.actions) == (None, ("apply helmchart",))
    found = real.get(pool)
    assert found is not None
    desired = step.desired(row, pool)
    assert found["spec"] == desired["spec"] and found["spec"]["bootstrap"] is True
    assert found["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "anycloud",
                                           "anycloud.sh/cluster": row["id"],
                                           "anycloud.sh/node-pool": pool}
    # The API server's own fields (uid, managedFields, resourceVersion) are not edits.
    version = found["metadata"]["resourceVersion"]
    assert step.check(row, pool, port) == _check("ours-unchanged")

    # Edited by someone else: a field ours (version) and one another manager added (set).
    real.plane.kubectl("patch", "helmchart", release_name(pool), "-n", "kube-system",
                       "--type=merge", "-p", '{"spec": {"version": "0.0.1", '
                       '"set": {"image.tag": "latest"}}}')
    assert step.check(row, pool, port) == _check("ours-edited")
    result = step.install(row, pool, port, "ours-edited")
    # The refresh brings both fields into the engine's state, so the up takes both back:
    # one apply, and the re-read finds nothing left to recreate.
    assert (result.diagnostic, result.actions) == (None, ("apply helmchart",))
    rewritten = real.get(pool)
    assert rewritten is not None and rewritten["spec"] == desired["spec"]
    assert rewritten["metadata"]["resourceVersion"] != version
    assert step.check(row, pool, port) == _check("ours-unchanged")

    # Its release namespace changed (Helm cannot move a release): deleted through the port,
    # then created again by the engine.
    real.plane.kubectl("patch", "helmchart", release_name(pool), "-n", "kube-system",
                       "--type=merge", "-p", '{"spec": {"targetNamespace": "elsewhere"}}')
    assert step.check(row, pool, port) == _check("ours-immutable-differs")
    result = step.install(row, pool, port, "ours-immutable-differs")
    assert (result.diagnostic, result.actions) == (None, ("delete helmchart", "apply helmchart"))
    recreated = real.get(pool)
    assert recreated is not None and recreated["spec"] == desired["spec"]
    assert recreated["metadata"]["uid"] != rewritten["metadata"]["uid"]

    # The pool is deleted: destroying its release stack deletes the HelmChart.
    step.remove(row, pool)
    assert real.get(pool) is None
    assert step.check(row, pool, port) == _check("absent")


@pytest.mark.kube
@pytest.mark.engine
@pytest.mark.slow
def test_real_foreign_helmchart_is_reported_and_left_alone(real: Any) -> None:
    import json

    pool = real.pool("foreign")
    theirs = foreign_chart(pool, {"app.kubernetes.io/managed-by": "Helm"})
    real.plane.kubectl("create", "-f", "-", input=json.dumps(theirs))
    check = real.step.check(real.cluster, pool, real.port_)
    assert check.classification == "foreign" and not check.needs_write
    assert check.diagnostic is not None and (
        f"`kubectl -n kube-system delete helmchart {release_name(pool)}`" in check.diagnostic)
    found = real.get(pool)
    assert found is not None and found["spec"] == theirs["spec"]


@pytest.mark.kube
@pytest.mark.engine
@pytest.mark.slow
def test_real_release_created_by_a_pass_and_deleted_with_the_pool(
    control_plane: Any, engine_env: dict[str, str], sqlite_url: str, tmp_path: Any,
) -> None:
    """The reconciler as ``demo --cluster local`` wires it: the pool's stack on the mock
    engine over the simulated cloud, the cluster real, the release on the real engine."""
    from automation.app import App
    from automation.kube.probe import KubernetesProbe
    from automation.ledger import open_ledger
    from automation.services import clusters, credentials
    from automation.simulators.ports import local_ports
    from automation.simulators.world import SimWorld
    from tests.automation.kube import objects

    world = SimWorld()
    ledger = open_ledger(sqlite_url)
    app = App(ledger=ledger, clock=world.clock, probe=KubernetesProbe(), home=tmp_path / "home")
    clusters.register_cluster(app, clusters.RegisterCluster(
        name="prod", kubeconfig=control_plane.kubeconfig, server_url=PUBLIC))
    credentials.new_credential(app, credentials.NewCredential("team-aws", "aws",
                                                              {"profile": "team"}))
    pool = node_pools.create_node_pool(app, node_pools.CreateNodePool(
        name="web", credentials="team-aws", region="us-east-1", vm_type="m7i.large",
        min_vms=1, max_vms=1)).id
    reconciler = Reconciler(app, local_ports(app, world))
    try:
        workloads.create_workload(app, "site", "web", WorkloadKind.SERVICE)
        (outcome,) = reconciler.run_once()
        assert outcome.actions[:3] == ["NewAttempt", "ApplyStack", "EnsureIngressRelease"]
        found = objects.get(control_plane, "helmchart", release_name(pool), "kube-system")
        assert found is not None and found["spec"]["bootstrap"] is True
        assert found["metadata"]["labels"]["anycloud.sh/node-pool"] == pool

        workloads.delete_workload(app, "site")
        for _ in range(3):
            reconciler.run_once()
            world.advance(M)
        node_pools.delete_node_pool(app, pool)
        for _ in range(6):
            reconciler.run_once()
            world.advance(M)
        assert pool_status.node_pool_status(app.ledger, pool).state == "deleted"
        assert objects.get(control_plane, "helmchart", release_name(pool), "kube-system") is None
        with app.ledger.read() as conn:
            kinds = list(conn.execute(sa.select(schema.events.c.kind).where(
                schema.events.c.subject_id == pool).order_by(schema.events.c.id)).scalars())
        assert (kinds.index("attempt_released") < kinds.index("ingress_release_removed")
                < kinds.index("network_removed"))
    finally:
        control_plane.kubectl("delete", "helmchart", release_name(pool), "-n", "kube-system",
                              "--ignore-not-found")
        ledger.dispose()


@pytest.mark.kube
@pytest.mark.engine
@pytest.mark.slow
def test_real_rbac_denials_name_the_verb_and_resource(
    control_plane: Any, engine_env: dict[str, str], sqlite_url: str, tmp_path: Any,
) -> None:
    """An identity that may read HelmCharts but not write them: the engine's 403 becomes the
    diagnostic; one that may not even read them: the port's 403 at the check."""
    import secrets

    from automation.app import App
    from automation.clock import ManualClock
    from automation.engine.pulumi_driver import AutomationRunner
    from automation.kube.adapter import KubernetesCluster
    from automation.kube.probe import KubernetesProbe
    from automation.ledger import open_ledger
    from automation.reconciler.ingress_step import IngressReleaseStep
    from automation.services import clusters
    from tests.automation.kube import objects

    plane = control_plane
    namespace = f"ingress-{secrets.token_hex(3)}"
    grant = f"anycloud-test-{namespace}"
    ledger = open_ledger(sqlite_url)
    app = App(ledger=ledger, clock=ManualClock(), probe=KubernetesProbe(),
              home=tmp_path / "home")
    step = IngressReleaseStep(AutomationRunner(tmp_path / "home"))
    pool = f"np-rbac-{secrets.token_hex(3)}"

    def identity(name: str, rules: list[dict[str, Any]]) -> tuple[Any, Any]:
        path = plane.token_kubeconfig(tmp_path / f"{name}.kubeconfig", name, namespace)
        plane.apply({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": f"{grant}-{name}"},
            "rules": [{"apiGroups": [""], "resources": ["namespaces"],
                       "resourceNames": ["kube-system"], "verbs": ["get"]}, *rules]}, {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{grant}-{name}"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": f"{grant}-{name}"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})
        user = f"system:serviceaccount:{namespace}:{name}"
        objects.wait_for(f"{user} may get kube-system", lambda: plane.kubectl(
            "auth", "can-i", "get", "namespaces/kube-system", f"--as={user}",
            check=False).stdout.strip() == "yes")
        record = clusters.register_cluster(app, clusters.RegisterCluster(
            name=name, kubeconfig=path, server_url=PUBLIC))
        with ledger.read() as conn:
            row = conn.execute(sa.select(schema.clusters).where(
                schema.clusters.c.id == record.id)).mappings().one()
        return row, KubernetesCluster(path, timeout_seconds=10)

    grant_text = "; grant it to the identity in the registered kubeconfig"
    try:
        row, port = identity("reader", [{"apiGroups": ["helm.cattle.io"],
                                         "resources": ["helmcharts"],
                                         "verbs": ["get", "list", "watch"]}])
        assert step.check(row, pool, port) == _check("absent")
        result = step.install(row, pool, port, "absent")
        assert result.diagnostic is not None and result.diagnostic.startswith(
            "installing the ingress release failed: the cluster's RBAC denies `")
        assert result.diagnostic.endswith(
            f"` on `helmcharts` in namespace kube-system{grant_text}"), result.diagnostic
        assert objects.get(plane, "helmchart", release_name(pool), "kube-system") is None
        port.close()

        row, port = identity("blind", [])
        check = step.check(row, pool, port)
        assert check.diagnostic is not None and check.diagnostic.startswith(
            "checking the ingress release failed: the cluster's RBAC denies `get` on "
            f"`helmcharts` in namespace kube-system{grant_text} (")  # then the server's text
        assert not check.needs_write
        port.close()
    finally:
        for name in ("reader", "blind"):
            plane.kubectl("delete", "clusterrolebinding", f"{grant}-{name}", "--ignore-not-found")
            plane.kubectl("delete", "clusterrole", f"{grant}-{name}", "--ignore-not-found")
        plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        ledger.dispose()
