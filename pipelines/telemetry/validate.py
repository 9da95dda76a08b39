"""Plausibility checks of telemetry: one sample alone, and two consecutive samples together.

A sample is rejected (``TelemetryError``) when a value is not a finite number or lies outside
what a traffic-monitoring flight can produce. Only the fields the ground model uses are
range-checked; ``abs_altitude_m``, ``gimbal_yaw_deg`` and the timestamp only need to be finite.

Two consecutive samples are *discontinuous* (:func:`continuity_problem`) when the height changes
faster than any drone climbs or sinks (60 -> 600 m in one frame), or when a field the ground
model uses (altitude, gimbal pitch, focal length) is present in one and missing in the other.
Nothing is interpolated across such a pair: the frames between them get no telemetry (the
pipeline then says why and measures no speed), so a wrong ground scale never reaches a ticket.
"""

from __future__ import annotations

import math
from collections.abc import Collection
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
# A laser rangefinder's slant range (DJI H20/H30: 3-1200 m and 3-3000 m).
LRF_RANGE_M = (3.0, 3000.0)

# The fastest climb or sink of a camera drone (DJI Mavic 3: 8 m/s up, 6 m/s down; FPV racers
# more), with margin, plus a tolerance for altimeter noise and rounding between two samples.
MAX_VERTICAL_SPEED_MPS = 20.0
ALTITUDE_NOISE_M = 2.0

_NUMERIC_FIELDS = tuple(f.name for f in fields(Telemetry) if f.name not in ("camera", "source"))
# Fields the ground model turns into a scale: one missing between two samples that have it is a hole.
_GROUND_FIELDS = ("altitude_m", "gimbal_pitch_deg")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def telemetry_problems(t: Telemetry, ignore: Collection[str] = ()) -> list[str]:
    """Every reason why ``t`` is implausible (empty when it is fine).

    ``ignore``: fields the run fixes by configuration (``--altitude`` ...); their values in the
    sample are not used, so they are not checked.
    """
    problems: list[str] = []
    for name in _NUMERIC_FIELDS:
        if name in ignore:
            continue
        value = getattr(t, name)
        if value is None and name not in ("timestamp_s", "digital_zoom"):
            continue
        if not _is_number(value) or not math.isfinite(value):
            problems.append(f"{name}={value!r} is not a finite number")
    if problems:
        return problems
    if (
        "altitude_m" not in ignore
        and t.altitude_m is not None
        and not MIN_ALTITUDE_M < t.altitude_m <= MAX_ALTITUDE_M
    ):
        problems.append(f"altitude {t.altitude_m} m outside ({MIN_ALTITUDE_M}, {MAX_ALTITUDE_M}] m")
    if (
        "gimbal_pitch_deg" not in ignore
        and t.gimbal_pitch_deg is not None
        and not MIN_PITCH_DEG <= t.gimbal_pitch_deg <= MAX_PITCH_DEG
    ):
        problems.append(
            f"gimbal pitch {t.gimbal_pitch_deg} deg outside [{MIN_PITCH_DEG}, {MAX_PITCH_DEG}] deg"
        )
    for name in ("focal_length_mm", "focal_length_35mm"):
        value = getattr(t, name)
        if name not in ignore and value is not None and not 0.0 < value <= MAX_FOCAL_MM:
            problems.append(f"{name} {value} outside (0, {MAX_FOCAL_MM}] mm")
    if not MIN_ZOOM <= t.digital_zoom <= MAX_ZOOM:
        problems.append(f"digital zoom {t.digital_zoom} outside [{MIN_ZOOM}, {MAX_ZOOM}]")
    if t.latitude is not None and not -90.0 <= t.latitude <= 90.0:
        problems.append(f"latitude {t.latitude} outside [-90, 90]")
    if t.longitude is not None and not -180.0 <= t.longitude <= 180.0:
        problems.append(f"longitude {t.longitude} outside [-180, 180]")
    if t.lrf_range_m is not None and not LRF_RANGE_M[0] <= t.lrf_range_m <= LRF_RANGE_M[1]:
        problems.append(f"laser range {t.lrf_range_m} m outside [{LRF_RANGE_M[0]:g}, {LRF_RANGE_M[1]:g}] m")
    return problems


def _has_focal(t: Telemetry) -> bool:
    return t.focal_length_mm is not None or t.focal_length_35mm is not None


def continuity_problem(a: Telemetry, b: Telemetry, ignore: Collection[str] = ()) -> str:
    """Why nothing may be interpolated between consecutive samples ``a`` and ``b`` ("" when it may).

    Both samples must be plausible on their own (:func:`telemetry_problems`). ``ignore``: fields
    the run fixes by configuration.
    """
    for name in _GROUND_FIELDS:
        if name in ignore:
            continue
        if (getattr(a, name) is None) != (getattr(b, name) is None):
            return f"{name} missing at t={(a if getattr(a, name) is None else b).timestamp_s:.3f} s"
    if "focal_length_mm" not in ignore and _has_focal(a) != _has_focal(b):
        return f"focal length missing at t={(b if _has_focal(a) else a).timestamp_s:.3f} s"
    if "altitude_m" not in ignore and a.altitude_m is not None and b.altitude_m is not None:
        dt = abs(b.timestamp_s - a.timestamp_s)
        if abs(b.altitude_m - a.altitude_m) > MAX_VERTICAL_SPEED_MPS * dt + ALTITUDE_NOISE_M:
            return (
                f"altitude jumps {a.altitude_m:g} -> {b.altitude_m:g} m in {dt:.3f} s "
                f"(t={a.timestamp_s:.3f} s; no drone climbs faster than {MAX_VERTICAL_SPEED_MPS:g} m/s)"
            )
    return ""


def validate_telemetry(t: Telemetry) -> Telemetry:
    """Return ``t`` unchanged, or raise :class:`TelemetryError` naming every absurd value."""
    problems = telemetry_problems(t)
    if problems:
        raise TelemetryError(f"implausible telemetry at t={t.timestamp_s!r} s: {'; '.join(problems)}")
    return t
