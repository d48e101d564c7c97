"""No silent stall (issue 34): what a pool's acting passes last changed, so a pool whose
passes change nothing for long is given an error that says what it waits for.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("node_pools") as batch:
        batch.add_column(sa.Column("progress_mark", sa.String(64)))
        batch.add_column(sa.Column("progress_since", UTCDateTime()))
        batch.add_column(sa.Column("passes_without_progress", sa.Integer, nullable=False,
                                   server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("node_pools") as batch:
        batch.drop_column("passes_without_progress")
        batch.drop_column("progress_since")
        batch.drop_column("progress_mark")
