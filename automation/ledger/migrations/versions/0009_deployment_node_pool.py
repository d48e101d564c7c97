"""The node pool a deployment's runtime is on (nodepool provisioners): what keeps the pool
from being deleted while the deployment holds objects there; and what each deployment asks of
its runtime (slots, cpu, memory, storage), given at create and used by every start.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployments") as batch:
        batch.add_column(sa.Column("node_pool_id", sa.String(32),
                                   sa.ForeignKey("node_pools.id", name="fk_deployments_node_pool")))
        batch.add_column(sa.Column("resources", sa.JSON))
    op.create_index("ix_deployments_node_pool", "deployments", ["node_pool_id"])


def downgrade() -> None:
    op.drop_index("ix_deployments_node_pool", "deployments")
    with op.batch_alter_table("deployments") as batch:
        batch.drop_column("resources")
        batch.drop_column("node_pool_id")
