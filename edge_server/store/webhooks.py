"""Outgoing webhooks' queue in the database (``webhook_deliveries``; issue 41). Rows only: signing,
sending and retrying are :mod:`edge_server.alerts.webhooks`'."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import sessionmaker

from edge_server.store.models import WebhookDeliveryRow, utcnow


class WebhookStore:
    def __init__(self, sessions: sessionmaker) -> None:
        self._sessions = sessions

    def add(self, rows: list[dict[str, Any]]) -> list[int]:
        """Queue deliveries (in this order: their ids follow it); their ids."""
        now = utcnow()
        objs = [WebhookDeliveryRow(created_at=now, attempts=0, next_attempt_at=now, **r) for r in rows]
        with self._sessions.begin() as s:
            s.add_all(objs)
            s.flush()
            return [o.id for o in objs]

    def next_pending(self, target: str) -> WebhookDeliveryRow | None:
        """The target's oldest delivery neither delivered nor dead-lettered (the one to send next)."""
        with self._sessions() as s:
            return s.scalars(
                select(WebhookDeliveryRow)
                .where(
                    WebhookDeliveryRow.target == target,
                    WebhookDeliveryRow.delivered_at.is_(None),
                    WebhookDeliveryRow.dead_at.is_(None),
                )
                .order_by(WebhookDeliveryRow.id)
                .limit(1)
            ).first()

    def _set(self, delivery_id: int, **values: Any) -> None:
        with self._sessions.begin() as s:
            s.execute(update(WebhookDeliveryRow).where(WebhookDeliveryRow.id == delivery_id).values(**values))

    def delivered(self, delivery_id: int, attempts: int, status: int) -> None:
        self._set(delivery_id, attempts=attempts, delivered_at=utcnow(), last_status=status, last_error=None)

    def failed(
        self, delivery_id: int, attempts: int, retry_at: dt.datetime, status: int | None, error: str
    ) -> None:
        self._set(
            delivery_id,
            attempts=attempts,
            next_attempt_at=retry_at,
            last_status=status,
            last_error=error[:2000],
        )

    def dead(self, delivery_id: int, attempts: int, status: int | None, error: str) -> None:
        self._set(
            delivery_id, attempts=attempts, dead_at=utcnow(), last_status=status, last_error=error[:2000]
        )

    def retry(self, delivery_id: int) -> WebhookDeliveryRow | None:
        """A dead-lettered delivery back in the queue (tried next: it is the oldest), None if it is not dead."""
        with self._sessions.begin() as s:
            row = s.get(WebhookDeliveryRow, delivery_id)
            if row is None or row.dead_at is None:
                return None
            row.dead_at, row.attempts, row.next_attempt_at = None, 0, utcnow()
        return row

    def counts(self) -> dict[str, dict[str, int]]:
        """Per target: pending, delivered and dead deliveries."""
        out: dict[str, dict[str, int]] = {}
        with self._sessions() as s:
            for target, delivered, dead, total in s.execute(
                select(
                    WebhookDeliveryRow.target,
                    func.count(WebhookDeliveryRow.delivered_at),
                    func.count(WebhookDeliveryRow.dead_at),
                    func.count(),
                ).group_by(WebhookDeliveryRow.target)
            ):
                out[target] = {"pending": total - delivered - dead, "delivered": delivered, "dead": dead}
        return out

    def last(self, target: str, delivered: bool) -> WebhookDeliveryRow | None:
        """The target's latest delivered (or latest failed-at-least-once, still pending or dead) delivery."""
        with self._sessions() as s:
            query = select(WebhookDeliveryRow).where(WebhookDeliveryRow.target == target)
            if delivered:
                query = query.where(WebhookDeliveryRow.delivered_at.is_not(None))
            else:
                query = query.where(WebhookDeliveryRow.last_error.is_not(None))
            return s.scalars(query.order_by(WebhookDeliveryRow.id.desc()).limit(1)).first()

    def dead_letters(self, limit: int = 100) -> list[WebhookDeliveryRow]:
        with self._sessions() as s:
            return list(
                s.scalars(
                    select(WebhookDeliveryRow)
                    .where(WebhookDeliveryRow.dead_at.is_not(None))
                    .order_by(WebhookDeliveryRow.id.desc())
                    .limit(limit)
                )
            )

    def forget_delivered(self, before: dt.datetime) -> int:
        """Delete deliveries delivered before ``before`` (dead letters stay until retried)."""
        with self._sessions.begin() as s:
            return (
                s.execute(delete(WebhookDeliveryRow).where(WebhookDeliveryRow.delivered_at < before)).rowcount
                or 0
            )


__all__ = ["WebhookStore"]
