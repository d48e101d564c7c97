"""Tenants (issue 36): clusters, credentials and node pools get an owning org, and a member's
or viewer's token may be scoped to an org and a project. What exists already moves to the
org named ``default`` (made here when there is something to move and no such org).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from automation import ids

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_OWNED = ("clusters", "credentials", "node_pools")


def _add_id_column(table: str, name: str, target: str, sqlite: bool) -> None:
    """A NULL-able id column. SQLite takes its foreign key only with the column (written as
    SQLite's own ALTER, which alembic does not emit); elsewhere the key is made after the
    backfill, with the NOT NULL."""
    if sqlite:
        op.execute(f"ALTER TABLE {table} ADD COLUMN {name} VARCHAR(32) REFERENCES {target}(id)")
    else:
        op.add_column(table, sa.Column(name, sa.String(32)))


def upgrade() -> None:
    conn = op.get_bind()
    sqlite = conn.dialect.name == "sqlite"
    for table in _OWNED:
        # SQLite adds a column that references another table only as NULL-able, and making it
        # NOT NULL would rebuild tables other tables' keys point at: there the services are
        # what keeps it set; PostgreSQL holds it NOT NULL itself.
        _add_id_column(table, "org_id", "orgs", sqlite)
    orgs = sa.table("orgs", sa.column("id"), sa.column("name"), sa.column("created_at"),
                    sa.column("updated_at"))
    owned = [sa.table(t, sa.column("org_id")) for t in _OWNED]
    if any(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar() for t in owned):
        org_id = conn.execute(sa.select(orgs.c.id).where(orgs.c.name == "default")).scalar()
        if org_id is None:
            org_id = ids.new_id("org")
            now = datetime.now(UTC).replace(tzinfo=None)  # the ledger stores naive UTC
            conn.execute(orgs.insert().values(id=org_id, name="default", created_at=now,
                                              updated_at=now))
        for t in owned:
            conn.execute(t.update().values(org_id=org_id))
    if not sqlite:
        for table in _OWNED:
            op.alter_column(table, "org_id", existing_type=sa.String(32), nullable=False)
            op.create_foreign_key(f"fk_{table}_org", table, "orgs", ["org_id"], ["id"])
    op.create_index("ix_node_pools_org", "node_pools", ["org_id"])
    _add_id_column("api_tokens", "org_id", "orgs", sqlite)
    _add_id_column("api_tokens", "project_id", "projects", sqlite)
    if not sqlite:
        op.create_foreign_key("fk_api_tokens_org", "api_tokens", "orgs", ["org_id"], ["id"])
        op.create_foreign_key("fk_api_tokens_project", "api_tokens", "projects",
                              ["project_id"], ["id"])


def downgrade() -> None:
    """PostgreSQL only: SQLite drops a column a foreign key is on only by rebuilding tables
    that others' keys point at (restore the backup taken before upgrading instead)."""
    if op.get_bind().dialect.name == "sqlite":
        raise NotImplementedError("0018 is not downgraded on SQLite: restore a backup")
    op.drop_index("ix_node_pools_org", "node_pools")
    for table, key, column in (("api_tokens", "fk_api_tokens_project", "project_id"),
                               ("api_tokens", "fk_api_tokens_org", "org_id"),
                               *((t, f"fk_{t}_org", "org_id") for t in _OWNED)):
        op.drop_constraint(key, table, type_="foreignkey")
        op.drop_column(table, column)
