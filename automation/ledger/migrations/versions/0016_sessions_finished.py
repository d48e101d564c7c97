"""The dashboard's busy slots over the last hour (issue 24): sessions by pool and end time,
so the window's sessions are found without reading a pool's whole session history.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_sessions_pool_finished", "sessions", ["pool", "finished_at"])


def downgrade() -> None:
    op.drop_index("ix_sessions_pool_finished", table_name="sessions")
