"""Reconciler bookkeeping: join timers, token lifecycle, replacement streak, leases.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("node_pools") as batch:
        batch.add_column(sa.Column("replacements_in_row", sa.Integer, nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("network_removed", sa.Boolean, nullable=False,
                                   server_default=sa.false()))
    with op.batch_alter_table("vm_attempts") as batch:
        for name in ("vm_created_at", "token_issued_at", "token_removed_at", "not_ready_since",
                     "gpu_missing_since"):
            batch.add_column(sa.Column(name, UTCDateTime()))
        batch.add_column(sa.Column("gpu_ready_seen", sa.Boolean, nullable=False,
                                   server_default=sa.false()))
    op.create_table(
        "leases",
        sa.Column("pool_id", sa.String(32), primary_key=True),
        sa.Column("holder", sa.String(128), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("leases")
    with op.batch_alter_table("vm_attempts") as batch:
        for name in ("gpu_ready_seen", "gpu_missing_since", "not_ready_since",
                     "token_removed_at", "token_issued_at", "vm_created_at"):
            batch.drop_column(name)
    with op.batch_alter_table("node_pools") as batch:
        batch.drop_column("network_removed")
        batch.drop_column("replacements_in_row")
