"""Evidence packs (issue 41): where a violation's engine record (its track's measured positions,
the configuration and session state in force), its source video (the received segment, not
re-encoded: RTMP and RTSP streams) and its signed evidence pack are kept, the pack's
SHA-256 (the database's own copy: a pack replaced on disk no longer matches it), when it was made
and whether later than the violation (on request, for a violation stored before packs).

All nullable: rows stored before keep their data and have no pack until one is asked for.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

COLUMNS = (
    "record_path",
    "source_path",
    "evidence_path",
    "evidence_sha256",
    "evidence_made_at",
    "evidence_made_later",
)


def upgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        batch.add_column(sa.Column("record_path", sa.Text(), nullable=True))
        batch.add_column(sa.Column("source_path", sa.Text(), nullable=True))
        batch.add_column(sa.Column("evidence_path", sa.Text(), nullable=True))
        batch.add_column(sa.Column("evidence_sha256", sa.String(64), nullable=True))
        batch.add_column(sa.Column("evidence_made_at", sa.DateTime(timezone=False), nullable=True))
        batch.add_column(sa.Column("evidence_made_later", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("violations") as batch:
        for name in reversed(COLUMNS):
            batch.drop_column(name)
