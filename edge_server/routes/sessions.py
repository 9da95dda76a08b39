"""Sessions: the list and one session (with live counters while it streams), the console's viewers
of a live stream's annotated video, and a live stream's rules (speed limits, zones)."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import ValidationError

from edge_server.routes.common import (
    ERRORS,
    OPERATE,
    READ,
    ApiError,
    SessionId,
    audit,
    manager_of,
    start_errors,
    store_of,
)
from edge_server.schemas import (
    API_PREFIX,
    ErrorOut,
    RulesIn,
    RulesOut,
    SdpIn,
    SessionDetail,
    SessionOut,
    SessionPage,
    SessionQuery,
    ViewerOut,
    ZoneIn,
)
from edge_server.store import CursorError
from pipelines.config import RulesConfig, validation_summary

log = logging.getLogger(__name__)

protected = APIRouter(responses=ERRORS)


@protected.get(
    f"{API_PREFIX}/sessions",
    response_model=SessionPage,
    tags=["sessions"],
    summary="Sessions, newest first",
    responses={400: {"model": ErrorOut, "description": "invalid cursor"}},
    dependencies=READ,
)
async def list_sessions(request: Request, query: Annotated[SessionQuery, Query()]) -> SessionPage:
    try:
        page = await asyncio.to_thread(
            store_of(request).list_sessions,
            status=query.status,
            limit=query.limit,
            cursor=query.cursor,
            server_id=query.server_id,
        )
    except CursorError as exc:
        raise ApiError(400, "invalid_cursor", str(exc)) from exc
    manager = manager_of(request)
    items = []
    for row in page.items:
        live = manager.get(row.id)
        items.append(SessionOut.from_row(row, live.live_stats() if live else None))
    return SessionPage(items=items, next_cursor=page.next_cursor)


@protected.get(
    f"{API_PREFIX}/sessions/{{session_id}}",
    response_model=SessionDetail,
    tags=["sessions"],
    summary="One session with its track summaries (live counters while it streams)",
    responses={404: {"model": ErrorOut}},
    dependencies=READ,
)
async def get_session(request: Request, session_id: SessionId) -> SessionDetail:
    store = store_of(request)
    row = await asyncio.to_thread(store.get_session, session_id)
    if row is None:
        raise ApiError(404, "not_found", f"no session {session_id}")
    tracks = await asyncio.to_thread(store.session_tracks, session_id)
    live = manager_of(request).get(session_id)
    if live is None:
        return SessionDetail.from_row_full(row, tracks)
    detail = SessionDetail.from_row_full(row, tracks, live.live_stats())
    info = {**(row.info or {}), **live.info(), "stage_ms_mean": live.stats.stage_ms_mean()}
    return detail.model_copy(update={"info": info})


@protected.post(
    f"{API_PREFIX}/sessions/{{session_id}}/viewers",
    response_model=ViewerOut,
    status_code=201,
    tags=["sessions"],
    summary="Watch a live stream's annotated video: SDP offer (receive-only video) in, SDP answer out",
    responses={400: {"model": ErrorOut}, 404: {"model": ErrorOut}, 503: {"model": ErrorOut}},
    dependencies=READ,
)
async def add_viewer(request: Request, session_id: SessionId, body: SdpIn) -> ViewerOut:
    try:
        with start_errors():
            viewer_id, answer = await manager_of(request).viewers.add(session_id, body.sdp)
    except KeyError:
        raise ApiError(404, "not_found", f"no active stream {session_id}") from None
    return ViewerOut(sdp=answer, session_id=session_id, viewer_id=viewer_id)


@protected.delete(
    f"{API_PREFIX}/sessions/{{session_id}}/viewers/{{viewer_id}}",
    status_code=204,
    response_class=Response,
    tags=["sessions"],
    summary="Stop watching a stream's annotated video (closing the peer connection does the same)",
    responses={404: {"model": ErrorOut}},
    dependencies=READ,
)
async def remove_viewer(request: Request, session_id: SessionId, viewer_id: SessionId) -> Response:
    if not await manager_of(request).viewers.remove(session_id, viewer_id):
        raise ApiError(404, "not_found", f"no viewer {viewer_id} of an active stream {session_id}")
    return Response(status_code=204)


def _live_worker(request: Request, session_id: str) -> Any:
    live = manager_of(request).get(session_id)
    if live is None:
        raise ApiError(404, "not_found", f"no active stream {session_id}")
    if live.worker is None:
        raise ApiError(409, "not_started", f"stream {session_id} has not started yet; try again in a moment")
    return live.worker


def _rules_out(rules: RulesConfig) -> RulesOut:
    return RulesOut(
        speed_limit_kmh=rules.speed_limit_kmh,
        zones=[
            ZoneIn(
                name=z.name,
                polygon=[[float(x), float(y)] for x, y in z.polygon],
                speed_limit_kmh=z.speed_limit_kmh,
            )
            for z in rules.zones
        ],
        tolerance_kmh=rules.tolerance_kmh,
        tolerance_percent=rules.tolerance_percent,
        tolerance_mode=rules.tolerance_mode,
        ticket_rule=rules.ticket_rule,
        confidence=rules.confidence,
        min_duration_s=rules.min_duration_s,
    )


RULES_RESPONSES: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}}


@protected.get(
    f"{API_PREFIX}/sessions/{{session_id}}/rules",
    response_model=RulesOut,
    tags=["sessions"],
    summary="A live stream's speed limits and zones",
    responses=RULES_RESPONSES,
    dependencies=READ,
)
async def get_rules(request: Request, session_id: SessionId) -> RulesOut:
    return _rules_out(_live_worker(request, session_id).rules)


@protected.put(
    f"{API_PREFIX}/sessions/{{session_id}}/rules",
    response_model=RulesOut,
    tags=["sessions"],
    summary="Set a live stream's speed limit, zones, tolerance, ticket rule and minimum duration "
    "(from its next frame)",
    responses=RULES_RESPONSES,
    dependencies=OPERATE,
)
async def set_rules(request: Request, session_id: SessionId, body: RulesIn) -> RulesOut:
    worker = _live_worker(request, session_id)
    worker_rules_before = worker.rules
    current = worker.rules.model_dump()
    update = body.model_dump(exclude_none=True)
    update["speed_limit_kmh"] = body.speed_limit_kmh  # null is a value here: zones only
    if body.speed_limit_kmh is None and not (body.zones if body.zones is not None else current["zones"]):
        raise ApiError(422, "invalid_request", "no limit at all: give speed_limit_kmh or at least one zone")
    try:  # RulesIn holds the config's ranges: this is a safety net, never a 500
        rules = RulesConfig(**{**current, **update})
    except ValidationError as exc:
        raise ApiError(422, "invalid_request", validation_summary(exc)) from exc
    worker.set_rules(rules)
    out = _rules_out(rules)
    await audit(
        request, "session.rules", "session", session_id, _rules_out(worker_rules_before).model_dump(mode="json"),
        out.model_dump(mode="json"),
    )  # fmt: skip
    log.info("session %s: rules set by the operator: %s", session_id, out.model_dump_json())
    request.app.state.bus.publish(
        {"type": "session.rules", "session_id": session_id, "rules": out.model_dump()}
    )
    return out
