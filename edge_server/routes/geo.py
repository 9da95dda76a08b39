"""Violations on a map (issue 41): the GeoJSON export (officers and admins: an export, like the CSV)
and the site's map tiles from its MBTiles file (any role that may read)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator
from functools import cache
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import StreamingResponse
from pydantic import Field

from edge_server.geo import MbTiles, track_feature, violation_feature
from edge_server.routes.common import ERRORS, OPERATE, READ, ApiError, store_of
from edge_server.routes.violations import CSV_PAGE, violation_filter
from edge_server.schemas import API_PREFIX, ErrorOut, ViolationFilterQuery, ViolationOut

protected = APIRouter(responses=ERRORS)
GEOJSON_MAX = 10_000  # features of one export (violations; their tracks come with them)


class GeoJsonQuery(ViolationFilterQuery):
    tracks: bool = Field(False, description="also each violation's track (a LineString) from its record")


@protected.get(
    f"{API_PREFIX}/violations.geojson",
    tags=["violations"],
    summary="The violations of the list's filters as GeoJSON (RFC 7946) for GIS tools: where each vehicle "
    "was, and its track with ?tracks=true",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/geo+json": {}}}, 422: {"model": ErrorOut}},
    dependencies=OPERATE,
)
async def export_geojson(request: Request, query: Annotated[GeoJsonQuery, Query()]) -> StreamingResponse:
    flt = violation_filter(query)
    store = store_of(request)
    media_dir: Path = request.app.state.settings.resolved_media_dir

    async def body() -> AsyncIterator[str]:
        yield '{"type":"FeatureCollection","features":['
        first, placed, unplaced = True, 0, 0
        pages = store.violation_pages(flt, sort=query.sort, limit=CSV_PAGE)
        while placed < GEOJSON_MAX and (page := await asyncio.to_thread(next, pages, None)) is not None:
            features = []
            for row in page:
                feature = violation_feature(ViolationOut.from_row(row))
                if feature is None:
                    unplaced += 1
                    continue
                placed += 1
                features.append(feature)
                if query.tracks and row.record_path:
                    track = await asyncio.to_thread(track_feature, row.id, media_dir / row.record_path)
                    if track is not None:
                        features.append(track)
            for feature in features:
                yield ("" if first else ",") + json.dumps(feature, separators=(",", ":"), default=str)
                first = False
        # a foreign member (RFC 7946 section 6.1): what the export could not place
        yield f'],"airpatrol":{{"violations":{placed},"without_position":{unplaced},"limit":{GEOJSON_MAX}}}}}'

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    headers = {
        "Content-Disposition": f'attachment; filename="violations-{stamp}.geojson"',
        "Cache-Control": "no-store",
    }
    return StreamingResponse(body(), media_type="application/geo+json", headers=headers)


@cache
def _tiles(path: Path) -> MbTiles:
    return MbTiles(path)


def tiles_of(request: Request) -> MbTiles | None:
    path = request.app.state.settings.map_tiles
    if path is None:
        return None
    try:
        return _tiles(Path(path).resolve())
    except Exception as exc:  # noqa: BLE001 - a broken file is a clear answer, not a 500
        raise ApiError(503, "map_tiles_unavailable", f"the map tiles {path} cannot be read: {exc}") from exc


@protected.get(
    f"{API_PREFIX}/map",
    tags=["map"],
    summary="The site's map: whether it has tiles (map_tiles), their bounds, centre, zooms and attribution",
    responses={503: {"model": ErrorOut}},
    dependencies=READ,
)
async def map_info(request: Request) -> dict:
    tiles = await asyncio.to_thread(tiles_of, request)
    return {"tiles": tiles is not None, **(tiles.info() if tiles else {})}


@protected.get(
    f"{API_PREFIX}/map/tiles/{{z}}/{{x}}/{{y}}",
    tags=["map"],
    summary="One map tile (XYZ scheme) from the site's MBTiles file",
    response_class=Response,
    responses={
        200: {"content": {"image/png": {}, "image/jpeg": {}, "image/webp": {}}},
        404: {"model": ErrorOut},
        503: {"model": ErrorOut},
    },
    dependencies=READ,
)
async def map_tile(
    request: Request,
    z: Annotated[int, PathParam(ge=0, le=24)],
    x: Annotated[int, PathParam(ge=0, le=2**24)],
    y: Annotated[int, PathParam(ge=0, le=2**24)],
) -> Response:
    tiles = await asyncio.to_thread(tiles_of, request)
    if tiles is None:
        raise ApiError(
            404, "not_found", "this server has no map tiles (settings: map_tiles, an MBTiles file)"
        )
    data = await asyncio.to_thread(tiles.tile, z, x, y)
    if data is None:
        raise ApiError(404, "not_found", f"no tile {z}/{x}/{y} in the site's map")
    return Response(data, media_type=tiles.media_type, headers={"Cache-Control": "private, max-age=86400"})
