"""The API's view of a violation's evidence pack (pydantic: the edge of the service)."""

from __future__ import annotations

import datetime as dt
from typing import Any

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


class LegalHoldOut(BaseModel):
    at: dt.datetime
    by: str | None = Field(None, description="who placed it")
    reason: str | None = Field(None, description="e.g. the case number")

    @classmethod
    def from_row(cls, row) -> LegalHoldOut | None:  # noqa: ANN001 - a ViolationRow
        if getattr(row, "legal_hold_at", None) is None:
            return None
        return cls(at=row.legal_hold_at, by=row.legal_hold_by, reason=row.legal_hold_reason)


class AuditEntryOut(BaseModel):
    seq: int = Field(description="the entry's place in the chain (1, 2, 3, ... without gaps)")
    at: str = Field(description="UTC, ISO 8601")
    actor: str = Field(
        description="who: user:<name>[<role>]@<address>, token:<name>[<role>]@<address>, "
        "api-token@<address> (the server's API token), engine, pre-audit, cli:<os user>@<host>"
    )
    action: str = Field(description="e.g. violation.created, violation.false_positive, evidence.made")
    target_type: str
    target_id: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    detail: str = ""
    server_id: str | None = None
    prev_hash: str = Field(description="the hash of the entry before (64 zeros for the first)")
    hash: str = Field(description="SHA-256 of this entry's fields and prev_hash (docs/evidence.md)")


class AuditHistoryOut(BaseModel):
    entries: list[AuditEntryOut]


class AuditPageOut(BaseModel):
    entries: list[AuditEntryOut]
    next_after_seq: int | None = Field(
        None, description="pass as ?after_seq= for the next page; null: the end"
    )


__all__ = ["AuditEntryOut", "AuditHistoryOut", "AuditPageOut", "EvidenceOut"]
