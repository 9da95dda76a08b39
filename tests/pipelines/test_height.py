"""The camera's height above the road and the scale's sigma (pipelines.height), applied by the
ground model per frame and carried by every speed and violation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import supervision as sv

from pipelines.camera import get_profile, intrinsics_for
from pipelines.config import CameraConfig, ConfigError, PipelineConfig, RulesConfig
from pipelines.geometry import GroundProjector
from pipelines.ground import GroundModel, reference_from_config
from pipelines.height import (
    HeightReference,
    ScaleModel,
    ScalePriors,
    centre_pitch_frac_per_deg,
    height_above_road,
    scale_sigma_frac,
)
from pipelines.rules import ViolationDetector
from pipelines.types import Frame, ScaleInfo, SpeedEstimate, Telemetry

INTR = intrinsics_for(get_profile("dji_mavic_3"), 1920, 1080)
PRIORS = ScalePriors()


def frame(t: float = 1.0, altitude: float = 68.0, pitch: float = -90.0, source: str = "flight") -> Frame:
    tel = Telemetry(t, altitude_m=altitude, gimbal_pitch_deg=pitch, camera="mavic 3", source=source)
    return Frame(index=int(t * 30), timestamp_s=t, image=np.zeros((1080, 1920, 3), np.uint8), telemetry=tel)


@pytest.mark.parametrize(
    ("reference", "time_s", "height", "sigma", "source"),
    [
        (None, 5.0, 68.0, math.hypot(5.0, 1.0), "flight"),  # the road's level unknown: wide
        (
            HeightReference("site", -8.0, 0.5),
            5.0,
            60.0,
            math.hypot(0.5, 1.0),
            "site",
        ),  # + baro since take-off
        # a measured base at 10 s: the barometer drifts 0.06 m a minute from then on
        (HeightReference("measured_base", -8.0, 0.3, at_time_s=10.0), 10.0, 60.0, 0.3, "measured_base"),
        (
            HeightReference("measured_base", -8.0, 0.3, at_time_s=10.0),
            610.0,
            60.0,
            math.hypot(0.3, 0.6),
            "measured_base",
        ),
        (
            HeightReference("measured_base", 3.0, 0.3, at_time_s=0.0),
            1e6,
            71.0,
            math.hypot(0.3, 3.0),
            "measured_base",
        ),
    ],
)
def test_height_above_the_road_and_its_sigma(reference, time_s, height, sigma, source) -> None:
    h, s, src = height_above_road(68.0, time_s, reference, PRIORS)
    assert (h, src) == (pytest.approx(height), source)
    assert s == pytest.approx(sigma)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"source": "gps"}, "source must be one of"),
        ({"takeoff_above_road_m": 900.0}, r"within \+-500 m"),
        ({"sigma_m": 0.0}, "sigma must be in"),
        ({"sigma_m": float("nan")}, "sigma must be in"),
        ({"pitch_bias_deg": 20.0}, "pitch bias"),
        ({"pitch_sigma_deg": -1.0}, "pitch sigma"),
    ],
)
def test_an_absurd_reference_is_refused(kwargs, message) -> None:
    args = {"source": "site", "takeoff_above_road_m": 0.0, "sigma_m": 0.5} | kwargs
    with pytest.raises(ValueError, match=message):
        HeightReference(**args)


@pytest.mark.parametrize(
    ("pitch", "direction", "expected_per_deg"),
    [
        (-90.0, (0.0, 1.0), 0.0),  # nadir: a pitch error is second order at the centre
        (-45.0, (0.0, 1.0), 2.0 / math.tan(math.radians(45.0)) * math.pi / 180),  # along the line of sight
        (-45.0, (1.0, 0.0), 1.0 / math.tan(math.radians(45.0)) * math.pi / 180),  # across it
        (-60.0, (0.0, 1.0), 2.0 / math.tan(math.radians(60.0)) * math.pi / 180),
        (-60.0, (0.0, 0.0), 2.0 / math.tan(math.radians(60.0)) * math.pi / 180),  # unknown: the worse axis
    ],
)
def test_a_pitch_error_stretches_ground_distances_as_the_geometry_says(
    pitch, direction, expected_per_deg
) -> None:
    centre = GroundProjector.create(INTR, 60.0, pitch).to_ground(np.array([[960.0, 540.0]]))
    per_deg = ScaleModel(INTR, 60.0, pitch).pitch_frac_per_deg(centre, np.array([direction]))
    assert per_deg[0] == pytest.approx(expected_per_deg, rel=0.05, abs=5e-4)
    if direction == (0.0, 1.0):  # the closed form the error budget and the source weighing use
        assert centre_pitch_frac_per_deg(pitch) == pytest.approx(per_deg[0], rel=0.05, abs=5e-4)


def test_the_scale_sigma_adds_the_height_and_the_pitch_in_quadrature() -> None:
    assert scale_sigma_frac(60.0, 0.6, 0.0, 0.03) == pytest.approx(0.01)
    assert scale_sigma_frac(60.0, 0.0, 1.0, np.array([0.03, np.nan])) == pytest.approx([0.03, 0.0])
    assert scale_sigma_frac(60.0, 0.6, 1.0, 0.01) == pytest.approx(math.hypot(0.01, 0.01))


@pytest.mark.parametrize(
    ("camera", "reading", "height", "source"),
    [
        ({}, 68.0, 68.0, "flight"),
        ({"takeoff_above_road_m": -8.0}, 68.0, 60.0, "site"),
        ({"altitude_m": 68.0, "takeoff_above_road_m": -8.0}, 90.0, 60.0, "site"),  # a typed reading, offset
        ({"altitude_m": 68.0}, 90.0, 68.0, "operator"),
        (
            {"height_reference": {"takeoff_above_road_m": -8.5, "sigma_m": 0.2, "pitch_bias_deg": -1.0}},
            68.0,
            59.5,
            "measured_base",
        ),
    ],
)
def test_the_ground_model_measures_above_the_road(camera, reading, height, source) -> None:
    ground = GroundModel(CameraConfig(name="mavic 3", **camera))
    proj = ground.projector(frame(altitude=reading, pitch=-60.0))
    assert proj is not None and proj.altitude_m == pytest.approx(height)
    assert ground.scale.source == source and ground.scale.height_m == pytest.approx(height)
    assert f"altitude {height:.1f} m above the road ({source})" in ground.status.reason
    expected_pitch = -61.0 if source == "measured_base" else -60.0  # the bias the base found
    assert proj.pitch_deg == pytest.approx(expected_pitch) and ground.scale.pitch_deg == pytest.approx(
        expected_pitch
    )


ROOT2 = math.sqrt(2.0)


@pytest.mark.parametrize(
    ("camera", "pitch_sigma"),
    [
        ({}, ROOT2),  # the gimbal's 1 deg and the road's tilt, 1 deg: the altitude knows no plane
        ({"takeoff_above_road_m": 0.0}, ROOT2),  # nor does a stated take-off height
        ({"altitude_m": 68.0}, ROOT2),
        ({"takeoff_above_road_m": 0.0, "ground_tilt_sigma_deg": 0.0}, 1.0),  # the site's roads are level
        (
            {"takeoff_above_road_m": 0.0, "ground_tilt_sigma_deg": 2.0, "pitch_sigma_deg": 0.5},
            math.hypot(0.5, 2.0),
        ),
        # a base solved the pitch against the road's plane: its own sigma, nothing added
        ({"height_reference": {"takeoff_above_road_m": 0.0, "sigma_m": 0.2, "pitch_sigma_deg": 0.3}}, 0.3),
    ],
)
def test_the_road_s_tilt_is_a_pitch_error_for_sources_that_do_not_know_its_plane(camera, pitch_sigma) -> None:
    ground = GroundModel(CameraConfig(name="mavic 3", **camera))
    assert ground.projector(frame(pitch=-45.0)) is not None
    assert ground.scale.pitch_sigma_deg == pytest.approx(pitch_sigma)


def test_a_reference_set_live_applies_from_the_next_frame_and_can_be_taken_back() -> None:
    ground = GroundModel(CameraConfig(name="mavic 3", takeoff_above_road_m=0.0))
    assert ground.projector(frame()).altitude_m == pytest.approx(68.0)
    ground.set_reference(HeightReference("measured_base", -8.0, 0.2, at_time_s=1.0, set_by="PC 12"))
    assert ground.projector(frame(2.0)).altitude_m == pytest.approx(60.0)
    assert ground.scale.reference.set_by == "PC 12" and ground.scale.height_sigma_m == pytest.approx(
        0.2, abs=0.01
    )
    ground.set_reference(None)  # back to the configuration's (the site value)
    assert ground.projector(frame(3.0)).altitude_m == pytest.approx(68.0) and ground.scale.source == "site"


def test_a_reference_that_puts_the_camera_under_the_road_disables_speeds() -> None:
    ground = GroundModel(CameraConfig(name="mavic 3", takeoff_above_road_m=-70.0))
    assert ground.projector(frame()) is None
    assert "does not fit this flight" in ground.status.reason and ground.scale is None


def test_site_yaml_and_config_errors(tmp_path) -> None:
    site = tmp_path / "site.yaml"
    site.write_text("camera:\n  takeoff_above_road_m: 2.5\n  takeoff_above_road_sigma_m: 0.3\n")
    ref = reference_from_config(PipelineConfig.from_yaml(site).camera)
    assert (ref.source, ref.takeoff_above_road_m, ref.sigma_m) == ("site", 2.5, 0.3)
    assert reference_from_config(CameraConfig()) is None
    site.write_text("camera:\n  takeoff_above_road_m: 900\n")
    with pytest.raises(ConfigError, match="takeoff_above_road_m"):
        PipelineConfig.from_yaml(site)


def _drive(det: ViolationDetector, scales, n: int = 60, kmh: float = 70.0, terms=None) -> list:
    """One vehicle at ``kmh`` for ``n`` frames at 30 fps with the scale ``scales(i)`` on frame i;
    ``terms(i)``: its (relative sigma, pitch sensitivity, point height's sigma) there (None: the
    scale's sigma, no sensitivity)."""
    out = []
    for i in range(n):
        t = i / 30.0
        scale = scales(i)
        frac, per_deg, point = (scale.sigma_frac, math.nan, math.nan) if terms is None else terms(i)
        est = SpeedEstimate(
            1, kmh, 1.0, 30, 1.0, position_m=(0.0, kmh / 3.6 * t), position_t=t, segment=1,
            scale_sigma_frac=frac, scale_source=scale.source, scale_per_deg=per_deg, point_sigma_frac=point,
        )  # fmt: skip
        d = sv.Detections(xyxy=np.array([[10.0, 10.0, 40.0, 30.0]]), tracker_id=np.array([1]))
        f = Frame(i, t, np.zeros((240, 320, 3), np.uint8))
        out += det.update(f, d, {1: est}, np.array([[0.0, 5.0]]), scale)
    for i in range(n, n + 40):
        out += det.update(Frame(i, i / 30.0, np.zeros((240, 320, 3), np.uint8)), sv.Detections.empty(), {})
    return out


FLIGHT = ScaleInfo("flight", 68.0, 5.1, -90.0, 1.0, sigma_frac=5.1 / 68.0)
HIGH_FLIGHT = ScaleInfo(
    "flight", 165.0, 5.1, -90.0, 1.0, sigma_frac=0.6 / 165.0
)  # sigma small, source untrusted
SITE = ScaleInfo("site", 60.0, 0.86, -90.0, 1.0, 0.86 / 60.0, HeightReference("site", -8.0, 0.5))
BASE = ScaleInfo("measured_base", 60.0, 0.3, -90.0, 0.2, 0.005, HeightReference("measured_base", -8.0, 0.3))
LRF = ScaleInfo("lrf", 60.0, 0.3, -90.0, 1.0, 0.005, HeightReference("lrf", -8.0, 0.3))
LRF_FIRST = ScaleInfo(
    "lrf", 60.0, 0.45, -90.0, 1.0, 0.0075, HeightReference("lrf", -8.0, 0.45, provisional=True)
)


@pytest.mark.parametrize(
    ("scales", "status", "reason"),
    [
        (lambda i: SITE, "enforceable", ""),
        (lambda i: BASE, "enforceable", ""),
        # the road's level unknown: 7.4 % of the speed, beyond the tolerance
        (lambda i: FLIGHT, "not_enforceable", "mostly the scale from the drone's take-off altitude"),
        # however small its sigma, no ticket rests on the road's unknown level (rules.enforceable_scale_sources)
        (
            lambda i: HIGH_FLIGHT,
            "not_enforceable",
            "a ticket needs the take-off height above the road, a measured base or the laser rangefinder",
        ),
        (
            lambda i: SITE if i < 30 else BASE,
            "not_enforceable",
            "height reference changed during the measuring base",
        ),
        (lambda i: LRF, "enforceable", ""),
        # the laser's first readings: speeds use them, no ticket rests on them; nor across their confirmation
        (lambda i: LRF_FIRST, "not_enforceable", "a provisional laser reference, on fewer readings"),
        (lambda i: LRF_FIRST if i < 30 else LRF, "not_enforceable", "height reference changed during"),
    ],
)
def test_the_ticket_carries_its_scale_and_its_sigma(scales, status, reason) -> None:
    (v,) = _drive(ViolationDetector(RulesConfig(speed_limit_kmh=50.0)), scales)
    assert v.status == status and reason in v.status_reason
    last = scales(59)
    assert v.scale.source == last.source and v.scale.sigma_frac == pytest.approx(
        np.mean([scales(i).sigma_frac for i in range(60)])
    )
    assert v.ticket_sigma_kmh == pytest.approx(v.scale.sigma_frac * 70.0, rel=0.02)  # exact positions
    assert v.to_dict()["scale"]["source"] == last.source
    if last is FLIGHT:
        assert "measure a base or set the take-off height above the road" in v.status_reason


NADIR_SITE = ScaleInfo("site", 60.0, 0.86, -90.0, 1.41, 0.86 / 60.0, HeightReference("site", -8.0, 0.5))


@pytest.mark.parametrize(
    ("per_deg", "point", "expected"),
    [
        # across a nadir frame a pitch error stretches the top half and shrinks the bottom: over
        # the whole pass it cancels, and only the height's 1.43 % is left
        (lambda i: -0.012 + 0.024 * i / 59, lambda i: 0.0, 0.86 / 60.0),
        # a point 0.75 m up (0.5 % its sigma) all along: in quadrature
        (lambda i: -0.012 + 0.024 * i / 59, lambda i: 0.005, math.hypot(0.86 / 60.0, 0.005)),
        # the first half only: a sensitivity of one sign, the mean's
        (lambda i: -0.012 + 0.012 * i / 59, lambda i: 0.0, math.hypot(0.86 / 60.0, 1.41 * 0.006)),
        # a position with no sensitivity (not on the ground): the mean of the positions' sigmas
        (lambda i: math.nan if i == 30 else 0.0, lambda i: 0.0, None),
    ],
)
def test_a_ticket_s_scale_sigma_is_the_one_at_its_base_s_mean_pitch_sensitivity(
    per_deg, point, expected
) -> None:
    """The height's and the pitch's errors are the same all along a base: the ticket's scale sigma
    is the sigma at the base's mean pitch sensitivity (pipelines.height.base_scale_frac), not the
    mean of its positions' sigmas."""

    def terms(i):
        frac = math.hypot(float(scale_sigma_frac(60.0, 0.86, 1.41, per_deg(i))), point(i))
        return frac, per_deg(i), point(i)

    (v,) = _drive(ViolationDetector(RulesConfig(speed_limit_kmh=50.0)), lambda i: NADIR_SITE, terms=terms)
    mean_of_sigmas = float(np.mean([terms(i)[0] for i in range(60)]))
    assert v.scale.sigma_frac == pytest.approx(mean_of_sigmas if expected is None else expected, rel=1e-6)
    assert v.ticket_sigma_kmh == pytest.approx(v.scale.sigma_frac * 70.0, rel=0.02)


def test_a_site_may_trust_the_flight_source() -> None:
    cfg = RulesConfig(speed_limit_kmh=50.0, enforceable_scale_sources=("flight", "site", "measured_base"))
    (v,) = _drive(ViolationDetector(cfg), lambda i: HIGH_FLIGHT)
    assert v.status == "enforceable" and v.scale.source == "flight"


def test_the_priors_default_to_the_configuration() -> None:
    """One set of defaults: the engine's ScalePriors() are the camera configuration's (the error
    budget draws its flights from them)."""
    from pipelines.ground import scale_priors

    assert scale_priors(CameraConfig()) == ScalePriors()
