"""RTMP stream keys; where a violation's scale came from.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rtmp_keys",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("key_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("name", sa.String(100), nullable=True),
        sa.Column("device_sn", sa.String(64), nullable=True),
        sa.Column("operator", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=False), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=False), nullable=True),
    )
    op.create_index("ix_rtmp_keys_device_sn", "rtmp_keys", ["device_sn"])
    with op.batch_alter_table("violations") as batch:
        batch.add_column(sa.Column("scale_source", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        batch.drop_column("scale_source")
    op.drop_index("ix_rtmp_keys_device_sn", table_name="rtmp_keys")
    op.drop_table("rtmp_keys")
