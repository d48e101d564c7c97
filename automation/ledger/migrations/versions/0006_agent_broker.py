"""The agent broker: the agents of AgentPools, their sessions and the sessions' output.

``agents``: one row per agent (its pod name), the pool it serves (``<namespace>/<name>``),
its slots and the slots its sessions hold, its state (ready, draining, unknown, gone) and
heartbeat times. ``sessions``: a command asked of a pool, pending until a slot is free, then
running on one agent until it is done, failed or cancelled. ``session_output``: what the
command printed, in the order its agent posted it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "agents",
        sa.Column("id", sa.String(253), primary_key=True),
        sa.Column("pool", sa.String(320), nullable=False),
        sa.Column("pod_name", sa.String(253), nullable=False),
        sa.Column("slots", sa.Integer, nullable=False),
        sa.Column("busy_slots", sa.Integer, nullable=False),
        sa.Column("reported_busy_slots", sa.Integer, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("registered_at", UTCDateTime(), nullable=False),
        sa.Column("last_heartbeat_at", UTCDateTime(), nullable=False),
        sa.Column("idle_since", UTCDateTime()),
        sa.Column("unknown_since", UTCDateTime()),
        sa.Column("gone_at", UTCDateTime()),
    )
    op.create_index("ix_agents_pool", "agents", ["pool", "state"])
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("pool", sa.String(320), nullable=False),
        sa.Column("agent_id", sa.String(253)),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("command", sa.JSON, nullable=False),
        sa.Column("exit_code", sa.Integer),
        sa.Column("error", sa.Text),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("assigned_at", UTCDateTime()),
        sa.Column("delivered_at", UTCDateTime()),
        sa.Column("cancel_requested_at", UTCDateTime()),
        sa.Column("finished_at", UTCDateTime()),
        sa.Column("client_seen_at", UTCDateTime()),
    )
    op.create_index("ix_sessions_pool_state", "sessions", ["pool", "state", "created_at"])
    op.create_index("ix_sessions_agent", "sessions", ["agent_id", "state"])
    op.create_table(
        "session_output",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(32), sa.ForeignKey("sessions.id"), nullable=False),
        sa.Column("stream", sa.String(8), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
    )
    op.create_index("ix_session_output_session", "session_output", ["session_id", "id"])


def downgrade() -> None:
    op.drop_table("session_output")
    op.drop_table("sessions")
    op.drop_table("agents")
