"""Sessions have an owner (issue 52): the API token that started one. Only that token, or an
admin, reads its output or cancels it. Sessions from before have none (NULL): admins only.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-08
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # No foreign key: a token is never deleted (revoked ones stay), and SQLite would take one
    # only through its own ALTER (see 0018) for no gain here.
    op.add_column("sessions", sa.Column("owner_token_id", sa.String(32)))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("owner_token_id")
