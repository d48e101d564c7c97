"""Runtime tokens (issue 22): each deployment's audience, and the keys that sign its tokens.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(sa.Column("audience", sa.String(512)))
    op.create_table(
        "token_signing_keys",
        sa.Column("kid", sa.String(64), primary_key=True),
        sa.Column("public_jwk", sa.JSON, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("retired_at", UTCDateTime()),
    )


def downgrade() -> None:
    op.drop_table("token_signing_keys")
    with op.batch_alter_table("deployments") as batch:
        batch.drop_column("audience")
