"""Violations on a map (edge_server.geo, routes/geo): the GeoJSON export (RFC 7946) of violations
where the engine placed them and their tracks from their records, filtered like the list, officers
only; the site's map tiles from a real MBTiles file (the XYZ rows flipped from TMS), and clear
answers without tiles or with a broken file."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sqlite3
from pathlib import Path

import cv2
import numpy as np
import pytest
from edge_helpers import violation_recorder
from test_edge_alerts import LAT, LON, speeding

from edge_server.evidence.contents import track_point_dict
from edge_server.geo import track_coordinates

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)


def _placed(server, gps: bool = True, track_id: int = 1) -> int:
    """A violation the engine placed (GPS and yaw known), with its record on disk."""
    v = speeding(gps=gps, track_id=track_id)
    if gps:
        v = dataclasses.replace(v, latitude=LAT + 0.0002, longitude=LON)
    row = violation_recorder(server.app, server.settings, "geo").record(
        v, None, None, dt.datetime(2026, 11, 28, 9, tzinfo=dt.timezone.utc)
    )
    rel = f"geo/record-{row.id}.json"
    path = server.settings.resolved_media_dir / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"trace": [track_point_dict(p) for p in v.trace]}))
    server.store.update_violation(row.id, record_path=rel)
    return row.id


def test_track_coordinates_need_gps_and_yaw() -> None:
    trace = [track_point_dict(p) for p in speeding().trace]
    coords = track_coordinates({"trace": trace})
    assert len(coords) == 61 and coords[0][1] < coords[-1][1]  # northbound: latitude grows
    assert coords[0][0] == pytest.approx(LON, abs=1e-7)
    assert track_coordinates({"trace": [track_point_dict(p) for p in speeding(gps=False).trace]}) == []


def test_the_geojson_export(server_factory) -> None:
    srv = server_factory()
    placed = _placed(srv)
    unplaced = _placed(srv, gps=False, track_id=2)
    viewer = srv.app.state.accounts.add_machine_token("v", "viewer", "test").token
    with srv.client() as c:
        answer = c.get("/api/v1/violations.geojson", params={"tracks": "true"})
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/geo+json"
        doc = answer.json()
        assert doc["type"] == "FeatureCollection"
        assert doc["airpatrol"] == {"violations": 1, "without_position": 1, "limit": 10000}
        point, track = doc["features"]
        assert point["id"] == placed and point["geometry"] == {
            "type": "Point", "coordinates": [round(LON, 7), round(LAT + 0.0002, 7)]
        }  # fmt: skip
        props = point["properties"]
        assert (
            props["ticket_speed_kmh"] == 72.0
            and props["status"] == "enforceable"
            and props["kind"] == "violation"
        )
        assert track["geometry"]["type"] == "LineString" and len(track["geometry"]["coordinates"]) == 61
        assert track["properties"] == {"kind": "track", "violation_id": placed, "points": 61}
        assert unplaced not in [f["id"] for f in doc["features"]]
        only_points = c.get("/api/v1/violations.geojson").json()["features"]
        assert [f["geometry"]["type"] for f in only_points] == ["Point"]
        none = c.get("/api/v1/violations.geojson", params={"zone": "nowhere"}).json()
        assert none["features"] == [] and none["airpatrol"]["violations"] == 0
        assert c.get("/api/v1/violations.geojson", params={"trax": "1"}).status_code == 422
        refused = c.get("/api/v1/violations.geojson", headers={"Authorization": f"Bearer {viewer}"})
        assert refused.status_code == 403


def test_gdal_reads_the_export(server_factory, tmp_path: Path) -> None:
    """GIS tools read it: GDAL's GeoJSON driver (pyogrio) finds both features, WGS 84, the fields."""
    from pyogrio import raw, read_info

    srv = server_factory()
    placed = _placed(srv)
    path = tmp_path / "violations.geojson"
    with srv.client() as c:
        path.write_bytes(c.get("/api/v1/violations.geojson", params={"tracks": "true"}).content)
    info = read_info(path)
    assert info["driver"] == "GeoJSON" and info["crs"] == "EPSG:4326" and info["features"] == 2
    assert {"kind", "ticket_speed_kmh", "status", "violation_id"} <= set(info["fields"])
    west, south, east, north = info["total_bounds"]
    assert west == pytest.approx(LON, abs=1e-4) and south < LAT < LAT + 0.0002 <= north
    meta, _, geometries, fields = raw.read(path)
    kinds = list(fields[list(meta["fields"]).index("kind")])
    assert kinds == ["violation", "track"] and len(geometries) == 2
    assert placed in list(fields[list(meta["fields"]).index("id")])


def _mbtiles(path: Path, fmt: str = "png", x: int = 1, zooms: tuple[int, int] = (2, 16)) -> bytes:
    """A one-tile MBTiles file: zoom 2, column ``x``, XYZ row 1 (TMS row 2)."""
    image = np.zeros((256, 256, 3), np.uint8)
    image[:, :, 1] = 200
    ok, png = cv2.imencode(".png", image)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE metadata (name TEXT, value TEXT)")
    db.execute(
        "CREATE TABLE tiles (zoom_level INTEGER, tile_column INTEGER, tile_row INTEGER, tile_data BLOB)"
    )
    meta = {"name": "site", "format": fmt, "bounds": "13.3,52.4,13.5,52.6", "center": "13.405,52.52,14",
            "minzoom": str(zooms[0]), "maxzoom": str(zooms[1]), "attribution": "(c) OpenStreetMap contributors"}  # fmt: skip
    db.executemany("INSERT INTO metadata VALUES (?, ?)", meta.items())
    db.execute("INSERT INTO tiles VALUES (2, ?, 2, ?)", (x, png.tobytes()))
    db.commit()
    db.close()
    return png.tobytes()


def test_map_tiles_from_an_mbtiles_file(server_factory, tmp_path: Path) -> None:
    png = _mbtiles(tmp_path / "site.mbtiles")
    srv = server_factory(map_tiles=tmp_path / "site.mbtiles")
    with srv.client() as c:
        info = c.get("/api/v1/map").json()
        assert info["tiles"] is True and info["center"] == [13.405, 52.52, 14.0] and info["maxzoom"] == 16
        assert info["attribution"] == "(c) OpenStreetMap contributors"
        tile = c.get("/api/v1/map/tiles/2/1/1")
        assert tile.status_code == 200 and tile.headers["content-type"] == "image/png" and tile.content == png
        assert c.get("/api/v1/map/tiles/2/1/2").status_code == 404  # the TMS row is not the XYZ one
        assert c.get("/api/v1/map/tiles/25/0/0").status_code == 422


@pytest.mark.parametrize("what", ["none", "vector", "broken"])
def test_map_without_usable_tiles(server_factory, tmp_path: Path, what: str) -> None:
    path = tmp_path / "site.mbtiles"
    if what == "vector":
        _mbtiles(path, fmt="pbf")
    elif what == "broken":
        path.write_bytes(b"not a database")
    srv = server_factory(map_tiles=None if what == "none" else path)
    with srv.client() as c:
        info = c.get("/api/v1/map")
        tile = c.get("/api/v1/map/tiles/2/1/1")
    if what == "none":
        assert info.json() == {"tiles": False} and tile.status_code == 404
    else:
        assert info.status_code == tile.status_code == 503
        assert info.json()["error"] == "map_tiles_unavailable" and "cannot be read" in info.json()["detail"]


def test_the_vendored_leaflet_is_npms() -> None:
    """The files under console_assets/vendor/leaflet are the npm package's, as SOURCE.md lists them."""
    import hashlib
    import re

    folder = Path(__file__).resolve().parents[2] / "edge_server" / "console_assets" / "vendor" / "leaflet"
    listed = re.findall(r"^([0-9a-f]{64})  (\S+)$", (folder / "SOURCE.md").read_text(), re.M)
    assert len(listed) == 7
    for digest, name in listed:
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
    assert "BSD 2-Clause" in (folder / "LICENSE").read_text()
