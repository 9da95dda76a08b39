"""The :class:`Store`: all database access of the server (sessions and their tracks, RTMP stream
keys, violations). Every method opens its own short session, so a ``Store`` is safe to share
between the event loop's thread pool and the per-stream worker threads."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker

from edge_server.store.accounts import AccountStore
from edge_server.store.audit import AuditLog
from edge_server.store.database import make_engine, migrate
from edge_server.store.models import RtmpKeyRow, SessionRow, TrackRow, ViolationRow, utcnow
from edge_server.store.paging import (
    SORT_KINDS,
    SORTS,
    CursorError,
    Page,
    ViolationFilter,
    decode_cursor,
    encode_cursor,
    keyset,
    keyset_nulls_last,
)
from edge_server.store.retention import RetentionStore
from edge_server.store.webhooks import WebhookStore
from pipelines.height import SCALE_SOURCES
from pipelines.types import (
    ENFORCEABLE,
    ENGINE_STATUSES,
    NOT_ENFORCEABLE,
    SCALE_CHECK_STATUSES,
    PitchCheckResult,
    ScaleCheckResult,
    Telemetry,
    Violation,
)

log = logging.getLogger(__name__)


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
        **ticket_fields(v),
    }


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def ticket_fields(v: Violation) -> dict[str, Any]:
    """The ticket columns: the speed over the measuring base, its sigma, the tolerance and the
    confidence factor applied, the base, the engine's status and why. A status the store does not
    know is stored as not enforceable (a ticket needs the engine to say enforceable)."""
    status, reason = v.status, v.status_reason or ""
    if status not in ENGINE_STATUSES:  # the engine's statuses a row stores (ticket_status)
        log.warning(
            "violation of track %s: unknown engine status %r, stored as not enforceable", v.track_id, status
        )
        reason = f"unknown engine status {status!r}" + (f": {reason}" if reason else "")
        status = NOT_ENFORCEABLE
    return {
        "ticket_speed_kmh": _float(v.ticket_speed_kmh),
        "ticket_sigma_kmh": _float(v.ticket_sigma_kmh),
        "tolerance_kmh": _float(v.tolerance_kmh),
        "confidence_k": _float(v.confidence_k),
        "base": None if v.base is None else v.base.to_dict(),
        "ticket_status": status,
        "status_reason": reason,
    }


def drone_fields(t: Telemetry | None) -> dict[str, Any]:
    """The row columns the drone's telemetry at the violation fills (its ``scale_source``: where
    the altitude came from, unless the violation's scale says more: :func:`scale_fields`)."""
    return {
        "drone_latitude": None if t is None else t.latitude,
        "drone_longitude": None if t is None else t.longitude,
        "altitude_m": None if t is None else t.altitude_m,
        "scale_source": None if t is None else t.source,
    }


def scale_fields(v: Violation) -> dict[str, Any]:
    """The scale columns (issue 39): the scale the ticket rests on - its source, the camera's height
    above the road and its sigma, the speed's relative sigma from it, the whole scale with its
    height reference; nothing when the violation has none (its telemetry's source stays)."""
    scale = v.scale
    if scale is None:
        return {}
    data = scale.to_dict()
    fields = {
        "height_above_road_m": data["height_above_road_m"],
        "height_sigma_m": data["height_sigma_m"],
        "scale_sigma_pct": data["sigma_pct"],
        "scale": data,
    }
    if scale.source in SCALE_SOURCES:
        fields["scale_source"] = scale.source
    else:
        log.warning(
            "violation of track %s: unknown scale source %r, not stored as one", v.track_id, scale.source
        )
    return fields


def _known_check(v: Violation, check: ScaleCheckResult | PitchCheckResult | None, what: str) -> bool:
    """Whether a check is there to store (one whose status the store does not know is logged, not stored)."""
    if check is None:
        return False
    if check.status not in SCALE_CHECK_STATUSES:
        log.warning("violation of track %s: unknown %s status %r, not stored", v.track_id, what, check.status)
        return False
    return True


def scale_check_fields(v: Violation) -> dict[str, Any]:
    """The scale check's columns (issue 40): its status and the whole check; nothing without one."""
    check = v.scale_check
    if check is None or not _known_check(v, check, "scale check"):
        return {}
    return {"scale_check_status": check.status, "scale_check": check.to_dict()}


def pitch_check_fields(v: Violation) -> dict[str, Any]:
    """The pitch check's column (issue 39): the whole check; nothing without one."""
    check = v.pitch_check
    if check is None or not _known_check(v, check, "pitch check"):
        return {}
    return {"pitch_check": check.to_dict()}


def violation_conditions(flt: ViolationFilter) -> list[Any]:
    """The WHERE conditions of a violation filter (combined with AND). A speed bound is on the
    ticket speed, so it leaves out the rows without one; the status is the derived one
    (:attr:`ViolationRow.status`)."""
    row = ViolationRow
    conditions: list[Any] = []
    if flt.session_id:
        conditions.append(row.session_id == flt.session_id)
    if flt.since is not None:
        conditions.append(row.occurred_at >= flt.since)
    if flt.until is not None:
        conditions.append(row.occurred_at < flt.until)
    if flt.min_speed_kmh is not None:
        conditions.append(row.ticket_speed_kmh >= flt.min_speed_kmh)
    if flt.max_speed_kmh is not None:
        conditions.append(row.ticket_speed_kmh <= flt.max_speed_kmh)
    if flt.zone:
        conditions.append(row.zone == flt.zone)
    if flt.class_name:
        conditions.append(row.class_name == flt.class_name)
    if flt.server_id:
        conditions.append(row.server_id == flt.server_id)
    if flt.false_positive is not None:
        conditions.append(row.false_positive == flt.false_positive)
    if flt.statuses:
        conditions.append(row.status.in_(sorted(set(flt.statuses))))
    return conditions


class Store:
    """All database access of the server."""

    def __init__(self, engine: Engine, server_id: str | None = None) -> None:
        """``server_id``: stamped on every session and violation this store writes (a fleet)."""
        self.engine = engine
        self.server_id = server_id
        self._sessions = sessionmaker(engine, expire_on_commit=False)
        self.audit = AuditLog(self._sessions, server_id)  # the audit trail (edge_server.store.audit)
        self.accounts = AccountStore(self._sessions)  # users and tokens (edge_server.store.accounts)
        self.retention = RetentionStore(self._sessions)  # holds and purges (edge_server.store.retention)
        self.webhooks = WebhookStore(self._sessions)  # outgoing webhooks' queue (edge_server.store.webhooks)

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

    def merge_session_info(self, session_id: str, items: dict[str, Any]) -> bool:
        """Add (or replace) keys of a session's info, in one transaction; False: no such session."""
        with self._sessions.begin() as s:
            row = s.get(SessionRow, session_id, with_for_update=True)
            if row is None:
                return False
            row.info = {**(row.info or {}), **items}
        return True

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
            value, row_id = decode_cursor(cursor, sort, "datetime", id_kind="str")
            stmt = stmt.where(keyset(SessionRow.started_at, SessionRow.id, True, value, row_id))
        stmt = stmt.order_by(SessionRow.started_at.desc(), SessionRow.id.desc()).limit(limit + 1)
        with self._sessions() as s:
            rows = list(s.scalars(stmt))
        next_cursor = None
        if len(rows) > limit:
            rows = rows[:limit]
            next_cursor = encode_cursor(sort, rows[-1].started_at, rows[-1].id)
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
        alert: dict[str, Any] | None = None,
    ) -> ViolationRow:
        """Store one violation of a session, with the drone's position and height at the time (and
        ``alert``: its ``heading_deg`` and ``next_checkpoint``, edge_server.violations)."""
        row = ViolationRow(
            session_id=session_id,
            occurred_at=occurred_at,
            snapshot_path=snapshot_path,
            server_id=self.server_id,
            **{
                **violation_fields(violation),
                **drone_fields(telemetry),
                **scale_fields(violation),
                **scale_check_fields(violation),
                **pitch_check_fields(violation),
                **(alert or {}),
            },
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

    def hold_enforceable(
        self, session_id: str, reason: str, check: dict[str, Any], kind: str = "scale_check"
    ) -> list[int]:
        """Hold a session's enforceable violations for review (not enforceable, ``reason``, the
        check ``check`` that held them: the scale check, or with ``kind`` "pitch_check" the pitch
        check); returns their ids."""
        with self._sessions.begin() as s:
            rows = s.scalars(
                select(ViolationRow).where(
                    ViolationRow.session_id == session_id, ViolationRow.ticket_status == ENFORCEABLE
                )
            ).all()
            for row in rows:
                row.ticket_status = NOT_ENFORCEABLE
                row.status_reason = reason
                if kind == "pitch_check":
                    row.pitch_check = check
                else:
                    row.scale_check_status = check.get("status")
                    row.scale_check = check
                row.updated_at = utcnow()
            return [row.id for row in rows]

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
        stmt = select(ViolationRow).where(*violation_conditions(flt))
        nullable = SORT_KINDS[attr] == "float_or_null"
        if cursor:
            value, row_id = decode_cursor(cursor, sort, SORT_KINDS[attr])
            if attr == "id":
                stmt = stmt.where(col < value if desc else col > value)
            elif nullable:
                stmt = stmt.where(keyset_nulls_last(col, ViolationRow.id, desc, value, row_id))
            else:
                stmt = stmt.where(keyset(col, ViolationRow.id, desc, value, row_id))
        order = [col.desc() if desc else col.asc()]
        if nullable:
            order = [order[0].nulls_last()]
        if attr != "id":
            order.append(ViolationRow.id.desc() if desc else ViolationRow.id.asc())
        stmt = stmt.order_by(*order).limit(limit + 1)
        with self._sessions() as s:
            rows = list(s.scalars(stmt))
        next_cursor = None
        if len(rows) > limit:
            rows = rows[:limit]
            last = rows[-1]
            next_cursor = encode_cursor(sort, getattr(last, attr), last.id)
        return Page(rows, next_cursor)

    def violation_pages(
        self, flt: ViolationFilter = ViolationFilter(), *, sort: str = "-occurred_at", limit: int = 500
    ) -> Iterator[list[ViolationRow]]:
        """Every violation ``flt`` selects, a keyset page at a time (memory stays flat whatever the
        count; rows added meanwhile are safe); the first page even when it is empty."""
        cursor = None
        while True:
            page = self.list_violations(flt, sort=sort, limit=limit, cursor=cursor)
            yield list(page.items)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def count_violations(self, session_id: str | None = None) -> int:
        stmt = select(func.count(ViolationRow.id))
        if session_id:
            stmt = stmt.where(ViolationRow.session_id == session_id)
        with self._sessions() as s:
            return int(s.scalar(stmt) or 0)

    def without_evidence(self, server_id: str, limit: int | None = None) -> list[int]:
        """Ids of violations with no evidence pack that this server recorded (or no server: rows from
        before fleets), oldest first."""
        stmt = (
            select(ViolationRow.id)
            .where(ViolationRow.evidence_path.is_(None))
            .where(or_(ViolationRow.server_id == server_id, ViolationRow.server_id.is_(None)))
            .order_by(ViolationRow.id)
            .limit(limit)
        )
        with self._sessions() as s:
            return list(s.scalars(stmt))

    def violations_of(self, session_id: str) -> Sequence[ViolationRow]:
        with self._sessions() as s:
            return list(
                s.scalars(
                    select(ViolationRow)
                    .where(ViolationRow.session_id == session_id)
                    .order_by(ViolationRow.id)
                )
            )
