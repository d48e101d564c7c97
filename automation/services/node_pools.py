"""Node pools: create (durable intent), list, status, delete (request).

Creation stores intent and returns; the reconciler provisions. Deletion checks references
inside the same transaction that moves the pool to ``deleting``, under the pool's row lock,
which is also what admitting a workload takes: one of the two always sees the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from automation import ids
from automation.errors import Conflict, InvalidInput, NotFound
from automation.ledger import schema
from automation.models import (
    AttemptState,
    ClusterState,
    LIVE_POOL_STATES,
    NodePool,
    NodePoolStatus,
    PoolState,
    VmCounts,
    WorkloadState,
)
from automation.services.common import find_live, record_event
from automation.services.context import App
from automation.validation import check_name, check_placement, check_vm_counts

pools, clusters, credentials, attempts = (
    schema.node_pools, schema.clusters, schema.credentials, schema.vm_attempts,
)
_LIVE = pools.c.state.in_(list(LIVE_POOL_STATES))
# Workloads that still target a pool: active ones, and terminated services whose objects on
# the cluster are not yet confirmed removed.
_REFERENCING = schema.workloads.c.state.in_([WorkloadState.ACTIVE, WorkloadState.TERMINATED])


@dataclass(frozen=True)
class CreateNodePool:
    name: str
    credentials: str
    region: str
    vm_type: str
    min_vms: int
    max_vms: int
    zone: str | None = None
    cluster: str | None = None


def _resolve_cluster(conn: Connection, ref: str | None) -> RowMapping:
    live = clusters.c.state != ClusterState.DELETED
    if ref is not None:
        return find_live(conn, clusters, ref, live=live, kind="cluster", field="--cluster")
    rows = conn.execute(sa.select(clusters).where(live).order_by(clusters.c.name)).mappings().all()
    if not rows:
        raise NotFound("cluster", "(any)", field="--cluster")
    if len(rows) > 1:
        names = ", ".join(r["name"] for r in rows)
        raise InvalidInput(
            "--cluster", None, f"several clusters are registered ({names}): name one with --cluster"
        )
    return rows[0]


def create_node_pool(app: App, req: CreateNodePool) -> NodePool:
    check_name("name", req.name)
    count = check_vm_counts(req.min_vms, req.max_vms)
    now = app.clock.now()
    with app.ledger.write() as conn:
        cluster = _resolve_cluster(conn, req.cluster)
        if cluster["state"] != ClusterState.READY:
            raise Conflict(
                f"node pools are unavailable until cluster {cluster['name']!r} is ready "
                f"(it is {cluster['state']}: {cluster['last_error'] or 'facts unknown'})",
                code="NODE_POOLS_UNAVAILABLE", field="--cluster", value=cluster["name"],
                rule="the cluster must be ready (Kubernetes version and CA known)",
            )
        cred = find_live(
            conn, credentials, req.credentials, live=credentials.c.state == "active",
            kind="credential", field="--credentials", lock=True,
        )
        placement = check_placement(app.catalog, cred["provider"], req.region, req.zone, req.vm_type)
        taken = conn.execute(
            sa.select(pools.c.id).where(_LIVE, pools.c.cluster_id == cluster["id"],
                                        pools.c.name == req.name)
        ).first()
        if taken:
            raise Conflict(
                f"node pool {req.name!r} already exists on cluster {cluster['name']!r} ({taken.id})",
                code="ALREADY_EXISTS", field="name", value=req.name,
                rule="must be unique among the cluster's node pools",
            )
        row: dict[str, Any] = dict(
            id=ids.new_id("np"), name=req.name, cluster_id=cluster["id"],
            credential_id=cred["id"], provider=placement.provider, region=placement.region,
            zone=placement.zone, vm_type=placement.vm_type.name, min_vms=count, max_vms=count,
            state=PoolState.PENDING, hosts_service=False, last_error=None,
            consecutive_failures=0, created_at=now, updated_at=now,
        )
        try:
            with conn.begin_nested():
                conn.execute(pools.insert().values(**row))
        except sa.exc.IntegrityError as exc:  # a concurrent create of the same name won
            raise Conflict(
                f"node pool {req.name!r} already exists on cluster {cluster['name']!r}",
                code="ALREADY_EXISTS", field="name", value=req.name,
                rule="must be unique among the cluster's node pools",
            ) from exc
        record_event(
            conn, now, "node_pool", row["id"], "created",
            f"node pool {req.name}: {count} x {placement.vm_type.name} in {placement.region}",
        )
    return NodePool.model_validate(row)


def _count_column(condition: sa.ColumnElement[bool], label: str) -> sa.Label[Any]:
    return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0).label(label)


def _counts_subquery() -> sa.Subquery:
    """Ready / starting / draining VMs per pool, from the attempts and their Node state."""
    ready = (attempts.c.state == AttemptState.RUNNING) & (attempts.c.node_state == "Ready")
    starting = attempts.c.state.in_([AttemptState.PENDING, AttemptState.CREATING]) | (
        (attempts.c.state == AttemptState.RUNNING)
        & (sa.func.coalesce(attempts.c.node_state, "") != "Ready")
    )
    return (
        sa.select(
            attempts.c.pool_id,
            _count_column(ready, "ready"),
            _count_column(starting, "starting"),
            _count_column(attempts.c.state == AttemptState.RELEASING, "draining"),
        )
        .group_by(attempts.c.pool_id)
        .subquery()
    )


def _status_query() -> sa.Select[Any]:
    counts = _counts_subquery()
    return (
        sa.select(
            pools,
            clusters.c.name.label("cluster_name"),
            credentials.c.name.label("credential_name"),
            counts.c.ready, counts.c.starting, counts.c.draining,
        )
        .join(clusters, clusters.c.id == pools.c.cluster_id)
        .join(credentials, credentials.c.id == pools.c.credential_id)
        .outerjoin(counts, counts.c.pool_id == pools.c.id)
    )


def _to_status(r: RowMapping) -> NodePoolStatus:
    return NodePoolStatus(
        id=r["id"], name=r["name"], cluster=r["cluster_name"], credentials=r["credential_name"],
        provider=r["provider"], region=r["region"], zone=r["zone"], vm_type=r["vm_type"],
        vms=r["max_vms"], state=r["state"], last_error=r["last_error"],
        counts=VmCounts(
            ready=r["ready"] or 0, starting=r["starting"] or 0, draining=r["draining"] or 0
        ),
        hosts_service=r["hosts_service"], created_at=r["created_at"], updated_at=r["updated_at"],
    )


def list_node_pools(app: App, cluster: str | None = None) -> list[NodePoolStatus]:
    with app.ledger.read() as conn:
        query = _status_query().where(_LIVE).order_by(clusters.c.name, pools.c.name)
        if cluster is not None:
            row = find_live(conn, clusters, cluster, live=clusters.c.state != ClusterState.DELETED,
                            kind="cluster", field="--cluster")
            query = query.where(pools.c.cluster_id == row["id"])
        return [_to_status(r) for r in conn.execute(query).mappings()]


def node_pool_status(app: App, ref: str) -> NodePoolStatus:
    """By id (any state, deleted included) or by name among live pools."""
    with app.ledger.read() as conn:
        rows = conn.execute(
            _status_query().where(sa.or_(pools.c.id == ref, sa.and_(_LIVE, pools.c.name == ref)))
        ).mappings().all()
    if not rows:
        raise NotFound("node pool", ref, field="node_pool")
    if len(rows) > 1:
        raise InvalidInput(
            "node_pool", ref, "names node pools on several clusters: give the node pool id"
        )
    return _to_status(rows[0])


def lock_live_pool(conn: Connection, ref: str, field: str = "node_pool") -> RowMapping:
    """The pool row under an update lock: the serialisation point of delete and admission."""
    return find_live(conn, pools, ref, live=_LIVE, kind="node pool", field=field, lock=True)


def delete_node_pool(app: App, ref: str) -> NodePool:
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = lock_live_pool(conn, ref)
        if row["state"] == PoolState.DELETING:
            return NodePool.model_validate(row)
        users = conn.execute(
            sa.select(schema.workloads.c.name, schema.workloads.c.state).where(
                schema.workloads.c.pool_id == row["id"], _REFERENCING
            ).order_by(schema.workloads.c.name)
        ).all()
        if users:
            listed = ", ".join(f"{u.name} ({u.state})" for u in users)
            raise Conflict(
                f"node pool {row['name']!r} is still targeted by {listed}",
                code="NODE_POOL_IN_USE", field="node_pool", value=ref,
                rule="a node pool targeted by deployments or services cannot be deleted",
            )
        conn.execute(
            pools.update().where(pools.c.id == row["id"])
            .values(state=PoolState.DELETING, updated_at=now)
        )
        record_event(conn, now, "node_pool", row["id"], "deleting", f"node pool {row['name']} deleting")
    return NodePool.model_validate({**row, "state": PoolState.DELETING, "updated_at": now})
