"""Vehicles have height (pipelines.vehicle_height): a point h above the road, projected onto the road
from a camera H above it, moves H / (H - h) as far; each step is scaled back by 1 - h / H and the
point height's uncertainty is in the speed's sigma."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.camera import get_profile, intrinsics_for
from pipelines.config import ConfigError, PipelineConfig
from pipelines.geometry import GroundProjector, apply_homography, ground_to_image_homography
from pipelines.vehicle_height import (
    POINT_HEIGHT_M,
    moving_camera_factor,
    point_heights,
    sigma_frac,
    step_factor,
    with_point_sigma,
)

K = intrinsics_for(get_profile("dji_mavic_3"), 1920, 1080)


@pytest.mark.parametrize(
    ("h", "big_h", "factor"),
    [
        (0.0, 30.0, 1.0),
        (0.75, 30.0, 1.0 - 0.75 / 30.0),  # a car at 30 m: its steps read 2.6 % long
        (1.5, 150.0, 0.99),
        (3.0, 6.0, 0.5),  # as low as the engine measures: the camera twice the point's height
        (3.0, 5.9, math.nan),  # lower: nothing
        (0.75, math.nan, math.nan),  # off a terrain model
        (0.75, 0.0, math.nan),
    ],
)
def test_step_factor(h, big_h, factor):
    got = step_factor(np.array([h]), np.array([big_h]))[0]
    assert got == pytest.approx(factor, nan_ok=True)


@pytest.mark.parametrize(
    ("h", "big_h", "share", "frac"),
    [
        (0.0, 30.0, 0.4, 0.0),
        (0.75, 30.0, 0.4, 0.3 / 29.25),  # 1.0 % of a car's speed at 30 m
        (0.75, 150.0, 0.4, 0.3 / 149.25),
        (1.65, 30.0, 0.0, 0.0),
        (3.0, 5.0, 0.4, math.nan),
    ],
)
def test_sigma_frac_is_the_point_height_s_sigma_over_the_camera_s_clearance(h, big_h, share, frac):
    assert sigma_frac(np.array([h]), np.array([big_h]), share)[0] == pytest.approx(frac, nan_ok=True)


def test_point_heights_by_class_fall_back_to_vehicle():
    table = {"car": 0.75, "bus": 1.55, "vehicle": 0.7}
    got = point_heights(np.array(["car", "bus", "tractor"], dtype=object), table, 3)
    np.testing.assert_allclose(got, [0.75, 1.55, 0.7])
    np.testing.assert_allclose(point_heights(None, table, 2), [0.7, 0.7])
    np.testing.assert_allclose(point_heights(["car"], {"car": 0.75}, 1), [0.75])
    np.testing.assert_allclose(point_heights(["tractor"], {"car": 0.75}, 1), [0.0])


@pytest.mark.parametrize(
    ("scale", "point", "expected"),
    [
        (None, [0.0, 0.01], [math.nan, math.hypot(0.02, 0.01)]),  # none: the config's 2 % where it adds
        ([0.03, math.nan], [0.04, 0.0], [0.05, math.nan]),
        ([0.03, 0.03], [math.nan, 0.0], [0.03, 0.03]),  # no step: the scale's alone
    ],
)
def test_with_point_sigma_adds_in_quadrature_and_keeps_what_it_does_not_touch(scale, point, expected):
    got = with_point_sigma(None if scale is None else np.array(scale), np.array(point), 0.02)
    np.testing.assert_allclose(got, expected)


@pytest.mark.parametrize(
    ("step", "camera", "factor"),
    [
        ([0.0, 0.46], None, 1.0),  # no camera step known: as hovering
        ([0.0, 0.46], [0.0, 0.0], 1.0),  # hovering
        ([0.0, -0.46], [0.0, 0.33], 1.0 + 0.33 / 0.46),  # coming: 50 km/h under 10 m/s the other way
        ([0.0, 0.46], [0.0, 0.33], 1.0 - 0.33 / 0.46),  # driving with the camera
        ([0.0, 0.33], [0.0, 0.33], 0.0),  # at the camera's speed: the point's height does not matter
        ([0.46, 0.0], [0.0, 0.33], 1.0),  # across the camera's motion: along its own, as hovering
        ([0.0, 0.01], [0.0, 0.33], 10.0),  # nearly stopped: capped
        ([0.0, 0.0], [0.0, 0.33], 1.0),  # stopped: no relative sigma to give (NaN: 1)
        ([math.nan, math.nan], [0.0, 0.33], 1.0),
    ],
)
def test_moving_camera_factor(step, camera, factor):
    got = moving_camera_factor(np.array([step]), None if camera is None else np.array([camera]))
    assert got[0] == pytest.approx(factor)


@pytest.mark.parametrize("pitch", [-90.0, -60.0, -45.0, -30.0])
@pytest.mark.parametrize(("altitude", "h"), [(30.0, 0.75), (60.0, 1.5), (150.0, 3.1)])
def test_a_point_above_the_road_steps_its_true_length_at_any_pitch(pitch, altitude, h):
    """Points at h above the road (the plane z = h is the road seen from altitude - h), moving 1.5 m
    in several directions across the view: projected as if on the road their steps are altitude /
    (altitude - h) long; told h, exactly their length."""
    proj = GroundProjector.create(K, altitude, pitch)
    plane = ground_to_image_homography(K, altitude - h, pitch)
    start = np.array([[0.0, altitude * 0.3], [4.0, altitude * 0.5], [-6.0, altitude * 0.8], [2.0, 0.0]])
    move = np.array([[0.0, 1.5], [1.5, 0.0], [1.5 / math.sqrt(2), 1.5 / math.sqrt(2)], [-1.5, 0.0]])
    then_px, now_px = apply_homography(plane, start), apply_homography(plane, start + move)
    flat = proj.ground_step(now_px, then_px)
    np.testing.assert_allclose(np.hypot(*flat.T), 1.5 * altitude / (altitude - h), rtol=1e-9)
    told = proj.ground_step(now_px, then_px, np.full(len(start), h))
    np.testing.assert_allclose(told, move, atol=1e-9)


def test_the_defaults_and_a_bad_height_in_the_configuration():
    cfg = PipelineConfig()
    assert cfg.speed.point_height_m == POINT_HEIGHT_M
    assert cfg.speed.point_height_sigma_frac == pytest.approx(0.4)
    flat = cfg.with_overrides(speed={"point_height_m": {"car": 0.0}})
    assert flat.speed.point_height_m == {"car": 0.0}
    for bad in ({"car": -0.5}, {"bus": 7.0}):
        with pytest.raises(ConfigError, match="point height must be within 0..5 m"):
            cfg.with_overrides(speed={"point_height_m": bad})
