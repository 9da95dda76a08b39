"""The laser rangefinder as a height source (pipelines.rangefinder), chosen per frame by the ground
model against the other references, and its sigma against the geometry it stands for."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.camera import get_profile, intrinsics_for
from pipelines.config import CameraConfig, RangefinderConfig
from pipelines.geometry import GroundProjector, apply_homography, ground_to_image_homography
from pipelines.ground import GroundModel
from pipelines.height import HeightReference, ScaleModel, reference_key, scale_sigma_frac, with_pitch_observed
from pipelines.rangefinder import MAX_SPREAD_M, LrfReading, Rangefinder, lrf_reading, pool, spot_refusal
from pipelines.types import Frame, Telemetry

W, H = 1920, 1080
INTR = intrinsics_for(get_profile("dji_mavic_3"), W, H)
ROAD = np.ones((H // 4, W // 4), bool)  # a road mask at a quarter of the frame's size


def frame(t: float, altitude: float, pitch: float, lrf: float | None, sample_t: float | None = None) -> Frame:
    tel = Telemetry(
        t if sample_t is None else sample_t, altitude_m=altitude, gimbal_pitch_deg=pitch, camera="mavic 3",
        lrf_range_m=lrf,
    )  # fmt: skip
    return Frame(index=int(t * 30), timestamp_s=t, image=np.zeros((H, W, 3), np.uint8), telemetry=tel)


@pytest.mark.parametrize(
    ("range_m", "pitch", "altitude", "offset", "sigma", "per_deg"),
    [
        (60.0, -90.0, 68.0, -8.0, 0.2 + 0.0015 * 60, 0.0),  # took off 8 m below the road
        (60.0 * math.sqrt(2), -45.0, 60.0, 0.0, (0.2 + 0.0015 * 60 * math.sqrt(2)) / math.sqrt(2), -60 * math.pi / 180),
        (120.0, -30.0, 57.0, 3.0, (0.2 + 0.18) * 0.5, -120 * math.cos(math.radians(30)) * math.pi / 180),
    ],
)  # fmt: skip
def test_a_reading_is_the_take_off_height_above_the_road(
    range_m, pitch, altitude, offset, sigma, per_deg
) -> None:
    r = lrf_reading(range_m, pitch, altitude, 5.0, 0.2, 0.0015)
    assert (r.time_s, r.offset_m, r.sigma_m) == (5.0, pytest.approx(offset), pytest.approx(sigma))
    assert r.m_per_pitch_deg == pytest.approx(per_deg, abs=1e-12)


@pytest.mark.parametrize(
    ("range_m", "pitch", "message"),
    [(0.0, -90.0, "not a positive"), (math.nan, -90.0, "not a positive"), (80.0, -10.0, "too far")],
)
def test_a_reading_that_cannot_give_a_height_is_refused(range_m, pitch, message) -> None:
    with pytest.raises(ValueError, match=message):
        lrf_reading(range_m, pitch, 60.0, 0.0, 0.2, 0.0015)


def off_centre_mask() -> np.ndarray:
    m = ROAD.copy()
    m[:, W // 8 - 20 : W // 8 + 20] = False  # a strip through the centre is not road (a verge)
    return m


@pytest.mark.parametrize(
    ("mask", "boxes", "reason"),
    [
        (ROAD, None, None),
        (np.ones((H, W), bool), np.zeros((0, 4)), None),  # full resolution, no boxes
        (ROAD, np.array([[0, 0, 100, 100.0]]), None),  # a box elsewhere
        (None, None, "no road mask"),
        (off_centre_mask(), None, "off the road (0% of its spot"),
        (ROAD, np.array([[900, 500, 1000, 600.0]]), "a vehicle is under the laser's point"),
    ],
)
def test_the_laser_point_must_be_the_road(mask, boxes, reason) -> None:
    got = spot_refusal(W, H, mask, boxes, 0.01, 0.9)
    assert got == reason if reason is None else reason in got


def readings(offsets, sigma=0.3, per_deg=0.0) -> list[LrfReading]:
    return [LrfReading(float(i), o, sigma, per_deg) for i, o in enumerate(offsets)]


def test_pooled_readings_reject_what_is_not_the_road() -> None:
    rng = np.random.default_rng(3)
    good = -8.0 + np.clip(rng.normal(0, 0.3, 20), -0.6, 0.6)  # within 2 sigma
    ref, why = pool(readings([*good, -6.5, -6.4, -20.0]), 1.0)  # two roofs and a ditch
    assert why == "" and ref is not None and ref.source == "lrf"
    assert ref.takeoff_above_road_m == pytest.approx(float(np.mean(good)), abs=0.01)
    assert ref.sigma_m == pytest.approx(0.3 / math.sqrt(20), rel=0.5)
    assert ref.height_pitch_corr == 0.0 and ref.pitch_sigma_deg == 1.0
    assert ref.at_time_s == pytest.approx(9.5) and "20 reading(s) over 19 s" in ref.detail


def test_readings_that_disagree_make_no_reference() -> None:
    ref, why = pool(readings([-8.0, -8.1, 2.0, 3.0, 12.0]), 1.0)
    assert ref is None and "disagree" in why


def test_scatter_beyond_the_readings_sigma_inflates_it() -> None:
    tight, _ = pool(readings([-8.0, -8.1, -7.9, -8.0], sigma=0.3), 1.0)
    wide, _ = pool(readings([-8.0, -7.0, -9.0, -8.0, -7.4, -8.6], sigma=0.3), 1.0)
    assert tight.sigma_m == pytest.approx(0.15)  # 0.3 / sqrt(4): the scatter is within it
    assert wide.sigma_m > 0.3


def test_an_oblique_reading_carries_the_pitch_in_its_sigma_and_correlation() -> None:
    per_deg = -85.0 * math.cos(math.radians(45)) * math.pi / 180  # about -1.05 m a degree
    ref, _ = pool(readings([0.0] * 10, sigma=0.2, per_deg=per_deg), 1.0)
    assert ref.sigma_m == pytest.approx(math.hypot(0.2 / math.sqrt(10), per_deg), rel=1e-6)
    assert ref.height_pitch_corr == pytest.approx(per_deg / ref.sigma_m) and ref.height_pitch_corr < -0.9


def test_each_sample_counts_once_and_old_readings_expire() -> None:
    lrf = Rangefinder(RangefinderConfig(min_readings=3, window_s=30, max_age_s=10), 1.0)
    for t in np.arange(0.0, 6.0, 1 / 30):  # 30 fps video, OSD at 0.5 Hz: each sample on 60 frames
        sample = 2.0 * math.floor(t / 2.0)
        lrf.observe(frame(t, 68.0, -90.0, 60.0, sample_t=sample), 68.0, -90.0, ROAD, None)
    assert len(lrf.readings) == 3
    ref = lrf.reference(6.0)
    assert ref is not None and ref.takeoff_above_road_m == pytest.approx(-8.0)
    assert lrf.reference(4.0 + 10.5) is None and "no usable laser reading for 10 s" in lrf.status
    assert lrf.reference(100.0) is None and not lrf.readings


def test_too_few_readings_and_refusals_are_said() -> None:
    lrf = Rangefinder(RangefinderConfig(min_readings=3, provisional=False), 1.0)
    lrf.observe(frame(0.0, 68.0, -90.0, 60.0), 68.0, -90.0, ROAD, None)
    assert lrf.reference(0.5) is None and lrf.status == "1 of 3 laser readings needed"
    lrf.observe(frame(1.0, 68.0, -90.0, 60.0), 68.0, -90.0, None, None)
    lrf.observe(frame(2.0, 68.0, -90.0, 60.0), 68.0, -90.0, ROAD, np.array([[900, 500, 1000, 600.0]]))
    assert len(lrf.readings) == 1 and sum(lrf.refused.values()) == 2


def test_the_first_readings_make_a_provisional_reference_until_enough_have_come() -> None:
    """Before ``min_readings``, the readings that agree: a provisional reference (its sigma widened by
    the barometer's scatter between readings, which one reading cannot show), named so; two that
    disagree: none; the third reading confirms it."""
    lrf = Rangefinder(RangefinderConfig(min_readings=3), 1.0)
    lrf.observe(frame(0.0, 68.0, -90.0, 60.0), 68.0, -90.0, ROAD, None)
    one = lrf.reference(0.5)
    alone, _ = pool(list(lrf.readings), 1.0)
    assert one is not None and one.provisional and one.takeoff_above_road_m == pytest.approx(-8.0)
    assert one.sigma_m == pytest.approx(math.hypot(alone.sigma_m, MAX_SPREAD_M))
    assert lrf.status.startswith("laser rangefinder, provisional (1 of 3 readings):")
    assert one.to_dict()["provisional"] is True
    # oblique: the widened sigma carries the same height-pitch covariance (-1 m a degree, 1 deg)
    tilted, _ = pool(readings([-8.0], sigma=0.2, per_deg=-1.0), 1.0, needed=3)
    assert tilted.provisional and tilted.sigma_m == pytest.approx(
        math.hypot(math.hypot(0.2, 1.0), MAX_SPREAD_M)
    )
    assert tilted.height_pitch_corr * tilted.sigma_m == pytest.approx(-1.0)
    assert f"+- {tilted.sigma_m:.2f} m" in tilted.detail
    lrf.observe(frame(2.0, 68.0, -90.0, 56.0), 68.0, -90.0, ROAD, None)  # a roof, a verge: 4 m off
    assert lrf.reference(2.5) is None and "disagree" in lrf.status
    for t in (4.0, 6.0):
        lrf.observe(frame(t, 68.0, -90.0, 60.0), 68.0, -90.0, ROAD, None)
    confirmed = lrf.reference(6.5)
    assert confirmed is not None and not confirmed.provisional and confirmed.sigma_m < one.sigma_m
    assert reference_key(confirmed) != reference_key(one)  # a base across the two: two references


def run_ground(camera: CameraConfig, frames: list[Frame], mask=ROAD) -> GroundModel:
    ground = GroundModel(camera)
    for f in frames:
        ground.projector(f, laser_spot=(mask, None))
    return ground


@pytest.mark.parametrize(
    ("camera", "mask", "source", "height"),
    [
        (CameraConfig(), ROAD, "lrf", 60.0),  # over unknown ground: the laser
        (CameraConfig(takeoff_above_road_m=0.0), ROAD, "lrf", 60.0),  # a site value (wrong here) loses
        (CameraConfig(), None, "flight", 68.0),  # no road mask: the laser is not trusted
        (CameraConfig(rangefinder=RangefinderConfig(enabled=False)), ROAD, "flight", 68.0),
    ],
)
def test_the_ground_model_measures_with_the_laser(camera, mask, source, height) -> None:
    frames = [frame(t, 68.0, -90.0, 60.0) for t in np.arange(0.0, 10.0, 2.0)]
    ground = run_ground(camera.model_copy(update={"name": "dji_mavic_3"}), frames, mask)
    assert (ground.scale.source, ground.scale.height_m) == (source, pytest.approx(height))


def test_a_fresh_measured_base_is_kept_against_a_laser_no_better() -> None:
    base = {"source": "measured_base", "takeoff_above_road_m": -8.0, "sigma_m": 0.05, "at_time_s": 0.0}
    camera = CameraConfig(name="dji_mavic_3", height_reference=base)
    ground = run_ground(camera, [frame(t, 68.0, -90.0, 60.0) for t in np.arange(0.0, 10.0, 2.0)])
    assert ground.scale.source == "measured_base"


def test_a_measured_base_gives_the_laser_the_pitch_it_cannot_measure() -> None:
    """Oblique, the gimbal 2 deg off what it reports: a base with lines in two directions found the
    bias (to 0.2 deg) but its height is loose; the laser's readings, taken with the corrected pitch,
    give the height, and their sigma (and the scale's) carry the base's 0.2 deg instead of the 1 deg
    prior. A new bias drops the readings taken with the old one."""
    true_pitch, reported, height = -45.0, -43.0, 60.0
    slant = height / math.sin(math.radians(-true_pitch))
    base = {
        "source": "measured_base", "takeoff_above_road_m": 0.0, "sigma_m": 1.5, "at_time_s": 0.0,
        "pitch_bias_deg": -2.0, "pitch_sigma_deg": 0.2,
    }  # fmt: skip
    camera = CameraConfig(name="dji_mavic_3", height_reference=base)
    ground = run_ground(camera, [frame(t, height, reported, slant) for t in np.arange(0.0, 10.0, 2.0)])
    scale = ground.scale
    assert scale.source == "lrf" and scale.height_m == pytest.approx(height, abs=0.05)
    assert scale.pitch_deg == pytest.approx(true_pitch) and scale.pitch_sigma_deg == pytest.approx(0.2)
    lrf_only = run_ground(
        CameraConfig(name="dji_mavic_3", pitch_deg=true_pitch),
        [frame(t, height, true_pitch, slant) for t in np.arange(0.0, 10.0, 2.0)],
    ).scale
    # the laser knows the height, not the road's plane: the gimbal's 1 deg and the road's tilt, 1 deg
    assert lrf_only.source == "lrf" and lrf_only.pitch_sigma_deg == pytest.approx(math.sqrt(2.0))
    assert scale.height_sigma_m < lrf_only.height_sigma_m / 3  # the pitch's share of the laser's height
    ground.set_reference(HeightReference("measured_base", 0.0, 1.5, pitch_bias_deg=-1.0, pitch_sigma_deg=0.2))
    assert not ground.rangefinder.readings and "pitch bias changed" in ground.rangefinder.status
    for t in (10.0, 12.0):
        ground.projector(frame(t, height, reported, slant), laser_spot=(ROAD, None))
    assert len(ground.rangefinder.readings) == 2
    ground.set_reference(HeightReference("measured_base", 0.1, 1.0, pitch_bias_deg=-1.0, pitch_sigma_deg=0.2))
    assert len(ground.rangefinder.readings) == 2  # the same bias: the readings hold


@pytest.mark.parametrize(
    ("height", "true_pitch", "bias"), [(60.0, -45.0, -3.3), (150.0, -45.0, -2.1), (60.0, -60.0, 1.6)]
)
def test_the_traffics_pitch_moves_the_lasers_height_with_it(height, true_pitch, bias) -> None:
    """The laser's height is ``R sin(pitch)`` through the pitch used: a pitch off against the road's
    plane (the gimbal's error or the road's tilt: the same to the camera) puts the height off by
    ``R cos(pitch) dpitch``. When the traffic says how far the pitch is off, the height moves with it
    to the truth: the reference's pitch sigma is the one against the road (1.41 deg), as the scale's
    is. Before, the reference carried the gimbal's 1 deg and the height moved half way (a 150 m flight
    at -45 deg 2.1 deg off: the laser arm's speeds went from -4 % to +2.5 %)."""
    slant = height / math.sin(math.radians(-true_pitch))
    reported = true_pitch + bias
    frames = [frame(t, height, reported, slant) for t in np.arange(0.0, 10.0, 2.0)]
    scale = run_ground(CameraConfig(name="dji_mavic_3"), frames).scale
    assert scale.source == "lrf" and scale.pitch_sigma_deg == pytest.approx(math.sqrt(2.0))
    # the pitch's error, through the laser
    off = slant * math.cos(math.radians(true_pitch)) * math.radians(abs(bias))
    assert abs(scale.height_m - height) == pytest.approx(off, rel=0.1)
    moved = with_pitch_observed(scale, bias, 0.05)  # the traffic: the pitch used is `bias` off, to 0.05 deg
    assert moved.pitch_deg == pytest.approx(true_pitch, abs=0.01)
    assert moved.height_m == pytest.approx(height, rel=0.002)
    assert scale.reference.pitch_sigma_deg == pytest.approx(math.sqrt(2.0))


def test_a_change_of_laser_reading_is_no_change_of_reference() -> None:
    a, b = HeightReference("lrf", -8.0, 0.2), HeightReference("lrf", -8.1, 0.2)
    site = HeightReference("site", 0.0, 0.5)
    assert len({reference_key(r) for r in (a, b)}) == 1
    assert len({reference_key(r) for r in (a, site, None)}) == 3


@pytest.mark.parametrize(
    ("pitch", "direction"), [(-45.0, (0.0, 1.0)), (-45.0, (1.0, 0.0)), (-60.0, (0.0, 1.0))]
)
def test_the_laser_scale_sigma_covers_its_errors(pitch: float, direction) -> None:
    """Monte Carlo over the gimbal's 1 deg pitch error and the range's noise: the speed error of a
    vehicle at the image's centre, through the real geometry, against the sigma the engine gives it
    (with the height-pitch covariance the laser's height shares with the pitch)."""
    rng = np.random.default_rng(7)
    true_h, cfg = 60.0, RangefinderConfig()
    centre = GroundProjector.create(INTR, true_h, pitch).to_ground(np.array([[W / 2, H / 2]]))[0]
    step = np.asarray(direction) * 1.0  # a frame's displacement: the sensitivity is local
    truth_to_image = ground_to_image_homography(INTR, true_h, pitch)
    errors, sigmas = [], []
    for _ in range(200):
        bias = rng.normal(0.0, 1.0)
        used_pitch = pitch + bias
        true_range = true_h / math.sin(math.radians(-pitch))
        lrf = Rangefinder(cfg, 1.0)
        for k in range(10):
            noisy = true_range + rng.normal(0.0, cfg.sigma_m + cfg.sigma_frac * true_range)
            lrf.observe(frame(2.0 * k, true_h, used_pitch, noisy), true_h, used_pitch, ROAD, None)
        ref = lrf.reference(20.0)
        h = true_h + ref.takeoff_above_road_m
        pts = apply_homography(truth_to_image, np.array([centre, centre + step]))
        ground = GroundProjector.create(INTR, h, used_pitch).to_ground(pts)
        errors.append(np.linalg.norm(ground[1] - ground[0]) - 1.0)
        per_deg = ScaleModel(INTR, h, used_pitch).pitch_frac_per_deg(ground[:1], step[None])
        cov = ref.height_pitch_corr * ref.sigma_m * 1.0
        sigmas.append(float(scale_sigma_frac(h, ref.sigma_m, 1.0, per_deg, cov)[0]))
    within = float(np.mean(np.abs(errors) <= np.array(sigmas)))
    assert 0.6 <= within <= 0.8, (within, float(np.std(errors)), float(np.mean(sigmas)))
