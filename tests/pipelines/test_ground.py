"""Per-frame ground model: overrides > telemetry > logged fallback; never a guessed scale."""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from pipelines.camera import get_profile
from pipelines.config import CameraConfig, ConfigError
from pipelines.ground import GroundModel
from pipelines.types import Frame, Telemetry

IMG = np.zeros((540, 960, 3), np.uint8)


def frame(tel: Telemetry | None) -> Frame:
    return Frame(index=0, timestamp_s=0.0, image=IMG, telemetry=tel)


MAVIC3 = get_profile("dji_mavic_3")


@pytest.mark.parametrize(
    ("cfg", "tel", "altitude", "pitch", "fx"),
    [
        # telemetry only; 24 mm equivalent -> the Mavic 3's real 12.29 mm (within rounding of the crop factor)
        (
            CameraConfig(name="mavic 3"),
            Telemetry(0.0, altitude_m=100.0, gimbal_pitch_deg=-90.0, focal_length_35mm=24.0),
            100.0,
            -90.0,
            pytest.approx(12.29 * 960 / 17.3, rel=0.01),
        ),
        # overrides win over telemetry
        (
            CameraConfig(name="dji_mavic_3", altitude_m=50.0, pitch_deg=-60.0),
            Telemetry(0.0, altitude_m=100.0, gimbal_pitch_deg=-90.0),
            50.0,
            -60.0,
            pytest.approx(12.29 * 960 / 17.3),
        ),
        # camera named by telemetry, no pitch anywhere -> default pitch (logged)
        (
            CameraConfig(),
            Telemetry(0.0, altitude_m=80.0, camera="Mavic 3"),
            80.0,
            -90.0,
            pytest.approx(12.29 * 960 / 17.3),
        ),
        # digital zoom narrows the field of view
        (
            CameraConfig(name="mavic 3"),
            Telemetry(0.0, altitude_m=80.0, gimbal_pitch_deg=-90.0, digital_zoom=2.0),
            80.0,
            -90.0,
            pytest.approx(2 * 12.29 * 960 / 17.3),
        ),
    ],
)
def test_resolution_order(cfg, tel, altitude, pitch, fx):
    model = GroundModel(cfg)
    proj = model.projector(frame(tel))
    assert proj is not None
    assert proj.altitude_m == altitude
    assert proj.pitch_deg == pitch
    assert proj.intrinsics.fx == fx
    # a pitch nobody measured is said so with every frame (the runs' summaries count it)
    assumed = tel.gimbal_pitch_deg is None and cfg.pitch_deg is None
    assert model.status.assumption.startswith("pitch assumed: -90.0 deg") == assumed


@pytest.mark.parametrize(
    ("cfg", "tel", "reason"),
    [
        (CameraConfig(name="mavic 3"), None, "no altitude"),
        (CameraConfig(name="mavic 3"), Telemetry(0.0, gimbal_pitch_deg=-90.0), "no altitude"),
        (CameraConfig(altitude_m=100.0), Telemetry(0.0), "no camera"),
        (CameraConfig(name="mavic 3", altitude_m=100.0, pitch_deg=-5.0), None, "too shallow"),
    ],
)
def test_unknown_scale_disables_speed_with_a_reason(cfg, tel, reason, caplog):
    model = GroundModel(cfg)
    with caplog.at_level(logging.WARNING, logger="pipelines.ground"):
        assert model.projector(frame(tel)) is None
        assert model.projector(frame(tel)) is None
    assert reason in model.status.reason
    assert len(caplog.records) == 1, "the fallback is logged once, not every frame"


def test_unknown_camera_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown camera"):
        GroundModel(CameraConfig.model_construct(name="potato cam"))
    with pytest.raises(ValueError, match="unknown camera"):
        CameraConfig(name="potato cam")


def test_projector_is_cached_until_telemetry_changes():
    model = GroundModel(CameraConfig(name="mavic 3"))
    a = model.projector(frame(Telemetry(0.0, altitude_m=100.0, gimbal_pitch_deg=-90.0)))
    b = model.projector(frame(Telemetry(0.1, altitude_m=100.0, gimbal_pitch_deg=-90.0)))
    c = model.projector(frame(Telemetry(0.2, altitude_m=101.0, gimbal_pitch_deg=-90.0)))
    assert a is b
    assert c is not a
    assert c.nadir_gsd_m_per_px == pytest.approx(a.nadir_gsd_m_per_px * 1.01)


OBLIQUE = Telemetry(0.0, altitude_m=80.0, gimbal_pitch_deg=-45.0, focal_length_35mm=24.0)


@pytest.mark.parametrize(
    ("cfg", "later", "ok", "reason"),
    [
        # the frame's telemetry was lost or refused (a jump, a NaN): no fallback, no speed
        (CameraConfig(name="mavic 3"), None, False, "altitude"),
        (CameraConfig(name="mavic 3", altitude_m=80.0), None, False, "gimbal pitch"),  # not the default -90
        (CameraConfig(name="mavic 3", altitude_m=80.0, pitch_deg=-45.0), None, False, "focal length"),
        (
            CameraConfig(name="mavic 3"),
            Telemetry(1.0, altitude_m=80.0, focal_length_35mm=24.0),
            False,
            "gimbal pitch",
        ),
        # everything the flight gave is fixed by configuration: the frame keeps its speed
        (
            CameraConfig(name="mavic 3", altitude_m=80.0, pitch_deg=-45.0, focal_length_mm=12.29),
            None,
            True,
            "",
        ),
        (CameraConfig(name="mavic 3"), OBLIQUE, True, ""),
    ],
)
def test_no_fallback_once_telemetry_gave_the_value(cfg, later, ok, reason):
    model = GroundModel(cfg)
    assert model.projector(frame(OBLIQUE)) is not None
    proj = model.projector(Frame(index=1, timestamp_s=1.0, image=IMG, telemetry=later))
    assert (proj is not None) == ok and model.status.ok == ok
    assert reason in model.status.reason


def test_a_flight_without_pitch_still_assumes_the_default():
    model = GroundModel(CameraConfig(name="mavic 3"))
    for k in range(2):
        tel = Telemetry(float(k), altitude_m=80.0, focal_length_35mm=24.0)
        assert model.projector(Frame(index=k, timestamp_s=float(k), image=IMG, telemetry=tel)) is not None
        assert "pitch assumed" in model.status.assumption


def test_without_an_altitude_the_vehicles_height_is_measured_at() -> None:
    """No altitude at all: measured at the starting height (no speed: probing) until the scale
    check's rulers give one, taken where it moves by 1 % (and as it is the moment it becomes known);
    speeds from the moment it is known to derive_max_sigma, and a later None keeps it."""
    from pipelines.config import ScaleCheckConfig
    from pipelines.height import DerivedHeight

    model = GroundModel(CameraConfig(name="mavic 3", pitch_deg=-60.0), derive=ScaleCheckConfig())
    steps = [
        (None, False, 60.0, True),
        (DerivedHeight(50.0, 0.10, 8), False, 50.0, True),  # a height, not yet known to 6 %
        (DerivedHeight(50.2, 0.04, 12), True, 50.2, False),  # known: taken as it is
        (DerivedHeight(50.4, 0.04, 14), False, 50.2, False),  # within 1 %: the same height
        (None, False, 50.2, False),
        (DerivedHeight(53.0, 0.035, 20), False, 53.0, False),
    ]
    for derived, first, height, probing in steps:
        assert model.set_derived(derived) is first
        proj = model.projector(frame(Telemetry(0.0)))
        assert (proj.altitude_m, model.probing) == (height, probing)
        scale = model.scale
        assert (scale.source, scale.pitch_deg) == ("vehicles", -60.0)
        if derived is not None:
            assert scale.height_sigma_m == pytest.approx(height * derived.sigma_frac)
    assert "vehicles" in model.status.reason and model.status.ok


@pytest.mark.parametrize(
    ("derive", "tels", "reason"),
    [
        ({"derive": False}, [None], "no altitude: pass --altitude"),
        ({"enabled": False}, [None], "no altitude: pass --altitude"),
        ({}, [Telemetry(0.0, altitude_m=60.0), Telemetry(0.1)], "no altitude in this frame's telemetry"),
    ],
    ids=["derive-off", "check-off", "altitude-lost"],
)
def test_the_vehicles_stand_in_only_for_a_stream_that_never_had_an_altitude(derive, tels, reason) -> None:
    from pipelines.config import ScaleCheckConfig

    model = GroundModel(CameraConfig(name="mavic 3"), derive=ScaleCheckConfig(**derive))
    for tel in tels:
        proj = model.projector(frame(tel))
    assert proj is None and reason in model.status.reason


def test_a_pitch_the_cars_give_stands_in_where_none_is_known() -> None:
    """No altitude and no pitch: the cars' fitted pitch replaces the assumed nadir where it differs by
    more than half a degree, with its sigma, and the vehicles' height (which rests on it) is
    measured again; a configured or reported pitch is never replaced."""
    from pipelines.config import ScaleCheckConfig
    from pipelines.height import DerivedHeight
    from pipelines.pitch_fit import PitchFit

    model = GroundModel(CameraConfig(name="mavic 3"), derive=ScaleCheckConfig())
    model.projector(frame(Telemetry(0.0)))
    assert (model.pitch_source, model.pitch_known) == ("default", False)
    assert model.set_derived(DerivedHeight(50.0, 0.04, 12))
    assert not model.set_fitted_pitch(PitchFit(-89.7, 8.0, 20))  # nadir, as assumed: nothing changes
    assert model.projector(frame(Telemetry(0.0))).pitch_deg == -90.0 and not model.probing
    assert model.set_fitted_pitch(PitchFit(-52.0, 3.0, 20))
    proj = model.projector(frame(Telemetry(0.0)))
    assert (proj.pitch_deg, proj.altitude_m, model.derived, model.probing) == (-52.0, 60.0, None, True)
    assert model.scale.pitch_sigma_deg == pytest.approx(math.hypot(3.0, 1.0))
    assert model.status.assumption.endswith("; pitch fitted from the vehicles: -52.0 +- 3.0 deg")
    given = GroundModel(CameraConfig(name="mavic 3", pitch_deg=-60.0), derive=ScaleCheckConfig())
    given.projector(frame(Telemetry(0.0)))
    assert not given.set_fitted_pitch(PitchFit(-52.0, 3.0, 20))
    assert given.projector(frame(Telemetry(0.0))).pitch_deg == -60.0 and given.pitch_known
