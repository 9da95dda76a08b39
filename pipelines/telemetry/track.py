"""A validated, time-sorted telemetry track, interpolated per video frame, and file loading."""

from __future__ import annotations

import logging
import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipelines.errors import TelemetryError
from pipelines.telemetry.flightlog import parse_flightlog_csv
from pipelines.telemetry.srt import parse_srt
from pipelines.telemetry.validate import telemetry_problems
from pipelines.types import Telemetry

log = logging.getLogger(__name__)

DEFAULT_MAX_GAP_S = 1.0

# Interpolated linearly / on the circle (degrees, shortest arc).
_LINEAR_FIELDS = (
    "altitude_m",
    "gimbal_pitch_deg",
    "focal_length_mm",
    "focal_length_35mm",
    "digital_zoom",
    "latitude",
    "abs_altitude_m",
)
_CIRCULAR_FIELDS = ("longitude", "gimbal_yaw_deg")


def lerp_angle_deg(a: float, b: float, f: float) -> float:
    """Interpolate from ``a`` to ``b`` (degrees in [-180, 180]) along the shorter arc."""
    d = (b - a + 180.0) % 360.0 - 180.0
    v = a + f * d
    if v > 180.0:
        return v - 360.0
    if v < -180.0:
        return v + 360.0
    return v


def _lerp(a: float | None, b: float | None, f: float, circular: bool) -> float | None:
    if a is None or b is None:
        return a if f < 0.5 else b  # the nearer sample's value, even when that is None
    if circular:
        return lerp_angle_deg(a, b, f)
    return a + f * (b - a)


def interpolate_telemetry(a: Telemetry, b: Telemetry, t: float) -> Telemetry:
    """The telemetry at time ``t`` between samples ``a`` and ``b`` (``a.timestamp_s <= t < b.timestamp_s``).

    Numeric fields linearly, longitude and gimbal yaw along the shorter arc; ``camera`` and a field
    missing in one neighbour from the nearer sample. The live server's buffer and the offline
    track both interpolate through this function.
    """
    f = (t - a.timestamp_s) / (b.timestamp_s - a.timestamp_s)
    if f == 0.0:
        return replace(a, timestamp_s=t)
    values = {name: _lerp(getattr(a, name), getattr(b, name), f, False) for name in _LINEAR_FIELDS}
    for name in _CIRCULAR_FIELDS:
        values[name] = _lerp(getattr(a, name), getattr(b, name), f, True)
    return Telemetry(timestamp_s=t, camera=a.camera if f < 0.5 else b.camera, **values)


class TelemetryTrack:
    """Samples sorted by time, implausible ones dropped; :meth:`at` interpolates.

    ``at(t)`` interpolates numeric fields linearly between the two neighbouring samples
    (longitude and gimbal yaw along the shorter arc, ``camera`` from the nearer sample; a field
    missing in one neighbour takes the nearer sample's value), holds the first/last sample up to
    ``max_gap_s`` beyond the ends, and raises :class:`TelemetryError` further out. The returned
    sample carries ``timestamp_s = t``. One call costs a bisection and a few multiplications.
    """

    __slots__ = ("_samples", "_times", "max_gap_s")

    def __init__(self, samples: Iterable[Telemetry], max_gap_s: float = DEFAULT_MAX_GAP_S):
        if not max_gap_s >= 0:
            raise ValueError(f"max_gap_s must be >= 0, got {max_gap_s}")
        given = list(samples)
        if not given:
            raise TelemetryError("no telemetry samples")
        kept: list[Telemetry] = []
        first_problem = ""
        for sample in given:
            problems = telemetry_problems(sample)
            if problems:
                first_problem = first_problem or f"t={sample.timestamp_s!r} s: {'; '.join(problems)}"
            else:
                kept.append(sample)
        if not kept:
            raise TelemetryError(
                f"none of the {len(given)} telemetry samples is plausible (first: {first_problem})"
            )
        if len(kept) < len(given):
            log.warning(
                "dropped %d of %d implausible telemetry samples (first: %s)",
                len(given) - len(kept),
                len(given),
                first_problem,
            )
        kept.sort(key=lambda s: s.timestamp_s)
        unique = [kept[0]]
        for sample in kept[1:]:
            if sample.timestamp_s > unique[-1].timestamp_s:
                unique.append(sample)
        if len(unique) < len(kept):
            log.info("ignored %d telemetry samples with a repeated timestamp", len(kept) - len(unique))
        self._samples: tuple[Telemetry, ...] = tuple(unique)
        self._times: list[float] = [s.timestamp_s for s in unique]
        self.max_gap_s = float(max_gap_s)

    def __len__(self) -> int:
        return len(self._samples)

    def __repr__(self) -> str:
        return f"TelemetryTrack({len(self)} samples, {self.start_s:.3f}-{self.end_s:.3f} s)"

    @property
    def samples(self) -> tuple[Telemetry, ...]:
        return self._samples

    @property
    def start_s(self) -> float:
        return self._times[0]

    @property
    def end_s(self) -> float:
        return self._times[-1]

    def at(self, t: float) -> Telemetry:
        """Telemetry at time ``t`` (seconds, same clock as the samples)."""
        times = self._times
        i = bisect_right(times, t)
        if i == 0 or i == len(times) or not math.isfinite(t):
            return self._held(t, 0 if i == 0 else len(times) - 1)
        return interpolate_telemetry(self._samples[i - 1], self._samples[i], t)

    def _held(self, t: float, k: int) -> Telemetry:
        if not abs(t - self._times[k]) <= self.max_gap_s:  # also rejects NaN
            raise TelemetryError(
                f"no telemetry at t={t:.3f} s: the track covers {self.start_s:.3f}-{self.end_s:.3f} s "
                f"(samples are held for at most {self.max_gap_s:g} s beyond its ends)"
            )
        return replace(self._samples[k], timestamp_s=t)


def load_telemetry(
    path: str | Path,
    camera: str | None = None,
    fps: float | None = None,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    overrides: Mapping[str, Any] | None = None,
) -> TelemetryTrack:
    """Load a DJI ``.srt`` sidecar or a ``.csv`` flight log into a :class:`TelemetryTrack`.

    ``camera`` names the camera profile (fills ``focal_length_mm``); ``fps`` lets a CSV without
    a time column use ``frame / fps``. ``overrides`` (Telemetry field -> value, e.g. the command
    line's ``--altitude``) replace the file's values before validation, so a fixed value rescues a
    log whose own is absurd (a ``rel_alt`` of 0 from a take-off on a roof, say). Any problem raises
    :class:`TelemetryError` naming the file.
    """
    path = Path(path)
    if not path.is_file():
        raise TelemetryError(f"telemetry file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".srt":
        try:
            text = path.read_bytes().decode("utf-8-sig", errors="replace")
        except OSError as exc:
            raise TelemetryError(f"cannot read telemetry file {path}: {exc}") from exc
        samples = parse_srt(text, camera, source=str(path))
    elif suffix == ".csv":
        samples = parse_flightlog_csv(path, fps=fps, camera=camera)
    else:
        raise TelemetryError(f"unsupported telemetry file {path}: expected a DJI .srt or a .csv flight log")
    if not samples:
        raise TelemetryError(f"no telemetry found in {path} (not a DJI SRT / flight-log CSV?)")
    if overrides:
        samples = [replace(sample, **overrides) for sample in samples]
    try:
        return TelemetryTrack(samples, max_gap_s=max_gap_s)
    except TelemetryError as exc:
        raise TelemetryError(f"{path}: {exc}") from exc
