"""The scale check a violation carries (issue 40, "a scale check on every session"): its status
(unverified, ok, suspect) as a column to filter on, and the whole check (ratio of the telemetry's
scale to the one the vehicles imply, its sigma, the vehicles behind it, the reason) as JSON.

Both columns are nullable: rows stored before keep their data and get NULL here (no check was made).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        batch.add_column(sa.Column("scale_check_status", sa.String(16), nullable=True))
        batch.add_column(sa.Column("scale_check", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        for name in ("scale_check", "scale_check_status"):
            batch.drop_column(name)
