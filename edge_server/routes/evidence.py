"""A violation's signed evidence pack: download it, or have it made now (a violation stored before
packs, or whose pack was not made: marked as made later); its history in the audit trail, and the
trail itself. docs/evidence.md says what they hold."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse

from edge_server.events import evidence_ready_event
from edge_server.evidence.schemas import AuditHistoryOut, AuditPageOut
from edge_server.evidence.service import EvidenceError, EvidenceService
from edge_server.routes.common import ADMIN, ERRORS, OPERATE, READ, ApiError, actor_of, audit, store_of
from edge_server.routes.violations import MediaFileResponse, ViolationId, _media_file, _violation_or_404
from edge_server.schemas import API_PREFIX, ErrorOut, ViolationOut
from edge_server.store import MAX_ROW_ID

protected = APIRouter(responses=ERRORS)


@protected.get(
    f"{API_PREFIX}/violations/{{violation_id}}/evidence.zip",
    tags=["evidence"],
    summary="The violation's signed evidence pack (check it with `airpatrol verify`)",
    response_class=FileResponse,
    responses={200: {"content": {"application/zip": {}}}, 404: {"model": ErrorOut}},
    dependencies=OPERATE,
)
async def violation_evidence(request: Request, violation_id: ViolationId) -> FileResponse:
    row = await _violation_or_404(request, violation_id)
    path = _media_file(request, row, "evidence pack")
    await audit(
        request, "evidence.downloaded", "violation", violation_id, None, {"sha256": row.evidence_sha256}
    )
    return MediaFileResponse(
        path, media_type="application/zip", filename=f"violation-{violation_id}-evidence.zip"
    )


@protected.post(
    f"{API_PREFIX}/violations/{{violation_id}}/evidence",
    response_model=ViolationOut,
    tags=["evidence"],
    summary="Make the violation's evidence pack now, if it has none (marked as made later)",
    responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}},
    dependencies=OPERATE,
)
async def make_evidence(request: Request, violation_id: ViolationId) -> ViolationOut:
    service: EvidenceService | None = getattr(request.app.state, "evidence", None)
    if service is None:
        raise ApiError(409, "evidence_off", "evidence packs are off on this server (evidence_packs: false)")
    row = await _violation_or_404(request, violation_id)
    here = request.app.state.server_id
    if row.server_id and row.server_id != here and not row.evidence_path:
        raise ApiError(
            409,
            "conflict",
            f"violation {violation_id} was recorded by server {row.server_id}, which keeps its media: "
            f"ask it for the pack (this is {here})",
        )
    try:
        row = await asyncio.to_thread(service.make, violation_id, made_later=True, actor=actor_of(request))
    except EvidenceError as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    out = ViolationOut.from_row(row)
    if out.evidence is not None:
        request.app.state.bus.publish(evidence_ready_event(out))
    return out


@protected.get(
    f"{API_PREFIX}/violations/{{violation_id}}/history",
    response_model=AuditHistoryOut,
    tags=["evidence"],
    summary="The violation's entries in the audit trail: who did what to it, when, before and after "
    "(kept after retention removed the violation)",
    responses={404: {"model": ErrorOut}},
    dependencies=READ,
)
async def violation_history(request: Request, violation_id: ViolationId) -> AuditHistoryOut:
    entries = await asyncio.to_thread(store_of(request).audit.history, "violation", violation_id)
    if not entries:
        await _violation_or_404(request, violation_id)
    return AuditHistoryOut(entries=entries)


@protected.get(
    f"{API_PREFIX}/audit",
    response_model=AuditPageOut,
    tags=["evidence"],
    summary="The audit trail in order (hash-chained; `airpatrol audit verify` checks it)",
    dependencies=ADMIN,
)
async def audit_trail(
    request: Request,
    after_seq: Annotated[int, Query(ge=0, le=MAX_ROW_ID)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditPageOut:
    entries = await asyncio.to_thread(store_of(request).audit.entries, after_seq, limit)
    more = len(entries) == limit
    return AuditPageOut(entries=entries, next_after_seq=entries[-1]["seq"] if more else None)
