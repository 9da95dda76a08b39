"""The API's view of a violation's next checkpoint (pydantic: the edge of the service)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field


class CheckpointOut(BaseModel):
    name: str = Field(description="the checkpoint's name in the site YAML (alerts.checkpoints)")
    latitude: float
    longitude: float
    distance_m: float = Field(description="straight-line distance from the vehicle's last measured position")
    eta_s: float = Field(description="seconds to get there at the ticket speed, from that position")
    at: dt.datetime = Field(description="UTC time the vehicle gets there at the ticket speed")

    @classmethod
    def from_stored(cls, stored: dict | None) -> CheckpointOut | None:
        if not stored:
            return None
        try:
            return cls.model_validate(stored)
        except ValueError:  # a row written by another version: shown without it
            return None


class WebhookTargetOut(BaseModel):
    name: str
    url: str
    events: list[str]
    enforceable_only: bool
    pending: int = Field(description="queued, not yet delivered")
    delivered: int = Field(description="delivered and still kept (webhook_keep_days)")
    dead: int = Field(description="dead-lettered")
    last_delivered_at: dt.datetime | None = None
    last_error: str | None = Field(
        None, description="the latest failed try's error (HTTP status or connection)"
    )


class WebhookDeliveryOut(BaseModel):
    id: int
    target: str
    event_id: str = Field(description="its Idempotency-Key")
    event_type: str
    created_at: dt.datetime
    attempts: int
    dead_at: dt.datetime | None
    last_status: int | None
    last_error: str | None

    @classmethod
    def from_row(cls, row) -> WebhookDeliveryOut:  # noqa: ANN001 - a WebhookDeliveryRow
        return cls(
            id=row.id, target=row.target, event_id=row.event_id, event_type=row.event_type,
            created_at=row.created_at, attempts=row.attempts, dead_at=row.dead_at,
            last_status=row.last_status, last_error=row.last_error,
        )  # fmt: skip
