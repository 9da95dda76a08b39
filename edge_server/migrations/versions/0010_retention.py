"""Retention and legal holds (issue 41): a violation under a legal hold (when, by whom, why) is never
purged; one whose media retention deleted says when. New nullable columns only.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

COLUMNS = ("legal_hold_at", "legal_hold_by", "legal_hold_reason", "media_purged_at")


def upgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        batch.add_column(sa.Column("legal_hold_at", sa.DateTime(timezone=False), nullable=True))
        batch.add_column(sa.Column("legal_hold_by", sa.String(128), nullable=True))
        batch.add_column(sa.Column("legal_hold_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("media_purged_at", sa.DateTime(timezone=False), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
