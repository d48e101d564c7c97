"""Static provisioner slots: the runtimes of each static provisioner (the rows an allocation
locks) and the slots each provisioned resource holds.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "static_runtimes",
        sa.Column("provisioner", sa.String(63), primary_key=True),
        sa.Column("host", sa.String(512), primary_key=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_table(
        "static_allocations",
        sa.Column("provision_id", sa.String(64), primary_key=True),
        sa.Column("provisioner", sa.String(63), nullable=False),
        sa.Column("host", sa.String(512), nullable=False),
        sa.Column("slots", sa.Integer, nullable=False),
        sa.Column("allocated_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_static_allocations_runtime", "static_allocations",
                    ["provisioner", "host"])


def downgrade() -> None:
    op.drop_table("static_allocations")
    op.drop_table("static_runtimes")
