"""Plausibility checks of one telemetry sample.

A sample is rejected (``TelemetryError``) when a value is not a finite number or lies outside
what a traffic-monitoring flight can produce. Only the fields the ground model uses are
range-checked; ``abs_altitude_m``, ``gimbal_yaw_deg`` and the timestamp only need to be finite.
"""

from __future__ import annotations

import math
from dataclasses import fields

from pipelines.errors import TelemetryError
from pipelines.types import Telemetry

# Height above the take-off point: below 0.5 m the drone is on the ground (or the value is a
# placeholder); above 1500 m it is far outside any legal or useful traffic flight.
MIN_ALTITUDE_M = 0.5
MAX_ALTITUDE_M = 1500.0
# DJI gimbal pitch: -90 is nadir, 0 the horizon; gimbals tilt up by at most ~30 degrees.
MIN_PITCH_DEG = -90.0
MAX_PITCH_DEG = 30.0
# Focal lengths (real or 35 mm-equivalent) in mm; 2000 mm-eq covers the longest zoom payloads.
MAX_FOCAL_MM = 2000.0
MIN_ZOOM = 1.0
MAX_ZOOM = 200.0

_NUMERIC_FIELDS = tuple(f.name for f in fields(Telemetry) if f.name != "camera")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def telemetry_problems(t: Telemetry) -> list[str]:
    """Every reason why ``t`` is implausible (empty when it is fine)."""
    problems: list[str] = []
    for name in _NUMERIC_FIELDS:
        value = getattr(t, name)
        if value is None and name not in ("timestamp_s", "digital_zoom"):
            continue
        if not _is_number(value) or not math.isfinite(value):
            problems.append(f"{name}={value!r} is not a finite number")
    if problems:
        return problems
    if t.altitude_m is not None and not MIN_ALTITUDE_M < t.altitude_m <= MAX_ALTITUDE_M:
        problems.append(f"altitude {t.altitude_m} m outside ({MIN_ALTITUDE_M}, {MAX_ALTITUDE_M}] m")
    if t.gimbal_pitch_deg is not None and not MIN_PITCH_DEG <= t.gimbal_pitch_deg <= MAX_PITCH_DEG:
        problems.append(
            f"gimbal pitch {t.gimbal_pitch_deg} deg outside [{MIN_PITCH_DEG}, {MAX_PITCH_DEG}] deg"
        )
    for name in ("focal_length_mm", "focal_length_35mm"):
        value = getattr(t, name)
        if value is not None and not 0.0 < value <= MAX_FOCAL_MM:
            problems.append(f"{name} {value} outside (0, {MAX_FOCAL_MM}] mm")
    if not MIN_ZOOM <= t.digital_zoom <= MAX_ZOOM:
        problems.append(f"digital zoom {t.digital_zoom} outside [{MIN_ZOOM}, {MAX_ZOOM}]")
    if t.latitude is not None and not -90.0 <= t.latitude <= 90.0:
        problems.append(f"latitude {t.latitude} outside [-90, 90]")
    if t.longitude is not None and not -180.0 <= t.longitude <= 180.0:
        problems.append(f"longitude {t.longitude} outside [-180, 180]")
    return problems


def validate_telemetry(t: Telemetry) -> Telemetry:
    """Return ``t`` unchanged, or raise :class:`TelemetryError` naming every absurd value."""
    problems = telemetry_problems(t)
    if problems:
        raise TelemetryError(f"implausible telemetry at t={t.timestamp_s!r} s: {'; '.join(problems)}")
    return t
