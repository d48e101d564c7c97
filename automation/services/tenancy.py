"""What a caller's token lets it see (issue 36): the one place a tenant's scope becomes SQL.

A member's or viewer's token may be scoped to an org (and a project): it then sees that org's
clusters, credentials, node pools and the placements on them, the org itself, and its
projects' deployments (only its project's, when the token names one). Admins, unscoped
tokens and embedded mode see everything. A record out of scope is answered exactly as one
that does not exist (``NotFound``), so its existence is not disclosed.

A project scope is about deployments: a project-scoped member reads its org's node pools
(where its deployments may run, and what they cost) but does not create or delete them,
as they serve every project of the org (``org_wide``).

The routes resolve a reference here first and hand the services the record's id, so a name a
tenant gives can never be resolved to another tenant's record of the same name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, Protocol, TypeVar

import sqlalchemy as sa

from automation.app import App
from automation.auth.roles import Principal
from automation.errors import InvalidInput, NotFound, PermissionDenied
from automation.ledger import schema
from automation.ledger.records import find_live

Kind = Literal["cluster", "credential", "node pool", "org", "project", "deployment"]
_S = schema

# Each kind's table and what counts as live (what a reference may name).
_TABLES: dict[str, tuple[sa.Table, sa.ColumnElement[bool]]] = {
    "cluster": (_S.clusters, _S.clusters.c.state != "deleted"),
    "credential": (_S.credentials, _S.credentials.c.state == "active"),
    "node pool": (_S.node_pools, _S.node_pools.c.state != "deleted"),
    "org": (_S.orgs, sa.true()),
    "project": (_S.projects, sa.true()),
    "deployment": (_S.deployments, _S.deployments.c.state != "deleted"),
    "workload": (_S.workloads, _S.workloads.c.state != "removed"),
}


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_HasId)


def is_scoped(who: Principal | None) -> bool:
    return who is not None and who.org_id is not None


def _condition(who: Principal, kind: str) -> sa.ColumnElement[bool]:
    """The rows of ``kind`` a scoped caller sees."""
    org, project = who.org_id, who.project_id
    if kind in ("cluster", "credential", "node pool"):
        return _TABLES[kind][0].c.org_id == org
    if kind == "org":
        return _S.orgs.c.id == org
    projects = _S.projects
    in_project = sa.and_(projects.c.org_id == org,
                         projects.c.id == project if project else sa.true())
    if kind == "project":
        return in_project
    if kind == "deployment":
        return _S.deployments.c.project_id.in_(sa.select(projects.c.id).where(in_project))
    pools = _S.node_pools
    return _S.workloads.c.pool_id.in_(sa.select(pools.c.id).where(pools.c.org_id == org))


def visible_ids(app: App, who: Principal | None, kind: Kind) -> frozenset[str] | None:
    """The ids of ``kind`` the caller sees; None: all of them (nothing to filter)."""
    if who is None or not is_scoped(who):
        return None
    kinds = ("deployment", "workload") if kind == "deployment" else (kind,)
    with app.ledger.read() as conn:
        return frozenset(i for k in kinds for i in conn.execute(
            sa.select(_TABLES[k][0].c.id).where(_condition(who, k))).scalars())


def only_visible(items: Iterable[T], ids: frozenset[str] | None) -> list[T]:
    return list(items) if ids is None else [i for i in items if i.id in ids]


def resolve(app: App, who: Principal | None, kind: Kind, ref: str, *, field: str) -> str:
    """The id of the live ``kind`` that ``ref`` (id or name) names within the caller's scope,
    NotFound otherwise; ``ref`` unchanged for an unscoped caller (the service resolves it,
    with the messages it always gave)."""
    if who is None or not is_scoped(who):
        return ref
    kinds = ("deployment", "workload") if kind == "deployment" else (kind,)
    with app.ledger.read() as conn:
        for k in kinds:
            table, live = _TABLES[k]
            try:
                return str(find_live(conn, table, ref, live=live, kind=kind, field=field,
                                     scope=_condition(who, k))["id"])
            except NotFound:
                continue
    raise NotFound(kind, ref, field=field)


def sole(app: App, who: Principal | None, kind: Kind, *, field: str) -> str | None:
    """For a scoped caller who named no ``kind``: the one it sees (None for anyone else,
    whose service picks as it always did). Refused when it sees none or several."""
    if who is None or not is_scoped(who):
        return None
    table, live = _TABLES[kind]
    with app.ledger.read() as conn:
        rows = conn.execute(sa.select(table.c.id, table.c.name).where(
            live, _condition(who, kind)).order_by(table.c.name)).all()
    if len(rows) != 1:
        raise InvalidInput(field, None, f"name the {kind}: your org has "
                           + (f"several ({', '.join(r.name for r in rows)})" if rows else "none"))
    return str(rows[0].id)


def org_wide(who: Principal, doing: str) -> None:
    """Refuse a project-scoped token what changes a record its whole org shares (``doing``:
    e.g. "create a node pool"); anyone else goes on to the usual scope checks."""
    if who.project_id is not None:
        raise PermissionDenied(
            f"token {who.name!r} is scoped to one project: it may not {doing}, which every "
            "project of its org shares", field="scope", value=who.project_id,
            rule="a project-scoped token acts on its project's deployments only; node pools "
                 "are the org's (an org-scoped or unscoped member's)")


def org_of_new_project(app: App, who: Principal, ref: str, *, field: str) -> str:
    """The org a new project is made in: ``ref`` within the caller's scope (NotFound
    otherwise). A token scoped to one project makes no other."""
    if who.project_id is not None:
        raise PermissionDenied(
            f"token {who.name!r} is scoped to one project: it may not create another",
            field="scope", value=who.project_id,
            rule="a project-scoped token acts on its project's deployments only")
    return resolve(app, who, "org", ref, field=field)
