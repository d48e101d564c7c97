"""Which engine bought each VM attempt and which image it runs; a code with a pool's last error.

``vm_attempts.engine``: ``pulumi`` or ``mock`` (the SDK's mock engine: nothing was bought).
A pass refuses to act on a pool whose live attempts another engine bought; rows from before
this revision are NULL (unknown) and accepted by either. ``node_pools.last_error_code``: a
stable code for scripts beside the message (``ENGINE_MISMATCH``, ``STACK_LOCKED``, ...).
``vm_attempts.image``: the image the attempt's VM was built from (AMI id, GCP image selfLink,
Azure image URN), recorded once the VM exists; later runs build the VM from it, so a newer
image never replaces it. NULL: no VM yet, or a row from before this revision.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("vm_attempts") as batch:
        batch.add_column(sa.Column("engine", sa.String(16)))
        batch.add_column(sa.Column("image", sa.String(512)))
    with op.batch_alter_table("node_pools") as batch:
        batch.add_column(sa.Column("last_error_code", sa.String(64)))


def downgrade() -> None:
    with op.batch_alter_table("node_pools") as batch:
        batch.drop_column("last_error_code")
    with op.batch_alter_table("vm_attempts") as batch:
        batch.drop_column("image")
        batch.drop_column("engine")
