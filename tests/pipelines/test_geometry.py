"""Ground geometry against hand-computed cases and the conventions documented in geometry.py.

World: origin on the ground below the camera, Z up, Y the direction the camera looks towards
(image "up" at nadir), X to the image's right. Pitch -90 = nadir. Pixels: u right, v down.
With tilt = 90 + pitch (0 at nadir), the optical axis hits the ground at Y = h * tan(tilt).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.camera import get_profile, intrinsics_for
from pipelines.geometry import (
    GroundProjector,
    apply_homography,
    camera_rotation,
    geolocate,
    ground_to_image_homography,
    gsd_m_per_px,
    image_to_ground_homography,
)

MAVIC3 = get_profile("dji_mavic_3")
K4K = intrinsics_for(MAVIC3, 3840, 2160)  # fx = fy = 12.29 * 3840 / 17.3 = 2727.88 px
F = 12.29 * 3840 / 17.3
CX, CY = 1920.0, 1080.0


def test_gsd_mavic3_100m_4k() -> None:
    expected = 100 * 17.3 / (12.29 * 3840)  # 0.036657 m/px
    assert gsd_m_per_px(100.0, 12.29, 17.3, 3840) == pytest.approx(expected)
    assert expected == pytest.approx(0.036657, abs=1e-6)
    projector = GroundProjector.create(K4K, 100.0, -90.0)
    assert projector.nadir_gsd_m_per_px == pytest.approx(expected)
    assert projector.gsd_at(np.array([[CX, CY]]))[0] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    "args", [(0.0, 12.29, 17.3, 3840), (100, 0, 17.3, 3840), (100, 12.29, -1, 3840), (100, 12.29, 17.3, 0)]
)
def test_gsd_rejects_non_positive(args: tuple) -> None:
    with pytest.raises(ValueError):
        gsd_m_per_px(*args)


@pytest.mark.parametrize("pitch", [-90.0, -75.0, -45.0, -20.0, -1.0])
def test_camera_rotation_is_proper_and_looks_down_towards_plus_y(pitch: float) -> None:
    r = camera_rotation(pitch)
    np.testing.assert_allclose(r.T @ r, np.eye(3), atol=1e-12)
    assert np.linalg.det(r) == pytest.approx(1.0)
    tilt = math.radians(90.0 + pitch)
    np.testing.assert_allclose(r[:, 2], [0.0, math.sin(tilt), -math.cos(tilt)], atol=1e-12)  # optical axis
    np.testing.assert_allclose(r[:, 0], [1.0, 0.0, 0.0], atol=1e-12)  # image right = +X


def test_camera_rotation_nadir_image_up_is_plus_y() -> None:
    r = camera_rotation(-90.0)
    np.testing.assert_allclose(-r[:, 1], [0.0, 1.0, 0.0], atol=1e-12)  # -(image down)


@pytest.mark.parametrize("pitch", [0.0, 10.0, -91.0])
def test_camera_rotation_rejects_pitch_not_looking_down(pitch: float) -> None:
    with pytest.raises(ValueError, match="pitch"):
        camera_rotation(pitch)


@pytest.mark.parametrize("altitude", [30.0, 100.0, 146.0])
@pytest.mark.parametrize(
    ("du", "dv"), [(0.0, 0.0), (100.0, 0.0), (-250.0, 0.0), (0.0, 300.0), (0.0, -400.0), (120.0, -80.0)]
)
def test_nadir_pixel_offsets_scale_by_h_over_f(altitude: float, du: float, dv: float) -> None:
    ground = GroundProjector.create(K4K, altitude, -90.0).to_ground(np.array([[CX + du, CY + dv]]))[0]
    # right -> +X; down in the image -> -Y (image up is +Y)
    np.testing.assert_allclose(ground, [du * altitude / F, -dv * altitude / F], atol=1e-9)


@pytest.mark.parametrize(
    ("pitch", "centre_y_over_h"),
    [
        (-90.0, 0.0),
        (-60.0, 1.0 / math.tan(math.radians(60.0))),  # 0.57735
        (-45.0, 1.0),
        (-30.0, 1.0 / math.tan(math.radians(30.0))),  # 1.73205
        (-20.0, 1.0 / math.tan(math.radians(20.0))),  # 2.74748
    ],
)
@pytest.mark.parametrize("altitude", [50.0, 120.0])
def test_oblique_image_centre_ground_distance(pitch: float, centre_y_over_h: float, altitude: float) -> None:
    ground = GroundProjector.create(K4K, altitude, pitch).to_ground(np.array([[CX, CY]]))[0]
    np.testing.assert_allclose(ground, [0.0, altitude * centre_y_over_h], atol=1e-9)


@pytest.mark.parametrize("pitch", [-60.0, -45.0, -30.0])
def test_oblique_centre_row_lateral_scale(pitch: float) -> None:
    # A pixel du right of the centre: ray (du/f, 0, 1) -> X = du * h / (f * cos(tilt)), Y unchanged.
    h, du = 80.0, 300.0
    tilt = math.radians(90.0 + pitch)
    ground = GroundProjector.create(K4K, h, pitch).to_ground(np.array([[CX + du, CY]]))[0]
    np.testing.assert_allclose(ground, [du * h / (F * math.cos(tilt)), h * math.tan(tilt)], atol=1e-9)


def test_pixel_rows_above_the_horizon_are_nan() -> None:
    # pitch -10: the horizon row is v = cy - f * tan(10 deg) = 1080 - 481.0 = 599.0
    projector = GroundProjector.create(K4K, 100.0, -10.0)
    horizon_v = CY - F * math.tan(math.radians(10.0))
    pts = np.array(
        [[CX, 0.0], [CX, horizon_v - 1.0], [100.0, horizon_v - 5.0], [CX, horizon_v + 1.0], [CX, 2000.0]]
    )
    assert projector.below_horizon(pts).tolist() == [False, False, False, True, True]
    ground = projector.to_ground(pts)
    assert np.isnan(ground[:3]).all()
    assert np.isfinite(ground[3:]).all()
    assert ground[3, 1] > ground[4, 1] > 0  # nearer the horizon = farther away


def test_apply_homography_shapes_and_points_at_infinity() -> None:
    h = np.diag([2.0, 3.0, 1.0])
    np.testing.assert_allclose(apply_homography(h, np.array([1.0, 1.0])), [[2.0, 3.0]])
    assert apply_homography(h, np.zeros((0, 2))).shape == (0, 2)
    to_infinity = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # w = x
    out = apply_homography(to_infinity, np.array([[0.0, 5.0], [2.0, 5.0]]))
    assert np.isnan(out[0]).all()
    np.testing.assert_allclose(out[1], [1.0, 2.5])


@pytest.mark.parametrize("pitch", [-90.0, -70.0, -45.0, -25.0])
def test_ground_to_image_and_image_to_ground_invert_each_other(pitch: float) -> None:
    h = 95.0
    g2i = ground_to_image_homography(K4K, h, pitch)
    i2g = image_to_ground_homography(K4K, h, pitch)
    np.testing.assert_allclose(g2i @ i2g / (g2i @ i2g)[2, 2], np.eye(3), atol=1e-9)
    u, v = np.meshgrid(np.linspace(0, 3839, 7), np.linspace(1300 if pitch > -30 else 0, 2159, 5))
    pixels = np.column_stack([u.ravel(), v.ravel()])
    projector = GroundProjector.create(K4K, h, pitch)
    assert projector.below_horizon(pixels).all()
    back = apply_homography(g2i, projector.to_ground(pixels))
    np.testing.assert_allclose(back, pixels, atol=1e-6)
    # and the optical axis' ground point maps to the principal point
    tilt = math.radians(90.0 + pitch)
    np.testing.assert_allclose(
        apply_homography(g2i, np.array([[0.0, h * math.tan(tilt)]]))[0], [CX, CY], atol=1e-6
    )


def test_gsd_grows_towards_the_top_of_an_oblique_image() -> None:
    projector = GroundProjector.create(K4K, 100.0, -45.0)
    rows = np.array([2100.0, 1600.0, 1080.0, 600.0, 100.0])  # bottom -> top
    gsd = projector.gsd_at(np.column_stack([np.full_like(rows, CX), rows]))
    assert (np.diff(gsd) > 0).all()
    # At the centre: dX/du = h / (f cos t), dY/dv = h / (f cos^2 t) -> geometric mean h / (f cos^1.5 t).
    c = math.cos(math.radians(45.0))
    assert gsd[2] == pytest.approx(100.0 / (F * c**1.5), rel=2e-3)


def test_nadir_gsd_is_uniform() -> None:
    projector = GroundProjector.create(K4K, 60.0, -90.0)
    pts = np.array([[0.0, 0.0], [CX, CY], [3839.0, 2159.0], [500.0, 1900.0]])
    np.testing.assert_allclose(projector.gsd_at(pts), 60.0 / F, rtol=1e-9)


@pytest.mark.parametrize("pitch", [-90.0, -50.0])
def test_sign_conventions(pitch: float) -> None:
    projector = GroundProjector.create(K4K, 100.0, pitch)
    centre, right, up = projector.to_ground(np.array([[CX, CY], [CX + 200.0, CY], [CX, CY - 200.0]]))
    assert right[0] > centre[0]  # image right -> +X
    assert up[1] > centre[1]  # image up -> +Y (farther away when oblique)
    assert centre[1] >= 0.0  # the camera looks towards +Y


@pytest.mark.parametrize(("altitude", "pitch"), [(0.0, -90.0), (-5.0, -45.0), (100.0, 0.0), (100.0, 5.0)])
def test_projector_rejects_impossible_poses(altitude: float, pitch: float) -> None:
    with pytest.raises(ValueError):
        GroundProjector.create(K4K, altitude, pitch)


@pytest.mark.parametrize(
    ("heading", "ground_xy", "north_m", "east_m"),
    [
        (0.0, (0.0, 100.0), 100.0, 0.0),  # looking north, 100 m ahead
        (90.0, (0.0, 100.0), 0.0, 100.0),  # looking east
        (90.0, (30.0, 0.0), -30.0, 0.0),  # looking east, 30 m to the image's right = south
        (180.0, (10.0, 50.0), -50.0, -10.0),  # looking south: ahead is south, right is west
        (-45.0, (0.0, math.sqrt(2) * 10), 10.0, -10.0),  # north-west
    ],
)
def test_geolocate_rotates_the_ground_offset_by_the_heading(heading, ground_xy, north_m, east_m) -> None:
    lat0, lon0 = 48.0, 11.0
    lat, lon = geolocate(lat0, lon0, heading, ground_xy)
    r = 6_371_008.8
    assert (lat - lat0) * math.pi / 180 * r == pytest.approx(north_m, abs=1e-6)
    assert (lon - lon0) * math.pi / 180 * r * math.cos(math.radians(lat0)) == pytest.approx(east_m, abs=1e-6)
