"""Which edge server recorded each session and violation (a fleet of servers on one database).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("sessions", "violations"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("server_id", sa.String(64), nullable=True))
        op.create_index(f"ix_{table}_server_id", table, ["server_id"])


def downgrade() -> None:
    for table in ("sessions", "violations"):
        op.drop_index(f"ix_{table}_server_id", table_name=table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("server_id")
