"""The store's tables as SQLAlchemy 2 ORM classes: sessions, their track summaries, violations and
RTMP stream keys. The schema itself is owned by the Alembic migrations (``edge_server/migrations``,
whose ``env.py`` reads ``Base.metadata``); these classes mirror them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    case,
    true,
)
from sqlalchemy.ext.hybrid import hybrid_property
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


class UTCDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes in Python, naive UTC in the database (same on SQLite and PG)."""

    impl = DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=dt.timezone.utc)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class Base(DeclarativeBase):
    pass


class SessionRow(Base):
    """One stream from one drone (a flight or part of one)."""

    __tablename__ = "sessions"
    __table_args__ = (Index("ix_sessions_started_at_id", "started_at", "id"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # "webrtc" (phone app) | "whip"
    status: Mapped[str] = mapped_column(String(16), default="active", index=True)  # active | ended | failed
    end_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    remote: Mapped[str | None] = mapped_column(String(255), nullable=True)  # client address / user agent
    started_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    width: Mapped[int | None] = mapped_column(Integer, nullable=True)
    height: Mapped[int | None] = mapped_column(Integer, nullable=True)
    camera: Mapped[str | None] = mapped_column(String(64), nullable=True)
    frames_received: Mapped[int] = mapped_column(Integer, default=0)
    frames_processed: Mapped[int] = mapped_column(Integer, default=0)
    frames_dropped: Mapped[int] = mapped_column(Integer, default=0)
    telemetry_received: Mapped[int] = mapped_column(Integer, default=0)
    telemetry_rejected: Mapped[int] = mapped_column(Integer, default=0)
    violations_count: Mapped[int] = mapped_column(Integer, default=0)
    processed_fps: Mapped[float | None] = mapped_column(Float, nullable=True)
    latency_p50_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    latency_p95_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    info: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # pipeline metadata, clock sync ...
    # the edge server that took the stream (settings.server_id; None: a row from before fleets)
    server_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)

    tracks: Mapped[list[TrackRow]] = relationship(back_populates="session", cascade="all, delete-orphan")


class TrackRow(Base):
    """Summary of one tracked vehicle of a session."""

    __tablename__ = "tracks"
    __table_args__ = (UniqueConstraint("session_id", "track_id", name="uq_tracks_session_track"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    track_id: Mapped[int] = mapped_column(Integer)
    class_name: Mapped[str] = mapped_column(String(32), default="vehicle")
    first_time_s: Mapped[float] = mapped_column(Float)
    last_time_s: Mapped[float] = mapped_column(Float)
    frames: Mapped[int] = mapped_column(Integer, default=0)
    peak_speed_kmh: Mapped[float | None] = mapped_column(Float, nullable=True)
    mean_speed_kmh: Mapped[float | None] = mapped_column(Float, nullable=True)
    violated: Mapped[bool] = mapped_column(Boolean, default=False)

    session: Mapped[SessionRow] = relationship(back_populates="tracks")


def violation_status(false_positive: bool, ticket_status: str | None) -> str:
    """A violation's one status, derived (never stored): ``dismissed`` when an officer marked it a
    false positive, else ``legacy`` when it was stored before the ticket speed (no engine status),
    else the engine's ``enforceable`` / ``not_enforceable``. :attr:`ViolationRow.status` is the same
    rule in SQL."""
    if false_positive:
        return "dismissed"
    if ticket_status is None:
        return "legacy"
    return "enforceable" if ticket_status == "enforceable" else "not_enforceable"


class ViolationRow(Base):
    """One violation. The speed on a ticket is ``ticket_speed_kmh`` (``ticket_sigma_kmh``, measured
    over ``base``, a :meth:`pipelines.types.MeasuringBase.to_dict`); ``peak_speed_kmh`` is the
    highest per-frame estimate, informative only. Rows stored before the ticket speed (migration
    0004) have NULL in every ticket column: their status is ``legacy``."""

    __tablename__ = "violations"
    __table_args__ = (
        Index("ix_violations_occurred_at_id", "occurred_at", "id"),
        Index("ix_violations_peak_speed_id", "peak_speed_kmh", "id"),
        Index("ix_violations_ticket_speed_id", "ticket_speed_kmh", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    occurred_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)  # wall clock of the violation start
    track_id: Mapped[int] = mapped_column(Integer)
    class_name: Mapped[str] = mapped_column(String(32), default="vehicle")
    zone: Mapped[str] = mapped_column(String(64), index=True)
    speed_limit_kmh: Mapped[float] = mapped_column(Float)
    peak_speed_kmh: Mapped[float] = mapped_column(Float)
    mean_speed_kmh: Mapped[float] = mapped_column(Float)
    sigma_kmh: Mapped[float] = mapped_column(Float, default=0.0)
    start_time_s: Mapped[float] = mapped_column(Float)  # stream time (s since the first frame)
    end_time_s: Mapped[float] = mapped_column(Float)
    start_frame: Mapped[int] = mapped_column(Integer)
    end_frame: Mapped[int] = mapped_column(Integer)
    bbox_xyxy: Mapped[list | None] = mapped_column(JSON, nullable=True)
    ground_x_m: Mapped[float | None] = mapped_column(Float, nullable=True)
    ground_y_m: Mapped[float | None] = mapped_column(Float, nullable=True)
    latitude: Mapped[float | None] = mapped_column(Float, nullable=True)  # vehicle, when the engine knows it
    longitude: Mapped[float | None] = mapped_column(Float, nullable=True)
    drone_latitude: Mapped[float | None] = mapped_column(Float, nullable=True)  # from telemetry
    drone_longitude: Mapped[float | None] = mapped_column(Float, nullable=True)
    altitude_m: Mapped[float | None] = mapped_column(Float, nullable=True)
    # where the scale came from (pipelines.height.SCALE_SOURCES): "flight" (the drone's altitude over
    # unknown ground), "operator" (typed in for a stream without telemetry), "site" (the take-off
    # point's height above the road), "measured_base" (lines of known length on the road), "lrf" (the
    # laser rangefinder's readings), "terrain" (a terrain model of the site), "vehicles" (no altitude:
    # the height the cars and lanes give); from the violation's scale, else the telemetry's source;
    # None: neither, or an older row. A plain String(16): a new source needs no migration
    scale_source: Mapped[str | None] = mapped_column(String(16), nullable=True)
    snapshot_path: Mapped[str | None] = mapped_column(Text, nullable=True)  # relative to the media dir
    clip_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    false_positive: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    server_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)  # who recorded it
    # the ticket (pipelines.ticket); all NULL on rows stored before it. ticket_speed_kmh and its
    # sigma are also NULL when the track had no measuring base of the minimum length
    ticket_speed_kmh: Mapped[float | None] = mapped_column(Float, nullable=True)
    ticket_sigma_kmh: Mapped[float | None] = mapped_column(Float, nullable=True)
    tolerance_kmh: Mapped[float | None] = mapped_column(Float, nullable=True)  # applied at that speed
    confidence_k: Mapped[float | None] = mapped_column(Float, nullable=True)
    base: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # MeasuringBase.to_dict()
    # the engine's "enforceable" | "not_enforceable" (NULL: a row from before); the API's status is
    # derived from it and false_positive (violation_status, the hybrid ``status`` below)
    ticket_status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    status_reason: Mapped[str | None] = mapped_column(Text, nullable=True)  # why not enforceable
    # the scale the ticket rests on (issue 39, migration 0005; NULL on rows before it and on
    # violations without one): the camera's height above the road and its sigma, the scale's
    # relative sigma of the speed (%), and the whole ScaleInfo.to_dict() (pitch, reference: who
    # set it, when, how)
    height_above_road_m: Mapped[float | None] = mapped_column(Float, nullable=True)
    height_sigma_m: Mapped[float | None] = mapped_column(Float, nullable=True)
    scale_sigma_pct: Mapped[float | None] = mapped_column(Float, nullable=True)
    scale: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # the session's scale check from the vehicles when the violation closed (issue 40, migration
    # 0006; NULL before it and where the check is off): its status, and ScaleCheckResult.to_dict()
    scale_check_status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    scale_check: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # the session's pitch check against the traffic (issue 39, migration 0013; NULL before it and
    # where the check is off): PitchCheckResult.to_dict() when it closed, or the one that held it
    pitch_check: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # evidence (issue 41, migration 0007; NULL before it): the engine's record of the violation
    # (edge_server.evidence.contents), the received video's segment, the signed pack, its SHA-256, when it was made and whether
    # later than the violation (on request); paths relative to the media dir
    record_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    source_path: Mapped[str | None] = mapped_column(Text, nullable=True)  # the received video's segment
    evidence_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    evidence_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    evidence_made_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    evidence_made_later: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    # retention (issue 41, migration 0010): a legal hold keeps the record and its media whatever the
    # retention; media_purged_at: when retention deleted its media (the record stays)
    legal_hold_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    legal_hold_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    legal_hold_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    media_purged_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # the stop team's alert (issue 41, migration 0011): the direction of travel (compass bearing, from
    # the track's positions on the earth) and the next checkpoint ahead: name, lat/lon, distance_m,
    # eta_s and ``at`` (UTC, when the vehicle gets there at the ticket speed)
    heading_deg: Mapped[float | None] = mapped_column(Float, nullable=True)
    next_checkpoint: Mapped[dict | None] = mapped_column(JSON, nullable=True)

    @hybrid_property
    def status(self) -> str:
        return violation_status(bool(self.false_positive), self.ticket_status)

    @status.inplace.expression
    @classmethod
    def _status_expression(cls) -> Any:
        return case(
            (cls.false_positive == true(), "dismissed"),
            (cls.ticket_status.is_(None), "legacy"),
            (cls.ticket_status == "enforceable", "enforceable"),
            else_="not_enforceable",
        )


class RtmpKeyRow(Base):
    """An RTMP stream key: a publisher pushing to ``rtmp://<edge>:1935/live/<key>`` is admitted.

    Only a SHA-256 of the key is kept (the key is shown once, when it is made), like an API token;
    ``id`` names the key in the API and in logs. ``operator`` holds the altitude, gimbal pitch and
    camera the operator set for streams that carry no telemetry (DJI Fly); ``device_sn`` the
    aircraft whose DJI Cloud API telemetry belongs to streams of this key.
    """

    __tablename__ = "rtmp_keys"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    key_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str | None] = mapped_column(String(100), nullable=True)
    device_sn: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    operator: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)


class AuditEntryRow(Base):
    """One entry of the audit trail (issue 41): who did what to which record, when, with the
    record's fields before and after; ``hash`` chains it to the entry before it (``prev_hash``), so
    a changed or removed entry breaks the chain (edge_server.store.audit). Append-only: nothing in
    the server updates or deletes a row."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_target", "target_type", "target_id", "seq"),)

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # 1, 2, 3, ...
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    actor: Mapped[str] = mapped_column(String(128))  # "api-token", "engine", "pre-audit", a user later
    action: Mapped[str] = mapped_column(String(64))  # e.g. "violation.false_positive"
    target_type: Mapped[str] = mapped_column(String(32))  # violation, session, evidence, rtmp_key, keys
    target_id: Mapped[str] = mapped_column(String(64))
    before: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    after: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    detail: Mapped[str] = mapped_column(Text, default="")
    server_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))


class AuditCheckpointRow(Base):
    """A signed statement of the audit trail's head: entry ``seq`` had hash ``head_hash`` (Ed25519,
    the server's evidence key); one every ``audit_checkpoint_every`` entries, and one in each
    evidence pack, so a cut tail (entries removed from the end) is found too."""

    __tablename__ = "audit_checkpoints"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    seq: Mapped[int] = mapped_column(Integer, index=True)
    head_hash: Mapped[str] = mapped_column(String(64))
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    server_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    key_fingerprint: Mapped[str] = mapped_column(String(64))
    signature: Mapped[str] = mapped_column(Text)  # base64


class UserRow(Base):
    """A person who signs in (issue 41): an administrator, officer or viewer. Only an Argon2 hash of
    the password is kept (edge_server.auth.passwords). A disabled user keeps the row (the audit
    trail names them) and every token of theirs stops working."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))  # admin, officer, viewer
    password_hash: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    password_changed_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    disabled_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)


class ApiTokenRow(Base):
    """A bearer token: a user's (made by signing in; it acts with the user's role of the moment) or
    a machine's (a publisher, a scraper, a dispatch system; its role is its own). Only a SHA-256 of
    the token is kept; ``id`` names it in the API, the CLI and the logs. A revoked or expired token
    is refused; the row stays for the audit trail."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(16))  # login, machine
    name: Mapped[str] = mapped_column(String(64))
    role: Mapped[str | None] = mapped_column(String(16), nullable=True)  # a machine token's role
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True, index=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    expires_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)


class WebhookDeliveryRow(Base):
    """One event for one webhook target (issue 41): pending until delivered (a 2xx) or dead-lettered
    (a permanent refusal, or ``webhook_max_attempts`` tries). A target's rows go out in ``id``
    order, one at a time. ``payload`` is the exact JSON body sent (and signed) at every try;
    ``event_id`` is its idempotency key, the same at every try."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (Index("ix_webhook_deliveries_pending", "target", "delivered_at", "dead_at", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    target: Mapped[str] = mapped_column(String(64))
    event_id: Mapped[str] = mapped_column(String(64))
    event_type: Mapped[str] = mapped_column(String(64))
    payload: Mapped[str] = mapped_column(Text)
    server_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    delivered_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    dead_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
