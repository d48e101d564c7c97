"""AgentPools the operator serves, and its namespaces (issue 21): POOL_NOT_FOUND for sessions.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agent_pools",
        sa.Column("pool", sa.String(320), primary_key=True),
        sa.Column("uid", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("desired_replicas", sa.Integer, nullable=False),
        sa.Column("reason", sa.String(64)),
        sa.Column("opened_at", UTCDateTime(), nullable=False),
        sa.Column("observed_at", UTCDateTime(), nullable=False),
        sa.Column("deleted_at", UTCDateTime()),
    )
    op.create_table(
        "agent_pool_namespaces",
        sa.Column("namespace", sa.String(63), primary_key=True),
        sa.Column("seen_at", UTCDateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("agent_pool_namespaces")
    op.drop_table("agent_pools")
