"""The camera's height above the road from a terrain model (pipelines.terrain): each viewing ray meets
the terrain, the frame's scale is the height at the image's centre, and every measured point is
moved to where its own ray meets the ground, chosen per frame by the ground model against the other
references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.camera import get_profile, intrinsics_for
from pipelines.config import CameraConfig
from pipelines.geometry import apply_homography, ground_to_image_homography
from pipelines.ground import GroundModel
from pipelines.height import reference_key
from pipelines.terrain import TerrainHeights, TerrainSettings, TerrainView, offsets_to_latlon, ray_heights
from pipelines.types import Frame, HeightReference, Telemetry

W, H = 1920, 1080
INTR = intrinsics_for(get_profile("dji_mavic_3"), W, H)
LAT, LON = 47.3769, 8.5417
M_PER_DEG_LAT = 6_371_008.8 * math.pi / 180.0


def north_m(lat: np.ndarray) -> np.ndarray:
    return (np.asarray(lat) - LAT) * M_PER_DEG_LAT


def east_m(lon: np.ndarray) -> np.ndarray:
    return (np.asarray(lon) - LON) * M_PER_DEG_LAT * math.cos(math.radians(LAT))


def plane(base_m: float, grade_north: float = 0.0, grade_east: float = 0.0, radius_m: float = 2000.0):
    """Terrain that rises ``grade`` per metre northward / eastward from ``base_m`` at the origin, NaN
    (off the model) beyond ``radius_m``."""

    def elevation(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        n, e = north_m(lat), east_m(lon)
        z = base_m + grade_north * n + grade_east * e
        return np.where(np.hypot(n, e) <= radius_m, z, np.nan)

    return elevation


def place_at(heading: float):
    return lambda xy: offsets_to_latlon(LAT, LON, heading, xy)


@pytest.mark.parametrize(
    ("heading", "xy", "east", "north"),
    [(0.0, (3.0, 10.0), 3.0, 10.0), (90.0, (3.0, 10.0), 10.0, -3.0), (180.0, (0.0, 5.0), 0.0, -5.0)],
)
def test_offsets_are_placed_by_the_heading(heading, xy, east, north) -> None:
    lat, lon = offsets_to_latlon(LAT, LON, heading, np.array([xy]))
    assert (east_m(lon)[0], north_m(lat)[0]) == (
        pytest.approx(east, abs=1e-6),
        pytest.approx(north, abs=1e-6),
    )


@pytest.mark.parametrize(
    ("grade", "depression_deg", "heading"),
    [(0.0, 90.0, 0.0), (0.0, 45.0, 0.0), (0.05, 45.0, 0.0), (-0.08, 45.0, 0.0), (0.06, 30.0, 0.0), (0.06, 45.0, 90.0)],
)  # fmt: skip
def test_a_ray_meets_a_graded_road_where_the_geometry_says(grade, depression_deg, heading) -> None:
    """Camera 100 m above the origin's ground; the road rises ``grade`` northward. The centre ray
    along the heading reaches y = h cot(d): along north, h = 100 - grade h cot(d)."""
    cot = 1.0 / math.tan(math.radians(depression_deg))
    h = ray_heights(np.array([[0.0, cot]]), 120.0, place_at(heading), plane(20.0, grade), 100.0)[0]
    along_north = cot if heading == 0.0 else 0.0
    assert h == pytest.approx(100.0 / (1.0 + grade * along_north), abs=0.01)


@pytest.mark.parametrize(
    ("elevation", "why"),
    [
        (plane(20.0, radius_m=50.0), "the ray leaves the model"),
        (plane(20.0, grade_north=0.8), "terrain steeper than the ray"),
        (plane(130.0), "the camera under the terrain"),
    ],
)
def test_a_ray_that_meets_no_terrain_is_nan(elevation, why) -> None:
    assert math.isnan(ray_heights(np.array([[0.0, 1.0]]), 120.0, place_at(0.0), elevation, 100.0)[0]), why


@pytest.mark.parametrize(("pitch", "heading"), [(-90.0, 0.0), (-45.0, 0.0), (-45.0, 90.0), (-35.0, 210.0)])
def test_lifted_points_are_where_the_vehicles_are_on_graded_ground(pitch, heading) -> None:
    """Points on a road rising 6 % northward and 3 % eastward, imaged by a camera 100 m above the
    origin: the flat projection at the centre's height misplaces them by their height difference;
    lifted, each is where it is (to a centimetre), and so is a 10 m displacement."""
    terrain = plane(20.0, 0.06, 0.03)
    camera = 120.0
    d = math.radians(-pitch)
    centre = ray_heights(
        np.array([[0.0, math.cos(d) / math.sin(d)]]), camera, place_at(heading), terrain, 100.0
    )[0]
    view = TerrainView(camera, centre, place_at(heading), terrain)
    rng = np.random.default_rng(3)
    y0 = 100.0 * math.cos(d) / math.sin(d)
    truth = np.column_stack([rng.uniform(-30, 30, 8), y0 + rng.uniform(-25, 25, 8)])
    lat, lon = view.place(truth)
    true_h = camera - terrain(lat, lon)
    to_image = ground_to_image_homography(INTR, centre, pitch)
    uv = apply_homography(to_image, truth * (centre / true_h)[:, None])  # the same rays
    flat = apply_homography(np.linalg.inv(to_image), uv)
    lifted = view.lift(flat, centre)
    assert np.abs(lifted - truth).max() < 0.01
    moved = truth + [0.0, 10.0]
    lat2, lon2 = view.place(moved)
    uv2 = apply_homography(to_image, moved * (centre / (camera - terrain(lat2, lon2)))[:, None])
    step = view.lift(apply_homography(np.linalg.inv(to_image), uv2), centre) - lifted
    assert np.linalg.norm(step, axis=1) == pytest.approx(np.full(8, 10.0), abs=0.01)
    if pitch != -90.0:  # flat, the displacement is off by the height differences along it
        flat_step = apply_homography(np.linalg.inv(to_image), uv2) - flat
        assert np.abs(np.linalg.norm(flat_step, axis=1) - 10.0).max() > 0.05


@pytest.mark.parametrize(
    ("grade_north", "grade_east", "step", "factor"),
    [
        (0.08, 0.0, (0.0, 0.5), math.sqrt(1 + 0.08**2)),  # a car's frame step up an 8 % grade
        (0.08, 0.0, (0.0, -0.5), math.sqrt(1 + 0.08**2)),  # down it
        (0.08, 0.0, (0.7, 0.0), 1.0),  # across it
        (0.06, 0.03, (3.0, 4.0), math.sqrt(1 + ((0.06 * 4.0 + 0.03 * 3.0) / 5.0) ** 2)),
        (0.0, 0.0, (0.0, 0.5), 1.0),
        (0.08, 0.0, (0.0, 0.0), 1.0),  # standing still
    ],
)
def test_a_step_over_the_terrain_is_measured_along_the_ground(grade_north, grade_east, step, factor) -> None:
    """Heading north, the camera's ground frame is east / north: a step's length along the ground is
    its run times sqrt(1 + (rise / run)^2); off the model, the run."""
    terrain = plane(20.0, grade_north, grade_east, radius_m=500.0)
    view = TerrainView(120.0, 100.0, place_at(0.0), terrain)
    start = np.array([[2.0, 30.0], [-5.0, 60.0]])
    got = view.slope_factor(start, start + step, 100.0)
    assert got == pytest.approx(np.full(2, factor), rel=1e-9)
    # a projection at another height (a site value's scale while the model lifts): its metres scaled
    again = view.slope_factor(start * 1.1, (start + step) * 1.1, 110.0)
    assert again == pytest.approx(got, rel=1e-9)
    assert (
        view.slope_factor(np.array([[0.0, 900.0]]), np.array([[0.0, 901.0]]), 100.0)[0] == 1.0
    )  # off the model


def test_the_projector_s_steps_over_a_graded_road_are_along_it() -> None:
    """A vehicle driving north up an 8 % grade under an oblique camera: the projector's step is its
    way along the road (sqrt(1 + 0.08^2) of the run: +0.32 %); without the model, the flat step."""
    from pipelines.geometry import GroundProjector

    terrain = plane(20.0, 0.08, radius_m=2000.0)
    pitch, camera = -45.0, 120.0
    centre = ray_heights(np.array([[0.0, 1.0]]), camera, place_at(0.0), terrain, 100.0)[0]
    view = TerrainView(camera, centre, place_at(0.0), terrain)
    proj = GroundProjector.create(INTR, centre, pitch)
    lifted = GroundProjector(proj.intrinsics, centre, pitch, proj.image_to_ground, terrain=view)
    a, b = np.array([[1.0, 95.0]]), np.array([[1.0, 96.5]])  # true ground points, 1.5 m apart northward

    def seen(xy: np.ndarray) -> np.ndarray:  # its pixel: along its ray, at its own height
        lat, lon = view.place(xy)
        return apply_homography(
            ground_to_image_homography(INTR, centre, pitch),
            xy * (centre / (camera - terrain(lat, lon)))[:, None],
        )

    step = lifted.ground_step(seen(b), seen(a))
    assert np.linalg.norm(step) == pytest.approx(1.5 * math.sqrt(1 + 0.08**2), rel=1e-4)
    assert np.linalg.norm(proj.ground_step(seen(b), seen(a))) == pytest.approx(
        np.linalg.norm(proj.to_ground(seen(b)) - proj.to_ground(seen(a)))
    )


def frame(tel: Telemetry, t: float = 1.0) -> Frame:
    return Frame(index=int(t * 30), timestamp_s=t, image=np.zeros((H, W, 3), np.uint8), telemetry=tel)


def tel(reading: float, pitch: float = -90.0, abs_alt: float | None = None, **kw) -> Telemetry:
    base = dict(latitude=LAT, longitude=LON, gimbal_yaw_deg=0.0, camera="mavic 3")
    return Telemetry(1.0, altitude_m=reading, gimbal_pitch_deg=pitch, abs_altitude_m=abs_alt, **(base | kw))


def heights(
    takeoff: tuple[float, float] | None = None, sigma=2.0, alt_sigma=3.0, terrain=None
) -> TerrainHeights:
    settings = TerrainSettings("test.tif", sigma, alt_sigma, takeoff, "terrain model test.tif")
    return TerrainHeights(settings, terrain or plane(20.0))


@pytest.mark.parametrize(
    ("takeoff", "abs_alt", "sigma_m", "at_time"),
    [
        (None, 80.0, math.hypot(2.0, 3.0), 1.0),  # absolute altitude: measured now, no drift
        ((LAT - 0.001, LON), None, math.sqrt(2.0) * 2.0, None),  # take-off on the model + barometer
    ],
)
def test_the_pilot_who_took_off_below_the_road_is_measured_from_the_road(
    takeoff, abs_alt, sigma_m, at_time
) -> None:
    """The road at 20 m, the camera at 80 m: 60 m above the road; the drone took off 8 m below the road
    (the model's take-off point at 12 m) and reads 68."""
    terrain = plane(20.0) if takeoff is None else (lambda la, lo: np.where(north_m(la) < -50, 12.0, 20.0))
    source = heights(takeoff, terrain=terrain)
    ref, view, why = source.for_frame(tel(68.0, abs_alt=abs_alt), 68.0, -90.0, 1.0)
    assert why == ""
    assert ref.source == "terrain" and ref.takeoff_above_road_m == pytest.approx(-8.0, abs=0.01)
    assert (ref.sigma_m, ref.at_time_s) == (pytest.approx(sigma_m), at_time)
    assert view.centre_height_m == pytest.approx(60.0, abs=0.01)

    ground = GroundModel(CameraConfig(name="mavic 3"), terrain=source)
    proj = ground.projector(frame(tel(68.0, abs_alt=abs_alt)))
    assert proj.altitude_m == pytest.approx(60.0, abs=0.01) and proj.terrain is not None
    assert ground.scale.source == "terrain"
    assert ground.scale.pitch_sigma_deg == pytest.approx(1.0)  # the gimbal's: the model knows the road's tilt
    plain = GroundModel(CameraConfig(name="mavic 3")).projector(frame(tel(68.0, abs_alt=abs_alt)))
    assert plain.altitude_m == 68.0  # every speed 13 % high without it


@pytest.mark.parametrize(
    ("telemetry", "why"),
    [
        (tel(68.0, abs_alt=80.0, latitude=None), "no GPS position"),
        (tel(68.0, pitch=-45.0, abs_alt=80.0, gimbal_yaw_deg=None), "no gimbal yaw"),
        (tel(68.0), "no absolute altitude"),
        (tel(68.0, abs_alt=80.0, latitude=LAT + 0.1), "not on the terrain model"),
    ],
)
def test_a_frame_the_model_cannot_place_keeps_the_other_sources(telemetry, why) -> None:
    ref, view, reason = heights().for_frame(telemetry, 68.0, telemetry.gimbal_pitch_deg, 1.0)
    assert (ref, view) == (None, None) and why in reason
    ground = GroundModel(CameraConfig(name="mavic 3"), terrain=heights())
    if telemetry.latitude is None:  # the flight's own scale, unchanged
        assert ground.projector(frame(telemetry)).altitude_m == 68.0
        assert ground.scale.source == "flight"


def test_the_altitude_over_unknown_ground_never_beats_the_model() -> None:
    """30 m above a road 15 m above the take-off point: the drone reads 45 m, whose prior (5.1 m) is
    11 % of that wrong height, against the model's 3.6 m of the right 30 m (12 %). The model wins:
    a height over ground of unknown level is no rival to a source that knows the road's."""
    ground = GroundModel(CameraConfig(name="mavic 3"), terrain=heights(terrain=plane(20.0)))
    proj = ground.projector(frame(tel(45.0, abs_alt=50.0)))
    assert ground.scale.source == "terrain" and proj.altitude_m == pytest.approx(30.0, abs=0.01)


def test_a_take_off_point_off_the_model_is_refused() -> None:
    with pytest.raises(ValueError, match="not on the terrain model"):
        heights((LAT + 1.0, LON))


def test_a_tighter_reference_wins_and_the_relief_is_still_lifted() -> None:
    """A site value known to 0.3 m beats the model's 3.6 m: the scale is the site's, but the frame's
    points still meet the terrain (the relief across the view)."""
    cfg = CameraConfig(name="mavic 3", takeoff_above_road_m=-8.0, takeoff_above_road_sigma_m=0.3)
    ground = GroundModel(cfg, terrain=heights())
    proj = ground.projector(frame(tel(68.0, abs_alt=80.0)))
    assert ground.scale.source == "site" and proj.altitude_m == pytest.approx(60.0)
    assert proj.terrain is not None


def test_the_terrain_is_one_reference_across_frames() -> None:
    a = HeightReference("terrain", -8.0, 3.0, at_time_s=1.0)
    b = HeightReference("terrain", -8.2, 3.0, at_time_s=2.0)
    assert reference_key(a) == reference_key(b) == "terrain"
