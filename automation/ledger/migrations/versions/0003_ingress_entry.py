"""Ingress entry and applied stack digest.

The attempt whose Node is the pool's elected ingress entry, and a digest of the stack inputs
last applied successfully (a Service arriving, a token dropped: the stack needs an update).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("node_pools") as batch:
        batch.add_column(sa.Column("ingress_entry_attempt_id", sa.String(32)))
        batch.add_column(sa.Column("applied_digest", sa.String(64)))


def downgrade() -> None:
    with op.batch_alter_table("node_pools") as batch:
        batch.drop_column("applied_digest")
        batch.drop_column("ingress_entry_attempt_id")
