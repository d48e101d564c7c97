"""Orgs and projects, and the provisioner each may choose (superuser-only, seed 002)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from automation import ids
from automation.app import App
from automation.errors import Conflict, InvalidInput
from automation.ledger import schema
from automation.ledger.records import Expectation, find_live, record_event
from automation.models import Org, Project
from automation.provisioners.provisioner_set import ProvisionerSet
from automation.validation import check_name

_ANY = sa.true()


def create_org(app: App, name: str) -> Org:
    check_name("org", name)
    now = app.clock.now()
    with app.ledger.write() as conn:
        _unique(conn, schema.orgs, name, "org")
        org_id = ids.new_id("org")
        row = dict(id=org_id, name=name, created_at=now, updated_at=now)
        conn.execute(schema.orgs.insert().values(**row))
        record_event(conn, now, "org", org_id, "created", f"org {name}")
    return Org.model_validate(row)


def create_project(app: App, name: str, org: str) -> Project:
    check_name("project", name)
    now = app.clock.now()
    with app.ledger.write() as conn:
        owner = find_live(conn, schema.orgs, org, live=_ANY, kind="org", field="--org")
        _unique(conn, schema.projects, name, "project")
        project_id = ids.new_id("prj")
        row = dict(id=project_id, name=name, org_id=owner["id"], created_at=now,
                   updated_at=now)
        conn.execute(schema.projects.insert().values(**row))
        record_event(conn, now, "project", project_id, "created",
                     f"project {name} in org {owner['name']}")
    return Project.model_validate(row)


def list_orgs(app: App) -> list[Org]:
    with app.ledger.read() as conn:
        rows = conn.execute(sa.select(schema.orgs).order_by(schema.orgs.c.name)).mappings()
        return [Org.model_validate(dict(r)) for r in rows]


def list_projects(app: App, org: str | None = None) -> list[Project]:
    with app.ledger.read() as conn:
        query = sa.select(schema.projects).order_by(schema.projects.c.name)
        if org is not None:
            owner = find_live(conn, schema.orgs, org, live=_ANY, kind="org", field="--org")
            query = query.where(schema.projects.c.org_id == owner["id"])
        return [Project.model_validate(dict(r)) for r in conn.execute(query).mappings()]


def get_org(app: App, ref: str) -> Org:
    with app.ledger.read() as conn:
        return Org.model_validate(dict(find_live(conn, schema.orgs, ref, live=_ANY,
                                                 kind="org", field="org")))


def get_project(app: App, ref: str) -> Project:
    with app.ledger.read() as conn:
        return Project.model_validate(dict(find_live(conn, schema.projects, ref, live=_ANY,
                                                     kind="project", field="project")))


def set_project_provisioner(app: App, project: str, provisioner: str | None,
                            provisioners: ProvisionerSet, by: str,
                            expect: Expectation | None = None) -> Project:
    """``sudo project edit``: applies to each deployment the next time it starts.
    ``expect``: a check of the locked record first (``If-Match``)."""
    _in_set(provisioners, provisioner, "--provisioner")
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = find_live(conn, schema.projects, project, live=_ANY, kind="project",
                        field="project", lock=True)
        if expect is not None:
            expect(Project.model_validate(dict(row)))
        conn.execute(schema.projects.update().where(schema.projects.c.id == row["id"])
                     .values(provisioner=provisioner, updated_at=now))
        record_event(conn, now, "project", row["id"], "provisioner_set",
                     f"provisioner {provisioner or '(unset)'} by {by}")
        out = conn.execute(sa.select(schema.projects).where(
            schema.projects.c.id == row["id"])).mappings().one()
    return Project.model_validate(dict(out))


def set_org_default_provisioner(app: App, org: str, provisioner: str | None,
                                provisioners: ProvisionerSet, by: str,
                                expect: Expectation | None = None) -> Org:
    """``sudo org set-default-provisioner``: for the org's projects that choose none."""
    _in_set(provisioners, provisioner, "provisioner")
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = find_live(conn, schema.orgs, org, live=_ANY, kind="org", field="org", lock=True)
        if expect is not None:
            expect(Org.model_validate(dict(row)))
        conn.execute(schema.orgs.update().where(schema.orgs.c.id == row["id"])
                     .values(default_provisioner=provisioner, updated_at=now))
        record_event(conn, now, "org", row["id"], "default_provisioner_set",
                     f"default provisioner {provisioner or '(unset)'} by {by}")
        out = conn.execute(sa.select(schema.orgs).where(
            schema.orgs.c.id == row["id"])).mappings().one()
    return Org.model_validate(dict(out))


def _unique(conn: Any, table: sa.Table, name: str, kind: str) -> None:
    if conn.execute(sa.select(table.c.id).where(table.c.name == name)).first():
        raise Conflict(f"{kind} {name!r} already exists", code="ALREADY_EXISTS", field=kind,
                       value=name, rule=f"must be unique among {kind}s")


def _in_set(provisioners: ProvisionerSet, name: str | None, field: str) -> None:
    if name is not None and name not in provisioners.provisioners:
        raise InvalidInput(field, name, "must name a provisioner of the set: "
                           f"{', '.join(sorted(provisioners.provisioners))}")
