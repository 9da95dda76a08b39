"""Ego-motion error metric: grid RMS against the exact homography, true motion, and the eval run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eval.datasets import load_dataset
from eval.egomotion import (
    EgoErrors,
    ego_errors,
    image_grid,
    map_points,
    pair_error,
    summarize_ego,
    true_interframe,
)
from eval.groundtruth import CameraTruth
from eval.runner import run_sequence
from eval.simulate import CameraPath, FlightSpec
from eval.variants import OracleOptions, Variant
from pipelines.config import PipelineConfig

W, H = 640, 360


def _shift(dx: float, dy: float) -> np.ndarray:
    return np.array([[1.0, 0, dx], [0, 1.0, dy], [0, 0, 1.0]])


def _rot(deg: float) -> np.ndarray:
    """Rotation about the image centre."""
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    cx, cy = (W - 1) / 2, (H - 1) / 2
    return _shift(cx, cy) @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]]) @ _shift(-cx, -cy)


def test_image_grid_is_regular_and_centred():
    g = image_grid(W, H, 4, 2)
    assert g.shape == (8, 2)
    assert np.allclose(np.unique(g[:, 0]), [79.5, 239.5, 399.5, 559.5])
    assert np.allclose(np.unique(g[:, 1]), [89.5, 269.5])
    assert np.allclose(g.mean(axis=0), [(W - 1) / 2, (H - 1) / 2])


@pytest.mark.parametrize(
    ("h_est", "h_true", "rms", "true_median"),
    [
        (np.eye(3), np.eye(3), 0.0, 0.0),  # hovering, estimated as such
        (_shift(3.0, 4.0), _shift(3.0, 4.0), 0.0, 5.0),  # exact pan
        (_shift(0.3, -0.4), np.eye(3), 0.5, 0.0),  # a constant offset: RMS = its length
        (np.eye(3), _shift(-0.03, 0.04), 0.05, 0.05),  # motion missed: error = the motion
        (_shift(2.0, 0.0), _shift(2.0, 0.05), 0.05, 2.0006),
        (
            _shift(12.0, 0.0) @ np.diag([1.02, 1.02, 1.0]),
            _shift(12.0, 0.0) @ np.diag([1.02, 1.02, 1.0]),
            0.0,
            None,
        ),
    ],
)
def test_pair_error_table(h_est, h_true, rms, true_median):
    e, t = pair_error(h_est, h_true, W, H)
    assert e == pytest.approx(rms, abs=1e-9)
    if true_median is not None:
        assert t == pytest.approx(true_median, abs=1e-3)


def test_pair_error_of_a_rotation_is_its_rms_arc():
    """A 0.1 deg rotation missed entirely: the RMS of r * angle over the grid points kept in view."""
    h = _rot(0.1)
    e, _ = pair_error(np.eye(3), h, W, H)
    g = image_grid(W, H)
    r = np.linalg.norm(g - [(W - 1) / 2, (H - 1) / 2], axis=1)
    expect = math.sqrt(np.mean((2 * r * math.sin(math.radians(0.05))) ** 2))
    assert e == pytest.approx(expect, rel=1e-6)


def test_only_points_seen_in_both_frames_count():
    """Half the grid leaves the image: the error is measured on the half still in view."""
    grid = np.array([[10.0, 100.0], [600.0, 100.0]])
    h_true = _shift(100.0, 0.0)  # (600, 100) -> (700, 100): out of view
    h_est = _shift(100.0, 0.0) @ np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    h_est = h_est.copy()
    h_est[1, 2] = 1.0  # one px off everywhere
    assert pair_error(h_est, h_true, W, H, grid) == (pytest.approx(1.0), pytest.approx(100.0))
    assert all(math.isnan(v) for v in pair_error(np.eye(3), _shift(5000.0, 0.0), W, H))


def test_map_points_marks_infinity():
    h = np.array([[1.0, 0, 0], [0, 1.0, 0], [0.01, 0, 1.0]])
    out = map_points(h, np.array([[-100.0, 0.0], [0.0, 0.0]]))
    assert np.isnan(out[0]).all() and np.allclose(out[1], [0, 0])


@pytest.mark.parametrize(
    ("pitch", "drift", "yaw_rate", "altitude"),
    [(-90.0, (1.5, 0.0), 0.0, 60.0), (-90.0, (0.0, -3.0), 0.0, 120.0), (-90.0, (0.0, 0.0), 6.0, 80.0)],
)
def test_true_interframe_matches_the_simulated_drone(pitch, drift, yaw_rate, altitude):
    """Nadir: the true motion is the drift over the ground sampling distance (or, yawing about the
    optical axis, a rotation about the principal point)."""
    spec = FlightSpec(
        duration_s=0.5, fps=10.0, width=W, height=H, altitude_m=altitude, pitch_deg=pitch,
        drift_mps=drift, yaw_rate_dps=yaw_rate, n_vehicles=0,
    )  # fmt: skip
    cam = CameraPath(spec)
    h = true_interframe(cam.world_to_image(2), cam.world_to_image(3))
    _, t = pair_error(np.eye(3), h, W, H)
    gsd = cam.gsd_at(2, (W / 2, H / 2))
    if yaw_rate == 0:
        assert t == pytest.approx(math.hypot(*drift) / spec.fps / gsd, rel=1e-6)
        assert np.allclose(h[:2, :2], np.eye(2), atol=1e-12)  # a pure translation
    else:
        principal = np.array([[cam.intrinsics.cx, cam.intrinsics.cy]])
        assert np.allclose(map_points(h, principal), principal, atol=1e-9)
        angle = math.degrees(math.atan2(h[1, 0], h[0, 0]))
        assert abs(angle) == pytest.approx(yaw_rate / spec.fps, rel=1e-6)


def _truth(mats: list[np.ndarray], first: int = 1) -> CameraTruth:
    return CameraTruth(np.arange(first, first + len(mats)), np.stack(mats))


def test_ego_errors_pairs_and_summary():
    """World -> image: the camera pans 2 px per frame; frame 3's estimate is 1 px off, frame 5 is
    missing (so are the pairs 4-5 and 5-6), frame 7 has no truth; frame 0 has no previous frame."""
    truth = _truth([_shift(-2.0 * k, 0) for k in range(7)])  # 0-based frames 0..6
    est = {k: _shift(-2.0, 0) for k in (0, 1, 2, 3, 4, 6, 7)}
    est[3] = _shift(-2.0, 1.0)
    errors = ego_errors(est, truth, W, H, valid={3: False})
    assert list(errors.frames) == [1, 2, 3, 4]
    assert np.allclose(errors.rms_px, [0, 0, 1, 0]) and np.allclose(errors.true_px, 2.0)
    assert list(errors.invalid) == [False, False, True, False]
    s = summarize_ego(errors)
    assert s["pairs"] == 4 and s["mean_px"] == pytest.approx(0.25) and s["max_px"] == pytest.approx(1.0)
    assert s["p95_px"] == pytest.approx(np.percentile([0, 0, 1, 0], 95))
    assert s["true_median_px"] == pytest.approx(2.0) and s["invalid"] == 1


def test_summary_of_nothing():
    empty = EgoErrors(np.zeros(0, int), np.zeros(0), np.zeros(0), np.zeros(0, bool))
    assert summarize_ego(empty) == {
        "pairs": 0, "mean_px": None, "p95_px": None, "max_px": None, "true_median_px": None, "invalid": 0,
    }  # fmt: skip


def test_eval_scores_ego_motion_on_a_simulated_flight(small_flight_dir):
    """The runner's ego-motion error: small with compensation on, the camera's own motion with it
    off (an identity estimate misses all of it)."""
    seq = load_dataset(small_flight_dir).sequences[0]
    cfg = PipelineConfig().with_overrides(road={"enabled": False})
    on = run_sequence(
        seq, cfg, Variant("base", oracle=True), oracle=OracleOptions(), max_frames=20, progress=False
    )
    off = run_sequence(
        seq,
        cfg,
        Variant("egomotion=off", overrides=(("egomotion", "enabled", False),), oracle=True),
        oracle=OracleOptions(),
        max_frames=20,
        progress=False,
    )
    assert on.egomotion["pairs"] == off.egomotion["pairs"] == 19
    true = off.egomotion["true_median_px"]
    assert true > 0.3  # the regression flight drifts (1.1 m/s at 60 m: 0.36 px/frame) and yaws
    assert off.egomotion["mean_px"] == pytest.approx(true, rel=0.2)
    assert on.egomotion["mean_px"] < 0.2 * true, (on.egomotion, off.egomotion)
