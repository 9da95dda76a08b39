"""HTTP and WebSocket routes: ingest (phone offer API and WHIP), sessions, violations, events."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import hmac
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import (
    APIRouter,
    Depends,
    HTTPException,
    Query,
    Request,
    Response,
    WebSocket,
    WebSocketDisconnect,
)
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.datastructures import Headers
from starlette.responses import MalformedRangeHeader, RangeNotSatisfiable
from starlette.types import Receive, Scope, Send

from edge_server.events import dumps
from edge_server.schemas import (
    API_PREFIX,
    ErrorOut,
    FalsePositiveIn,
    HealthOut,
    RulesIn,
    RulesOut,
    SdpIn,
    SdpOut,
    SessionDetail,
    SessionOut,
    SessionPage,
    SessionQuery,
    StopOut,
    ViewerOut,
    ViolationFilterQuery,
    ViolationOut,
    ViolationPage,
    ViolationQuery,
    ZoneIn,
)
from edge_server.store import MAX_ROW_ID, CursorError, Store, ViolationFilter
from edge_server.streams import CapacityError, OfferError, PipelineUnavailable, StreamManager
from edge_server.violation_csv import CSV_COLUMNS, csv_line, csv_values
from pipelines.config import RulesConfig

log = logging.getLogger(__name__)

MAX_SDP_BYTES = 200_000

# Path parameters are bounded before they reach the database: an id beyond 64 bits is no row of
# any table (SQLite would raise OverflowError binding it), a session id is a short plain token.
ViolationId = Annotated[int, PathParam(ge=1, le=MAX_ROW_ID, description="violation id")]
SessionId = Annotated[
    str, PathParam(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$", description="session id")
]

bearer = HTTPBearer(
    auto_error=False, scheme_name="bearer", description="the server's API token (AIRPATROL_API_TOKEN)"
)


class ApiError(HTTPException):
    """An HTTP error with a machine-readable code; rendered as ``{"error": code, "detail": msg}``."""

    def __init__(self, status: int, code: str, detail: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(status_code=status, detail=detail, headers=headers)
        self.code = code


UNAUTHORIZED_DETAIL = "missing or wrong bearer token (send 'Authorization: Bearer <AIRPATROL_API_TOKEN>')"


def token_ok(request_token: str | None, expected: str) -> bool:
    return bool(request_token) and hmac.compare_digest(request_token.encode(), expected.encode())


def require_token(
    request: Request, creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)] = None
) -> None:
    token = creds.credentials if creds is not None else None
    if token is None and request.url.path in ("/docs", "/openapi.json"):
        token = request.query_params.get("token")  # browsers cannot send headers to the docs page
    if not token_ok(token, request.app.state.api_token):
        raise ApiError(401, "unauthorized", UNAUTHORIZED_DETAIL, headers={"WWW-Authenticate": "Bearer"})


def _store(request: Request) -> Store:
    return request.app.state.store


def _manager(request: Request) -> StreamManager:
    return request.app.state.manager


ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "missing or wrong bearer token"},
}

public = APIRouter()
protected = APIRouter(dependencies=[Depends(require_token)], responses=ERRORS)


# ------------------------------------------------------------------------------------------------
# health and metrics


@public.get(
    "/healthz", response_model=HealthOut, tags=["ops"], summary="Liveness and database check (no auth)"
)
async def healthz(request: Request) -> HealthOut:
    from edge_server import __version__

    db_ok = await asyncio.to_thread(_store(request).ping)
    return HealthOut(
        status="ok" if db_ok else "degraded",
        database=db_ok,
        active_streams=_manager(request).active_count,
        version=__version__,
        rtmp=rtmp_status(request.app),
        mqtt=mqtt_status(request.app),
        server_id=getattr(request.app.state, "server_id", None),
    )


def rtmp_status(app: Any) -> str:
    """RTMP ingest as it is now: nginx may have died since it started."""
    manager = getattr(app.state, "manager", None)
    rtmp = manager.rtmp.server if manager is not None else None
    if rtmp is not None and not rtmp.running:
        return f"unavailable: nginx exited ({rtmp.workdir / 'error.log'}: {rtmp.error_tail() or 'no log'})"
    return getattr(app.state, "rtmp_status", "off")


def mqtt_status(app: Any) -> str:
    subscriber = getattr(app.state, "mqtt", None)
    if subscriber is None:
        return getattr(app.state, "mqtt_status", "off")
    where = f"{subscriber.target.host}:{subscriber.target.port}"
    if subscriber.connected:
        return f"connected to {where}"
    return f"unavailable: not connected to {where} ({subscriber.last_error or 'connecting'})"


@protected.get("/metrics", tags=["ops"], summary="Prometheus metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)


# ------------------------------------------------------------------------------------------------
# ingest


def _remote(request: Request) -> str | None:
    host = request.client.host if request.client else None
    agent = request.headers.get("user-agent")
    text = " ".join(x for x in (host, agent and f"({agent[:120]})") if x)
    return text or None


@contextlib.contextmanager
def start_errors() -> Iterator[None]:
    """A stream that cannot start: the API's answer (400 bad offer, 503 full or no pipeline)."""
    try:
        yield
    except OfferError as exc:
        raise ApiError(400, "invalid_sdp", str(exc)) from exc
    except CapacityError as exc:
        raise ApiError(503, "at_capacity", str(exc), headers={"Retry-After": "10"}) from exc
    except PipelineUnavailable as exc:
        raise ApiError(503, "pipeline_unavailable", str(exc)) from exc


async def _start_stream(request: Request, sdp: str, kind: str) -> Any:
    with start_errors():
        return await _manager(request).webrtc.create(sdp, kind, _remote(request))


# what ending a stream answers (every DELETE of a live stream)
STOP_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "stopped, flushed and stored"},
    202: {"model": StopOut, "description": "stopped; still being stored (session.ended follows)"},
    404: {"model": ErrorOut},
}


@protected.post(
    f"{API_PREFIX}/webrtc/offer",
    response_model=SdpOut,
    tags=["ingest"],
    summary="Start a stream from the phone app: SDP offer in, SDP answer out",
    responses={400: {"model": ErrorOut}, 503: {"model": ErrorOut}},
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
)
async def webrtc_stop(request: Request, session_id: str) -> JSONResponse:
    return await _stop(request, session_id, "ended by client", "stream")


async def _stop(
    request: Request, session_id: str, reason: str, what: str, kind: str | None = None
) -> JSONResponse:
    """200 once the stream is flushed and stored; 202 while it is still flushing (its
    ``session.ended`` event and the session row follow when it is done); 404 when unknown (or,
    with ``kind``, a live stream of another kind)."""
    live = _manager(request).get(session_id)
    if kind is not None and (live is None or live.kind != kind):
        raise ApiError(404, "not_found", f"no active {what} {session_id}")
    outcome = await _manager(request).close(session_id, reason)
    if outcome is None:
        raise ApiError(404, "not_found", f"no active {what} {session_id}")
    if outcome == "ended":
        return JSONResponse(StopOut(session_id=session_id, status="ended").model_dump(exclude_none=True))
    detail = "the stream is stopped and still being stored; session.ended follows when it is done"
    body = StopOut(session_id=session_id, status="closing", detail=detail)
    return JSONResponse(body.model_dump(), status_code=202)


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
)
async def whip_delete(request: Request, session_id: str) -> JSONResponse:
    return await _stop(request, session_id, "ended by client (WHIP DELETE)", "WHIP session")


@protected.patch(
    "/whip/{session_id}",
    tags=["ingest"],
    summary="Trickle ICE / ICE restart: not supported (405)",
    status_code=405,  # its only answer: the document lists no 200 it never sends
    response_class=Response,
    responses={405: {"model": ErrorOut, "description": "not supported; Allow names DELETE"}},
)
async def whip_patch(session_id: str) -> Response:
    raise ApiError(
        405,
        "method_not_allowed",
        "trickle ICE and ICE restarts are not supported: send a complete offer (all candidates) in the POST",
        headers={"Allow": "DELETE"},
    )


# ------------------------------------------------------------------------------------------------
# sessions


@protected.get(
    f"{API_PREFIX}/sessions",
    response_model=SessionPage,
    tags=["sessions"],
    summary="Sessions, newest first",
    responses={400: {"model": ErrorOut, "description": "invalid cursor"}},
)
async def list_sessions(request: Request, query: Annotated[SessionQuery, Query()]) -> SessionPage:
    try:
        page = await asyncio.to_thread(
            _store(request).list_sessions,
            status=query.status,
            limit=query.limit,
            cursor=query.cursor,
            server_id=query.server_id,
        )
    except CursorError as exc:
        raise ApiError(400, "invalid_cursor", str(exc)) from exc
    manager = _manager(request)
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
)
async def get_session(request: Request, session_id: SessionId) -> SessionDetail:
    store = _store(request)
    row = await asyncio.to_thread(store.get_session, session_id)
    if row is None:
        raise ApiError(404, "not_found", f"no session {session_id}")
    tracks = await asyncio.to_thread(store.session_tracks, session_id)
    live = _manager(request).get(session_id)
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
)
async def add_viewer(request: Request, session_id: SessionId, body: SdpIn) -> ViewerOut:
    try:
        with start_errors():
            viewer_id, answer = await _manager(request).viewers.add(session_id, body.sdp)
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
)
async def remove_viewer(request: Request, session_id: SessionId, viewer_id: SessionId) -> Response:
    if not await _manager(request).viewers.remove(session_id, viewer_id):
        raise ApiError(404, "not_found", f"no viewer {viewer_id} of an active stream {session_id}")
    return Response(status_code=204)


def _live_worker(request: Request, session_id: str) -> Any:
    live = _manager(request).get(session_id)
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
        min_duration_s=rules.min_duration_s,
        use_lower_bound=rules.use_lower_bound,
    )


RULES_RESPONSES: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut}, 409: {"model": ErrorOut}}


@protected.get(
    f"{API_PREFIX}/sessions/{{session_id}}/rules",
    response_model=RulesOut,
    tags=["sessions"],
    summary="A live stream's speed limits and zones",
    responses=RULES_RESPONSES,
)
async def get_rules(request: Request, session_id: SessionId) -> RulesOut:
    return _rules_out(_live_worker(request, session_id).rules)


@protected.put(
    f"{API_PREFIX}/sessions/{{session_id}}/rules",
    response_model=RulesOut,
    tags=["sessions"],
    summary="Set a live stream's speed limit, zones, tolerance and minimum duration (from its next frame)",
    responses=RULES_RESPONSES,
)
async def set_rules(request: Request, session_id: SessionId, body: RulesIn) -> RulesOut:
    worker = _live_worker(request, session_id)
    current = worker.rules.model_dump()
    update = body.model_dump(exclude_none=True)
    update["speed_limit_kmh"] = body.speed_limit_kmh  # null is a value here: zones only
    if body.speed_limit_kmh is None and not (body.zones if body.zones is not None else current["zones"]):
        raise ApiError(422, "invalid_request", "no limit at all: give speed_limit_kmh or at least one zone")
    rules = RulesConfig(**{**current, **update})
    worker.set_rules(rules)
    out = _rules_out(rules)
    log.info("session %s: rules set by the operator: %s", session_id, out.model_dump_json())
    request.app.state.bus.publish(
        {"type": "session.rules", "session_id": session_id, "rules": out.model_dump()}
    )
    return out


# ------------------------------------------------------------------------------------------------
# violations


@protected.get(
    f"{API_PREFIX}/violations",
    response_model=ViolationPage,
    tags=["violations"],
    summary="Violations with filters, sorting and cursor pagination",
    responses={400: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)
async def list_violations(request: Request, query: Annotated[ViolationQuery, Query()]) -> ViolationPage:
    flt = _violation_filter(query)
    try:
        page = await asyncio.to_thread(
            _store(request).list_violations, flt, sort=query.sort, limit=query.limit, cursor=query.cursor
        )
    except CursorError as exc:
        raise ApiError(400, "invalid_cursor", str(exc)) from exc
    return ViolationPage(items=[ViolationOut.from_row(r) for r in page.items], next_cursor=page.next_cursor)


def _violation_filter(q: ViolationFilterQuery) -> ViolationFilter:
    since, until = _utc(q.since, "since"), _utc(q.until, "until")
    if since and until and since >= until:
        raise ApiError(422, "invalid_request", "'since' must be before 'until'")
    if q.min_speed_kmh is not None and q.max_speed_kmh is not None and q.min_speed_kmh > q.max_speed_kmh:
        raise ApiError(422, "invalid_request", "'min_speed_kmh' must not be above 'max_speed_kmh'")
    return ViolationFilter(
        q.session_id,
        since,
        until,
        q.min_speed_kmh,
        q.zone,
        q.false_positive,
        max_speed_kmh=q.max_speed_kmh,
        class_name=q.class_name,
        server_id=q.server_id,
    )


CSV_PAGE = 500  # rows read from the store at a time while the export streams


@protected.get(
    f"{API_PREFIX}/violations.csv",
    tags=["violations"],
    summary="The violations of the list's filters as CSV (all of them, streamed)",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/csv": {}}, "description": f"header row, then {', '.join(CSV_COLUMNS)}"},
        422: {"model": ErrorOut},
    },
)
async def export_violations(
    request: Request, query: Annotated[ViolationFilterQuery, Query()]
) -> StreamingResponse:
    flt = _violation_filter(query)
    store = _store(request)

    async def rows() -> AsyncIterator[str]:
        yield csv_line(CSV_COLUMNS)
        cursor = None
        while True:  # keyset pages: memory stays flat whatever the count; rows added meanwhile are safe
            page = await asyncio.to_thread(
                store.list_violations, flt, sort=query.sort, limit=CSV_PAGE, cursor=cursor
            )
            yield "".join(csv_line(csv_values(ViolationOut.from_row(r))) for r in page.items)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    headers = {
        "Content-Disposition": f'attachment; filename="violations-{stamp}.csv"',
        "Cache-Control": "no-store",
    }
    return StreamingResponse(rows(), media_type="text/csv; charset=utf-8", headers=headers)


def _utc(value: dt.datetime | None, name: str) -> dt.datetime | None:
    """``value`` in UTC (naive times are UTC); 422 when it has no UTC equivalent (e.g. 9999-12-31T23:59-12:00)."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    try:
        return value.astimezone(dt.timezone.utc)
    except OverflowError as exc:
        raise ApiError(
            422, "invalid_request", f"{name}: {value.isoformat()} is outside the representable UTC range"
        ) from exc


async def _violation_or_404(request: Request, violation_id: int) -> Any:
    row = await asyncio.to_thread(_store(request).get_violation, violation_id)
    if row is None:
        raise ApiError(404, "not_found", f"no violation {violation_id}")
    return row


@protected.get(
    f"{API_PREFIX}/violations/{{violation_id}}",
    response_model=ViolationOut,
    tags=["violations"],
    responses={404: {"model": ErrorOut}},
)
async def get_violation(request: Request, violation_id: ViolationId) -> ViolationOut:
    return ViolationOut.from_row(await _violation_or_404(request, violation_id))


class MediaFileResponse(FileResponse):
    """A snapshot or clip file; a ``Range`` it cannot serve gets a JSON error like every other
    error of the API (Starlette answers those in plain text)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        http_range = Headers(scope=scope).get("range")
        if http_range is not None and scope.get("method", "GET").upper() in ("GET", "HEAD"):
            size = Path(self.path).stat().st_size
            try:
                self._parse_range_header(http_range, size)
            except MalformedRangeHeader as exc:
                await json_error(400, "invalid_range", exc.content or "malformed Range header")(
                    scope, receive, send
                )
                return
            except RangeNotSatisfiable:
                detail = f"the range starts beyond the file's {size} bytes"
                headers = {"Content-Range": f"bytes */{size}"}
                await json_error(416, "range_not_satisfiable", detail, headers)(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


def _media_file(request: Request, row: Any, what: str) -> Path:
    """A violation's snapshot or clip in this server's media folder. In a fleet each server keeps
    the media it recorded: one recorded elsewhere is found here only on shared storage (media_dir
    mounted by every server), else the 404 names the server that has it."""
    rel = row.snapshot_path if what == "snapshot" else row.clip_path
    if not rel:
        raise ApiError(404, "not_found", f"violation {row.id} has no {what} (yet)")
    media_dir: Path = request.app.state.settings.resolved_media_dir
    path = (media_dir / rel).resolve()
    if not path.is_relative_to(media_dir) or not path.is_file():
        here = request.app.state.server_id
        if row.server_id and row.server_id != here:
            raise ApiError(
                404,
                "not_found",
                f"the {what} of violation {row.id} is kept by server {row.server_id}, not this one "
                f"({here}): ask it, or give the fleet one shared media_dir",
            )
        raise ApiError(404, "not_found", f"the {what} file of violation {row.id} is missing")
    return path


@protected.get(
    f"{API_PREFIX}/violations/{{violation_id}}/snapshot.jpg",
    tags=["violations"],
    response_class=FileResponse,
    responses={200: {"content": {"image/jpeg": {}}}, 404: {"model": ErrorOut}},
)
async def violation_snapshot(request: Request, violation_id: ViolationId) -> FileResponse:
    row = await _violation_or_404(request, violation_id)
    path = _media_file(request, row, "snapshot")
    return MediaFileResponse(path, media_type="image/jpeg", filename=f"violation-{violation_id}.jpg")


@protected.get(
    f"{API_PREFIX}/violations/{{violation_id}}/clip.mp4",
    tags=["violations"],
    response_class=FileResponse,
    responses={200: {"content": {"video/mp4": {}}}, 404: {"model": ErrorOut}},
)
async def violation_clip(request: Request, violation_id: ViolationId) -> FileResponse:
    row = await _violation_or_404(request, violation_id)
    path = _media_file(request, row, "clip")
    return MediaFileResponse(path, media_type="video/mp4", filename=f"violation-{violation_id}.mp4")


@protected.put(
    f"{API_PREFIX}/violations/{{violation_id}}/false_positive",
    response_model=ViolationOut,
    tags=["violations"],
    summary="Mark (or unmark) a violation as a false positive",
    responses={404: {"model": ErrorOut}},
)
async def set_false_positive(
    request: Request, violation_id: ViolationId, body: FalsePositiveIn
) -> ViolationOut:
    row = await asyncio.to_thread(
        _store(request).update_violation, violation_id, false_positive=body.false_positive
    )
    if row is None:
        raise ApiError(404, "not_found", f"no violation {violation_id}")
    out = ViolationOut.from_row(row)
    request.app.state.bus.publish(
        {"type": "violation.updated", "session_id": row.session_id, "violation": out.model_dump(mode="json")}
    )
    return out


# ------------------------------------------------------------------------------------------------
# live events


@public.websocket(f"{API_PREFIX}/events")
async def events_ws(websocket: WebSocket, session_id: str | None = None, token: str | None = None) -> None:
    """Live events as JSON text messages. Auth: ``?token=`` or ``Authorization: Bearer``."""
    header = websocket.headers.get("authorization", "")
    given = token or (header[7:].strip() if header.lower().startswith("bearer ") else None)
    if not token_ok(given, websocket.app.state.api_token):
        await websocket.close(code=1008, reason="missing or wrong token")
        return
    await websocket.accept()
    bus = websocket.app.state.bus
    metrics = websocket.app.state.metrics
    sub = bus.subscribe(session_id)
    metrics.event_subscribers.set(bus.subscriber_count)
    receiver = asyncio.create_task(_until_disconnect(websocket))
    try:
        manager = websocket.app.state.manager
        await websocket.send_text(dumps({"type": "hello", "active_sessions": sorted(manager.sessions)}))
        while True:
            getter = asyncio.create_task(sub.get())
            done, _ = await asyncio.wait({getter, receiver}, return_when=asyncio.FIRST_COMPLETED)
            if receiver in done:
                getter.cancel()
                break
            await websocket.send_text(dumps(getter.result()))
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        receiver.cancel()
        sub.close()
        metrics.event_subscribers.set(bus.subscriber_count)
        with contextlib.suppress(Exception):
            await websocket.close()


async def _until_disconnect(websocket: WebSocket) -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        while True:
            msg = await websocket.receive()
            if msg.get("type") == "websocket.disconnect":
                return


def json_error(status: int, code: str, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": code, "detail": detail}, status_code=status, headers=headers)
