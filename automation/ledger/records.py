"""Ledger look-ups and the event log, shared by the services and the control loops: a live
record by name or id, an event appended, a deployment name checked free."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from automation.errors import AnycloudError, Conflict, NotFound
from automation.ids import looks_like_id
from automation.ledger import schema

# A check of a record, read under its row lock, before a change (the API's If-Match): it
# raises to refuse the change, and nothing is written.
Expectation = Callable[[Any], None]


def could_name(ref: str) -> bool:
    """Whether ``ref`` could be a stored id or name. A NUL byte never is: PostgreSQL's text
    cannot hold one (asking would fail the query), and no name rule allows one."""
    return "\x00" not in ref


def by_ref(table: sa.Table, ref: str) -> sa.ColumnElement[bool]:
    """The rows ``ref`` names: by id or by name, but by id alone when it is shaped like one,
    so that a name made before names were refused that shape (or in another org) can never
    stand in for an id."""
    if looks_like_id(ref):
        return table.c.id == ref
    return sa.or_(table.c.id == ref, table.c.name == ref)


def find_live(
    conn: Connection,
    table: sa.Table,
    ref: str,
    *,
    live: sa.ColumnElement[bool],
    kind: str,
    field: str,
    scope: sa.ColumnElement[bool] | None = None,
    lock: bool = False,
) -> RowMapping:
    """The live row whose id or name is ``ref``; ``lock`` holds it until commit."""
    if not could_name(ref):
        raise NotFound(kind, ref, field=field)
    query = sa.select(table).where(live, by_ref(table, ref))
    if scope is not None:
        query = query.where(scope)
    if lock:
        query = query.with_for_update()
    rows = conn.execute(query).mappings().all()
    if not rows:
        raise NotFound(kind, ref, field=field)
    if len(rows) > 1:
        # Only possible for a name shared across clusters; the id is always unique.
        raise AnycloudError(
            f"{kind} name {ref!r} is used in several clusters: give its id or --cluster",
            code="AMBIGUOUS", field=field, value=ref, rule="must name exactly one " + kind,
        )
    return rows[0]


def record_event(
    conn: Connection,
    at: datetime,
    subject_kind: str,
    subject_id: str,
    kind: str,
    message: str,
    data: dict[str, Any] | None = None,
) -> None:
    conn.execute(
        schema.events.insert().values(
            at=at, subject_kind=subject_kind, subject_id=subject_id,
            kind=kind, message=message, data=data,
        )
    )


def check_deployment_name_free(conn: Connection, name: str, kind: str = "deployment") -> None:
    """Deployments of projects and work placed on pools share one name space (the CLI finds
    either by name): refuse a name a live one of either holds."""
    deployments, workloads = schema.deployments, schema.workloads
    if conn.execute(sa.select(deployments.c.id).where(
            deployments.c.state != "deleted", deployments.c.name == name)).first() \
            or conn.execute(sa.select(workloads.c.id).where(
                workloads.c.state != "removed", workloads.c.name == name)).first():
        raise Conflict(f"{kind} {name!r} already exists", code="ALREADY_EXISTS", field="name",
                       value=name, rule="must be unique among deployments and services")
