"""The audit trail (issue 41): an append-only, hash-chained log of every action on sessions,
violations, evidence packs, keys and settings (``audit_log``), and signed checkpoints of its head
(``audit_checkpoints``). New tables only: nothing stored before changes. The false-positive marks
made before the trail existed get a "pre-audit" entry when a server first starts on it.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("at", sa.DateTime(timezone=False), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target_type", sa.String(32), nullable=False),
        sa.Column("target_id", sa.String(64), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("server_id", sa.String(64), nullable=True),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.create_index("ix_audit_log_target", "audit_log", ["target_type", "target_id", "seq"])
    op.create_table(
        "audit_checkpoints",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=False), nullable=False),
        sa.Column("server_id", sa.String(64), nullable=True),
        sa.Column("key_fingerprint", sa.String(64), nullable=False),
        sa.Column("signature", sa.Text(), nullable=False),
    )
    op.create_index("ix_audit_checkpoints_seq", "audit_checkpoints", ["seq"])


def downgrade() -> None:
    op.drop_index("ix_audit_checkpoints_seq", table_name="audit_checkpoints")
    op.drop_table("audit_checkpoints")
    op.drop_index("ix_audit_log_target", table_name="audit_log")
    op.drop_table("audit_log")
