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
