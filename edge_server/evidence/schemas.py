"""The API's view of a violation's evidence pack (pydantic: the edge of the service)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field


class EvidenceOut(BaseModel):
    url: str = Field(description="GET: the signed pack (zip); check it with `airpatrol verify`")
    sha256: str | None = Field(None, description="the pack file's SHA-256 as the server wrote it")
    made_at: dt.datetime | None = None
    made_later: bool = Field(
        False, description="made on request after the violation was stored, not when it was recorded"
    )

    @classmethod
    def from_row(cls, row, url: str) -> EvidenceOut | None:  # noqa: ANN001 - a ViolationRow
        if not getattr(row, "evidence_path", None):
            return None
        return cls(
            url=url,
            sha256=row.evidence_sha256,
            made_at=row.evidence_made_at,
            made_later=bool(row.evidence_made_later),
        )


__all__ = ["EvidenceOut"]
