"""A site's terrain model read from a GeoTIFF (pipelines.terrain_io): heights where the points are,
its vertical datum, the drone's altitude converted into it with PROJ's geoid grid, and bad files
refused in one line. The GeoTIFFs are written here with rasterio (synthetic terrain of known shape)."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
import rasterio
from affine import Affine
from pyproj import Transformer

from pipelines.config import CameraConfig, TerrainConfig
from pipelines.ground import GroundModel
from pipelines.terrain import offsets_to_latlon
from pipelines.terrain_io import TerrainError, covers, datum_shift, geoid_available, load_terrain, read_dem
from pipelines.types import Frame, Telemetry

LAT, LON = 47.3769, 8.5417  # Zurich: UTM zone 32N, EGM96 undulation about +48 m
UTM = "EPSG:32632"
TO_UTM = Transformer.from_crs("EPSG:4326", UTM, always_xy=True)
X0, Y0 = TO_UTM.transform(LON, LAT)


def write_dem(
    path: Path, crs: str | None, heights: np.ndarray, origin: tuple[float, float], cell: float, nodata=-9999.0
):
    with rasterio.open(
        path, "w", driver="GTiff", height=heights.shape[0], width=heights.shape[1], count=1, dtype="float32",
        crs=crs, transform=Affine(cell, 0.0, origin[0], 0.0, -cell, origin[1]), nodata=nodata,
    ) as ds:  # fmt: skip
        ds.write(heights.astype(np.float32)[None])
    return path


def graded_utm(tmp_path: Path, crs: str = UTM, name: str = "site.tif", base: float = 400.0) -> Path:
    """A 2 km square around the site, 5 m cells, rising 4 % eastward and 2 % northward from ``base``
    at the site: z = base + 0.04 (x - X0) + 0.02 (y - Y0), at the cells' centres."""
    n, cell = 400, 5.0
    left, top = X0 - 1000.0, Y0 + 1000.0
    xc = left + cell * (np.arange(n) + 0.5)
    yc = top - cell * (np.arange(n) + 0.5)
    z = base + 0.04 * (xc[None, :] - X0) + 0.02 * (yc[:, None] - Y0)
    return write_dem(tmp_path / name, crs, z, (left, top), cell)


needs_geoid = pytest.mark.skipif(  # .ci/proj-data.sh sets AIRPATROL_TEST_GEOID: then it must be there
    not geoid_available() and not os.environ.get("AIRPATROL_TEST_GEOID"),
    reason="PROJ has no EGM96 grid (Debian's proj-data: .ci/proj-data.sh installs it; CI fails without)",
)


def test_heights_are_read_where_the_points_are(tmp_path) -> None:
    dem = read_dem(graded_utm(tmp_path, f"{UTM}+5773"))
    assert dem.datum == "egm96"
    rng = np.random.default_rng(0)
    dx, dy = rng.uniform(-900, 900, 50), rng.uniform(-900, 900, 50)
    lon, lat = Transformer.from_crs(UTM, "EPSG:4326", always_xy=True).transform(X0 + dx, Y0 + dy)
    got = dem.elevation(np.asarray(lat), np.asarray(lon))
    assert np.abs(got - (400.0 + 0.04 * dx + 0.02 * dy)).max() < 1e-3  # bilinear is exact on a plane


def test_off_the_model_and_no_data_are_nan(tmp_path) -> None:
    z = np.full((10, 10), 300.0)
    z[4:6, 4:6] = -9999.0  # no data
    dem = read_dem(write_dem(tmp_path / "holes.tif", f"{UTM}+5773", z, (X0 - 25, Y0 + 25), 5.0))
    lon, lat = Transformer.from_crs(UTM, "EPSG:4326", always_xy=True).transform(
        [X0 - 20, X0, X0 + 500], [Y0 + 20, Y0, Y0]
    )
    got = dem.elevation(np.asarray(lat), np.asarray(lon))
    assert got[0] == pytest.approx(300.0) and math.isnan(got[1]) and math.isnan(got[2])


@pytest.mark.parametrize(
    ("crs", "configured", "datum"),
    [
        (f"{UTM}+5773", "crs", "egm96"),
        (f"{UTM}+3855", "crs", "egm2008"),
        ("EPSG:4979", "crs", "ellipsoid"),
        (UTM, "egm2008", "egm2008"),  # a 2D CRS, the datum stated
    ],
)
def test_the_models_vertical_datum_comes_from_its_crs_or_the_configuration(
    tmp_path, crs, configured, datum
) -> None:
    if crs == "EPSG:4979":
        z = np.full((20, 20), 450.0)
        path = write_dem(tmp_path / "geo.tif", crs, z, (LON - 0.01, LAT + 0.01), 0.001)
    else:
        path = graded_utm(tmp_path, crs)
    assert read_dem(path, configured).datum == datum


def test_bad_models_are_refused_in_one_line(tmp_path) -> None:
    garbage = tmp_path / "garbage.tif"
    garbage.write_bytes(b"II*\x00 not really a tiff")
    empty = write_dem(tmp_path / "empty.tif", f"{UTM}+5773", np.full((5, 5), -9999.0), (X0, Y0), 5.0)
    cases = [
        (tmp_path / "missing.tif", "crs", "no such file"),
        (garbage, "crs", "garbage.tif"),
        (write_dem(tmp_path / "nocrs.tif", None, np.zeros((5, 5)), (0, 5), 1.0), "crs", "has no CRS"),
        (
            graded_utm(tmp_path, UTM, "flat2d.tif"),
            "crs",
            "names no vertical datum: set camera.terrain.dem_datum",
        ),
        (empty, "crs", "no heights"),
    ]
    for path, datum, message in cases:
        with pytest.raises(TerrainError, match=message) as info:
            read_dem(path, datum)
        assert "\n" not in str(info.value)


@needs_geoid
@pytest.mark.parametrize(
    ("source", "target", "lat", "lon", "shift"),
    [
        # GeographicLib's GeoidEval example: EGM96 at 16:46:33N 3:00:34W is 28.7068 m
        ("egm96", "ellipsoid", 16 + 46 / 60 + 33 / 3600, -(3 + 34 / 3600), 28.7068),
        ("ellipsoid", "egm96", 16 + 46 / 60 + 33 / 3600, -(3 + 34 / 3600), -28.7068),
        ("egm96", "egm96", LAT, LON, 0.0),
    ],
)
def test_heights_are_converted_between_datums_with_the_geoid_grid(source, target, lat, lon, shift) -> None:
    assert datum_shift(source, target)(100.0, lat, lon) == pytest.approx(100.0 + shift, abs=0.05)


def test_an_unknown_datum_is_refused() -> None:
    with pytest.raises(TerrainError, match="vertical datum 'navd88'"):
        datum_shift("navd88", "ellipsoid")


@needs_geoid
def test_an_absolute_altitude_above_sea_level_meets_an_ellipsoidal_model(tmp_path) -> None:
    """The model in ellipsoidal heights (GNSS survey), the drone's altitude above mean sea level
    (EGM96): the road at 450 m ellipsoidal is 450 - N above sea level; a camera 60 m above it reads
    abs_alt 510 - N. Without the conversion the height would be off by N (48 m here)."""
    n = datum_shift("egm96", "ellipsoid")(0.0, LAT, LON)
    assert 40.0 < n < 55.0
    path = write_dem(
        tmp_path / "ell.tif", "EPSG:4979", np.full((40, 40), 450.0), (LON - 0.02, LAT + 0.02), 0.001
    )
    cfg = CameraConfig(name="mavic 3", terrain=TerrainConfig(dem=path, altitude_datum="egm96"))
    terrain = load_terrain(cfg.terrain)
    tel = Telemetry(
        1.0, altitude_m=68.0, gimbal_pitch_deg=-90.0, latitude=LAT, longitude=LON, abs_altitude_m=510.0 - n,
        gimbal_yaw_deg=0.0, camera="mavic 3",
    )  # fmt: skip
    ground = GroundModel(cfg, terrain=terrain)
    proj = ground.projector(Frame(0, 1.0, np.zeros((1080, 1920, 3), np.uint8), telemetry=tel))
    assert proj.altitude_m == pytest.approx(60.0, abs=0.01)
    assert ground.scale.source == "terrain" and "ell.tif" in ground.scale.reference.detail
    assert covers(terrain, [(LAT, LON), (LAT + 1.0, LON)]) == 0.5


def test_a_take_off_point_off_the_model_is_one_line(tmp_path) -> None:
    cfg = TerrainConfig(dem=graded_utm(tmp_path, f"{UTM}+5773"), takeoff=(LAT + 1.0, LON))
    with pytest.raises(TerrainError, match="site.tif: the take-off point .* is not on the terrain model"):
        load_terrain(cfg)


@pytest.mark.parametrize(
    ("smooth_m", "least", "most"), [(0.0, 0.9, 1.1), (None, 0.25, 0.32), (15.0, 0.07, 0.12)]
)
def test_cell_noise_is_smoothed_and_relief_kept(tmp_path, smooth_m, least, most) -> None:
    """A model of a 5 % grade with 1 m of independent noise per 5 m cell: by default (a Gaussian of
    one cell) the noise drops to about a quarter, at 15 m to about a tenth; the grade stays."""
    n, cell = 200, 5.0
    xc = cell * (np.arange(n) + 0.5) - 500.0
    truth = 400.0 + 0.05 * xc[None, :] + 0.0 * xc[:, None]
    noisy = truth + np.random.default_rng(1).normal(0.0, 1.0, truth.shape)
    path = write_dem(tmp_path / "noisy.tif", f"{UTM}+5773", noisy, (X0 - 500.0, Y0 + 500.0), cell)
    dem = read_dem(path, smooth_m=smooth_m)
    inner = dem.heights[20:-20, 20:-20] - truth[20:-20, 20:-20]
    assert least < np.std(inner) < most and abs(np.mean(inner)) < 0.05


@pytest.mark.parametrize("heading", [0.0, 37.0, 200.0])
def test_the_frames_fast_path_meets_the_same_ground(tmp_path, heading) -> None:
    """Ground offsets straight to the model's grid through one affine map a frame (``Dem.local``)
    give the heights the exact projection gives, to 2 mm on a 4.5 % grade, over 400 m around the drone."""
    dem = read_dem(graded_utm(tmp_path, f"{UTM}+5773"), smooth_m=0.0)
    place, at_grid = dem.local(LAT, LON, heading)
    xy = np.random.default_rng(2).uniform(-400.0, 400.0, (200, 2))
    fast = at_grid(*place(xy))
    exact = dem.elevation(*offsets_to_latlon(LAT, LON, heading, xy))
    assert np.abs(fast - exact).max() < 2e-3
