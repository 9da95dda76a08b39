"""A graded road in the simulator (``FlightSpec.road_grade_pct``, issue 39): the ground is a plane
level with the take-off point where the camera looks mid-flight; what is drawn on it, the flat
vehicles and the solids' corners, lands where an independent camera model (``cv2.projectPoints``)
puts the 3D points; the true speed is along the slope; a flight without a grade renders as before
(tests/eval/test_simulate_vehicles3d.py's digests, with ``road_grade_pct: 0`` given)."""

from __future__ import annotations

import functools
import math

import cv2
import numpy as np
import pytest
import yaml

from eval.simulate import FlightSpec, Scene, SimulationError
from eval.simulate.body3d import parts
from eval.simulate.geometry import GroundSurface, compass_dir

TINY = {"width": 320, "height": 240, "duration_s": 1.0, "fps": 10.0, "noise_sigma": 0.0, "mask_every": 0}


@functools.cache
def _scene(**changes) -> Scene:
    return Scene(FlightSpec(**(TINY | changes)))


def _opencv(scene: Scene, k: int, pts: np.ndarray) -> np.ndarray:
    """Pixels of world points ``pts`` (N, 3: east, north, up from the take-off level) in frame ``k``
    by OpenCV's camera model: the drone at its position and altitude, its optical axis ``pitch``
    below the horizon along its yaw."""
    spec, cam = scene.spec, scene.camera
    psi, p = math.radians(cam.yaw[k]), math.radians(spec.pitch_deg)
    forward = np.array([math.sin(psi), math.cos(psi), 0.0])
    right = np.array([math.cos(psi), -math.sin(psi), 0.0])
    axis = math.cos(p) * forward + math.sin(p) * np.array([0.0, 0.0, 1.0])
    rot = np.array([right, np.cross(axis, right), axis])
    eye = np.array([*cam.drone_xy[k], cam.altitude[k]])
    i = cam.intrinsics
    matrix = np.array([[i.fx, 0.0, i.cx], [0.0, i.fy, i.cy], [0.0, 0.0, 1.0]])
    uv, _ = cv2.projectPoints(pts.astype(np.float64), cv2.Rodrigues(rot)[0], -rot @ eye, matrix, np.zeros(5))
    return uv.reshape(-1, 2)


@pytest.mark.parametrize(
    ("pitch", "grade", "heading"),
    [(-90.0, 8.0, 0.0), (-45.0, 8.0, 0.0), (-45.0, -6.0, 30.0), (-60.0, 4.0, 120.0)],
)
def test_the_ground_is_the_graded_plane(pitch: float, grade: float, heading: float) -> None:
    scene = _scene(
        pitch_deg=pitch, altitude_m=40.0, road_grade_pct=grade, road_heading_deg=heading, n_vehicles=0
    )
    surface = scene.camera.surface
    assert surface is not None
    # rising along the road, level with the take-off point at the road's centre point
    assert np.allclose(surface.gradient, compass_dir(heading) * grade / 100.0)
    assert surface.height(scene.centre[None])[0] == pytest.approx(0.0, abs=1e-9)
    mid = scene.spec.n_frames // 2
    centre_px = np.array([[scene.spec.width / 2, scene.spec.height / 2]])
    assert np.allclose(scene.camera.image_to_world(mid, centre_px)[0], scene.centre, atol=1e-6)
    # every pixel's ground point is on the plane, where OpenCV sees it
    for k in (0, scene.spec.n_frames - 1):
        uv = np.array([[10.0, 12.0], [300.0, 20.0], [160.0, 120.0], [30.0, 230.0], [310.0, 225.0]])
        xy = scene.camera.image_to_world(k, uv)
        seen = _opencv(scene, k, np.column_stack([xy, surface.height(xy)]))
        assert np.abs(seen - uv).max() < 1e-6


@pytest.mark.parametrize("pitch", [-90.0, -45.0])
def test_a_solid_on_a_graded_road_is_drawn_where_its_corners_are(pitch: float) -> None:
    spec = {"pitch_deg": pitch, "altitude_m": 40.0, "road_grade_pct": 8.0, "road_heading_deg": 0.0}
    scene = _scene(**spec, n_vehicles=10, vehicle_height=True, vehicle_sizes="realistic")
    surface = scene.camera.surface
    k = 4
    _image, rows = scene.render(k)
    seen = {r["id"]: r for r in rows}
    checked = 0
    for v in scene.vehicles:
        row = seen.get(v.id)
        if row is None or row["visibility"] < 1.0:
            continue
        corners = [
            np.column_stack([q.corners, surface.height(q.corners) + z])
            for q in parts(v.length_m, v.width_m, v.height_m, v.positions[k], v.headings[k], v.body)
            for z in (q.z_lo, q.z_hi)
        ]
        uv = _opencv(scene, k, np.vstack(corners))
        x, y, w, h = row["xywh"]
        assert np.allclose([x, y, x + w, y + h], [*uv.min(0), *uv.max(0)], atol=0.02)
        checked += 1
    assert checked >= 3


def test_the_true_speed_is_along_the_slope() -> None:
    scene = _scene(pitch_deg=-90.0, altitude_m=60.0, road_grade_pct=8.0, road_heading_deg=0.0, n_vehicles=8)
    surface, dt = scene.camera.surface, 1.0 / scene.spec.fps
    for v in scene.vehicles:
        xyz = np.column_stack([v.positions, surface.height(v.positions)])
        steps = np.linalg.norm(np.diff(xyz, axis=0), axis=1) / dt  # the 3D distance driven per frame
        mean_speed = (v.speeds_mps[1:] + v.speeds_mps[:-1]) / 2
        assert np.allclose(steps, mean_speed, rtol=2e-3)
        # a straight road rising 8 % along it: sqrt(1 + 0.08^2) = 1.0032 of the horizontal speed
        run = np.linalg.norm(np.diff(v.positions, axis=0), axis=1) / dt
        assert np.allclose(steps / run, math.sqrt(1 + 0.08**2), rtol=1e-9)


@pytest.mark.parametrize(
    ("headings", "factors"),
    [
        ([[0.0, 1.0]], [math.sqrt(1 + 0.08**2)]),  # uphill
        ([[0.0, -1.0]], [math.sqrt(1 + 0.08**2)]),  # downhill
        ([[1.0, 0.0]], [1.0]),  # across the slope
        ([[math.sqrt(0.5), math.sqrt(0.5)]], [math.sqrt(1 + 0.5 * 0.08**2)]),
    ],
)
def test_slope_factor(headings: list, factors: list) -> None:
    surface = GroundSurface.graded(np.array([5.0, -3.0]), 0.0, 8.0)
    assert surface.slope_factor(np.array(headings)) == pytest.approx(factors)
    assert surface.height(np.array([[5.0, 7.0], [100.0, -3.0]])) == pytest.approx([0.8, 0.0])


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"road_grade_pct": 16.0}, "road_grade_pct"),
        ({"road_grade_pct": 8.0, "lens_distortion": (-0.1, 0.0, 0.0, 0.0, 0.0)}, "ideal pinhole only"),
        ({"road_grade_pct": 8.0, "readout_ms": 20.0}, "ideal pinhole only"),
    ],
)
def test_invalid_grades_are_user_errors(changes: dict, field: str) -> None:
    with pytest.raises(SimulationError, match=field):
        FlightSpec(**changes)


def test_the_grade_goes_through_flight_yaml(tmp_path) -> None:
    spec = FlightSpec(road_grade_pct=-5.0, grade_heading_deg=90.0)
    path = tmp_path / "flight.yaml"
    path.write_text(yaml.safe_dump(spec.to_dict()))
    again = FlightSpec.from_yaml(path)
    assert (again.road_grade_pct, again.grade_heading_deg) == (-5.0, 90.0)
    assert FlightSpec.from_dict(spec.to_dict()) == spec
