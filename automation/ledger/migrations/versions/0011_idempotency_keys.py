"""Idempotency keys of the API's POSTs (issue 20): the first answer, kept 24 hours.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "idempotency_keys",
        sa.Column("token_id", sa.String(32), primary_key=True),
        sa.Column("route", sa.String(200), primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("status_code", sa.Integer),
        sa.Column("response", sa.JSON),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_idempotency_keys_created", "idempotency_keys", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_idempotency_keys_created", "idempotency_keys")
    op.drop_table("idempotency_keys")
