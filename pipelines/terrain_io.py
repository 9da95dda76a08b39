"""A terrain model of the site, read from a GeoTIFF (rasterio), and the vertical datums its heights and
the drone's absolute altitude are given in (pyproj, with PROJ's geoid grids).

Heights above sea level are above a geoid (EGM96, EGM2008: "orthometric"), GNSS heights above the
WGS 84 ellipsoid; the two differ by the geoid undulation N (-32 m in California, +48 m in central
Germany), so a model and an altitude in different datums are tens of metres apart. Each source's
datum is stated (``camera.terrain.dem_datum``: the file's vertical CRS where it has one, else
configured; ``altitude_datum``: the drone's), and the altitude is converted into the model's with
the geoid grid PROJ reads: EGM96's ``egm96_15.gtx`` ships in Debian's ``proj-data`` package
(``/usr/share/proj``, added to pyproj's search path when present), EGM2008's
``us_nga_egm08_25.tif`` is PROJ-data's (put it in ``PROJ_DATA``). A missing grid is an error, never
a silent zero (pyproj would otherwise skip the shift).

:func:`load_terrain` gives a :class:`~pipelines.terrain.TerrainHeights` for the engine; bad input
(no file, not a raster, no CRS, no vertical datum known, a take-off point off the model) is one line
of :class:`TerrainError`.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pipelines.errors import AirPatrolError
from pipelines.geometry import EARTH_RADIUS_M, offsets_to_latlon
from pipelines.terrain import TerrainHeights, TerrainSettings

if TYPE_CHECKING:
    from pipelines.config_camera import TerrainConfig

log = logging.getLogger(__name__)

DATUMS = ("egm96", "egm2008", "ellipsoid")
# the geographic 3D CRS whose heights are in each datum (EPSG: WGS 84 + EGM96 height, + EGM2008 height)
DATUM_CRS = {"egm96": "EPSG:4326+5773", "egm2008": "EPSG:4326+3855", "ellipsoid": "EPSG:4979"}
VERTICAL_EPSG = {5773: "egm96", 3855: "egm2008"}
DEBIAN_PROJ_DATA = "/usr/share/proj"
MAX_CELLS = 100_000_000  # a site's model, not a country's
LOCAL_STEP_M = 100.0


class TerrainError(AirPatrolError, ValueError):
    """A terrain model or datum that cannot be used (one line: what and why)."""


_grids_added: list[str] = []


def _pyproj():
    try:
        import pyproj
        import pyproj.datadir
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise TerrainError(f"a terrain model needs pyproj: {exc}") from None
    if not _grids_added and os.path.isdir(DEBIAN_PROJ_DATA):
        pyproj.datadir.append_data_dir(DEBIAN_PROJ_DATA)  # Debian's proj-data: the EGM96 grid
        _grids_added.append(DEBIAN_PROJ_DATA)
    return pyproj


def datum_shift(source: str, target: str):
    """``shift(height, lat, lon)``: a height in datum ``source`` expressed in ``target``. TerrainError
    when PROJ lacks the geoid grid the conversion needs."""
    for name in (source, target):
        if name not in DATUMS:
            raise TerrainError(f"vertical datum {name!r}: one of {', '.join(DATUMS)}")
    if source == target:
        return lambda h, lat, lon: float(h)
    pyproj = _pyproj()
    group = pyproj.transformer.TransformerGroup(DATUM_CRS[source], DATUM_CRS[target], always_xy=True)
    if not group.transformers or not group.best_available:
        grids = sorted(
            {g.short_name for op in group.unavailable_operations for g in op.grids if not g.available}
        )
        raise TerrainError(
            f"no geoid grid to convert heights from {source} to {target} ({', '.join(grids) or 'none found'}): "
            "install Debian's proj-data (EGM96) or put the grid in PROJ_DATA"
        )
    transformer = group.transformers[0]

    def shift(h: float, lat: float, lon: float) -> float:
        return float(transformer.transform(lon, lat, h)[2])

    return shift


def geoid_available(datum: str = "egm96") -> bool:
    """Whether PROJ has the geoid grid to convert ``datum`` heights to the ellipsoid."""
    try:
        datum_shift(datum, "ellipsoid")
        return True
    except TerrainError:
        return False


@dataclass(frozen=True, slots=True, eq=False)
class Dem:
    """A terrain model in memory: heights (m, NaN where the file has none) on its grid, the map from
    WGS 84 latitude/longitude into the grid's columns and rows, and the heights' vertical datum."""

    heights: np.ndarray
    to_grid: object  # callable(lat, lon) -> (col, row), fractional, pixel centres at integers
    datum: str
    name: str

    def elevation(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        """Heights at the points, bilinear between cell centres; NaN off the model or next to no data."""
        col, row = self.to_grid(np.asarray(lat, dtype=np.float64), np.asarray(lon, dtype=np.float64))
        return self.at_grid(col, row)

    def at_grid(self, col: np.ndarray, row: np.ndarray) -> np.ndarray:
        """Heights at fractional grid positions (cell centres at integers), bilinear."""
        col, row = np.asarray(col, dtype=np.float64), np.asarray(row, dtype=np.float64)
        rows, cols = self.heights.shape
        c0, r0 = np.floor(col), np.floor(row)
        fc, fr = col - c0, row - r0
        inside = (
            np.isfinite(col) & np.isfinite(row) & (c0 >= 0) & (r0 >= 0) & (c0 < cols - 1) & (r0 < rows - 1)
        )
        out = np.full(np.shape(col), np.nan)
        if inside.any():
            ci, ri = c0[inside].astype(np.intp), r0[inside].astype(np.intp)
            a, b = fc[inside], fr[inside]
            z = self.heights
            out[inside] = (
                z[ri, ci] * (1 - a) * (1 - b)
                + z[ri, ci + 1] * a * (1 - b)
                + z[ri + 1, ci] * (1 - a) * b
                + z[ri + 1, ci + 1] * a * b
            )
        return out

    def local(self, lat: float, lon: float, heading_deg: float):
        """(place, elevation) for a frame whose drone is at ``lat``, ``lon`` looking along
        ``heading_deg``: ground offsets go straight to grid positions through the affine map that three
        exact points (100 m apart) define, one projection a frame instead of one per ray step; over
        the 400 m around the drone a camera sees, grid positions within a few centimetres of the exact
        projection's (heights within 2 mm on a 4.5 % grade)."""
        probe = np.array([[0.0, 0.0], [LOCAL_STEP_M, 0.0], [0.0, LOCAL_STEP_M]])
        plat, plon = offsets_to_latlon(lat, lon, heading_deg, probe)
        col, row = self.to_grid(plat, plon)
        origin = np.array([col[0], row[0]])
        ex = (np.array([col[1], row[1]]) - origin) / LOCAL_STEP_M
        ey = (np.array([col[2], row[2]]) - origin) / LOCAL_STEP_M

        def place(xy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            g = origin + xy[:, :1] * ex + xy[:, 1:2] * ey
            return g[:, 0], g[:, 1]

        return place, self.at_grid


def _vertical_datum(crs, configured: str, path: Path) -> str:
    if configured != "crs":
        return configured
    if crs.is_compound:
        for sub in crs.sub_crs_list:
            if sub.is_vertical:
                name = VERTICAL_EPSG.get(sub.to_epsg() or 0)
                if name is None:
                    raise TerrainError(
                        f"{path.name}: vertical CRS {sub.name!r} is not one the engine converts "
                        f"({', '.join(DATUMS)}): set camera.terrain.dem_datum"
                    )
                return name
    if len(crs.axis_info) == 3 and crs.is_geographic:
        return "ellipsoid"
    raise TerrainError(
        f"{path.name}: its CRS ({crs.name}) names no vertical datum: set camera.terrain.dem_datum "
        f"({', '.join(DATUMS)})"
    )


def smooth(heights: np.ndarray, sigma_cells: float) -> np.ndarray:
    """``heights`` smoothed by a Gaussian of ``sigma_cells`` (normalised over the cells with data; no
    data stays no data)."""
    if sigma_cells <= 0:
        return heights
    from scipy.ndimage import gaussian_filter

    valid = np.isfinite(heights)
    num = gaussian_filter(np.where(valid, heights, 0.0), sigma_cells, mode="nearest")
    den = gaussian_filter(valid.astype(np.float64), sigma_cells, mode="nearest")
    with np.errstate(invalid="ignore", divide="ignore"):
        out = num / den
    out[~valid] = np.nan
    return out


def vertical_unit(crs) -> float:
    """Metres per unit of the heights: the vertical CRS's axis unit (a US model in feet), else 1."""
    for sub in crs.sub_crs_list if crs.is_compound else ():
        if sub.is_vertical and sub.axis_info:
            return float(sub.axis_info[0].unit_conversion_factor or 1.0)
    return 1.0


def read_dem(path: str | Path, dem_datum: str = "crs", smooth_m: float | None = None) -> Dem:
    """The terrain model in ``path`` (a single-band raster with a CRS: GeoTIFF), smoothed by a
    Gaussian of ``smooth_m`` metres (None: one cell; 0: not at all)."""
    path = Path(path)
    if not path.is_file():
        raise TerrainError(f"terrain model {path}: no such file")
    try:
        import rasterio
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise TerrainError(f"a terrain model needs rasterio: {exc}") from None
    pyproj = _pyproj()
    try:
        with rasterio.open(path) as ds:
            if ds.crs is None:
                raise TerrainError(f"{path.name}: the raster has no CRS (where it lies is unknown)")
            if ds.width * ds.height > MAX_CELLS:
                raise TerrainError(f"{path.name}: {ds.width} x {ds.height} cells is more than a site's model")
            if ds.width < 2 or ds.height < 2:
                raise TerrainError(f"{path.name}: {ds.width} x {ds.height} cells, too few to interpolate")
            band = ds.read(1, masked=True).astype(np.float64)
            transform, wkt = ds.transform, ds.crs.to_wkt()
    except TerrainError:
        raise
    except Exception as exc:  # rasterio's errors: not a raster, truncated, ...
        raise TerrainError(
            f"terrain model {path.name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    crs = pyproj.CRS.from_wkt(wkt)
    datum = _vertical_datum(crs, dem_datum, path)
    heights = np.ma.filled(band, np.nan) * vertical_unit(crs)
    heights[~np.isfinite(heights) | (np.abs(heights) > 12_000)] = np.nan
    if not np.isfinite(heights).any():
        raise TerrainError(f"{path.name}: no heights in the raster (all no data)")
    cell = cell_size_m(crs, transform, heights.shape)
    heights = smooth(heights, 1.0 if smooth_m is None else smooth_m / cell)
    to_crs = pyproj.Transformer.from_crs(
        "EPSG:4326", crs.to_2d() if hasattr(crs, "to_2d") else crs, always_xy=True
    )
    inv = ~transform  # map coordinates -> (column, row) of the cells' corners

    def to_grid(lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x, y = (np.asarray(v, dtype=np.float64) for v in to_crs.transform(lon, lat))
        return inv.a * x + inv.b * y + inv.c - 0.5, inv.d * x + inv.e * y + inv.f - 0.5

    return Dem(heights, to_grid, datum, path.name)


def cell_size_m(crs, transform, shape: tuple[int, int]) -> float:
    """A cell's size in metres (the geometric mean of its two sides; degrees at the model's centre)."""
    w, h = abs(transform.a), abs(transform.e)
    if crs.is_projected:  # metres, or the CRS's unit (US survey feet) in metres
        factor = crs.axis_info[0].unit_conversion_factor or 1.0
        w, h = w * factor, h * factor
    elif crs.is_geographic:
        lat = math.radians(transform.f + transform.e * shape[0] / 2.0)
        w, h = math.radians(w) * EARTH_RADIUS_M * math.cos(lat), math.radians(h) * EARTH_RADIUS_M
    return math.sqrt(w * h)


def load_terrain(cfg: TerrainConfig) -> TerrainHeights:
    """The engine's terrain heights from the configuration: the model read, the drone's altitude
    converted into its datum (not needed when the take-off point is given)."""
    dem = read_dem(cfg.dem, cfg.dem_datum, cfg.smooth_m)
    takeoff = None if cfg.takeoff is None else (float(cfg.takeoff[0]), float(cfg.takeoff[1]))
    to_model = None if takeoff is not None else datum_shift(cfg.altitude_datum, dem.datum)
    how = (
        f"take-off point {takeoff[0]:.6f}, {takeoff[1]:.6f} on the model + the altitude reading"
        if takeoff is not None
        else f"absolute altitude ({cfg.altitude_datum}) into the model's datum"
    )
    settings = TerrainSettings(
        name=dem.name,
        sigma_m=cfg.sigma_m,
        altitude_sigma_m=cfg.altitude_sigma_m,
        takeoff=takeoff,
        detail=f"terrain model {dem.name} ({dem.datum}, +- {cfg.sigma_m:g} m), {how}",
    )
    try:
        heights = TerrainHeights(settings, dem.elevation, to_model, dem.local)
    except ValueError as exc:
        raise TerrainError(f"{dem.name}: {exc}") from None
    log.info("terrain: %s", settings.detail)
    return heights


def covers(heights: TerrainHeights, positions: list[tuple[float, float]]) -> float:
    """The share of (lat, lon) ``positions`` (a flight's track) that lie on the model."""
    pts = np.array([p for p in positions if all(math.isfinite(v) for v in p)], dtype=np.float64).reshape(
        -1, 2
    )
    if not len(pts):
        return 0.0
    return float(np.isfinite(heights.elevation(pts[:, 0], pts[:, 1])).mean())


def check_covers(heights: TerrainHeights, samples) -> None:
    """TerrainError (one line) when none of a flight's telemetry ``samples`` with a GPS position lies
    on the model (the wrong site's model, or coordinates in the wrong order); a part off it is
    logged (those frames keep the other sources)."""
    positions = [
        (t.latitude, t.longitude) for t in samples if t.latitude is not None and t.longitude is not None
    ]
    if not positions:
        log.warning("terrain model %s: the flight's telemetry has no GPS position", heights.settings.name)
        return
    share = covers(heights, positions)
    if share == 0.0:
        lat, lon = positions[0]
        raise TerrainError(
            f"terrain model {heights.settings.name} does not cover the flight (none of its {len(positions)} "
            f"positions, the first {lat:.6f}, {lon:.6f}, is on it)"
        )
    if share < 1.0:
        log.warning(
            "terrain model %s covers %.0f %% of the flight's positions", heights.settings.name, 100 * share
        )


__all__ = [
    "DATUMS",
    "Dem",
    "TerrainError",
    "check_covers",
    "covers",
    "datum_shift",
    "load_terrain",
    "read_dem",
]
