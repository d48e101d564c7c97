"""API tokens (issue 20): opaque, stored as a hash, with a role and, for agents, a pool.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("scope", sa.String(320)),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("created_by", sa.String(253), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime()),
        sa.Column("revoked_at", UTCDateTime()),
    )
    live = sa.text("revoked_at IS NULL")
    op.create_index("uq_api_tokens_live_name", "api_tokens", ["name"], unique=True,
                    sqlite_where=live, postgresql_where=live)
    op.create_index("ix_api_tokens_scope", "api_tokens", ["scope"])


def downgrade() -> None:
    op.drop_index("ix_api_tokens_scope", "api_tokens")
    op.drop_index("uq_api_tokens_live_name", "api_tokens")
    op.drop_table("api_tokens")
