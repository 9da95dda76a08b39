"""validate_telemetry: absurd values raise TelemetryError naming the field; sane edges pass."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pipelines.errors import AirPatrolError, TelemetryError
from pipelines.telemetry import validate_telemetry
from pipelines.types import Telemetry

GOOD = Telemetry(
    timestamp_s=1.0,
    altitude_m=120.0,
    gimbal_pitch_deg=-90.0,
    focal_length_mm=12.29,
    focal_length_35mm=24.0,
    digital_zoom=1.0,
    latitude=37.38892,
    longitude=126.66295,
    abs_altitude_m=-124.7,
    gimbal_yaw_deg=-162.8,
    camera="dji_mavic_3",
)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("altitude_m", 0.5, "altitude"),
        ("altitude_m", 0.0, "altitude"),
        ("altitude_m", -3.0, "altitude"),
        ("altitude_m", 1500.1, "altitude"),
        ("altitude_m", math.nan, "altitude_m"),
        ("altitude_m", math.inf, "altitude_m"),
        ("altitude_m", "120", "altitude_m"),
        ("gimbal_pitch_deg", -90.5, "pitch"),
        ("gimbal_pitch_deg", 30.01, "pitch"),
        ("gimbal_pitch_deg", -math.inf, "gimbal_pitch_deg"),
        ("focal_length_mm", 0.0, "focal_length_mm"),
        ("focal_length_mm", -12.0, "focal_length_mm"),
        ("focal_length_mm", 2000.5, "focal_length_mm"),
        ("focal_length_35mm", 0.0, "focal_length_35mm"),
        ("focal_length_35mm", 2400.0, "focal_length_35mm"),  # an x10 value nobody descaled
        ("digital_zoom", 0.99, "zoom"),
        ("digital_zoom", 0.0, "zoom"),
        ("digital_zoom", 10000.0, "zoom"),  # an x10000 value nobody descaled
        ("digital_zoom", math.nan, "digital_zoom"),
        ("digital_zoom", None, "digital_zoom"),
        ("latitude", 90.5, "latitude"),
        ("latitude", -91.0, "latitude"),
        ("longitude", 180.5, "longitude"),
        ("longitude", -200.0, "longitude"),
        ("timestamp_s", math.nan, "timestamp_s"),
        ("timestamp_s", None, "timestamp_s"),
        ("abs_altitude_m", math.inf, "abs_altitude_m"),
        ("gimbal_yaw_deg", math.nan, "gimbal_yaw_deg"),
        ("altitude_m", True, "altitude_m"),
        ("lrf_range_m", 2.9, "laser range"),
        ("lrf_range_m", 3000.5, "laser range"),
        ("lrf_range_m", math.nan, "lrf_range_m"),
    ],
)
def test_absurd_values_raise(field: str, value: object, match: str) -> None:
    bad = dataclasses.replace(GOOD, **{field: value})
    with pytest.raises(TelemetryError, match=match) as info:
        validate_telemetry(bad)
    assert isinstance(info.value, AirPatrolError)
    assert "implausible telemetry at t=" in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("altitude_m", 0.51),
        ("altitude_m", 1500.0),
        ("altitude_m", None),
        ("gimbal_pitch_deg", -90.0),
        ("gimbal_pitch_deg", 30.0),
        ("gimbal_pitch_deg", None),
        ("focal_length_mm", 2000.0),
        ("focal_length_35mm", None),
        ("digital_zoom", 200.0),
        ("latitude", -90.0),
        ("longitude", 180.0),
        ("longitude", None),
        ("abs_altitude_m", -400.0),
        ("gimbal_yaw_deg", 540.0),  # yaw only needs to be finite
        ("timestamp_s", -2.0),
        ("camera", None),
        ("lrf_range_m", 3.0),
        ("lrf_range_m", 3000.0),
    ],
)
def test_plausible_values_pass_unchanged(field: str, value: object) -> None:
    sample = dataclasses.replace(GOOD, **{field: value})
    assert validate_telemetry(sample) is sample


def test_every_problem_is_reported() -> None:
    bad = dataclasses.replace(GOOD, altitude_m=0.0, gimbal_pitch_deg=45.0, latitude=100.0)
    with pytest.raises(TelemetryError) as info:
        validate_telemetry(bad)
    message = str(info.value)
    assert "altitude" in message and "pitch" in message and "latitude" in message
