"""Live catalog refresh: a dated overlay over the shipped VM catalog.

``catalog_refreshes``: one ``anycloud catalog refresh`` (cloud, credential, regions read, APIs
read, when, counts per region). ``catalog_refresh_regions``: the regions it read, each the
whole truth for that region as of ``fetched_at`` (the newest wins). ``catalog_overlay_types``
and ``catalog_overlay_offerings``: the types, zones and prices it read. A refresh is written
in one transaction; nothing here is ever updated, only added.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from automation.ledger.schema import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "catalog_refreshes",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("credential_id", sa.String(32), sa.ForeignKey("credentials.id"),
                  nullable=False),
        sa.Column("regions", sa.JSON, nullable=False),
        sa.Column("sources", sa.JSON, nullable=False),
        sa.Column("fetched_at", UTCDateTime(), nullable=False),
        sa.Column("counts", sa.JSON, nullable=False),
        sa.Column("warnings", sa.JSON, nullable=False),
    )
    op.create_table(
        "catalog_refresh_regions",
        sa.Column("refresh_id", sa.String(32), sa.ForeignKey("catalog_refreshes.id"),
                  primary_key=True),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("fetched_at", UTCDateTime(), nullable=False),
        sa.Column("zones", sa.Text, nullable=False),
    )
    op.create_index("ix_catalog_refresh_regions_newest", "catalog_refresh_regions",
                    ["provider", "region", "fetched_at"])
    op.create_table(
        "catalog_overlay_types",
        sa.Column("refresh_id", sa.String(32), sa.ForeignKey("catalog_refreshes.id"),
                  primary_key=True),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("arch", sa.String(16), nullable=False),
        sa.Column("vcpus", sa.Integer, nullable=False),
        sa.Column("memory_gib", sa.Float, nullable=False),
        sa.Column("gpus", sa.Integer, nullable=False),
        sa.Column("gpu_model", sa.String(128)),
        sa.Column("family", sa.String(32), nullable=False),
        sa.Column("fetched_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_catalog_overlay_types_newest", "catalog_overlay_types",
                    ["provider", "name", "fetched_at"])
    op.create_table(
        "catalog_overlay_offerings",
        sa.Column("refresh_id", sa.String(32), sa.ForeignKey("catalog_refreshes.id"),
                  primary_key=True),
        sa.Column("provider", sa.String(16), nullable=False),
        sa.Column("region", sa.String(64), primary_key=True),
        sa.Column("vm_type", sa.String(64), primary_key=True),
        sa.Column("zones", sa.Text),
        sa.Column("price_usd_hour", sa.Float),
    )
    op.create_index("ix_catalog_overlay_offerings_type", "catalog_overlay_offerings",
                    ["provider", "vm_type"])


def downgrade() -> None:
    op.drop_table("catalog_overlay_offerings")
    op.drop_table("catalog_overlay_types")
    op.drop_table("catalog_refresh_regions")
    op.drop_table("catalog_refreshes")
