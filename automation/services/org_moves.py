"""Moving records to another org (tenants): what was made before tenants, or in the wrong
org, is given to the org it belongs to.

A node pool belongs to its cluster's org and uses a credential of that org, so a cluster
moves with all its node pools and the credentials they use, in one transaction. A credential
that a pool on another cluster also uses cannot follow (that pool would be left with
another org's credential): the move is refused, naming it, and nothing changes. A credential
moves alone only while no live pool uses it. Deployments placed on a pool follow the pool;
projects and their deployments are not touched (a project already names its org).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from automation.app import App
from automation.errors import Conflict
from automation.ledger import schema
from automation.ledger.orgs import owning_org
from automation.ledger.records import Expectation, find_live, record_event
from automation.models import LIVE_POOL_STATES, MovedToOrg
from automation.services.clusters import with_kubeconfigs
from automation.services.credentials import with_secrets

_POOLS, _CREDS, _CLUSTERS = schema.node_pools, schema.credentials, schema.clusters
_LIVE_POOL = _POOLS.c.state.in_(list(LIVE_POOL_STATES))


def move_cluster(app: App, ref: str, org: str, expect: Expectation | None = None
                 ) -> MovedToOrg:
    """The cluster, its node pools and the credentials they use, to ``org``. ``expect``: the
    API's If-Match on the cluster, checked under its row lock."""
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = find_live(conn, _CLUSTERS, ref, live=_CLUSTERS.c.state != "deleted",
                        kind="cluster", field="cluster", lock=True)
        if expect is not None:
            expect(with_kubeconfigs(conn, [row])[0])
        org_id = owning_org(conn, org, now)
        live = conn.execute(sa.select(_POOLS.c.name, _POOLS.c.credential_id).where(
            _POOLS.c.cluster_id == row["id"], _LIVE_POOL)).all()
        cred_ids = sorted({p.credential_id for p in live})
        shared = conn.execute(
            sa.select(_CREDS.c.name, _POOLS.c.name.label("pool"), _CLUSTERS.c.name.label("on"))
            .join(_POOLS, _POOLS.c.credential_id == _CREDS.c.id)
            .join(_CLUSTERS, _CLUSTERS.c.id == _POOLS.c.cluster_id)
            .where(_CREDS.c.id.in_(cred_ids), _POOLS.c.cluster_id != row["id"], _LIVE_POOL)
            .order_by(_CREDS.c.name, _POOLS.c.name)).first()
        if shared is not None:
            raise Conflict(
                f"credential {shared.name!r} is also used by node pool {shared.pool!r} on "
                f"cluster {shared.on!r}, which stays: that pool would use another org's "
                "credential", field="cluster", value=ref,
                rule="a cluster moves with its pools and the credentials only they use")
        conn.execute(_CLUSTERS.update().where(_CLUSTERS.c.id == row["id"])
                     .values(org_id=org_id, updated_at=now))
        # Every pool of the cluster, deleted ones too: its history stays with it.
        conn.execute(_POOLS.update().where(_POOLS.c.cluster_id == row["id"])
                     .values(org_id=org_id))
        if cred_ids:
            conn.execute(_CREDS.update().where(_CREDS.c.id.in_(cred_ids))
                         .values(org_id=org_id))
        creds = sorted(conn.execute(sa.select(_CREDS.c.name).where(
            _CREDS.c.id.in_(cred_ids))).scalars())
        moved = MovedToOrg(org_id=org_id, clusters=[row["name"]],
                           node_pools=sorted(p.name for p in live),
                           credentials=creds)
        _record(conn, now, "cluster", row["id"], moved)
        return moved


def move_credential(app: App, ref: str, org: str, expect: Expectation | None = None
                    ) -> MovedToOrg:
    """A credential no live pool uses, to ``org`` (one in use moves with its cluster)."""
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = find_live(conn, _CREDS, ref, live=_CREDS.c.state == "active", kind="credential",
                        field="credentials", lock=True)
        if expect is not None:
            expect(with_secrets(conn, [row])[0])
        org_id = owning_org(conn, org, now)
        users = sorted(conn.execute(sa.select(_POOLS.c.name).where(
            _POOLS.c.credential_id == row["id"], _LIVE_POOL)).scalars())
        if users and org_id != row["org_id"]:
            raise Conflict(
                f"credential {row['name']!r} is used by node pool(s) {', '.join(users)}: "
                "move their cluster instead (`anycloud cluster move`), which takes it along",
                field="credentials", value=ref,
                rule="a node pool uses a credential of its own org")
        conn.execute(_CREDS.update().where(_CREDS.c.id == row["id"]).values(org_id=org_id))
        moved = MovedToOrg(org_id=org_id, clusters=[], node_pools=[],
                           credentials=[row["name"]])
        _record(conn, now, "credential", row["id"], moved)
        return moved


def _record(conn: Any, now: Any, kind: str, subject: str, moved: MovedToOrg) -> None:
    what = ", ".join(f"{len(names)} {label}" for label, names in (
        ("cluster(s)", moved.clusters), ("node pool(s)", moved.node_pools),
        ("credential(s)", moved.credentials)) if names)
    record_event(conn, now, kind, subject, "moved", f"moved to org {moved.org_id}: {what}")
