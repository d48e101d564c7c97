"""Sealed secrets (issue 20): a credential's secret material, AES-GCM under the server's key.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sealed_secrets",
        sa.Column("owner", sa.String(64), primary_key=True),
        sa.Column("key_id", sa.String(16), nullable=False),
        sa.Column("sealed", sa.LargeBinary, nullable=False),
        sa.Column("fingerprint", sa.String(40), nullable=False),
        sa.Column("shown", sa.JSON, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("rotated_at", UTCDateTime()),
    )


def downgrade() -> None:
    op.drop_table("sealed_secrets")
