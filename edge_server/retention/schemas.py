"""The API's view of retention and legal holds (pydantic: the edge of the service)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from edge_server.schemas import PLAIN_TEXT


class LegalHoldIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hold: StrictBool = Field(description="true: keep this violation and its media whatever the retention")
    reason: str | None = Field(
        None,
        min_length=1,
        max_length=500,
        pattern=PLAIN_TEXT,
        description="needed to place a hold: e.g. the case",
    )

    @model_validator(mode="after")
    def _reason_with_a_hold(self) -> LegalHoldIn:
        if self.hold and not self.reason:
            raise ValueError("a legal hold needs a reason (e.g. the case number)")
        return self


class PolicyOut(BaseModel):
    media_days: float | None = Field(description="media of not enforceable and dismissed violations")
    dismissed_days: float | None = Field(description="dismissed violations, record and media")
    violation_days: float | None = Field(description="every violation, record and media")
    interval_s: float


class PurgeOut(BaseModel):
    at: dt.datetime
    dry_run: bool
    deleted: list[int] = Field(description="violations removed (record and media)")
    media_cleared: list[int] = Field(description="violations whose media were removed (the record stays)")
    files: int
    bytes: int
    held: int = Field(description="violations under a legal hold, kept")
    errors: list[str]


class RetentionOut(BaseModel):
    policy: PolicyOut
    held: int = Field(description="violations under a legal hold")
    next: PurgeOut = Field(description="what a pass now would remove (a dry run)")
    last: PurgeOut | None = Field(None, description="the server's last pass since it started")
