"""Persistent store: flight sessions, track summaries and violations (SQLAlchemy 2).

SQLite (WAL) by default, PostgreSQL by URL. The schema is owned by the Alembic migrations in
``edge_server/migrations`` (run on startup by :func:`migrate`); the ORM classes below mirror them.
Every method opens its own short session, so a :class:`Store` is safe to share between the
event loop's thread pool and the per-stream worker threads.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
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
    and_,
    create_engine,
    delete,
    event,
    func,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, sessionmaker

from pipelines.types import Telemetry, Violation

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


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


class ViolationRow(Base):
    __tablename__ = "violations"
    __table_args__ = (
        Index("ix_violations_occurred_at_id", "occurred_at", "id"),
        Index("ix_violations_peak_speed_id", "peak_speed_kmh", "id"),
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
    # where the scale (altitude, gimbal pitch) came from: "flight" (the drone's telemetry) or
    # "operator" (typed in for a stream without telemetry); None: no telemetry, or an older row
    scale_source: Mapped[str | None] = mapped_column(String(16), nullable=True)
    snapshot_path: Mapped[str | None] = mapped_column(Text, nullable=True)  # relative to the media dir
    clip_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    false_positive: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, nullable=True)
    server_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)  # who recorded it


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


# ------------------------------------------------------------------------------------------------
# engine, migrations


def make_engine(url: str, **kwargs: Any) -> Engine:
    """Engine for ``url``; SQLite gets WAL, foreign keys and a busy timeout on every connection."""
    if url.startswith("sqlite"):
        connect_args = {"check_same_thread": False, "timeout": 30, **kwargs.pop("connect_args", {})}
        if ":///" in url and not url.endswith(":memory:"):
            Path(url.split(":///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args=connect_args, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


# pg_advisory_xact_lock key of the schema migration: any fixed 64-bit number of this project's own
MIGRATION_LOCK = 0x41495250_41545230  # "AIRPATR0"


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision (idempotent).

    On PostgreSQL, servers of a fleet starting at the same instant take turns: the migration runs in
    one transaction holding an advisory lock, so the second waits, then finds the schema at its head.
    """
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


# ------------------------------------------------------------------------------------------------
# queries


SORTS: dict[str, tuple[str, bool]] = {
    # public name -> (column attribute, descending)
    "-occurred_at": ("occurred_at", True),
    "occurred_at": ("occurred_at", False),
    "-peak_speed_kmh": ("peak_speed_kmh", True),
    "peak_speed_kmh": ("peak_speed_kmh", False),
    "-id": ("id", True),
    "id": ("id", False),
}


class CursorError(ValueError):
    pass


@dataclass(frozen=True)
class ViolationFilter:
    session_id: str | None = None
    since: dt.datetime | None = None  # occurred_at >= since
    until: dt.datetime | None = None  # occurred_at < until
    min_speed_kmh: float | None = None  # peak speed
    zone: str | None = None
    false_positive: bool | None = None
    max_speed_kmh: float | None = None  # peak speed
    class_name: str | None = None
    server_id: str | None = None


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_cursor: str | None


def _encode_cursor(sort: str, value: Any, row_id: Any) -> str:
    if isinstance(value, dt.datetime):
        value = value.astimezone(dt.timezone.utc).isoformat()
    raw = json.dumps([sort, value, row_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


MAX_ROW_ID = 2**63 - 1  # SQLite INTEGER and PostgreSQL BIGINT; larger ids cannot exist


def _decode_cursor(cursor: str, sort: str, kind: str, id_kind: str = "int") -> tuple[Any, Any]:
    """The ``(value, row_id)`` of a cursor made by :func:`_encode_cursor`, checked against ``sort``.

    Cursors travel through clients, so every part is validated here: a tampered cursor is a
    :class:`CursorError` (HTTP 400), never a database error. ``kind`` is the sort value's type
    (``datetime``, ``float`` or ``int``), ``id_kind`` the row id's (``int`` or ``str``).
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        cur_sort, value, row_id = json.loads(raw)
    except (ValueError, binascii.Error, TypeError, RecursionError) as exc:
        raise CursorError(
            "invalid cursor: pass the next_cursor value of the previous page unchanged"
        ) from exc
    if cur_sort != sort:
        raise CursorError(f"cursor was made for sort={cur_sort!r}, not sort={sort!r}")
    return _cursor_value(value, kind), _cursor_value(row_id, id_kind)


def _cursor_value(value: Any, kind: str) -> Any:
    """One decoded cursor field as a value the database accepts, or CursorError."""
    bad = CursorError("invalid cursor value: pass the next_cursor value of the previous page unchanged")
    if kind == "datetime":
        if not isinstance(value, str):
            raise bad
        try:
            parsed = dt.datetime.fromisoformat(value)
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.timezone.utc)
            return parsed.astimezone(dt.timezone.utc)  # out of datetime's range near years 1 and 9999
        except (ValueError, OverflowError) as exc:
            raise bad from exc
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad
        try:
            value = float(value)
        except OverflowError as exc:  # an int beyond float's range
            raise bad from exc
        if not math.isfinite(value):  # json.loads accepts NaN, Infinity and 1e400
            raise bad
        return value
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_ROW_ID:
            raise bad
        return value
    if kind == "str":
        if not isinstance(value, str) or len(value) > 64 or "\x00" in value:
            raise bad
        return value
    raise ValueError(f"unknown cursor field kind {kind!r}")


def _keyset(col: Any, id_col: Any, desc: bool, value: Any, row_id: Any) -> Any:
    if desc:
        return or_(col < value, and_(col == value, id_col < row_id))
    return or_(col > value, and_(col == value, id_col > row_id))


def violation_fields(v: Violation) -> dict[str, Any]:
    """The row columns an engine :class:`~pipelines.types.Violation` fills."""
    ground = v.ground_xy_m
    return {
        "track_id": int(v.track_id),
        "class_name": v.class_name,
        "zone": v.zone,
        "speed_limit_kmh": float(v.speed_limit_kmh),
        "peak_speed_kmh": float(v.peak_speed_kmh),
        "mean_speed_kmh": float(v.mean_speed_kmh),
        "sigma_kmh": float(v.sigma_kmh),
        "start_time_s": float(v.start_time_s),
        "end_time_s": float(v.end_time_s),
        "start_frame": int(v.start_frame),
        "end_frame": int(v.end_frame),
        "bbox_xyxy": [round(float(x), 1) for x in v.bbox_xyxy],
        "ground_x_m": None if ground is None else float(ground[0]),
        "ground_y_m": None if ground is None else float(ground[1]),
        "latitude": v.latitude,
        "longitude": v.longitude,
    }


def drone_fields(t: Telemetry | None) -> dict[str, Any]:
    """The row columns the drone's telemetry at the violation fills."""
    return {
        "drone_latitude": None if t is None else t.latitude,
        "drone_longitude": None if t is None else t.longitude,
        "altitude_m": None if t is None else t.altitude_m,
        "scale_source": None if t is None else t.source,
    }


class Store:
    """All database access of the server."""

    def __init__(self, engine: Engine, server_id: str | None = None) -> None:
        """``server_id``: stamped on every session and violation this store writes (a fleet)."""
        self.engine = engine
        self.server_id = server_id
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @classmethod
    def from_url(
        cls, url: str, *, run_migrations: bool = True, server_id: str | None = None, **engine_kwargs: Any
    ) -> Store:
        store = cls(make_engine(url, **engine_kwargs), server_id=server_id)
        if run_migrations:
            migrate(store.engine)
        return store

    def close(self) -> None:
        self.engine.dispose()

    def ping(self) -> bool:
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            return True
        except Exception:  # noqa: BLE001 - health check reports, never raises
            log.exception("database ping failed")
            return False

    # -- sessions -------------------------------------------------------------------------------

    def create_session(
        self, session_id: str, kind: str, remote: str | None = None, **fields: Any
    ) -> SessionRow:
        fields.setdefault("server_id", self.server_id)
        row = SessionRow(
            id=session_id, kind=kind, remote=remote, status="active", started_at=utcnow(), **fields
        )
        with self._sessions.begin() as s:
            s.add(row)
        return row

    def update_session(self, session_id: str, **fields: Any) -> None:
        with self._sessions.begin() as s:
            s.execute(update(SessionRow).where(SessionRow.id == session_id).values(**fields))

    def end_session(self, session_id: str, status: str, reason: str | None, **fields: Any) -> None:
        self.update_session(session_id, status=status, end_reason=reason, ended_at=utcnow(), **fields)

    def mark_abandoned_sessions(self) -> int:
        """Sessions left 'active' by a server that died: mark them failed (run at startup)."""
        with self._sessions.begin() as s:
            result = s.execute(
                update(SessionRow)
                .where(SessionRow.status == "active")
                .values(status="failed", end_reason="server stopped unexpectedly", ended_at=utcnow())
            )
            return int(result.rowcount or 0)

    def get_session(self, session_id: str) -> SessionRow | None:
        with self._sessions() as s:
            return s.get(SessionRow, session_id)

    def list_sessions(
        self,
        *,
        status: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        server_id: str | None = None,
    ) -> Page:
        sort = "-started_at"
        stmt = select(SessionRow)
        if status:
            stmt = stmt.where(SessionRow.status == status)
        if server_id:
            stmt = stmt.where(SessionRow.server_id == server_id)
        if cursor:
            value, row_id = _decode_cursor(cursor, sort, "datetime", id_kind="str")
            stmt = stmt.where(_keyset(SessionRow.started_at, SessionRow.id, True, value, row_id))
        stmt = stmt.order_by(SessionRow.started_at.desc(), SessionRow.id.desc()).limit(limit + 1)
        with self._sessions() as s:
            rows = list(s.scalars(stmt))
        next_cursor = None
        if len(rows) > limit:
            rows = rows[:limit]
            next_cursor = _encode_cursor(sort, rows[-1].started_at, rows[-1].id)
        return Page(rows, next_cursor)

    def session_tracks(self, session_id: str) -> list[TrackRow]:
        with self._sessions() as s:
            return list(
                s.scalars(
                    select(TrackRow).where(TrackRow.session_id == session_id).order_by(TrackRow.track_id)
                )
            )

    def save_tracks(self, session_id: str, tracks: Iterable[dict[str, Any]]) -> int:
        """Write track summaries of a session: a track saved before is replaced, others are kept
        (a stream saves its finished tracks as it runs, and the rest at its end)."""
        rows = [TrackRow(session_id=session_id, **t) for t in tracks]
        if not rows:
            return 0
        ids = [r.track_id for r in rows]
        with self._sessions.begin() as s:
            for start in range(0, len(ids), 500):  # bounded IN lists
                chunk = ids[start : start + 500]
                s.execute(
                    delete(TrackRow).where(TrackRow.session_id == session_id, TrackRow.track_id.in_(chunk))
                )
            s.add_all(rows)
        return len(rows)

    # -- RTMP stream keys -----------------------------------------------------------------------

    def add_rtmp_key(
        self,
        key_id: str,
        key_sha256: str,
        *,
        name: str | None = None,
        device_sn: str | None = None,
        operator: dict[str, Any] | None = None,
    ) -> RtmpKeyRow:
        row = RtmpKeyRow(
            id=key_id,
            key_sha256=key_sha256,
            name=name,
            device_sn=device_sn,
            operator=operator,
            created_at=utcnow(),
        )
        with self._sessions.begin() as s:
            s.add(row)
        return row

    def rtmp_key_by_hash(self, key_sha256: str) -> RtmpKeyRow | None:
        with self._sessions() as s:
            return s.scalars(select(RtmpKeyRow).where(RtmpKeyRow.key_sha256 == key_sha256)).first()

    def list_rtmp_keys(self) -> list[RtmpKeyRow]:
        with self._sessions() as s:
            return list(s.scalars(select(RtmpKeyRow).order_by(RtmpKeyRow.created_at.desc(), RtmpKeyRow.id)))

    def touch_rtmp_key(self, key_id: str) -> None:
        with self._sessions.begin() as s:
            s.execute(update(RtmpKeyRow).where(RtmpKeyRow.id == key_id).values(last_used_at=utcnow()))

    def delete_rtmp_key(self, key_id: str) -> bool:
        with self._sessions.begin() as s:
            return bool(s.execute(delete(RtmpKeyRow).where(RtmpKeyRow.id == key_id)).rowcount)

    # -- violations -----------------------------------------------------------------------------

    def add_violation(
        self,
        session_id: str,
        violation: Violation,
        *,
        occurred_at: dt.datetime,
        telemetry: Telemetry | None = None,
        snapshot_path: str | None = None,
    ) -> ViolationRow:
        """Store one violation of a session, with the drone's position and height at the time."""
        row = ViolationRow(
            session_id=session_id,
            occurred_at=occurred_at,
            snapshot_path=snapshot_path,
            server_id=self.server_id,
            **violation_fields(violation),
            **drone_fields(telemetry),
        )
        with self._sessions.begin() as s:
            s.add(row)
            s.flush()
            s.execute(
                update(SessionRow)
                .where(SessionRow.id == row.session_id)
                .values(violations_count=SessionRow.violations_count + 1)
            )
        return row

    def update_violation(self, violation_id: int, **fields: Any) -> ViolationRow | None:
        with self._sessions.begin() as s:
            row = s.get(ViolationRow, violation_id)
            if row is None:
                return None
            for key, value in fields.items():
                setattr(row, key, value)
            row.updated_at = utcnow()
        return row

    def get_violation(self, violation_id: int) -> ViolationRow | None:
        with self._sessions() as s:
            return s.get(ViolationRow, violation_id)

    def list_violations(
        self,
        flt: ViolationFilter = ViolationFilter(),
        *,
        sort: str = "-occurred_at",
        limit: int = 50,
        cursor: str | None = None,
    ) -> Page:
        if sort not in SORTS:
            raise CursorError(f"unknown sort {sort!r}; one of {', '.join(SORTS)}")
        attr, desc = SORTS[sort]
        col = getattr(ViolationRow, attr)
        stmt = select(ViolationRow)
        if flt.session_id:
            stmt = stmt.where(ViolationRow.session_id == flt.session_id)
        if flt.since is not None:
            stmt = stmt.where(ViolationRow.occurred_at >= flt.since)
        if flt.until is not None:
            stmt = stmt.where(ViolationRow.occurred_at < flt.until)
        if flt.min_speed_kmh is not None:
            stmt = stmt.where(ViolationRow.peak_speed_kmh >= flt.min_speed_kmh)
        if flt.max_speed_kmh is not None:
            stmt = stmt.where(ViolationRow.peak_speed_kmh <= flt.max_speed_kmh)
        if flt.zone:
            stmt = stmt.where(ViolationRow.zone == flt.zone)
        if flt.class_name:
            stmt = stmt.where(ViolationRow.class_name == flt.class_name)
        if flt.server_id:
            stmt = stmt.where(ViolationRow.server_id == flt.server_id)
        if flt.false_positive is not None:
            stmt = stmt.where(ViolationRow.false_positive == flt.false_positive)
        if cursor:
            kind = {"occurred_at": "datetime", "peak_speed_kmh": "float", "id": "int"}[attr]
            value, row_id = _decode_cursor(cursor, sort, kind)
            if attr == "id":
                stmt = stmt.where(col < value if desc else col > value)
            else:
                stmt = stmt.where(_keyset(col, ViolationRow.id, desc, value, row_id))
        order = [col.desc() if desc else col.asc()]
        if attr != "id":
            order.append(ViolationRow.id.desc() if desc else ViolationRow.id.asc())
        stmt = stmt.order_by(*order).limit(limit + 1)
        with self._sessions() as s:
            rows = list(s.scalars(stmt))
        next_cursor = None
        if len(rows) > limit:
            rows = rows[:limit]
            last = rows[-1]
            next_cursor = _encode_cursor(sort, getattr(last, attr), last.id)
        return Page(rows, next_cursor)

    def count_violations(self, session_id: str | None = None) -> int:
        stmt = select(func.count(ViolationRow.id))
        if session_id:
            stmt = stmt.where(ViolationRow.session_id == session_id)
        with self._sessions() as s:
            return int(s.scalar(stmt) or 0)

    def violations_of(self, session_id: str) -> Sequence[ViolationRow]:
        with self._sessions() as s:
            return list(
                s.scalars(
                    select(ViolationRow)
                    .where(ViolationRow.session_id == session_id)
                    .order_by(ViolationRow.id)
                )
            )
