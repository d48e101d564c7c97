"""The reconciler on the simulators: every lifecycle rule of the node-pool seed end to end."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from automation.ledger import schema
from automation.models import WorkloadKind
from automation.services import node_pools, pool_status, workloads
from automation.simulators.cluster import NodeBehaviour
from tests.automation.reconciler.conftest import Rig

M = timedelta(minutes=1)


def status(rig: Rig, pool: str):  # type: ignore[no-untyped-def]
    return pool_status.node_pool_status(rig.app.ledger, pool)


def attempts(rig: Rig, pool: str) -> list[dict]:
    with rig.app.ledger.read() as conn:
        return [dict(r) for r in conn.execute(sa.select(schema.vm_attempts).where(
            schema.vm_attempts.c.pool_id == pool).order_by(schema.vm_attempts.c.id)).mappings()]


def test_cpu_pool_from_create_to_ready(rig: Rig) -> None:
    pool = rig.pool("cpu", count=2)
    rig.passes(1)
    rows = attempts(rig, pool)
    assert [r["state"] for r in rows] == ["running", "running"]
    assert all(r["vm_created_at"] and r["public_ip"] for r in rows)
    assert status(rig, pool).state == "provisioning"
    assert len(rig.world.cloud.vms_of_pool(pool)) == 2
    rig.passes(4, step=M)  # Nodes join after 2 minutes, Ready 30 s later
    s = status(rig, pool)
    assert s.state == "ready" and s.counts.ready == 2
    assert all(r["token_removed_at"] is not None for r in attempts(rig, pool))
    # The tokens are gone from the stack too: no bootstrap-token Secret left in its state.
    state = rig.reconciler.ports.runner.load_state(  # type: ignore[attr-defined]
        __import__("automation.stack_targets", fromlist=["x"]).pool_target(rig.app, pool))
    assert not [u for u in state["resources"] if "kubernetes:core/v1:Secret" in u]


def test_converged_pass_writes_nothing(rig: Rig) -> None:
    pool = rig.pool("cpu", count=1)
    gpu = rig.pool("gpu", vm_type="g6.xlarge", count=1)
    rig.passes(6, step=M)
    assert status(rig, pool).state == "ready" and status(rig, gpu).state == "ready"
    writes: list[str] = []

    def count(conn, cursor, statement, *args):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            writes.append(statement)

    sa.event.listen(rig.app.ledger.engine, "before_cursor_execute", count)
    cluster_writes = len(rig.world.cluster.journal)
    outcomes = rig.reconciler.run_once()
    sa.event.remove(rig.app.ledger.engine, "before_cursor_execute", count)
    assert writes == []  # not even a lease
    assert [o.wrote for o in outcomes] == [False, False]
    assert all(o.actions == [] for o in outcomes)
    assert len(rig.world.cluster.journal) == cluster_writes  # nor anything on the cluster


def test_token_removed_when_node_exists_before_ready(rig: Rig) -> None:
    rig.world.cluster.default_behaviour = NodeBehaviour(join_after=M, ready_after=None)
    pool = rig.pool("cpu", count=1)
    rig.passes(3, step=M)
    (row,) = attempts(rig, pool)
    assert row["token_removed_at"] is not None and status(rig, pool).state == "provisioning"


def test_vm_that_never_joins_is_replaced_at_ten_minutes(rig: Rig) -> None:
    rig.world.cloud.faults.never_boot_next = 1
    pool = rig.pool("cpu", count=1)
    rig.passes(1)
    (first,) = attempts(rig, pool)
    rig.world.advance(9 * M)  # 9.5 minutes after the VM was created
    rig.reconciler.run_once()
    assert [r["state"] for r in attempts(rig, pool)] == ["running"]
    rig.world.advance(30 * timedelta(seconds=1))
    rig.reconciler.run_once()
    rows = attempts(rig, pool)
    assert rows[0]["state"] in ("releasing", "released")
    assert rows[1]["replaces_attempt_id"] == first["id"] and rows[1]["state"] == "running"
    rig.passes(6, step=M)
    s = status(rig, pool)
    assert s.state == "ready" and s.counts.ready == 1
    assert [r["state"] for r in attempts(rig, pool)] == ["released", "running"]


def test_three_replacements_in_a_row_then_parked(rig: Rig) -> None:
    rig.world.cloud.faults.never_boot_next = 10
    pool = rig.pool("cpu", count=1)
    rig.passes(50, step=M)
    s = status(rig, pool)
    assert s.state == "failed" and "join preconditions" in (s.last_error or "")
    rows = attempts(rig, pool)
    assert len(rows) == 4  # the original and three replacements, no fifth
    bought = len(rig.world.cloud.journal)
    rig.passes(5, step=M)
    assert len(rig.world.cloud.journal) == bought  # parked: provisions nothing


def test_provider_failures_back_off_then_park(rig: Rig) -> None:
    rig.world.cloud.faults.create_errors = ["InsufficientInstanceCapacity"] * 5
    pool = rig.pool("cpu", count=1)
    rig.reconciler.run_once()
    with rig.app.ledger.read() as conn:
        row = conn.execute(sa.select(schema.node_pools).where(
            schema.node_pools.c.id == pool)).mappings().one()
    assert row["consecutive_failures"] == 1
    assert row["backoff_until"] == rig.world.clock.now() + M
    rig.reconciler.run_once()  # still backing off: no new cloud call
    assert rig.world.cloud.faults.create_errors == ["InsufficientInstanceCapacity"] * 4
    for _ in range(40):
        rig.world.advance(M)
        rig.reconciler.run_once()
    s = status(rig, pool)
    assert s.state == "failed" and "5 consecutive provider failures" in (s.last_error or "")
    assert rig.world.cloud.vms == {}


def test_recovers_after_fewer_than_five_failures(rig: Rig) -> None:
    rig.world.cloud.faults.create_errors = ["RequestLimitExceeded"] * 2
    pool = rig.pool("cpu", count=1)
    for _ in range(20):
        rig.reconciler.run_once()
        rig.world.advance(M)
    s = status(rig, pool)
    assert s.state == "ready"
    with rig.app.ledger.read() as conn:
        assert conn.execute(sa.select(schema.node_pools.c.consecutive_failures).where(
            schema.node_pools.c.id == pool)).scalar_one() == 0


def test_foreign_node_fails_the_pool(rig: Rig) -> None:
    pool = rig.pool("cpu", count=1)
    rig.passes(5, step=M)
    rig.world.cluster.add_foreign_node("intruder", {"anycloud.sh/node-pool": pool})
    rig.reconciler.run_once()
    s = status(rig, pool)
    assert s.state == "failed" and "intruder" in (s.last_error or "")


def test_gpu_pool_ready_with_devices(rig: Rig) -> None:
    pool = rig.pool("gpu", vm_type="g5.12xlarge", count=1)
    rig.passes(6, step=M)
    s = status(rig, pool)
    assert s.state == "ready" and s.counts.ready == 1


def test_gpu_count_mismatch_fails(rig: Rig) -> None:
    rig.world.cluster.default_behaviour = NodeBehaviour(advertised_gpus=2)
    pool = rig.pool("gpu", vm_type="g5.12xlarge", count=1)
    rig.passes(6, step=M)
    s = status(rig, pool)
    assert s.state == "failed" and "device-count mismatch" in (s.last_error or "")


def test_delete_releases_everything_and_waits_for_the_provider(rig: Rig) -> None:
    pool = rig.pool("cpu", count=2)
    rig.passes(6, step=M)
    w = workloads.create_workload(rig.app, "web", "cpu", WorkloadKind.DEPLOYMENT)
    workloads.delete_workload(rig.app, w.name)
    node_pools.delete_node_pool(rig.app, pool)
    rig.reconciler.run_once()
    assert status(rig, pool).state == "deleting"
    assert {r["state"] for r in attempts(rig, pool)} == {"releasing"}
    assert rig.world.cluster.node_names() == []  # Nodes cordoned and removed
    rig.world.advance(10 * timedelta(seconds=1))
    rig.reconciler.run_once()
    assert {r["state"] for r in attempts(rig, pool)} == {"releasing"}  # provider not sure yet
    rig.passes(4, step=M)
    assert status(rig, pool).state == "deleted"
    assert rig.world.cloud.vms_of_pool(pool) == []


@pytest.mark.parametrize("count", [1])
def test_other_pools_unaffected_by_a_deletion(rig: Rig, count: int) -> None:
    keep = rig.pool("keep", count=count)
    gone = rig.pool("gone", count=count)
    rig.passes(6, step=M)
    node_pools.delete_node_pool(rig.app, gone)
    rig.passes(6, step=M)
    assert status(rig, gone).state == "deleted"
    assert status(rig, keep).state == "ready" and status(rig, keep).counts.ready == count


def test_service_pool_elects_an_ingress_entry(rig: Rig) -> None:
    pool = rig.pool("web", count=2)
    workloads.create_workload(rig.app, "site", "web", WorkloadKind.SERVICE)
    rig.passes(6, step=M)
    s = status(rig, pool)
    rows = attempts(rig, pool)
    lowest = min(r["id"] for r in rows)
    assert s.state == "ready" and s.ingress_entry_ip == next(
        r["public_ip"] for r in rows if r["id"] == lowest)
    labelled = [n for n in rig.world.cluster.node_names()
                if rig.world.cluster.node(n).labels.get("anycloud.sh/ingress-entry") == pool]
    assert labelled == [f"anycloud-{lowest}"]


def test_a_service_arriving_later_reapplies_the_stack(rig: Rig) -> None:
    from automation.stack_targets import pool_target

    pool = rig.pool("web", count=1)
    rig.passes(6, step=M)
    runner = rig.reconciler.ports.runner
    before = set(runner.load_state(pool_target(rig.app, pool))["resources"])  # type: ignore[attr-defined]
    assert not [u for u in before if "HelmChart" in u or "ingress" in u.lower()]
    assert rig.reconciler.run_once()[0].actions == []  # converged: nothing to apply
    workloads.create_workload(rig.app, "site", "web", WorkloadKind.SERVICE)
    outcome = rig.reconciler.run_once()[0]
    assert "ApplyStack" in outcome.actions
    state = runner.load_state(pool_target(rig.app, pool))  # type: ignore[attr-defined]
    # The network now admits port 80 from the edge; the Traefik release is not part of the
    # pool's stack (its own stack, through the add-on step: test_ingress_release.py).
    (sg,) = [r for u, r in state["resources"].items() if "$aws:ec2/securityGroup:" in u]
    assert [(r["protocol"], r["fromPort"]) for r in sg["inputs"]["ingress"]] == [("tcp", 80)]
    assert not [u for u in state["resources"] if "helm.cattle.io" in u]
    assert rig.reconciler.run_once()[0].actions == []


def test_a_parked_pool_still_deletes_the_token_of_a_vm_that_joins(rig: Rig) -> None:
    """Parked pools apply no stack: the token Secret is deleted on the cluster itself, and
    only then recorded as removed."""
    pool = rig.pool("cpu", count=1)
    rig.passes(1)  # the VM is bought; its token Secret exists; the Node joins in 2 minutes
    (row,) = attempts(rig, pool)
    assert row["id"] in rig.world.cluster.token_attempts.values()
    with rig.app.ledger.write() as conn:
        conn.execute(schema.node_pools.update().where(schema.node_pools.c.id == pool).values(
            state="failed", last_error="parked for the test", last_error_code="PARKED"))
    rig.log.clear()
    rig.passes(4, step=M)
    (row,) = attempts(rig, pool)
    assert row["token_removed_at"] is not None
    assert row["id"] not in rig.world.cluster.token_attempts.values()
    assert any("bootstrap token removed (1 Secret(s) deleted)" in m for _, m in rig.log)
    assert status(rig, pool).state == "failed"  # still parked: nothing else was done


def test_a_foreign_addon_fails_the_gpu_pool_but_never_blocks_replacing_its_vms(
    rig: Rig,
) -> None:
    """Seed: an add-on failure never blocks releasing or replacing the pool's existing VMs;
    and once the foreign object is gone, the next check clears the failure."""
    from automation.reconciler.reconcile import Reconciler
    from automation.simulators.ports import simulated_ports

    reconciler = Reconciler(rig.app, simulated_ports(rig.app, rig.world))
    rig.world.cluster.default_behaviour = NodeBehaviour(ready_after=None)  # NotReady forever
    pool = rig.pool("gpu", vm_type="g6.xlarge", count=1)
    reconciler.run_once()  # add-ons installed, the VM bought
    (first,) = attempts(rig, pool)
    rig.world.cluster.delete_addon_object("daemonset")
    rig.world.cluster.add_foreign_addon("daemonset")  # someone else's, under our name
    for _ in range(20):  # 16 minutes: the Node stays NotReady past the 15-minute limit
        rig.world.advance(M)
        reconciler.run_once()
    s = status(rig, pool)
    assert s.state == "failed" and s.last_error_code == "ADDONS_FAILED"
    assert "kubectl" in (s.last_error or "") and "delete" in (s.last_error or "")
    rows = attempts(rig, pool)
    assert rows[0]["id"] == first["id"] and rows[0]["state"] in ("releasing", "released")
    assert [r["replaces_attempt_id"] for r in rows[1:]] == [first["id"]]  # replaced anyway

    rig.world.cluster.default_behaviour = NodeBehaviour()
    rig.world.cluster.delete_addon_object("daemonset")  # the foreign object is removed
    for _ in range(6):
        rig.world.advance(M)
        reconciler.run_once()
    s = status(rig, pool)
    assert s.state in ("provisioning", "ready") and s.last_error is None


def test_a_namespace_left_in_place_stays_visible_once_the_pool_is_deleted(rig: Rig) -> None:
    from automation.reconciler.reconcile import pool_namespace
    from automation.services import node_pools as pools_service

    pool = rig.pool("cpu", count=1)
    rig.passes(6, step=M)
    rig.world.cluster.add_namespace(pool_namespace(pool), {"team": "someone-else"})
    pools_service.delete_node_pool(rig.app, "cpu")
    rig.passes(8, step=M)
    s = status(rig, pool)
    assert s.state == "deleted"
    assert s.last_error_code == "NAMESPACE_NOT_OWNED"
    assert f"namespace {pool_namespace(pool)} is not owned by anycloud" in (s.last_error or "")
    assert pool_namespace(pool) in rig.world.cluster.namespaces  # left in place


def test_a_terminated_services_objects_are_removed_once_the_cluster_answers(rig: Rig) -> None:
    """The reconciler deletes a terminated Service's namespace itself; while the cluster
    cannot be reached the pool records why, and the cleanup resumes on its own."""
    from automation.reconciler.reconcile import service_namespace
    from automation.services import node_pools as pools_service

    pool = rig.pool("web", count=1)
    rig.passes(6, step=M)
    site = workloads.create_workload(rig.app, "site", "web", WorkloadKind.SERVICE)
    namespace = service_namespace(site.id)
    rig.world.cluster.add_namespace(namespace, {"app.kubernetes.io/managed-by": "anycloud",
                                                "anycloud.sh/node-pool": pool})
    rig.world.cluster.namespace_delete_delay = 2 * M  # Terminating for two minutes
    workloads.delete_workload(rig.app, "site")
    rig.world.cluster.set_unreachable(True)
    rig.passes(2, step=M)
    assert status(rig, pool).last_error_code == "CLUSTER_UNAVAILABLE"
    assert namespace in rig.world.cluster.namespaces  # nothing could be done yet
    rig.world.cluster.set_unreachable(False)
    rig.passes(1, step=M)
    assert namespace in rig.world.cluster.terminating  # deleted, not yet gone
    rig.passes(4, step=M)
    assert namespace not in rig.world.cluster.namespaces
    with rig.app.ledger.read() as conn:
        state = conn.execute(sa.select(schema.workloads.c.state).where(
            schema.workloads.c.id == site.id)).scalar_one()
    assert state == "removed"
    pools_service.delete_node_pool(rig.app, "web")  # nothing targets the pool any more
    rig.passes(8, step=M)
    assert status(rig, pool).state == "deleted"
