"""The org that owns a new cluster, credential or pool (issue 36): the one named, else the
org named ``default`` (made on first use, as the migration makes it for older records)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from automation import ids
from automation.ledger import schema
from automation.ledger.records import find_live, record_event

DEFAULT_ORG = "default"


def owning_org(conn: Connection, ref: str | None, now: datetime, *, field: str = "--org"
               ) -> str:
    """The id of the org ``ref`` names (NotFound otherwise); None: the default org's."""
    orgs = schema.orgs
    if ref is not None:
        return str(find_live(conn, orgs, ref, live=sa.true(), kind="org", field=field)["id"])
    found = conn.execute(sa.select(orgs.c.id).where(orgs.c.name == DEFAULT_ORG)).scalar()
    if found is not None:
        return str(found)
    org_id = ids.new_id("org")
    conn.execute(orgs.insert().values(id=org_id, name=DEFAULT_ORG, created_at=now,
                                      updated_at=now))
    record_event(conn, now, "org", org_id, "created",
                 f"org {DEFAULT_ORG} (the owner of what is made without an org)")
    return org_id
