"""Deployments and services that target a node pool: what keeps a pool from being deleted."""

from __future__ import annotations

import sqlalchemy as sa

from automation import ids
from automation.app import App
from automation.errors import Conflict
from automation.ledger import schema
from automation.ledger.records import (
    Expectation,
    check_deployment_name_free,
    find_live,
    record_event,
)
from automation.models import PoolState, Workload, WorkloadKind, WorkloadState
from automation.services.node_pools import lock_live_pool
from automation.validation import check_name

workloads = schema.workloads
_LIVE = workloads.c.state != WorkloadState.REMOVED


def create_workload(app: App, name: str, pool: str, kind: WorkloadKind) -> Workload:
    check_name("name", name)
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = lock_live_pool(conn, pool, field="--node-pool")
        if row["state"] == PoolState.DELETING:
            raise Conflict(
                f"node pool {row['name']!r} is being deleted", code="NODE_POOL_DELETING",
                field="--node-pool", value=pool, rule="a deleting node pool admits no new work",
            )
        check_deployment_name_free(conn, name, str(kind))
        rec = dict(
            id=ids.new_id("dp" if kind is WorkloadKind.DEPLOYMENT else "sv"), name=name,
            kind=kind, pool_id=row["id"], state=WorkloadState.ACTIVE, created_at=now,
        )
        conn.execute(workloads.insert().values(**rec))
        if kind is WorkloadKind.SERVICE and not row["hosts_service"]:
            # The pool's ingress rule and entry are never removed once a Service arrived.
            conn.execute(
                schema.node_pools.update().where(schema.node_pools.c.id == row["id"])
                .values(hosts_service=True, updated_at=now)
            )
        record_event(conn, now, "node_pool", row["id"], f"{kind}_admitted", f"{kind} {name}")
    return Workload.model_validate(rec)


def delete_workload(app: App, ref: str, expect: Expectation | None = None) -> Workload:
    """A deployment stops targeting its pool at once; a service counts until the cluster
    confirms its objects removed (the reconciler's job). ``expect``: a check of the locked
    record first (``If-Match``)."""
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = find_live(conn, workloads, ref, live=_LIVE, kind="deployment", field="deployment",
                        lock=True)
        if expect is not None:
            expect(Workload.model_validate(row))
        if row["kind"] == WorkloadKind.SERVICE:
            state, stamp = WorkloadState.TERMINATED, {"terminated_at": now}
        else:
            state, stamp = WorkloadState.REMOVED, {"terminated_at": now, "removed_at": now}
        conn.execute(
            workloads.update().where(workloads.c.id == row["id"]).values(state=state, **stamp)
        )
        record_event(conn, now, "node_pool", row["pool_id"], f"{row['kind']}_{state}", row["name"])
    return Workload.model_validate({**row, "state": state})


def list_workloads(app: App) -> list[Workload]:
    with app.ledger.read() as conn:
        rows = conn.execute(sa.select(workloads).where(_LIVE).order_by(workloads.c.name)).mappings()
        return [Workload.model_validate(r) for r in rows]


def get_workload(app: App, ref: str) -> Workload:
    with app.ledger.read() as conn:
        row = find_live(conn, workloads, ref, live=_LIVE, kind="deployment", field="deployment")
    return Workload.model_validate(row)
