"""Retention's reads and writes (issue 41): the violations each rule would purge, legal holds,
clearing a violation's media, deleting one. The rules themselves and the files are
:mod:`edge_server.retention`'s."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import sessionmaker

from edge_server.store.models import ViolationRow, utcnow

MEDIA_COLUMNS = ("snapshot_path", "clip_path", "source_path", "record_path", "evidence_path")


class RetentionStore:
    def __init__(self, sessions: sessionmaker) -> None:
        self._sessions = sessions

    def candidates(
        self,
        rule: str,
        before: dt.datetime,
        server_id: str | None,
        created_before: dt.datetime,
        after_id: int = 0,
        limit: int = 1000,
    ) -> list[ViolationRow]:
        """This server's violations, not under a legal hold, that occurred before ``before`` (and
        were stored before ``created_before``: none whose clip or pack may still be in the making),
        that ``rule`` purges: ``media`` (not enforceable or dismissed, media still there),
        ``dismissed`` (marked false positives) or ``all``. In id order (the order they were stored),
        from after ``after_id``: a keyset page."""
        conditions: list[Any] = [
            ViolationRow.id > after_id,
            ViolationRow.legal_hold_at.is_(None),
            ViolationRow.occurred_at < before,
            ViolationRow.created_at < created_before,
            ViolationRow.server_id == server_id if server_id else ViolationRow.server_id.is_(None),
        ]
        if rule == "media":
            conditions += [
                ViolationRow.status.in_(["not_enforceable", "dismissed"]),
                ViolationRow.media_purged_at.is_(None),
                or_(*(getattr(ViolationRow, c).is_not(None) for c in MEDIA_COLUMNS)),
            ]
        elif rule == "dismissed":
            conditions.append(ViolationRow.false_positive.is_(True))
        elif rule != "all":
            raise ValueError(f"unknown retention rule {rule!r}")
        with self._sessions() as s:
            query = select(ViolationRow).where(*conditions).order_by(ViolationRow.id).limit(limit)
            return list(s.scalars(query))

    def held(self) -> int:
        with self._sessions() as s:
            query = (
                select(func.count()).select_from(ViolationRow).where(ViolationRow.legal_hold_at.is_not(None))
            )
            return s.scalar(query) or 0

    def set_hold(self, violation_id: int, by: str | None, reason: str | None) -> ViolationRow | None:
        """Place (``reason``) or release (None) a legal hold; the row after, or None if there is none."""
        values = {"legal_hold_at": utcnow(), "legal_hold_by": by, "legal_hold_reason": reason}
        if reason is None:
            values = dict.fromkeys(values)
        with self._sessions.begin() as s:
            row = s.get(ViolationRow, violation_id)
            if row is None:
                return None
            for name, value in values.items():
                setattr(row, name, value)
        return row

    def clear_media(self, violation_id: int) -> bool:
        """The row's media paths cleared and ``media_purged_at`` set, unless a hold came meanwhile."""
        values = dict.fromkeys(MEDIA_COLUMNS)
        with self._sessions.begin() as s:
            done = s.execute(
                update(ViolationRow)
                .where(ViolationRow.id == violation_id, ViolationRow.legal_hold_at.is_(None))
                .values(media_purged_at=utcnow(), **values)
            )
            return bool(done.rowcount)

    def delete(self, violation_id: int) -> bool:
        """Delete the row, unless a hold came meanwhile."""
        with self._sessions.begin() as s:
            done = s.execute(
                delete(ViolationRow).where(
                    ViolationRow.id == violation_id, ViolationRow.legal_hold_at.is_(None)
                )
            )
            return bool(done.rowcount)


__all__ = ["MEDIA_COLUMNS", "RetentionStore"]
