"""Violations: the list (filters, sorting, cursor pages), its CSV export, one violation, its
snapshot and clip files (:class:`MediaFileResponse`), and marking a false positive."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, StreamingResponse
from starlette.datastructures import Headers
from starlette.responses import MalformedRangeHeader, RangeNotSatisfiable
from starlette.types import Receive, Scope, Send

from edge_server.events import violation_event
from edge_server.routes.common import ERRORS, OPERATE, READ, ApiError, audit, json_error, store_of
from edge_server.schemas import (
    API_PREFIX,
    ErrorOut,
    FalsePositiveIn,
    ViolationFilterQuery,
    ViolationOut,
    ViolationPage,
    ViolationQuery,
)
from edge_server.store import MAX_ROW_ID, CursorError, ViolationFilter
from edge_server.violation_csv import CSV_COLUMNS, csv_line, csv_values

# An id beyond 64 bits is no row of any table (SQLite would raise OverflowError binding it): it is
# refused before it reaches the database.
ViolationId = Annotated[int, PathParam(ge=1, le=MAX_ROW_ID, description="violation id")]

protected = APIRouter(responses=ERRORS)


@protected.get(
    f"{API_PREFIX}/violations",
    response_model=ViolationPage,
    tags=["violations"],
    summary="Violations with filters, sorting and cursor pagination",
    responses={400: {"model": ErrorOut}, 422: {"model": ErrorOut}},
    dependencies=READ,
)
async def list_violations(request: Request, query: Annotated[ViolationQuery, Query()]) -> ViolationPage:
    flt = violation_filter(query)
    try:
        page = await asyncio.to_thread(
            store_of(request).list_violations, flt, sort=query.sort, limit=query.limit, cursor=query.cursor
        )
    except CursorError as exc:
        raise ApiError(400, "invalid_cursor", str(exc)) from exc
    return ViolationPage(items=[ViolationOut.from_row(r) for r in page.items], next_cursor=page.next_cursor)


def violation_filter(q: ViolationFilterQuery) -> ViolationFilter:
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
        statuses=q.statuses,
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
    dependencies=OPERATE,
)
async def export_violations(
    request: Request, query: Annotated[ViolationFilterQuery, Query()]
) -> StreamingResponse:
    flt = violation_filter(query)
    store = store_of(request)

    async def rows() -> AsyncIterator[str]:
        yield csv_line(CSV_COLUMNS)
        pages = store.violation_pages(flt, sort=query.sort, limit=CSV_PAGE)  # read in a thread, a page each
        while (page := await asyncio.to_thread(next, pages, None)) is not None:
            yield "".join(csv_line(csv_values(ViolationOut.from_row(r))) for r in page)

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
    row = await asyncio.to_thread(store_of(request).get_violation, violation_id)
    if row is None:
        raise ApiError(404, "not_found", f"no violation {violation_id}")
    return row


@protected.get(
    f"{API_PREFIX}/violations/{{violation_id}}",
    response_model=ViolationOut,
    tags=["violations"],
    responses={404: {"model": ErrorOut}},
    dependencies=READ,
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
    rel = {"snapshot": row.snapshot_path, "clip": row.clip_path, "evidence pack": row.evidence_path}[what]
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
    dependencies=READ,
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
    dependencies=READ,
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
    dependencies=OPERATE,
)
async def set_false_positive(
    request: Request, violation_id: ViolationId, body: FalsePositiveIn
) -> ViolationOut:
    before = await _violation_or_404(request, violation_id)
    was = {"false_positive": bool(before.false_positive), "status": before.status}
    row = await asyncio.to_thread(
        store_of(request).update_violation, violation_id, false_positive=body.false_positive
    )
    if row is None:
        raise ApiError(404, "not_found", f"no violation {violation_id}")
    out = ViolationOut.from_row(row)
    await audit(
        request, "violation.false_positive", "violation", violation_id, was,
        {"false_positive": out.false_positive, "status": out.status},
    )  # fmt: skip
    request.app.state.bus.publish(violation_event("violation.updated", out))
    return out
