"""Correction arms (eval.correction): the measured base drawn from the simulator's truth recovers the
height above the road (and an oblique gimbal's pitch bias) within its sigma from erroneous telemetry,
and each arm's overrides are a configuration the engine takes."""

from __future__ import annotations

import os

import numpy as np
import pytest

from eval.correction import ALONG_M, arm_config, measured_base, true_lines
from eval.simulate import FlightSpec, Scene, TelemetryErrors, scene_roads
from eval.simulate.telemetry_errors import erroneous_telemetry
from pipelines.config import PipelineConfig
from pipelines.geometry import apply_homography
from pipelines.ground import GroundModel
from pipelines.terrain_io import geoid_available, load_terrain
from pipelines.types import Frame

# 1080p flights of the ticket grid's kind (a straight road heading north), not rendered: the base
# only needs the camera path and the road
GRID = FlightSpec(
    width=1920,
    height=1080,
    duration_s=8.0,
    road_heading_deg=0.0,
    yaw_deg=0.0,
    yaw_rate_dps=0.0,
    drift_mps=(0.0, 0.0),
)
ERRORS = TelemetryErrors(road_level_m=8.0, altitude_bias_m=1.0, pitch_bias_deg=1.0)


@pytest.mark.parametrize(
    ("altitude", "pitch", "errors"),
    [
        (30.0, -90.0, ERRORS),
        (60.0, -90.0, TelemetryErrors(road_level_m=-15.0)),
        (30.0, -45.0, ERRORS),
        (60.0, -60.0, TelemetryErrors(road_level_m=15.0, pitch_bias_deg=-1.0)),
        (100.0, -45.0, ERRORS),
        (150.0, -90.0, TelemetryErrors(altitude_bias_m=-2.0)),
    ],
)
def test_the_measured_base_recovers_the_height_within_its_sigma(altitude, pitch, errors):
    spec = GRID.replace(altitude_m=altitude, pitch_deg=pitch, seed=int(altitude - pitch))
    z = []
    for seed in range(24):
        base = measured_base(spec, errors, np.random.default_rng(seed))
        s = base.solution
        assert base.true_height_m == altitude
        assert abs(base.height_error_m) <= 3.5 * s.height_sigma_m
        # a base is worth more than 5 m of unknown ground; at 100 m / -45 its height is 5.3 m loose, but
        # bound to its pitch (correlation -0.95 with the pitch's prior of the gimbal's and the road's tilt)
        assert s.height_sigma_m < 0.06 * altitude
        # the take-off point's height above the road: what the reading carries, taken off again
        reading = altitude + errors.altitude_error_m(base.time_s)
        assert s.takeoff_above_road_m == pytest.approx(altitude - reading + base.height_error_m, abs=1e-6)
        z.append(base.height_error_m / s.height_sigma_m)
    share = np.mean(np.abs(z) <= 1.0)
    assert 0.4 <= share <= 0.95, f"height within 1 sigma in {share:.0%} of 24 bases"


def test_an_oblique_low_base_measures_the_pitch_bias_too():
    spec = GRID.replace(altitude_m=30.0, pitch_deg=-45.0)
    biases = [measured_base(spec, ERRORS, np.random.default_rng(s)).solution for s in range(12)]
    assert all(b.pitch_sigma_deg < 0.8 for b in biases)  # the lines narrow the gimbal's 1 deg prior
    assert np.mean([b.pitch_bias_deg for b in biases]) == pytest.approx(-1.0, abs=0.3)
    nadir = measured_base(GRID.replace(altitude_m=60.0, pitch_deg=-90.0), ERRORS, np.random.default_rng(0))
    assert not nadir.solution.pitch_solved  # at nadir a pitch error hardly changes a length


@pytest.mark.parametrize(
    ("altitude", "pitch", "longest"), [(30.0, -90.0, 22.0), (60.0, -90.0, 30.0), (30.0, -45.0, 30.0)]
)
def test_true_lines_lie_on_the_road_in_view(altitude, pitch, longest):
    spec = GRID.replace(altitude_m=altitude, pitch_deg=pitch)
    camera, roads = scene_roads(spec)
    k = spec.n_frames // 2
    lines = true_lines(camera, roads[0], k)
    assert [ln.what for ln in lines] == ["along", "along", "across"]
    assert lines[0].length_m == ALONG_M[0] and lines[1].length_m == pytest.approx(longest, abs=0.5)
    assert lines[2].length_m == pytest.approx(14.0)  # edge line to edge line: 2 x 2 lanes of 3.5 m
    for ln in lines:
        a, b = np.array(ln.start_xy), np.array(ln.end_xy)
        assert np.linalg.norm(b - a) == pytest.approx(ln.length_m, abs=1e-6)
        uv = apply_homography(camera.world_to_image(k), np.array([a, b]))
        assert np.all((uv >= 0) & (uv <= [spec.width, spec.height]))


def test_scene_roads_are_the_scene_s_roads():
    spec = FlightSpec(width=320, height=180, duration_s=1.0, n_vehicles=2, layout="curved", seed=5)
    _, roads = scene_roads(spec)
    scene = Scene(spec)
    assert np.array_equal(roads[0].centre.points, scene.roads[0].centre.points)


def _height_above_road(config: dict | None, spec: FlightSpec, errors: TelemetryErrors) -> tuple[float, str]:
    """The engine's height above the road on the middle frame, under an arm's overrides."""
    cfg = PipelineConfig().with_overrides(camera={"name": spec.camera, **((config or {}).get("camera", {}))})
    k = spec.n_frames // 2
    truth = scene_roads(spec)[0].telemetry()
    tel = erroneous_telemetry(truth, errors)[k]
    ground = GroundModel(cfg.camera, None if cfg.camera.terrain is None else load_terrain(cfg.camera.terrain))
    frame = Frame(k, tel.timestamp_s, np.zeros((spec.height, spec.width, 3), np.uint8), tel)
    assert ground.projector(frame) is not None, ground.status.reason
    return ground.scale.height_m, ground.scale.source


@pytest.mark.parametrize(
    ("arm", "source", "off_by"),
    [
        ("none", "flight", 9.0),
        ("site", "site", 1.0),
        ("base", "measured_base", 0.0),
        ("base+lrf", "measured_base", 0.0),  # the laser's readings come in the SRT, not here
    ],
)
def test_each_arm_is_a_configuration_the_engine_takes(arm, source, off_by):
    spec = GRID.replace(altitude_m=60.0, pitch_deg=-60.0)
    config, record = arm_config(arm, spec, ERRORS, seed=3)
    assert record["arm"] == arm
    height, used = _height_above_road(config, spec, ERRORS)
    assert used == source
    assert ("laser" in record) is ("lrf" in arm)
    if arm.startswith("base"):
        sigma = record["base"]["solution"]["height_sigma_m"]
        assert abs(height - 60.0) <= 3 * sigma and config["camera"]["height_reference"]["at_time_s"] == 4.0
    else:  # none: the road's 8 m and the barometer's 1 m; site: the barometer's
        assert height - 60.0 == pytest.approx(off_by, abs=1e-6)
    with pytest.raises(ValueError, match="unknown correction arm"):
        arm_config("guess", spec, ERRORS, seed=3)


@pytest.mark.skipif(
    not geoid_available() and not os.environ.get("AIRPATROL_TEST_GEOID"),
    reason="PROJ has no EGM96 grid (Debian's proj-data: .ci/proj-data.sh installs it; CI fails without)",
)
@pytest.mark.parametrize(
    ("arm", "model", "within_m"), [("terrain", "lidar", 0.5), ("terrain-glo30", "glo30", 4.5)]
)
def test_a_terrain_arm_writes_a_model_the_engine_measures_the_road_from(arm, model, within_m, tmp_path):
    """The road 8 m above the take-off point, the barometer 1 m high: from the model, the camera is
    61 m above the road (the barometer's metre stays), less the model's own error at the road (its
    site-wide bias is in the record; the lidar's take-off point shares it)."""
    spec = GRID.replace(altitude_m=60.0, pitch_deg=-60.0)
    config, record = arm_config(arm, spec, ERRORS, seed=3, workdir=tmp_path)
    assert record["terrain"]["model"] == model and (tmp_path / f"{model}.tif").is_file()
    height, used = _height_above_road(config, spec, ERRORS)
    assert used == "terrain"
    expected = 61.0 if model == "lidar" else 61.0 - record["terrain"]["bias_m"]
    assert abs(height - expected) < within_m
    with pytest.raises(ValueError, match="needs a folder"):
        arm_config(arm, spec, ERRORS, seed=3)


def _road_lengths(config: dict | None, spec: FlightSpec) -> tuple[np.ndarray, np.ndarray]:
    """(the engine's, the truth's) lengths along the ground of 5 m steps along the road, in view on
    the middle frame of a graded flight, the engine under an arm's overrides, the telemetry exact."""
    cfg = PipelineConfig().with_overrides(camera={"name": spec.camera, **((config or {}).get("camera", {}))})
    camera, roads = scene_roads(spec)
    k = spec.n_frames // 2
    tel = camera.telemetry()[k]
    ground = GroundModel(cfg.camera, None if cfg.camera.terrain is None else load_terrain(cfg.camera.terrain))
    proj = ground.projector(Frame(k, tel.timestamp_s, np.zeros((spec.height, spec.width, 3), np.uint8), tel))
    assert proj is not None, ground.status.reason
    lane = roads[0].centre.offset(1.75)
    centre = camera.frame_centre(k)
    s0 = float(lane.cum[int(np.argmin(np.linalg.norm(lane.points - centre, axis=1)))])
    start, _ = lane.at(s0 + np.arange(-20.0, 20.0, 5.0))
    end, _ = lane.at(s0 + np.arange(-15.0, 25.0, 5.0))
    h_img = camera.world_to_image(k)
    measured = np.linalg.norm(
        proj.ground_step(apply_homography(h_img, end), apply_homography(h_img, start)), axis=1
    )
    rise = camera.surface.height(end) - camera.surface.height(start)
    return measured, np.hypot(np.linalg.norm(end - start, axis=1), rise)


@pytest.mark.skipif(
    not geoid_available() and not os.environ.get("AIRPATROL_TEST_GEOID"),
    reason="PROJ has no EGM96 grid (Debian's proj-data: .ci/proj-data.sh installs it; CI fails without)",
)
@pytest.mark.parametrize(("pitch", "grade"), [(-45.0, 8.0), (-45.0, -6.0), (-90.0, 8.0)])
def test_on_a_graded_road_the_terrain_arm_measures_along_it_and_the_site_value_does_not(
    pitch, grade, tmp_path
):
    """The simulator's graded road through the engine: with the site's model (lidar, the grade in it)
    every 5 m step along the road is 5 m along the ground to within the model's noise; with the
    take-off level exact but the ground taken as level, an oblique view reads it up to 10 % off."""
    spec = GRID.replace(altitude_m=60.0, pitch_deg=pitch, road_grade_pct=grade)
    exact = TelemetryErrors()
    config, _ = arm_config("terrain", spec, exact, seed=3, workdir=tmp_path)
    measured, truth = _road_lengths(config, spec)
    assert np.abs(measured / truth - 1.0).max() < 0.01
    site, _ = arm_config("site", spec, exact, seed=3)
    flat = _road_lengths(site, spec)[0] / truth - 1.0
    if pitch == -45.0:  # a grade along the view is a pitch error: climbing away, every step too long
        assert np.sign(np.median(flat)) == np.sign(grade) and np.abs(np.median(flat)) > 0.04
    else:  # straight down: too long beyond the centre's ground, too short before it
        assert flat.max() > 0.02 and flat.min() < -0.02
