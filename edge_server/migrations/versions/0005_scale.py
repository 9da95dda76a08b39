"""The scale a violation's ticket rests on (issue 39, "height above the road"): the camera's height
above the road and its sigma, the scale's relative sigma of the speed, and the whole scale (source,
pitch and its sigma, the height reference: who set it, when and how) as JSON.

Every new column is nullable: rows stored before keep their data and get NULL here (their
``scale_source`` stays what it was: the telemetry's). ``scale_source`` itself (String(16)) takes
the new sources (``site``, ``measured_base``) as it is.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        batch.add_column(sa.Column("height_above_road_m", sa.Float(), nullable=True))
        batch.add_column(sa.Column("height_sigma_m", sa.Float(), nullable=True))
        batch.add_column(sa.Column("scale_sigma_pct", sa.Float(), nullable=True))
        batch.add_column(sa.Column("scale", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        for name in ("scale", "scale_sigma_pct", "height_sigma_m", "height_above_road_m"):
            batch.drop_column(name)
