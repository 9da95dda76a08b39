"""A violation's signed evidence pack: download it, or have it made now (a violation stored before
packs, or whose pack was not made: marked as made later). docs/evidence.md says what it holds."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse

from edge_server.evidence.service import EvidenceError, EvidenceService
from edge_server.routes.common import ERRORS, ApiError, require_token
from edge_server.routes.violations import MediaFileResponse, ViolationId, _media_file, _violation_or_404
from edge_server.schemas import API_PREFIX, ErrorOut, ViolationOut

protected = APIRouter(dependencies=[Depends(require_token)], responses=ERRORS)


@protected.get(
    f"{API_PREFIX}/violations/{{violation_id}}/evidence.zip",
    tags=["evidence"],
    summary="The violation's signed evidence pack (check it with `airpatrol verify`)",
    response_class=FileResponse,
    responses={200: {"content": {"application/zip": {}}}, 404: {"model": ErrorOut}},
)
async def violation_evidence(request: Request, violation_id: ViolationId) -> FileResponse:
    row = await _violation_or_404(request, violation_id)
    path = _media_file(request, row, "evidence pack")
    return MediaFileResponse(
        path, media_type="application/zip", filename=f"violation-{violation_id}-evidence.zip"
    )


@protected.post(
    f"{API_PREFIX}/violations/{{violation_id}}/evidence",
    response_model=ViolationOut,
    tags=["evidence"],
    summary="Make the violation's evidence pack now, if it has none (marked as made later)",
    responses={404: {"model": ErrorOut}, 409: {"model": ErrorOut}},
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
        row = await asyncio.to_thread(service.make, violation_id, made_later=True)
    except EvidenceError as exc:
        raise ApiError(409, "conflict", str(exc)) from exc
    out = ViolationOut.from_row(row)
    if out.evidence is not None:
        request.app.state.bus.publish(
            {
                "type": "violation.evidence_ready",
                "session_id": row.session_id,
                "violation_id": row.id,
                "evidence": out.evidence.model_dump(mode="json"),
            }
        )
    return out
