"""Initial ledger: clusters, credentials, node pools, VM attempts, workloads, events.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _live_unique(name: str, table: str, cols: list[str], where: str) -> None:
    op.create_index(
        name, table, cols, unique=True,
        sqlite_where=sa.text(where), postgresql_where=sa.text(where),
    )


def upgrade() -> None:
    op.create_table(
        "clusters",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("server_url", sa.String(512), nullable=False),
        sa.Column("ca_sha256", sa.String(64)),
        sa.Column("kubernetes_version", sa.String(64)),
        sa.Column("kube_system_uid", sa.String(64)),
        sa.Column("kubeconfig_path", sa.String(1024)),
        sa.Column("kube_context", sa.String(253)),
        sa.Column("facts_source", sa.String(16)),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("deleted_at", UTCDateTime()),
    )
    _live_unique("uq_clusters_live_name", "clusters", ["name"], "state != 'deleted'")

    op.create_table(
        "credentials",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("reference", sa.JSON, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("deleted_at", UTCDateTime()),
    )
    _live_unique("uq_credentials_live_name", "credentials", ["name"], "state = 'active'")

    op.create_table(
        "node_pools",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("cluster_id", sa.String(32), sa.ForeignKey("clusters.id"), nullable=False),
        sa.Column(
            "credential_id", sa.String(32), sa.ForeignKey("credentials.id"), nullable=False
        ),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("region", sa.String(64), nullable=False),
        sa.Column("zone", sa.String(64)),
        sa.Column("vm_type", sa.String(64), nullable=False),
        sa.Column("min_vms", sa.Integer, nullable=False),
        sa.Column("max_vms", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("hosts_service", sa.Boolean, nullable=False),
        sa.Column("last_error", sa.Text),
        sa.Column("consecutive_failures", sa.Integer, nullable=False),
        sa.Column("backoff_until", UTCDateTime()),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("deleted_at", UTCDateTime()),
    )
    _live_unique(
        "uq_node_pools_live_name", "node_pools", ["cluster_id", "name"], "state != 'deleted'"
    )
    op.create_index("ix_node_pools_state", "node_pools", ["state"])

    op.create_table(
        "vm_attempts",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("pool_id", sa.String(32), sa.ForeignKey("node_pools.id"), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("replaces_attempt_id", sa.String(32)),
        sa.Column("token_generation", sa.Integer, nullable=False),
        sa.Column("vm_id", sa.String(256)),
        sa.Column("public_ip", sa.String(64)),
        sa.Column("node_name", sa.String(253)),
        sa.Column("node_state", sa.String(16)),
        sa.Column("last_error", sa.Text),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("released_at", UTCDateTime()),
    )
    op.create_index("ix_vm_attempts_pool", "vm_attempts", ["pool_id", "state"])

    op.create_table(
        "workloads",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("pool_id", sa.String(32), sa.ForeignKey("node_pools.id"), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("terminated_at", UTCDateTime()),
        sa.Column("removed_at", UTCDateTime()),
    )
    _live_unique("uq_workloads_live_name", "workloads", ["name"], "state != 'removed'")
    op.create_index("ix_workloads_pool", "workloads", ["pool_id", "state"])

    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("subject_kind", sa.String(16), nullable=False),
        sa.Column("subject_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("data", sa.JSON),
    )
    op.create_index("ix_events_subject", "events", ["subject_id", "id"])


def downgrade() -> None:
    for table in ("events", "workloads", "vm_attempts", "node_pools", "credentials", "clusters"):
        op.drop_table(table)
