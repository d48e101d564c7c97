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
from automation.app import App
from automation.errors import Conflict, InvalidInput, NotFound
from automation.ledger import schema
from automation.ledger.records import Expectation, find_live, record_event
from automation.models import (
    LIVE_POOL_STATES,
    ClusterState,
    NewNodePool,
    NodePool,
    NodePoolCreated,
    PoolState,
    WorkloadState,
)
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


def _resolve_cluster(conn: Connection, ref: str | None, *, lock: bool = False) -> RowMapping:
    """``lock``: hold the cluster's row until commit (what ``cluster move`` takes first)."""
    live = clusters.c.state != ClusterState.DELETED
    if ref is not None:
        return find_live(conn, clusters, ref, live=live, kind="cluster", field="--cluster",
                         lock=lock)
    query = sa.select(clusters).where(live).order_by(clusters.c.name)
    rows = conn.execute(query.with_for_update() if lock else query).mappings().all()
    if not rows:  # the seed's code for "no ready cluster", as for a pending one
        raise Conflict(
            "node pools are unavailable until a cluster is registered and ready: "
            "run `anycloud cluster register`",
            code="NODE_POOLS_UNAVAILABLE", field="--cluster", value=None,
            rule="a cluster must be registered and ready (Kubernetes version and CA known)",
        )
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
        # Locked first, before the credential (the order `cluster move` takes them in): a
        # move running meanwhile finishes before this reads the cluster's org, so the pool
        # never keeps the org the cluster is leaving (SQLite: the write transaction).
        cluster = _resolve_cluster(conn, req.cluster, lock=True)
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
        if cred["org_id"] != cluster["org_id"]:
            raise InvalidInput("--credentials", req.credentials,
                               f"must belong to the org of cluster {cluster['name']!r} (a "
                               "pool is its cluster's org's, and its credential pays for it)")
        placement = check_placement(
            app.catalog, cred["provider"], req.region, req.zone, req.vm_type
        )
        taken = conn.execute(
            sa.select(pools.c.id).where(_LIVE, pools.c.cluster_id == cluster["id"],
                                        pools.c.name == req.name)
        ).first()
        if taken:
            raise Conflict(
                f"node pool {req.name!r} already exists on cluster {cluster['name']!r} "
                f"({taken.id})",
                code="ALREADY_EXISTS", field="name", value=req.name,
                rule="must be unique among the cluster's node pools",
            )
        row: dict[str, Any] = dict(
            id=ids.new_id("np"), name=req.name, cluster_id=cluster["id"],
            credential_id=cred["id"], provider=placement.provider, region=placement.region,
            zone=placement.zone, vm_type=placement.vm_type.name, min_vms=count, max_vms=count,
            state=PoolState.PENDING, hosts_service=False, last_error=None,
            consecutive_failures=0, org_id=cluster["org_id"], created_at=now, updated_at=now,
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
            f"node pool {req.name}: {count} x {placement.vm_type.name} in "
            f"{placement.zone or placement.region}"
            + (" (zone chosen: the first offering the type)" if placement.zone_chosen else ""),
        )
    return NodePool.model_validate(row)


def create_warnings(app: App, pool: NodePool) -> list[str]:
    """What ``node-pool create`` warns about the pool it stored: an image not verified
    first-hand (data/images.toml) that its VMs would boot. The CLI prints each on stderr
    and, with ``--json``, lists them under ``warnings``."""
    from automation.stack_targets import pool_warnings

    return pool_warnings(app, pool.id)


def create_node_pool_reported(app: App, req: NewNodePool) -> NodePoolCreated:
    """Create, then what the CLI and the API answer: the pool, whether its zone was chosen
    for the user, the warnings, and the cost estimate at ``max_vms``."""
    from automation.services.cost import pool_rate

    pool = create_node_pool(app, CreateNodePool(
        name=req.name, cluster=req.cluster, credentials=req.credentials, region=req.region,
        zone=req.zone, vm_type=req.vm_type, min_vms=req.min_vms, max_vms=req.max_vms))
    estimate = pool_rate(pool.provider, pool.vm_type, pool.region, pool.max_vms,
                         ledger=app.ledger)
    chosen = req.zone is None and pool.zone is not None
    return NodePoolCreated.model_validate({
        **pool.model_dump(by_alias=False), "zone_chosen": chosen,
        "warnings": create_warnings(app, pool), "cost": estimate})


def get_node_pool(app: App, pool_id: str) -> NodePool:
    """The pool's record by id, in any state."""
    with app.ledger.read() as conn:
        row = conn.execute(sa.select(pools).where(pools.c.id == pool_id)).mappings().first()
    if row is None:
        raise NotFound("node pool", pool_id, field="node_pool")
    return NodePool.model_validate(row)


def lock_live_pool(conn: Connection, ref: str, field: str = "node_pool") -> RowMapping:
    """The pool row under an update lock: the serialisation point of delete and admission."""
    return find_live(conn, pools, ref, live=_LIVE, kind="node pool", field=field, lock=True)


def delete_node_pool(app: App, ref: str,
                     expect: Expectation | None = None) -> NodePool:
    """``expect``: a check of the locked row before anything changes (the API's If-Match)."""
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = lock_live_pool(conn, ref)
        if expect is not None:
            expect(row)
        if row["state"] == PoolState.DELETING:
            return NodePool.model_validate(row)
        placed = sa.select(schema.workloads.c.name, schema.workloads.c.state).where(
            schema.workloads.c.pool_id == row["id"], _REFERENCING)
        # Project deployments whose nodepool provisioner holds objects on the pool.
        provisioned = sa.select(schema.deployments.c.name, schema.deployments.c.state).where(
            schema.deployments.c.node_pool_id == row["id"], schema.deployments.c.state != "deleted")
        users = conn.execute(sa.union_all(placed, provisioned).order_by("name")).all()
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
        record_event(
            conn, now, "node_pool", row["id"], "deleting", f"node pool {row['name']} deleting"
        )
    return NodePool.model_validate({**row, "state": PoolState.DELETING, "updated_at": now})


@dataclass(frozen=True)
class PoolPlacement:
    """Where a nodepool provisioner puts a deployment's objects: the pool and its cluster."""

    pool_id: str
    kubeconfig_path: str
    kube_context: str | None
    gpus: int = 0  # NVIDIA GPUs per VM (the catalog's, for the pool's VM type); 0: CPU


def find_pool_placement(app: App, ref: str, cluster: str | None, field: str) -> PoolPlacement:
    """The live pool a nodepool provisioner names (``cluster`` when the name is ambiguous)."""
    with app.ledger.read() as conn:
        scope = None
        if cluster is not None:
            scope = pools.c.cluster_id == _resolve_cluster(conn, cluster)["id"]
        row = find_live(conn, pools, ref, live=_LIVE, kind="node pool", field=field, scope=scope)
        owner = conn.execute(sa.select(clusters).where(
            clusters.c.id == row["cluster_id"])).mappings().one()
    path = app.kubeconfig_path(owner)
    if not path:
        raise InvalidInput(field, ref, f"its cluster {owner['name']!r} has no kubeconfig: "
                           "register it with `anycloud cluster register --kubeconfig`")
    cloud = app.catalog.providers.get(row["provider"])
    vm = cloud.vm_type(row["vm_type"]) if cloud is not None else None
    return PoolPlacement(row["id"], path, owner["kube_context"],
                         int(vm.gpus) if vm is not None else 0)


def admit_deployment(app: App, pool_id: str, provision_id: str) -> None:
    """Before a nodepool provisioner creates objects for ``provision_id``: under the pool's row
    lock (what deletion takes too), refuse a deleting pool and record the deployment as
    targeting it, so the pool cannot be deleted under it."""
    with app.ledger.write() as conn:
        row = lock_live_pool(conn, pool_id)
        if row["state"] == PoolState.DELETING:
            raise Conflict(
                f"node pool {row['name']!r} is being deleted", code="NODE_POOL_DELETING",
                field="node_pool", value=row["name"],
                rule="a deleting node pool admits no new work",
            )
        conn.execute(schema.deployments.update().where(
            schema.deployments.c.provision_id == provision_id).values(node_pool_id=row["id"]))


def release_deployment(app: App, provision_id: str) -> None:
    """After a nodepool provisioner removed ``provision_id``'s objects: it targets no pool."""
    with app.ledger.write() as conn:
        conn.execute(schema.deployments.update().where(
            schema.deployments.c.provision_id == provision_id).values(node_pool_id=None))
