"""WebRTC ingest: the phone app's offer API (``/api/v1/webrtc``) and WHIP (RFC 9725, ``/whip``):
an SDP offer in, a stream started, its SDP answer out; and ending such a stream."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from edge_server.routes.common import (
    ERRORS,
    PUBLISH,
    STOP_RESPONSES,
    ApiError,
    manager_of,
    remote_of,
    start_errors,
    stop_stream,
)
from edge_server.schemas import API_PREFIX, ErrorOut, SdpIn, SdpOut, StopOut

MAX_SDP_BYTES = 200_000

public = APIRouter()
protected = APIRouter(responses=ERRORS)


async def _start_stream(request: Request, sdp: str, kind: str) -> Any:
    with start_errors():
        return await manager_of(request).webrtc.create(sdp, kind, remote_of(request))


@protected.post(
    f"{API_PREFIX}/webrtc/offer",
    response_model=SdpOut,
    tags=["ingest"],
    summary="Start a stream from the phone app: SDP offer in, SDP answer out",
    responses={400: {"model": ErrorOut}, 503: {"model": ErrorOut}},
    dependencies=PUBLISH,
)
async def webrtc_offer(request: Request, body: SdpIn) -> SdpOut:
    sess = await _start_stream(request, body.sdp, "webrtc")
    return SdpOut(
        sdp=sess.answer_sdp,
        session_id=sess.id,
        events_url=f"{API_PREFIX}/events?session_id={sess.id}",
        session_url=f"{API_PREFIX}/sessions/{sess.id}",
    )


@protected.delete(
    f"{API_PREFIX}/webrtc/{{session_id}}",
    tags=["ingest"],
    summary="End a phone-app stream (closing the peer connection does the same)",
    response_model=StopOut,
    responses=STOP_RESPONSES,
    dependencies=PUBLISH,
)
async def webrtc_stop(request: Request, session_id: str) -> JSONResponse:
    return await stop_stream(request, session_id, "ended by client", "stream")


WHIP_REQUEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/sdp": {"schema": {"type": "string"}, "example": "v=0\r\n..."}},
    }
}


@protected.post(
    "/whip",
    tags=["ingest"],
    status_code=201,
    summary="WHIP ingest (RFC 9725): POST an SDP offer (application/sdp), get 201 + Location + SDP answer",
    openapi_extra=WHIP_REQUEST_BODY,
    response_class=Response,
    responses={
        201: {
            "content": {"application/sdp": {}},
            "description": "SDP answer; Location names the session resource",
        },
        400: {"model": ErrorOut},
        415: {"model": ErrorOut},
        503: {"model": ErrorOut},
    },
    dependencies=PUBLISH,
)
async def whip_post(request: Request) -> Response:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/sdp":
        raise ApiError(
            415,
            "unsupported_media_type",
            f"WHIP needs Content-Type: application/sdp, got {ctype or 'none'!r}",
        )
    body = await request.body()
    if len(body) > MAX_SDP_BYTES:
        raise ApiError(413, "too_large", f"SDP offer larger than {MAX_SDP_BYTES} bytes")
    try:
        sdp = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, "invalid_sdp", "SDP offer is not UTF-8 text") from exc
    sess = await _start_stream(request, sdp, "whip")
    location = f"/whip/{sess.id}"
    return Response(
        content=sess.answer_sdp,
        status_code=201,
        media_type="application/sdp",
        headers={"Location": location, "ETag": f'"{sess.id}"', "X-Session-Id": sess.id},
    )


@public.options("/whip", include_in_schema=False)
async def whip_options() -> Response:
    return Response(status_code=204, headers={"Accept-Post": "application/sdp", "Allow": "OPTIONS, POST"})


@protected.delete(
    "/whip/{session_id}",
    tags=["ingest"],
    summary="End a WHIP session",
    response_model=StopOut,
    responses=STOP_RESPONSES,
    dependencies=PUBLISH,
)
async def whip_delete(request: Request, session_id: str) -> JSONResponse:
    return await stop_stream(request, session_id, "ended by client (WHIP DELETE)", "WHIP session")


@protected.patch(
    "/whip/{session_id}",
    tags=["ingest"],
    summary="Trickle ICE / ICE restart: not supported (405)",
    status_code=405,  # its only answer: the document lists no 200 it never sends
    response_class=Response,
    responses={405: {"model": ErrorOut, "description": "not supported; Allow names DELETE"}},
    dependencies=PUBLISH,
)
async def whip_patch(session_id: str) -> Response:
    raise ApiError(
        405,
        "method_not_allowed",
        "trickle ICE and ICE restarts are not supported: send a complete offer (all candidates) in the POST",
        headers={"Allow": "DELETE"},
    )
