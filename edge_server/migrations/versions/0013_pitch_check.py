"""The pitch check a violation carries (issue 39, "the gimbal's pitch checked against the traffic"):
the session's check when the violation closed, or the one that held it for review later (the pitch
used minus the traffic's, its sigma, the vehicles behind it, the status and why), as JSON.

Nullable: rows stored before keep their data and get NULL here (no check was carried).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        batch.add_column(sa.Column("pitch_check", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        batch.drop_column("pitch_check")
