"""A measured base (pipelines.calibrate): lines of known length on the road give the camera's
height above it and the gimbal's pitch bias; ``airpatrol calibrate`` on a recorded flight."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
import yaml
from flight_helpers import srt_flight

from pipelines.calibrate import BaseError, BaseLine, misfit_inflation, share_on_mask, solve_base
from pipelines.camera import get_profile, intrinsics_for
from pipelines.geometry import apply_homography, ground_to_image_homography

INTR = intrinsics_for(get_profile("dji_mavic_3"), 1920, 1080)


def drawn(segments, height: float, pitch: float, *, click_px: float = 0.0, seed: int = 0) -> list[BaseLine]:
    """The lines an officer draws: ground segments (metres, this frame's ground) seen by the true
    camera, each end clicked ``click_px`` off at random."""
    rng = np.random.default_rng(seed)
    h = ground_to_image_homography(INTR, height, pitch)
    lines = []
    for a, b in segments:
        pa, pb = apply_homography(h, np.array([a, b], float)) + rng.normal(0.0, click_px, (2, 2))
        lines.append(BaseLine(tuple(pa), tuple(pb), math.dist(a, b)))
    return lines


ALONG = ((-3.0, 30.0), (-3.0, 75.0))  # dash periods along the road, ahead of the camera
ACROSS = ((-12.0, 50.0), (12.0, 50.0))  # a stop line across it
LONG_ALONG = ((-3.0, 32.0), (-3.0, 122.0))  # read off a map: kerb corners 90 m apart
CROSS_ROAD = ((-40.0, 60.0), (40.0, 60.0))  # ... and along the cross road of an intersection
NADIR_ALONG = ((-3.0, -20.0), (-3.0, 20.0))
NADIR_ACROSS = ((-15.0, 5.0), (15.0, 5.0))


@pytest.mark.parametrize(
    ("height", "reading", "true_pitch", "reported", "segments", "pitch_solved"),
    [
        (60.0, 68.0, -90.0, -90.0, [NADIR_ALONG], False),  # took off 8 m below the road
        (60.0, 52.0, -90.0, -90.0, [NADIR_ALONG, NADIR_ACROSS], False),  # nadir: no pitch to measure
        (60.0, 68.0, -45.0, -45.0, [ALONG], False),
        # short lines in two directions: the pitch's information is weak, the prior's 1 deg holds it
        (60.0, 68.0, -45.0, -43.5, [ALONG, ACROSS], False),
        (60.0, 68.0, -45.0, -43.5, [LONG_ALONG, CROSS_ROAD], True),  # long ones measure the bias too
        (120.0, 110.0, -60.0, -61.0, [((-3.0, 25.0), (-3.0, 140.0)), ((-70.0, 60.0), (70.0, 60.0))], True),
    ],
)
def test_the_base_recovers_the_height_above_the_road(
    height, reading, true_pitch, reported, segments, pitch_solved
):
    lines = drawn(segments, height, true_pitch)
    s = solve_base(lines, INTR, reading, reported)
    assert s.pitch_solved is pitch_solved
    assert abs(s.height_m - height) <= 2.0 * s.height_sigma_m  # exact clicks: only the prior pulls
    assert abs(s.pitch_bias_deg - (true_pitch - reported)) <= 2.0 * s.pitch_sigma_deg
    if true_pitch == reported:  # the prior's 0 is the truth: exact
        assert s.height_m == pytest.approx(height, rel=1e-3)
        assert s.pitch_bias_deg == pytest.approx(0.0, abs=0.01)
    if pitch_solved:
        assert s.pitch_sigma_deg < 0.5 and abs(s.pitch_bias_deg - (true_pitch - reported)) < 0.3
    assert s.takeoff_above_road_m == pytest.approx(s.height_m - reading)
    assert max(abs(r) for r in s.residuals_m) < 0.01 * min(ln.length_m for ln in lines)
    ref = s.reference(at_time_s=12.0, set_by="PC 12", set_at="2026-11-27T10:00:00+00:00")
    assert (ref.source, ref.sigma_m, ref.at_time_s, ref.set_by) == (
        "measured_base",
        s.height_sigma_m,
        12.0,
        "PC 12",
    )
    assert "line(s)" in ref.detail


def test_the_sigma_holds_the_errors_of_clicks_and_lengths():
    """Over seeded clicks (1.5 px) and lengths (0.5 %), and a gimbal off by a prior's draw, the
    reported sigma holds about 68 % of the height errors (not far more, not far less)."""
    within, n = 0, 120
    rng = np.random.default_rng(5)
    for seed in range(n):
        bias = float(rng.normal(0.0, 1.0))
        lines = drawn([LONG_ALONG, CROSS_ROAD], 60.0, -45.0, click_px=1.5, seed=seed)
        lines = [BaseLine(ln.p1, ln.p2, ln.length_m * (1 + rng.normal(0.0, 0.005))) for ln in lines]
        s = solve_base(lines, INTR, 68.0, -45.0 - bias)
        within += abs(s.height_m - 60.0) <= s.height_sigma_m
    assert 0.55 <= within / n <= 0.85


THREE_LINES = [((-3.0, 40.0), (-3.0, 70.0)), ((-6.0, 42.0), (-6.0, 65.0)), ((-10.0, 55.0), (10.0, 55.0))]


def test_the_height_and_pitch_errors_fill_their_covariance():
    """Three lines (two along the road, one across), 1.5 px clicks, 0.5 % lengths, a gimbal off by
    its 1.41 deg prior: the (height, pitch) errors' Mahalanobis distance under the solve's covariance
    averages its two degrees of freedom, and 68 % fall inside the 1-sigma ellipse (chi-square 2.30).
    Inflating the covariance whenever chi-square passed its degrees of freedom averaged 1.75 and put
    74 % inside."""
    rng = np.random.default_rng(1)
    m2 = []
    for seed in range(300):
        bias = float(rng.normal(0.0, 1.41))
        lines = drawn(THREE_LINES, 60.0, -45.0 + bias, click_px=1.5, seed=seed)
        lines = [BaseLine(ln.p1, ln.p2, ln.length_m * (1 + rng.normal(0.0, 0.005))) for ln in lines]
        s = solve_base(lines, INTR, 68.0, -45.0, pitch_sigma_deg=1.41)
        c = s.height_pitch_corr * s.height_sigma_m * s.pitch_sigma_deg
        cov = np.array([[s.height_sigma_m**2, c], [c, s.pitch_sigma_deg**2]])
        err = np.array([s.height_m - 60.0, s.pitch_bias_deg - bias])
        m2.append(float(err @ np.linalg.solve(cov, err)))
    assert 1.8 <= np.mean(m2) <= 2.2
    assert 0.62 <= np.mean(np.array(m2) <= 2.30) <= 0.74


@pytest.mark.parametrize(
    ("chi2", "dof", "factor"),
    [
        (0.5, 2, 1.0),
        (5.9, 2, 1.0),  # under chi-square's 95 % point for 2 (5.99): the stated noise explains it
        (8.0, 2, 4.0),  # more: the noise the residuals show
        (3.0, 1, 1.0),
        (4.0, 1, 4.0),
        (50.0, 0, 1.0),  # one line (and the prior): nothing to judge it by
        (float("nan"), 2, 1.0),
    ],
)
def test_misfit_inflation(chi2, dof, factor):
    assert misfit_inflation(chi2, dof) == pytest.approx(factor)


def test_a_mistyped_length_widens_the_sigma():
    """One of three lengths typed 6 % long: the residuals exceed what clicks and lengths explain and
    the height's sigma widens to hold the error the slip makes."""
    lines = drawn(THREE_LINES, 60.0, -45.0, click_px=0.0)
    honest = solve_base(lines, INTR, 68.0, -45.0)
    slipped = [lines[0], BaseLine(lines[1].p1, lines[1].p2, lines[1].length_m * 1.06), lines[2]]
    s = solve_base(slipped, INTR, 68.0, -45.0)
    assert s.height_sigma_m > 2.0 * honest.height_sigma_m
    assert abs(s.height_m - 60.0) <= 2.0 * s.height_sigma_m


@pytest.mark.parametrize(
    ("lines", "reading", "pitch", "message"),
    [
        ([], 60.0, -90.0, "at least one line"),
        ([BaseLine((100, 500), (104, 503), 5.0)], 60.0, -90.0, "at least 10 px apart"),
        ([BaseLine((100, 500), (900, 500), 0.0)], 60.0, -90.0, "out of range"),
        ([BaseLine((100, 500), (900, 500), 5000.0)], 60.0, -90.0, "out of range"),
        ([BaseLine((100, 500), (900, 500), 20.0, 15.0)], 60.0, -90.0, "under half the length"),
        ([BaseLine((100, 500), (2900, 500), 20.0)], 60.0, -90.0, "outside the 1920x1080 frame"),
        ([BaseLine((100, float("nan")), (900, 500), 20.0)], 60.0, -90.0, "must be numbers"),
        ([BaseLine((900, 10), (900, 200), 20.0)], 60.0, -20.0, "above the horizon"),
        ([BaseLine((100, 500), (900, 500), 500.0)], 60.0, -90.0, "the drone reads 60.0 m"),  # absurd length
        ([BaseLine((100, 500), (900, 500), 20.0)], 0.0, -90.0, "altitude reading must be positive"),
        ([BaseLine((100, 500), (900, 500), 20.0)], 60.0, 10.0, "pitch must be in"),
    ],
)
def test_a_bad_base_says_what_is_wrong(lines, reading, pitch, message):
    with pytest.raises(BaseError, match=message):
        solve_base(lines, INTR, reading, pitch)


def test_share_on_mask():
    mask = np.zeros((100, 200), bool)
    mask[40:60, :] = True
    assert share_on_mask(mask, (10, 50), (190, 50)) == 1.0
    assert share_on_mask(mask, (100, 0), (100, 99)) == pytest.approx(0.2, abs=0.03)


def test_the_command_solves_a_recorded_frame_and_process_uses_it(tmp_path, capsys):
    from airpatrol.cli import main

    video, srt = srt_flight(tmp_path, 68.0, pitch=-45.0, n=4, size=(1920, 1080))
    args = [
        "calibrate",
        str(video),
        "--srt",
        str(srt),
        "--camera",
        "mavic 3",
        "--frame",
        "3",
        "--set-by",
        "PC 12",
    ]
    for ln in drawn([LONG_ALONG, CROSS_ROAD], 60.0, -45.0):
        args += ["--line", f"{ln.p1[0]:.3f},{ln.p1[1]:.3f},{ln.p2[0]:.3f},{ln.p2[1]:.3f}={ln.length_m:g}"]
    assert main([*args, "--out", str(tmp_path / "base")]) == 0
    out = capsys.readouterr().out
    assert "frame 3 (0.067 s): 2 line(s): 60.00 +-" in out and "take-off -8.00 m above the road" in out
    doc = yaml.safe_load((tmp_path / "base" / "height_reference.yaml").read_text())
    ref = doc["camera"]["height_reference"]
    assert ref["source"] == "measured_base" and ref["takeoff_above_road_m"] == pytest.approx(-8.0, abs=0.01)
    assert (ref["set_by"], ref["at_time_s"], doc["measured_base"]["frame"]) == (
        "PC 12",
        pytest.approx(0.067, abs=1e-3),
        3,
    )
    assert cv2.imread(str(tmp_path / "base" / "frame.png")).shape == (1080, 1920, 3)

    from pipelines.cli import _height_reference
    from pipelines.config import PipelineConfig
    from pipelines.ground import reference_from_config

    cfg = PipelineConfig().with_overrides(
        camera={"height_reference": _height_reference(tmp_path / "base" / "height_reference.yaml")}
    )
    assert reference_from_config(cfg.camera).takeoff_above_road_m == pytest.approx(-8.0, abs=0.01)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--frame", "9", "--line", "100,500,900,500=20"], "has 4 frames: no frame 9"),
        (["--frame", "2", "--line", "100,500,900,500"], "expected u1,v1,u2,v2=LENGTH"),
        (["--frame", "2", "--line", "100,500,104,500=20"], "at least 10 px apart"),
        (["--frame", "2", "--line", "100,500,900,500=20", "--camera", "nikon"], "unknown camera"),
    ],
)
def test_the_command_refuses_bad_input_in_one_line(tmp_path, capsys, extra, message):
    from airpatrol.cli import main

    video, srt = srt_flight(tmp_path, 68.0, pitch=-90.0, n=4, size=(1920, 1080))
    args = ["calibrate", str(video), "--srt", str(srt)]
    if "--camera" not in extra:
        args += ["--camera", "mavic 3"]
    code = 2
    try:
        code = main([*args, *extra])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_height_reference_file_without_one_is_refused(tmp_path):
    from pipelines.cli import _height_reference
    from pipelines.config import ConfigError

    path = tmp_path / "ref.yaml"
    path.write_text("camera:\n  name: mavic 3\n")
    with pytest.raises(ConfigError, match="no camera.height_reference"):
        _height_reference(path)


@pytest.mark.parametrize(
    ("segments", "direction"),
    [
        ([ALONG], (0.0, 1.0)),  # one line along the road; vehicles along it: the pitch's error cancels
        ([ALONG], (1.0, 0.0)),  # ... vehicles across it do not get that
        ([LONG_ALONG, CROSS_ROAD], (0.0, 1.0)),
    ],
)
def test_a_base_s_scale_sigma_holds_what_it_gives_a_vehicle(segments, direction):
    """Monte Carlo over the gimbal's bias (its 1 deg prior), clicks and lengths: a vehicle's speed
    measured with the solved height and pitch is off by about the sigma pipelines.height predicts
    from the solve's covariance (not by the sum that ignores it)."""
    from pipelines.height import ScaleModel, scale_sigma_frac

    rng = np.random.default_rng(11)
    vehicle = np.array([[-3.0, 55.0], [-3.0 + 5.0 * direction[0], 55.0 + 5.0 * direction[1]]])
    errors, predicted, independent = [], [], []
    for seed in range(150):
        bias = float(rng.normal(0.0, 1.0))  # the gimbal reports -45; it is at -45 + bias
        truth = ground_to_image_homography(INTR, 60.0, -45.0 + bias)
        lines = drawn(segments, 60.0, -45.0 + bias, click_px=1.5, seed=seed)
        lines = [BaseLine(ln.p1, ln.p2, ln.length_m * (1 + rng.normal(0.0, 0.005))) for ln in lines]
        s = solve_base(lines, INTR, 68.0, -45.0)
        used = ground_to_image_homography(INTR, s.height_m, -45.0 + s.pitch_bias_deg)
        seen = apply_homography(np.linalg.inv(used), apply_homography(truth, vehicle))
        errors.append(np.linalg.norm(seen[1] - seen[0]) / 5.0 - 1.0)
        at = apply_homography(np.linalg.inv(used), apply_homography(truth, vehicle[:1]))
        per_deg = ScaleModel(INTR, s.height_m, -45.0 + s.pitch_bias_deg).pitch_frac_per_deg(
            at, np.array([direction])
        )
        cov = s.height_pitch_corr * s.height_sigma_m * s.pitch_sigma_deg
        predicted.append(
            float(scale_sigma_frac(s.height_m, s.height_sigma_m, s.pitch_sigma_deg, per_deg, cov)[0])
        )
        independent.append(
            float(scale_sigma_frac(s.height_m, s.height_sigma_m, s.pitch_sigma_deg, per_deg)[0])
        )
    rms, sigma = float(np.sqrt(np.mean(np.square(errors)))), float(np.mean(predicted))
    assert 0.75 * sigma <= rms <= 1.3 * sigma, (rms, sigma, float(np.mean(independent)))


MID_ALONG = ((-3.0, 40.0), (-3.0, 75.0))  # inside the frame whatever the gimbal's bias (3 sigma)
FAR_ALONG = ((-3.0, 40.0), (-3.0, 110.0))
MID_ACROSS = ((-30.0, 60.0), (30.0, 60.0))


@pytest.mark.parametrize(
    ("segments", "path", "old_z_std"),
    [
        ([MID_ALONG], (35.0, 95.0), 0.8),  # one line along the road: height and pitch cancel near it only
        ([MID_ALONG], (28.0, 125.0), 0.85),  # ... a vehicle measured from the frame's foot to its top
        ([FAR_ALONG, MID_ACROSS], (35.0, 95.0), 0.95),  # two directions: the pitch measured
    ],
)
def test_a_ticket_s_scale_sigma_holds_the_error_over_its_base(segments, path, old_z_std):
    """Monte Carlo over the gimbal's bias (1.41 deg), clicks and lengths: a vehicle in the far lane
    measured over a base ``path`` (metres along the road) through the frame. The error of its
    displacement over the base (exact: the true camera and the solved one) is the same height's and
    pitch's at every position: base_scale_frac (the sigma at the mean pitch sensitivity) holds it
    like a sigma should; the mean of the positions' sigmas, which the ticket took before, is too
    wide (its z spread under ``old_z_std``)."""
    from pipelines.height import ScaleModel, base_scale_frac, scale_sigma_frac
    from pipelines.types import ScaleInfo

    rng = np.random.default_rng(3)
    along = np.linspace(*path, 31)
    road = np.column_stack([np.full_like(along, 3.0), along])
    z_new, z_old = [], []
    for seed in range(250):
        bias = float(rng.normal(0.0, 1.41))
        truth = ground_to_image_homography(INTR, 60.0, -45.0 + bias)
        lines = drawn(segments, 60.0, -45.0 + bias, click_px=1.5, seed=seed)
        lines = [BaseLine(ln.p1, ln.p2, ln.length_m * (1 + rng.normal(0.0, 0.005))) for ln in lines]
        s = solve_base(lines, INTR, 68.0, -45.0, pitch_sigma_deg=1.41)
        pitch = -45.0 + s.pitch_bias_deg
        used = ground_to_image_homography(INTR, s.height_m, pitch)
        seen = apply_homography(np.linalg.inv(used), apply_homography(truth, road))
        error = float(np.linalg.norm(seen[-1] - seen[0])) / (path[1] - path[0]) - 1.0
        per_deg = ScaleModel(INTR, s.height_m, pitch).pitch_frac_per_deg(seen, np.tile([0.0, 1.0], (31, 1)))
        cov = s.height_pitch_corr * s.height_sigma_m * s.pitch_sigma_deg
        scale = ScaleInfo(
            "measured_base", s.height_m, s.height_sigma_m, pitch, s.pitch_sigma_deg, height_pitch_cov=cov
        )
        z_new.append(error / base_scale_frac(scale, per_deg, np.zeros(31)))
        z_old.append(
            error
            / float(np.mean(scale_sigma_frac(s.height_m, s.height_sigma_m, s.pitch_sigma_deg, per_deg, cov)))
        )
    assert 0.6 <= np.mean(np.abs(z_new) <= 1.0) <= 0.76
    assert 0.85 <= np.std(z_new) <= 1.15
    assert np.std(z_old) < old_z_std
