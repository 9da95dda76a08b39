"""Initial schema: sessions, tracks, violations.

Revision ID: 0001
Revises:
Create Date: 2025-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """The first schema, one table after the other. Long because it declares every column; a
    migration stays as written once released, so it is not split."""
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("end_reason", sa.Text(), nullable=True),
        sa.Column("remote", sa.String(255), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=False), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=False), nullable=True),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column("camera", sa.String(64), nullable=True),
        sa.Column("frames_received", sa.Integer(), nullable=False),
        sa.Column("frames_processed", sa.Integer(), nullable=False),
        sa.Column("frames_dropped", sa.Integer(), nullable=False),
        sa.Column("telemetry_received", sa.Integer(), nullable=False),
        sa.Column("telemetry_rejected", sa.Integer(), nullable=False),
        sa.Column("violations_count", sa.Integer(), nullable=False),
        sa.Column("processed_fps", sa.Float(), nullable=True),
        sa.Column("latency_p50_ms", sa.Float(), nullable=True),
        sa.Column("latency_p95_ms", sa.Float(), nullable=True),
        sa.Column("info", sa.JSON(), nullable=True),
    )
    op.create_index("ix_sessions_started_at_id", "sessions", ["started_at", "id"])
    op.create_index("ix_sessions_status", "sessions", ["status"])

    op.create_table(
        "tracks",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "session_id", sa.String(32), sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("track_id", sa.Integer(), nullable=False),
        sa.Column("class_name", sa.String(32), nullable=False),
        sa.Column("first_time_s", sa.Float(), nullable=False),
        sa.Column("last_time_s", sa.Float(), nullable=False),
        sa.Column("frames", sa.Integer(), nullable=False),
        sa.Column("peak_speed_kmh", sa.Float(), nullable=True),
        sa.Column("mean_speed_kmh", sa.Float(), nullable=True),
        sa.Column("violated", sa.Boolean(), nullable=False),
        sa.UniqueConstraint("session_id", "track_id", name="uq_tracks_session_track"),
    )
    op.create_index("ix_tracks_session_id", "tracks", ["session_id"])

    op.create_table(
        "violations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column(
            "session_id", sa.String(32), sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column("occurred_at", sa.DateTime(timezone=False), nullable=False),
        sa.Column("track_id", sa.Integer(), nullable=False),
        sa.Column("class_name", sa.String(32), nullable=False),
        sa.Column("zone", sa.String(64), nullable=False),
        sa.Column("speed_limit_kmh", sa.Float(), nullable=False),
        sa.Column("peak_speed_kmh", sa.Float(), nullable=False),
        sa.Column("mean_speed_kmh", sa.Float(), nullable=False),
        sa.Column("sigma_kmh", sa.Float(), nullable=False),
        sa.Column("start_time_s", sa.Float(), nullable=False),
        sa.Column("end_time_s", sa.Float(), nullable=False),
        sa.Column("start_frame", sa.Integer(), nullable=False),
        sa.Column("end_frame", sa.Integer(), nullable=False),
        sa.Column("bbox_xyxy", sa.JSON(), nullable=True),
        sa.Column("ground_x_m", sa.Float(), nullable=True),
        sa.Column("ground_y_m", sa.Float(), nullable=True),
        sa.Column("latitude", sa.Float(), nullable=True),
        sa.Column("longitude", sa.Float(), nullable=True),
        sa.Column("drone_latitude", sa.Float(), nullable=True),
        sa.Column("drone_longitude", sa.Float(), nullable=True),
        sa.Column("altitude_m", sa.Float(), nullable=True),
        sa.Column("snapshot_path", sa.Text(), nullable=True),
        sa.Column("clip_path", sa.Text(), nullable=True),
        sa.Column("false_positive", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("created_at", sa.DateTime(timezone=False), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=False), nullable=True),
    )
    op.create_index("ix_violations_session_id", "violations", ["session_id"])
    op.create_index("ix_violations_zone", "violations", ["zone"])
    op.create_index("ix_violations_occurred_at_id", "violations", ["occurred_at", "id"])
    op.create_index("ix_violations_peak_speed_id", "violations", ["peak_speed_kmh", "id"])


def downgrade() -> None:
    op.drop_table("violations")
    op.drop_table("tracks")
    op.drop_index("ix_sessions_status", table_name="sessions")
    op.drop_index("ix_sessions_started_at_id", table_name="sessions")
    op.drop_table("sessions")
