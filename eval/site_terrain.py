"""A terrain model of a simulated flight's site, written as a GeoTIFF the engine reads
(:mod:`pipelines.terrain_io`), for issue 39's ``terrain`` correction arms.

The simulator's world is a road at ``FlightSpec.ground_elevation_m`` above mean sea level, flat or
graded (``road_grade_pct``: a plane through the road's centre point at that level); a flight derived
with ``road_level_m`` (:mod:`eval.simulate.telemetry_errors`) took off that far below the road. The
model: the road's ground within :data:`FLAT_M` of the flight's origin, a slope down (or up) to the
take-off level from there to :data:`RAMP_M`, and the take-off point :data:`TAKEOFF_M`
south of the origin, in the UTM zone of the site (the model's CRS), with the vertical datum stated
in its CRS (EGM96 height, or ellipsoidal heights: EPSG:4979). Its error, as a real model's: a bias
shared by the whole site and a per-cell error, each ``sigma / sqrt(2)``, so one point is off by
``sigma`` and two points by less (the bias cancels between them).

:data:`MODELS`: ``lidar`` (an airborne lidar DTM, here at 5 m cells: 0.15 m) and ``glo30`` (a 30 m global
model such as Copernicus GLO-30: 2 m).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eval.simulate import FlightSpec, scene_roads
from pipelines.geometry import EARTH_RADIUS_M

FLAT_M = 900.0  # the road's level around the flight (every view of the grid's flights lies within)
RAMP_M = 1100.0
TAKEOFF_M = 1300.0  # the take-off point, south of the origin
HALF_M = 1500.0  # the model covers a square of twice this


@dataclass(frozen=True, slots=True)
class ModelKind:
    cell_m: float
    sigma_m: float
    vertical: str  # egm96 | ellipsoid: the heights' datum, written in the CRS


MODELS = {"lidar": ModelKind(5.0, 0.15, "egm96"), "glo30": ModelKind(30.0, 2.0, "ellipsoid")}


def utm_epsg(lat: float, lon: float) -> int:
    zone = int((lon + 180.0) // 6.0) + 1
    return (32600 if lat >= 0 else 32700) + zone


def takeoff_point(spec: FlightSpec) -> tuple[float, float]:
    """(lat, lon) of the take-off point: :data:`TAKEOFF_M` south of the flight's origin."""
    return spec.latitude - math.degrees(TAKEOFF_M / EARTH_RADIUS_M), spec.longitude


def write_site_terrain(
    path: Path, spec: FlightSpec, road_level_m: float, kind: str, rng: np.random.Generator
) -> dict:
    """Write the site's model to ``path``; returns what it holds (the arm's record)."""
    import rasterio
    from affine import Affine
    from pyproj import Transformer

    from pipelines.terrain_io import datum_shift

    model = MODELS[kind]
    epsg = utm_epsg(spec.latitude, spec.longitude)
    x0, y0 = Transformer.from_crs("EPSG:4326", f"EPSG:{epsg}", always_xy=True).transform(
        spec.longitude, spec.latitude
    )
    n = int(round(2 * HALF_M / model.cell_m))
    centres = -HALF_M + model.cell_m * (np.arange(n) + 0.5)
    dx, dy = np.meshgrid(centres, -centres)  # rows run north to south
    r = np.hypot(dx, dy)
    road = spec.ground_elevation_m
    takeoff = road - road_level_m
    ground = np.full_like(r, road)
    surface = scene_roads(spec)[0].surface if spec.road_grade_pct else None
    if surface is not None:  # world metres east, north of the origin: the model's offsets (UTM, to 0.1 %)
        ground += surface.height(np.column_stack([dx.ravel(), dy.ravel()])).reshape(r.shape)
    ramp = np.clip((r - FLAT_M) / (RAMP_M - FLAT_M), 0.0, 1.0)
    z = ground + (takeoff - ground) * ramp
    bias = float(rng.normal(0.0, model.sigma_m / math.sqrt(2.0)))
    z = z + bias + rng.normal(0.0, model.sigma_m / math.sqrt(2.0), z.shape)
    crs = f"EPSG:{epsg}+5773"
    if model.vertical == "ellipsoid":  # the geoid's height added at every cell (it varies slowly: one value)
        z = z + datum_shift("egm96", "ellipsoid")(0.0, spec.latitude, spec.longitude)
        crs = f"EPSG:{epsg}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with rasterio.open(
        path, "w", driver="GTiff", height=n, width=n, count=1, dtype="float32", crs=crs,
        transform=Affine(model.cell_m, 0.0, x0 - HALF_M, 0.0, -model.cell_m, y0 + HALF_M),
    ) as ds:  # fmt: skip
        ds.write(z.astype(np.float32)[None])
    return {
        "model": kind,
        "path": str(path),
        "cell_m": model.cell_m,
        "sigma_m": model.sigma_m,
        "datum": model.vertical,
        "bias_m": round(bias, 3),
        "road_m": road,
        "takeoff_m": takeoff,
        "grade_pct": spec.road_grade_pct,
    }


__all__ = ["MODELS", "takeoff_point", "utm_epsg", "write_site_terrain"]
