"""Orgs, projects and their deployments: the provisioner each level chose, and each
deployment's runtime resource (a stable provision id, the provisioner holding it, its host, and
the move in progress).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "orgs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("default_provisioner", sa.String(63)),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "projects",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False, unique=True),
        sa.Column("org_id", sa.String(32), sa.ForeignKey("orgs.id"), nullable=False),
        sa.Column("provisioner", sa.String(63)),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "deployments",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("project_id", sa.String(32), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("provision_id", sa.String(64), nullable=False, unique=True),
        sa.Column("provisioner", sa.String(63)),
        sa.Column("runtime_host", sa.String(512)),
        sa.Column("data_dir", sa.String(512)),
        sa.Column("move", sa.JSON),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("deleted_at", UTCDateTime()),
    )
    op.create_index("uq_deployments_live_name", "deployments", ["name"], unique=True,
                    sqlite_where=sa.text("state != 'deleted'"),
                    postgresql_where=sa.text("state != 'deleted'"))
    op.create_index("ix_deployments_project", "deployments", ["project_id", "state"])


def downgrade() -> None:
    op.drop_table("deployments")
    op.drop_table("projects")
    op.drop_table("orgs")
