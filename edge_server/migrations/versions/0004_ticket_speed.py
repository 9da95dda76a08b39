"""The ticket speed of a violation (issue 38): the speed over its measuring base, its sigma, the
tolerance and confidence factor applied, the base, and the engine's status with its reason.

Every new column is nullable: rows stored before keep their peak speed and get NULL here (the API
calls them ``legacy``: peak only). ``ticket_speed_kmh`` is indexed with ``id`` for sorting and
keyset paging, like the peak speed.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        batch.add_column(sa.Column("ticket_speed_kmh", sa.Float(), nullable=True))
        batch.add_column(sa.Column("ticket_sigma_kmh", sa.Float(), nullable=True))
        batch.add_column(sa.Column("tolerance_kmh", sa.Float(), nullable=True))
        batch.add_column(sa.Column("confidence_k", sa.Float(), nullable=True))
        batch.add_column(sa.Column("base", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("ticket_status", sa.String(16), nullable=True))
        batch.add_column(sa.Column("status_reason", sa.Text(), nullable=True))
    op.create_index("ix_violations_ticket_speed_id", "violations", ["ticket_speed_kmh", "id"])


def downgrade() -> None:
    op.drop_index("ix_violations_ticket_speed_id", table_name="violations")
    with op.batch_alter_table("violations") as batch:
        for name in (
            "status_reason",
            "ticket_status",
            "base",
            "confidence_k",
            "tolerance_kmh",
            "ticket_sigma_kmh",
            "ticket_speed_kmh",
        ):
            batch.drop_column(name)
