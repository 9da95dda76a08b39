"""Violations on the map (issue 41): GeoJSON features (RFC 7946: lon/lat, WGS 84) of violations and
their tracks, for GIS tools (``GET /api/v1/violations.geojson``) and the console's map; and the
site's own map tiles from an MBTiles file (``map_tiles``), so the map works offline.

A violation is a Point where the engine placed the vehicle (the drone's GPS moved by the vehicle's
ground offset along the gimbal's heading); its track a LineString of the trusted positions in its
evidence record, each placed the same way with its own frame's telemetry. Without GPS or gimbal yaw
there is no position: such violations are counted, never placed at the drone.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from pathlib import Path
from typing import Any

from edge_server.schemas import ViolationOut
from pipelines.geometry import geolocate

log = logging.getLogger(__name__)

PROPERTIES = (
    "occurred_at", "session_id", "server_id", "status", "ticket_speed_kmh", "ticket_sigma_kmh", "tolerance_kmh",
    "speed_limit_kmh", "zone", "class_name", "heading_deg", "false_positive",
)  # fmt: skip


def violation_feature(v: ViolationOut) -> dict[str, Any] | None:
    if v.latitude is None or v.longitude is None:
        return None
    props = {"kind": "violation", "id": v.id, **{k: getattr(v, k) for k in PROPERTIES}}
    props["occurred_at"] = v.occurred_at.isoformat()
    props["next_checkpoint"] = v.next_checkpoint.name if v.next_checkpoint else None
    return {
        "type": "Feature",
        "id": v.id,
        "geometry": {"type": "Point", "coordinates": [round(v.longitude, 7), round(v.latitude, 7)]},
        "properties": props,
    }


def track_coordinates(record: dict[str, Any]) -> list[list[float]]:
    """The record's trusted positions on the earth, oldest first ([lon, lat])."""
    out = []
    for p in record.get("trace") or []:
        tel, ground = p.get("telemetry") or {}, p.get("ground_xy_m")
        if (
            not p.get("trusted")
            or not ground
            or None in (tel.get("latitude"), tel.get("longitude"), tel.get("gimbal_yaw_deg"))
        ):
            continue
        lat, lon = geolocate(tel["latitude"], tel["longitude"], tel["gimbal_yaw_deg"], (ground[0], ground[1]))
        out.append([round(lon, 7), round(lat, 7)])
    return out


def track_feature(violation_id: int, record_path: Path | None) -> dict[str, Any] | None:
    if record_path is None or not record_path.is_file():
        return None
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError):
        log.warning("violation %d: its record %s cannot be read", violation_id, record_path)
        return None
    coords = track_coordinates(record)
    if len(coords) < 2:
        return None
    return {
        "type": "Feature",
        "id": f"track-{violation_id}",
        "geometry": {"type": "LineString", "coordinates": coords},
        "properties": {"kind": "track", "violation_id": violation_id, "points": len(coords)},
    }


class MbTiles:
    """Tiles of one MBTiles file (SQLite; TMS rows, flipped here to the XYZ scheme Leaflet asks for)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self.metadata = dict(self._db().execute("SELECT name, value FROM metadata").fetchall())
        fmt = self.metadata.get("format", "png")
        self.media_type = {
            "png": "image/png",
            "jpg": "image/jpeg",
            "jpeg": "image/jpeg",
            "webp": "image/webp",
        }.get(fmt)
        if self.media_type is None:
            raise ValueError(
                f"{path}: tiles of format {fmt!r} (vector tiles?) cannot be shown; png, jpg or webp"
            )

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = sqlite3.connect(
                f"file:{self.path}?mode=ro", uri=True, check_same_thread=False
            )
        return db

    def tile(self, z: int, x: int, y: int) -> bytes | None:
        row = (
            self._db()
            .execute(
                "SELECT tile_data FROM tiles WHERE zoom_level = ? AND tile_column = ? AND tile_row = ?",
                (z, x, (1 << z) - 1 - y),
            )
            .fetchone()
        )
        return None if row is None else bytes(row[0])

    def info(self) -> dict[str, Any]:
        meta = self.metadata

        def numbers(key: str) -> list[float] | None:
            try:
                return [float(v) for v in meta[key].split(",")]
            except (KeyError, ValueError):
                return None

        def integer(key: str) -> int | None:
            try:
                return int(meta[key])
            except (KeyError, ValueError):
                return None

        return {
            "name": meta.get("name"),
            "attribution": meta.get("attribution"),
            "bounds": numbers("bounds"),  # west, south, east, north
            "center": numbers("center"),  # lon, lat, zoom
            "minzoom": integer("minzoom"),
            "maxzoom": integer("maxzoom"),
        }


__all__ = ["MbTiles", "track_coordinates", "track_feature", "violation_feature"]
