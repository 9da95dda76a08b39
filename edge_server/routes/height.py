"""A live session's height reference (issue 39, "height above the road"): GET, PUT and DELETE
``/api/v1/sessions/{id}/height-reference``, and the frames frozen to draw a measured base on (POST
``.../frames``, GET ``.../frames/{frame_index}``).

A drone reports its altitude above its take-off point; every speed scales with the camera's height
above the road. An operator gives it for a stream while it runs: the take-off point's height above
the road (a site value), or a measured base, lines drawn between road marks with their lengths on a
frame the operator froze (or the stream's latest frame), which the server solves
(:mod:`edge_server.height_reference`). The stream uses it from its next frame on; every violation
measured with it records it (its ``scale``). The change is logged, announced
(``session.height_reference``) and kept in the session's info.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

import cv2
from fastapi import APIRouter, Path, Request, Response

from edge_server.height_reference import (
    HeightReferenceError,
    Still,
    measure_base,
    site_reference,
    utc_now_iso,
)
from edge_server.routes.common import ERRORS, OPERATE, READ, ApiError, SessionId, audit, manager_of, store_of
from edge_server.scale_schemas import FrozenFrameOut, HeightReferenceIn, HeightStateOut
from edge_server.schemas import API_PREFIX, ErrorOut
from pipelines.calibrate import BaseLine

log = logging.getLogger(__name__)

protected = APIRouter(responses=ERRORS)

PATH = f"{API_PREFIX}/sessions/{{session_id}}/height-reference"
FrameIndex = Annotated[int, Path(ge=0, le=2**53, description="a frozen frame's index in the stream")]
JPEG_QUALITY = 92  # the frame an officer draws on: road marks must stay sharp
RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "no such live stream (or it has ended)"},
    409: {
        "model": ErrorOut,
        "description": "the stream has not started, has no frame to measure on yet, or no longer keeps the "
        "frozen frame asked for",
    },
}


async def _live_engine(request: Request, session_id: str) -> Any:
    """The stream's engine; 404 when it is not live (saying so when the session has ended), 409
    while it starts."""
    live = manager_of(request).get(session_id)
    if live is None:
        row = await asyncio.to_thread(store_of(request).get_session, session_id)
        if row is not None and row.status != "active":
            raise ApiError(
                404, "not_found", f"session {session_id} has ended: a height reference is for a live stream"
            )
        raise ApiError(404, "not_found", f"no active stream {session_id}")
    if live.worker is None:
        raise ApiError(409, "not_started", f"stream {session_id} has not started yet; try again in a moment")
    return live.worker


async def _announce(request: Request, session_id: str, engine: Any, entry: dict[str, Any]) -> HeightStateOut:
    """The change in the session's stored info, the audit trail and on the event bus; what the API
    answers."""
    state = HeightStateOut.model_validate(engine.height.state())
    await audit(request, "session.height_reference", "session", session_id, None, entry)
    try:
        await asyncio.to_thread(store_of(request).merge_session_info, session_id, engine.height.info())
    except Exception:  # noqa: BLE001 - applied and logged; the row gets it again when the stream ends
        log.warning(
            "session %s: height reference not stored in the session's info yet", session_id, exc_info=True
        )
    request.app.state.bus.publish(
        {"type": "session.height_reference", "session_id": session_id, "change": entry, **state.model_dump()}
    )
    return state


@protected.get(
    PATH,
    response_model=HeightStateOut,
    tags=["sessions"],
    summary="A live stream's height reference and the scale of its latest frame",
    responses=RESPONSES,
    dependencies=READ,
)
async def get_height_reference(request: Request, session_id: SessionId) -> HeightStateOut:
    engine = await _live_engine(request, session_id)
    return HeightStateOut.model_validate(engine.height.state())


@protected.put(
    PATH,
    response_model=HeightStateOut,
    tags=["sessions"],
    summary="Set a live stream's height above the road: a site value, or a measured base solved on the "
    "frame it was drawn on (frame_index; else its latest frame), from its next frame on",
    responses={
        **RESPONSES,
        400: {
            "model": ErrorOut,
            "description": "a measured base that cannot be used (a line off the road or the frame, a length "
            "out of range, lines that contradict the drone's altitude), or an unreadable body",
        },
    },
    dependencies=OPERATE,
)
async def set_height_reference(
    request: Request, session_id: SessionId, body: HeightReferenceIn
) -> HeightStateOut:
    engine = await _live_engine(request, session_id)
    height = engine.height
    set_at = utc_now_iso()
    try:
        if body.lines is not None:
            lines = [
                BaseLine(tuple(ln.p1), tuple(ln.p2), ln.length_m, ln.length_sigma_m) for ln in body.lines
            ]
            frame = height.frame_for(body.frame_index)
            _, reference, solution = await asyncio.to_thread(
                measure_base, frame, height.camera, lines, body.set_by, set_at
            )
        else:
            assert body.takeoff_above_road_m is not None  # HeightReferenceIn: one kind or the other
            reference = site_reference(
                body.takeoff_above_road_m, body.sigma_m, body.set_by, height.camera, set_at
            )
            solution = None
    except HeightReferenceError as exc:
        log.info("session %s: height reference refused: %s", session_id, exc.message)
        raise ApiError(exc.status, exc.code, exc.message) from exc
    entry = height.set(reference, solution)
    log.info("session %s: height reference set by %s: %s", session_id, reference.set_by, reference.detail)
    return await _announce(request, session_id, engine, entry)


def _frozen_out(session_id: str, still: Still) -> FrozenFrameOut:
    image = f"{PATH.format(session_id=session_id)}/frames/{still.frame_index}"
    return FrozenFrameOut.model_validate({**still.to_dict(), "image": image})


@protected.post(
    f"{PATH}/frames",
    response_model=FrozenFrameOut,
    status_code=201,
    tags=["sessions"],
    summary="Freeze a live stream's latest frame to draw a measured base on (the base is then solved on "
    "that very frame: PUT with its frame_index)",
    responses=RESPONSES,
    dependencies=OPERATE,
)
async def freeze_frame(request: Request, session_id: SessionId) -> FrozenFrameOut:
    engine = await _live_engine(request, session_id)
    try:
        still = engine.height.freeze()
    except HeightReferenceError as exc:
        raise ApiError(exc.status, exc.code, exc.message) from exc
    log.info("session %s: frame %d frozen for a measured base", session_id, still.frame_index)
    return _frozen_out(session_id, still)


@protected.get(
    f"{PATH}/frames/{{frame_index}}",
    tags=["sessions"],
    summary="A frozen frame's image (JPEG, as processed, without drawings)",
    response_class=Response,
    responses={**RESPONSES, 200: {"content": {"image/jpeg": {}}}},
    dependencies=READ,
)
async def frozen_frame_image(request: Request, session_id: SessionId, frame_index: FrameIndex) -> Response:
    engine = await _live_engine(request, session_id)
    try:
        still = engine.height.still(frame_index)
    except HeightReferenceError as exc:
        raise ApiError(exc.status, exc.code, exc.message) from exc
    ok, jpeg = await asyncio.to_thread(
        cv2.imencode, ".jpg", still.latest.frame.image, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY]
    )
    if not ok:
        raise ApiError(500, "internal", f"frame {frame_index} could not be encoded")
    return Response(jpeg.tobytes(), media_type="image/jpeg", headers={"Cache-Control": "no-store"})


@protected.delete(
    PATH,
    response_model=HeightStateOut,
    tags=["sessions"],
    summary="Return a live stream to the configuration's height reference (from its next frame on)",
    responses=RESPONSES,
    dependencies=OPERATE,
)
async def clear_height_reference(request: Request, session_id: SessionId) -> HeightStateOut:
    engine = await _live_engine(request, session_id)
    entry = engine.height.set(None)
    log.info("session %s: height reference back to the configuration's", session_id)
    return await _announce(request, session_id, engine, entry)
