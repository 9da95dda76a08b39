"""Vehicles have height (pipelines.vehicle_height): a point h above the road, projected onto the road
from a camera H above it, moves H / (H - h) as far; each step is scaled back by 1 - h / H and the
point height's uncertainty is in the speed's sigma."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval.groundtruth import load_mot_gt
from eval.metrics import box_iou
from eval.oracle import OracleDetector
from eval.simulate import SIM_CLASS_NAMES, FlightSpec, simulate_flight
from pipelines.builder import build_pipeline
from pipelines.camera import get_profile, intrinsics_for
from pipelines.config import ConfigError, PipelineConfig
from pipelines.geometry import GroundProjector, apply_homography, ground_to_image_homography
from pipelines.runner import load_frames
from pipelines.vehicle_height import (
    POINT_HEIGHT_M,
    POINT_SIZE_BOUNDS_M,
    bounded_by_size,
    measured_points,
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


def test_a_point_its_box_s_size_lowered_keeps_its_class_s_sigma():
    h, told, big_h = np.array([1.1, 0.75]), np.array([2.3, 0.75]), np.array([30.0, 30.0])
    got = sigma_frac(h, big_h, 0.4, np.maximum(h, told))
    assert got == pytest.approx([0.4 * 2.3 / (30 - 1.1), 0.4 * 0.75 / 29.25])
    assert sigma_frac(h, big_h, 0.4) == pytest.approx([0.4 * 1.1 / 28.9, 0.4 * 0.75 / 29.25])
    heights, sig_heights = measured_points(
        ["bus", "car"], np.array([4.0, 4.0]), POINT_HEIGHT_M, (5.0, 6.5), 2
    )
    assert heights == pytest.approx(h) and sig_heights == pytest.approx([2.3, 0.75])


def test_point_heights_by_class_fall_back_to_vehicle():
    table = {"car": 0.75, "bus": 1.55, "vehicle": 0.7}
    got = point_heights(np.array(["car", "bus", "tractor"], dtype=object), table, 3)
    np.testing.assert_allclose(got, [0.75, 1.55, 0.7])
    np.testing.assert_allclose(point_heights(None, table, 2), [0.7, 0.7])
    np.testing.assert_allclose(point_heights(["car"], {"car": 0.75}, 1), [0.75])
    np.testing.assert_allclose(point_heights(["tractor"], {"car": 0.75}, 1), [0.0])


@pytest.mark.parametrize(
    ("name", "size", "expected"),
    [
        ("bus", 3.9, 1.1),  # a car-sized box the detector called a bus: no higher than a van
        ("truck", 4.5, 1.1),
        ("car", 3.9, 0.75),  # a cap only lowers
        ("motorcycle", 2.0, 0.6),
        ("van", 5.5, 1.1),  # between the bounds: its class's
        ("bus", 5.5, 2.3),
        ("car", 6.6, 2.3),  # a box truck called a car: no lower than a truck
        ("van", 7.5, 2.3),
        ("bus", 8.0, 2.3),  # a floor only raises
        ("car", math.nan, 0.75),  # cut by the border: its size says nothing
        ("bus", math.nan, 2.3),
    ],
)
def test_a_box_s_size_bounds_its_class_s_point(name, size, expected):
    h = point_heights([name], POINT_HEIGHT_M, 1)
    got = bounded_by_size(h, np.array([size]), POINT_HEIGHT_M, POINT_SIZE_BOUNDS_M)
    assert got == pytest.approx([expected])
    assert bounded_by_size(h, np.array([size]), POINT_HEIGHT_M, None) == pytest.approx(h)


def test_a_size_bound_keeps_a_world_of_flat_vehicles_flat():
    flat = dict.fromkeys(POINT_HEIGHT_M, 0.0)
    h = point_heights(["car", "bus"], flat, 2)
    assert bounded_by_size(h, np.array([3.0, 9.0]), flat, POINT_SIZE_BOUNDS_M) == pytest.approx([0, 0])


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
    assert cfg.speed.point_size_bounds_m == POINT_SIZE_BOUNDS_M
    off = PipelineConfig.from_dict({"speed": {"point_size_bounds_m": None}})
    assert off.speed.point_size_bounds_m is None
    for bad in ((6.5, 5.0), (0.0, 5.0), (5.0, 80.0)):
        with pytest.raises(ConfigError, match="point_size_bounds_m must be two sizes"):
            cfg.with_overrides(speed={"point_size_bounds_m": list(bad)})


CLOSE = FlightSpec(  # low and straight down: where a point's height weighs most (1.5 m is 5 % at 30 m)
    seed=11,
    duration_s=3.0,
    width=640,
    height=360,
    altitude_m=30.0,
    pitch_deg=-90.0,
    drift_mps=(0.0, 0.0),
    yaw_rate_dps=0.0,
    n_vehicles=10,
    mask_every=0,
    preset="ultrafast",
    vehicle_sizes="realistic",
    vehicle_height=True,
)


@pytest.fixture(scope="module")
def close_flight(tmp_path_factory):
    return simulate_flight(CLOSE, tmp_path_factory.mktemp("close"))


def _speeds_by_truth(flight, bounds, label: str | None) -> dict[tuple[int, int], float]:
    """Every speed the pipeline reports for a car, keyed by (frame, true vehicle), with the oracle's
    exact boxes given the class ``label`` (None: the simulator's own)."""
    names = None if label is None else dict.fromkeys(SIM_CLASS_NAMES, label)
    detector = OracleDetector.from_mot(flight.gt, class_names=names, jitter_px=0.3, seed=1)
    config = PipelineConfig.from_dict({"road": {"enabled": False}, "speed": {"point_size_bounds_m": bounds}})
    pipeline = build_pipeline(config, detector=detector)
    truth = load_mot_gt(flight.gt, class_names=SIM_CLASS_NAMES).by_frame()
    source, frames, _ = load_frames(flight.video, flight.srt, camera=flight.spec.camera)
    out = {}
    with source:
        for frame in frames:
            det = pipeline.process(frame).detections
            gt = truth.get(frame.number)
            if gt is None or not len(det) or not len(gt.ids):
                continue
            iou = box_iou(det.xyxy, gt.xyxy)
            for row, speed in enumerate(det.data["speed_kmh"]):
                j = int(np.argmax(iou[row]))
                if np.isfinite(speed) and iou[row, j] > 0.7 and gt.class_names[j] == "car":
                    out[(frame.number, int(gt.ids[j]))] = float(speed)
    return out


def test_a_car_the_detector_calls_a_bus_is_measured_by_its_box_s_size(close_flight):
    """Every car-sized box called a bus: measured at a bus's 2.3 m point it reads 5 % slow at 30 m;
    its box's size bounds it to a van's 1.1 m, 1.2 % from a car's own."""
    own = _speeds_by_truth(close_flight, list(POINT_SIZE_BOUNDS_M), None)
    bounded = _speeds_by_truth(close_flight, list(POINT_SIZE_BOUNDS_M), "bus")
    unbounded = _speeds_by_truth(close_flight, None, "bus")
    cars = {k for k in own if k in bounded and k in unbounded}
    assert len(cars) > 100
    ratio = {
        name: np.median([runs[k] / own[k] for k in cars]) for name, runs in (("b", bounded), ("u", unbounded))
    }
    assert ratio["u"] == pytest.approx((30 - 2.3) / (30 - 0.75), abs=0.01), ratio
    assert ratio["b"] == pytest.approx((30 - 1.1) / (30 - 0.75), abs=0.005), ratio
