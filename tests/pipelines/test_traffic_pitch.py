"""The traffic's pitch weighed into the scale (``pitch_check.correct``): the Gaussian update of the
height and the pitch (pipelines.height.with_pitch_observed), the ground model that applies it from
the next frame on (pipelines.ground), the check that goes on measuring the source's pitch under its
own correction (pipelines.pitch_check), and a ticket whose base began under the wider scale."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.config import CameraConfig, PitchCheckConfig
from pipelines.ground import GroundModel
from pipelines.height import HeightReference, with_pitch_observed
from pipelines.pitch_check import PitchCheck
from pipelines.ticket import BaseSample, base_frac
from pipelines.types import Frame, ScaleInfo, SpeedEstimate, Telemetry

SITE = ScaleInfo("site", 60.0, 0.86, -45.0, math.sqrt(2.0))
# a laser's height rests on the pitch: dh = m dp with m = -R cos(pitch) pi/180 (R 85 m: -1.05 m/deg)
LRF = ScaleInfo("lrf", 60.0, math.hypot(0.3, 1.05 * math.sqrt(2.0)), -45.0, math.sqrt(2.0),
                height_pitch_cov=-1.05 * 2.0)  # fmt: skip


def _kalman(scale: ScaleInfo, error: float, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """The textbook update of the errors (dh, dp) ~ N(0, P) by the observation dp + N(0, sigma^2) = error."""
    p = np.array(
        [
            [scale.height_sigma_m**2, scale.height_pitch_cov],
            [scale.height_pitch_cov, scale.pitch_sigma_deg**2],
        ]
    )
    h = np.array([[0.0, 1.0]])
    gain = p @ h.T / (h @ p @ h.T + sigma**2)
    return (gain * error).ravel(), p - gain @ h @ p


@pytest.mark.parametrize(
    ("scale", "error", "sigma"),
    [
        (SITE, 2.0, 0.5),  # the traffic knows it better than the prior: most of the way
        (SITE, -1.0, 1.41),  # as well as the prior: half way
        (SITE, 0.3, 5.0),  # far worse: hardly moved
        (LRF, 2.0, 0.4),  # the laser's height moves with the pitch it was read through
        (LRF, -0.8, 0.8),
    ],
)
def test_the_height_and_the_pitch_are_updated_as_a_gaussian_says(scale, error, sigma) -> None:
    moved = with_pitch_observed(scale, error, sigma)
    (dh, dp), cov = _kalman(scale, error, sigma)
    assert moved.pitch_deg == pytest.approx(scale.pitch_deg - dp)
    assert moved.height_m == pytest.approx(scale.height_m - dh)
    assert moved.pitch_from_traffic_deg == pytest.approx(-dp)
    assert moved.pitch_sigma_deg == pytest.approx(math.sqrt(cov[1, 1]))
    assert moved.height_sigma_m == pytest.approx(math.sqrt(cov[0, 0]))
    assert moved.height_pitch_cov == pytest.approx(cov[0, 1])
    assert moved.pitch_sigma_deg < min(scale.pitch_sigma_deg, sigma) and moved.source == scale.source
    if scale.height_pitch_cov == 0.0:
        assert moved.height_m == scale.height_m and moved.height_sigma_m == scale.height_sigma_m
    assert "from the traffic" in moved.describe() and moved.to_dict()[
        "pitch_from_traffic_deg"
    ] == pytest.approx(-dp, abs=1e-3)
    assert moved.to_dict()["height_pitch_cov"] == pytest.approx(cov[0, 1], abs=1e-4)


@pytest.mark.parametrize(
    ("scale", "error", "sigma"),
    [
        (SITE, math.nan, 0.5),
        (SITE, 1.0, math.nan),
        (SITE, 1.0, 0.0),
        (ScaleInfo("site", 60.0, 0.9, -45.0, 0.0), 1.0, 0.5),
    ],
)
def test_no_observation_or_no_prior_leaves_the_scale(scale, error, sigma) -> None:
    assert with_pitch_observed(scale, error, sigma) is scale


def test_the_pitch_is_not_moved_past_nadir() -> None:
    nadir = ScaleInfo("site", 60.0, 0.86, -89.5, math.sqrt(2.0), height_pitch_cov=-1.0)
    moved = with_pitch_observed(nadir, 2.0, 0.3)  # the traffic says 1.96 deg steeper: only 0.5 of it
    assert moved.pitch_deg == pytest.approx(-90.0) and moved.pitch_from_traffic_deg == pytest.approx(-0.5)
    full = -1.0 * 2.0 / (2.0 + 0.09)
    assert moved.height_m == pytest.approx(60.0 - full * 0.5 / (2.0 * 2.0 / 2.09))


def _frame(t: float, altitude: float = 60.0, pitch: float = -45.0) -> Frame:
    tel = Telemetry(t, altitude_m=altitude, gimbal_pitch_deg=pitch, camera="mavic 3")
    return Frame(index=int(t * 30), timestamp_s=t, image=np.zeros((1080, 1920, 3), np.uint8), telemetry=tel)


def test_the_ground_model_weighs_the_traffic_in_from_the_next_frame_until_a_new_reference() -> None:
    ground = GroundModel(CameraConfig(name="mavic 3", takeoff_above_road_m=0.0))
    before = ground.projector(_frame(1.0))
    assert before.pitch_deg == pytest.approx(-45.0) and ground.traffic_shift == (0.0, 0.0)
    ground.set_traffic_pitch((1.5, 0.5))  # the pitch used is 1.5 deg shallower than the traffic's
    proj = ground.projector(_frame(2.0))
    gain = 2.0 / 2.25
    assert proj.pitch_deg == pytest.approx(-45.0 - 1.5 * gain) and proj.altitude_m == pytest.approx(60.0)
    assert ground.scale.pitch_from_traffic_deg == pytest.approx(-1.5 * gain)
    assert ground.scale.pitch_sigma_deg == pytest.approx(math.sqrt(2.0 * 0.25 / 2.25))
    assert ground.traffic_shift == pytest.approx((0.0, -1.5 * gain))
    assert "pitch -46.3 deg" in ground.status.reason
    ground.set_reference(HeightReference("measured_base", 0.0, 0.2, at_time_s=2.5))
    assert ground.projector(_frame(3.0)).pitch_deg == pytest.approx(-45.0) and ground.traffic_shift == (
        0.0,
        0.0,
    )


def test_the_check_measures_the_source_s_pitch_under_its_own_correction() -> None:
    """Tracks read through a pitch 2 deg off; halfway the scale is moved by the traffic's pitch (the
    speeds then read through a pitch 0.5 deg off): told what moved, the check reads 2 deg all along."""
    rng = np.random.default_rng(3)
    plain, told = PitchCheck(), PitchCheck()
    for k in range(40):
        v0, lo, hi = rng.uniform(12.0, 20.0), rng.uniform(0.005, 0.02), rng.uniform(0.03, 0.07)
        for i in range(60):
            per_deg = lo + (hi - lo) * i / 59
            moved = (0.0, -1.5) if (k >= 20 or i >= 30) else (0.0, 0.0)
            eps = 2.0 + moved[1]
            speed = v0 * 3.6 * math.exp(per_deg * eps) * (1.0 + 0.005 * rng.normal())
            est = SpeedEstimate(k, speed, 1.0, 30, 1.0, scale_source="site", scale_per_deg=per_deg)
            plain.update([est])
            told.update([est], moved)
    assert told.result().error_deg == pytest.approx(2.0, abs=0.1)
    assert plain.result().error_deg < 1.5  # the correction's own steps read as a smaller error
    assert told.observation(10.0) == (told.result().error_deg, told.result().sigma_deg)
    assert PitchCheck(PitchCheckConfig(correct=False)).observation(10.0) is None
    assert PitchCheck().observation(10.0) is None  # no vehicles yet: nothing to weigh in


def test_a_ticket_s_margin_keeps_the_source_s_sigma_however_the_traffic_moved_the_pitch() -> None:
    """The traffic's pitch moves the speed, not the ticket's margin: that rests on the traffic holding
    its speed across the view, which a junction or a queue breaks; the scale as the source gave it is
    kept (``unmoved``) and a base's sigma is the widest of its scales' as their sources gave them."""
    narrow = with_pitch_observed(SITE, 1.0, 0.3)
    assert narrow.unmoved is SITE and with_pitch_observed(narrow, 1.2, 0.2).unmoved is SITE
    wider = ScaleInfo("site", 60.0, 0.86, -45.0, 2.0)

    def base(scale_of) -> list[BaseSample]:
        return [
            BaseSample(i / 30.0, i + 1, 0.0, i * 0.5, math.nan, 0.03, 0.0, scale_of(i)) for i in range(40)
        ]

    unmoved = base_frac(base(lambda i: SITE), 0.01)
    assert base_frac(base(lambda i: narrow), 0.01) == pytest.approx(unmoved)
    assert base_frac(base(lambda i: SITE if i < 10 else narrow), 0.01) == pytest.approx(unmoved)
    # a base whose first positions were measured under a wider scale keeps that one's
    assert base_frac(base(lambda i: wider if i < 10 else SITE), 0.01) == pytest.approx(
        base_frac(base(lambda i: wider), 0.01)
    )


def test_the_ground_model_says_when_its_sources_re_measure_the_ground() -> None:
    """``reinterpreted``: the ratio of the height to the one the last frame's sources would give the
    same reading, and the pitch's change, where a reference or the traffic's pitch changed them (the
    speed stage then re-measures what its tracks had); the drone climbing is no reinterpretation."""
    ground = GroundModel(CameraConfig(name="mavic 3"))  # the take-off altitude: the flight source
    ground.projector(_frame(1.0))
    assert ground.reinterpreted is None
    ground.projector(_frame(1.1, altitude=62.0))  # it climbed: the readings say so, nothing to re-measure
    assert ground.reinterpreted is None
    ground.set_reference(HeightReference("lrf", -8.0, 0.3, at_time_s=1.1))  # the road 8 m above take-off
    assert ground.projector(_frame(1.2, altitude=62.0)).altitude_m == pytest.approx(54.0)
    assert ground.reinterpreted == pytest.approx((54.0 / 62.0, 0.0))
    ground.projector(_frame(1.3, altitude=61.0))
    assert ground.reinterpreted is None
    ground.set_traffic_pitch((1.5, 0.5))  # the pitch used is 1.5 deg shallower than the traffic's
    proj = ground.projector(_frame(1.4, altitude=61.0))
    assert ground.reinterpreted == pytest.approx((1.0, proj.pitch_deg + 45.0)) and proj.pitch_deg < -45.5
    ground.set_reference(HeightReference("measured_base", -8.0, 0.2, pitch_bias_deg=1.0, at_time_s=1.5))
    assert ground.projector(_frame(1.5, altitude=61.0)).pitch_deg == pytest.approx(-44.0)
    assert ground.reinterpreted == pytest.approx((1.0, -44.0 - proj.pitch_deg))  # the move gone, the bias in
    ground.projector(_frame(1.6, altitude=None))  # no altitude: no projector, nothing said
    assert ground.reinterpreted is None
