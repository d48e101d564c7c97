"""Drift in status (issue 23): the last drift check of each pool's stack.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "pool_drift",
        sa.Column("pool_id", sa.String(32), sa.ForeignKey("node_pools.id"), primary_key=True),
        sa.Column("checked_at", UTCDateTime(), nullable=False),
        sa.Column("engine", sa.String(16), nullable=False),
        sa.Column("changes", sa.JSON, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("error_code", sa.String(64)),
        sa.Column("seconds", sa.Float),
    )


def downgrade() -> None:
    op.drop_table("pool_drift")
