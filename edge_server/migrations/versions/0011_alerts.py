"""Alerts for the stop team (issue 41): a violation's direction of travel (compass bearing from its
measured track) and the next checkpoint ahead with its distance and ETA. New nullable columns only.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        batch.add_column(sa.Column("heading_deg", sa.Float(), nullable=True))
        batch.add_column(sa.Column("next_checkpoint", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        batch.drop_column("next_checkpoint")
        batch.drop_column("heading_deg")
