"""A validated, time-sorted telemetry track, interpolated per video frame, and file loading."""

from __future__ import annotations

import logging
import math
from bisect import bisect_right
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from pipelines.errors import TelemetryError
from pipelines.telemetry.flightlog import parse_flightlog_csv
from pipelines.telemetry.srt import parse_srt
from pipelines.telemetry.validate import continuity_problem, telemetry_problems
from pipelines.types import Frame, Telemetry

log = logging.getLogger(__name__)

DEFAULT_MAX_GAP_S = 1.0
# A laser range is carried by the frames after its sample for this long (each is counted once, by
# its sample's time: pipelines.rangefinder); the OSD sends one every 2 s.
LASER_HOLD_S = 5.0

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


def with_last_laser(out: Telemetry, samples: Sequence[Telemetry], k: int) -> Telemetry:
    """``out``, the telemetry at a time whose latest sample is ``samples[k]``, carrying the latest
    laser reading with its sample's own time (``lrf_time_s``: each reading counts once,
    pipelines.rangefinder): ``samples[k]``'s, else an earlier one within :data:`LASER_HOLD_S`, so a
    reading reaches the frames after it even when the next sample comes before the next frame. A
    laser range is a measurement at its sample's moment: never interpolated."""
    for j in range(k, -1, -1):
        s = samples[j]
        if j < k and out.timestamp_s - s.timestamp_s > LASER_HOLD_S:
            break
        if s.lrf_range_m is not None:
            when = s.timestamp_s if s.lrf_time_s is None else s.lrf_time_s
            if (out.lrf_range_m, out.lrf_time_s) == (s.lrf_range_m, when):
                return out
            return replace(out, lrf_range_m=s.lrf_range_m, lrf_time_s=when)
    return out


def interpolate_telemetry(a: Telemetry, b: Telemetry, t: float) -> Telemetry:
    """The telemetry at time ``t`` between samples ``a`` and ``b`` (``a.timestamp_s <= t < b.timestamp_s``).

    Numeric fields linearly, longitude and gimbal yaw along the shorter arc; ``camera`` and a field
    missing in one neighbour from the nearer sample; a laser range is not interpolated
    (:func:`with_last_laser` gives a frame its reading). The live server's buffer and the offline track both interpolate through
    this function.
    """
    f = (t - a.timestamp_s) / (b.timestamp_s - a.timestamp_s)
    if f == 0.0:
        return replace(a, timestamp_s=t)
    values = {name: _lerp(getattr(a, name), getattr(b, name), f, False) for name in _LINEAR_FIELDS}
    for name in _CIRCULAR_FIELDS:
        values[name] = _lerp(getattr(a, name), getattr(b, name), f, True)
    return Telemetry(timestamp_s=t, camera=a.camera if f < 0.5 else b.camera, **values)


def at_sample(samples: Sequence[Telemetry], k: int, t: float, ignore: Collection[str] = ()) -> Telemetry:
    """Sample ``k`` itself, stamped ``t`` (at it, or holding it beyond an end / across a gap).

    Refused (:class:`TelemetryError`) when the sample breaks continuity with every neighbour it
    has (:func:`~pipelines.telemetry.validate.continuity_problem`): a spike (60, 600, 60 m) or a
    lone sample without a field its neighbours have. Either side alone may be a real step.
    """
    s = samples[k]
    sides = [continuity_problem(samples[j], s, ignore) for j in (k - 1, k + 1) if 0 <= j < len(samples)]
    if sides and all(sides):
        raise TelemetryError(f"no telemetry at t={t:.3f} s: {sides[-1]}")
    return with_last_laser(s if s.timestamp_s == t else replace(s, timestamp_s=t), samples, k)


def between_samples(
    samples: Sequence[Telemetry],
    i: int,
    t: float,
    ignore: Collection[str] = (),
    holes: Sequence[float] = (),
) -> Telemetry:
    """The telemetry at ``t``, ``samples[i - 1].timestamp_s <= t < samples[i].timestamp_s``.

    The one interpolation of the live buffer and the offline track. Refused
    (:class:`TelemetryError`) when the two neighbours are discontinuous (a jump in height, a
    field missing on one side) or a rejected sample lies between them (``holes``: sorted times of
    samples dropped as implausible, e.g. a NaN altitude): nothing is guessed across those.
    """
    a, b = samples[i - 1], samples[i]
    if t == a.timestamp_s:
        return at_sample(samples, i - 1, t, ignore)
    problem = continuity_problem(a, b, ignore)
    if not problem and holes:
        j = bisect_right(holes, a.timestamp_s)
        if j < len(holes) and holes[j] < b.timestamp_s:
            problem = f"a rejected sample at t={holes[j]:.3f} s"
    if problem:
        raise TelemetryError(f"no telemetry at t={t:.3f} s: {problem}")
    return with_last_laser(interpolate_telemetry(a, b, t), samples, i - 1)


class TelemetryTrack:
    """Samples sorted by time, implausible ones dropped; :meth:`at` interpolates.

    ``at(t)`` interpolates numeric fields linearly between the two neighbouring samples
    (longitude and gimbal yaw along the shorter arc, ``camera`` from the nearer sample), holds
    the first/last sample up to ``max_gap_s`` beyond the ends, and raises :class:`TelemetryError`
    further out, and wherever the log cannot be trusted: across a sample dropped as implausible,
    across a jump in height or a field missing on one side (:func:`between_samples`). The returned
    sample carries ``timestamp_s = t``. One call costs a bisection and a few multiplications.

    ``ignore``: fields the run fixes by configuration (``--altitude`` ...): they are neither
    checked nor a reason to drop a sample; the ground model uses the configured value instead.
    """

    __slots__ = ("_holes", "_samples", "_times", "ignore", "max_gap_s")

    def __init__(
        self,
        samples: Iterable[Telemetry],
        max_gap_s: float = DEFAULT_MAX_GAP_S,
        ignore: Collection[str] = (),
    ):
        if not max_gap_s >= 0:
            raise ValueError(f"max_gap_s must be >= 0, got {max_gap_s}")
        given = list(samples)
        if not given:
            raise TelemetryError("no telemetry samples")
        self.ignore = frozenset(ignore)
        kept: list[Telemetry] = []
        holes: list[float] = []
        first_problem = ""
        for sample in given:
            problems = telemetry_problems(sample, self.ignore)
            if problems:
                first_problem = first_problem or f"t={sample.timestamp_s!r} s: {'; '.join(problems)}"
                t = sample.timestamp_s
                if isinstance(t, int | float) and math.isfinite(t):
                    holes.append(float(t))
            else:
                kept.append(sample)
        if not kept:
            raise TelemetryError(
                f"none of the {len(given)} telemetry samples is plausible (first: {first_problem})"
            )
        if len(kept) < len(given):
            log.warning(
                "dropped %d of %d implausible telemetry samples; frames around them get no telemetry, "
                "so no speed (first: %s)",
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
        self._holes: list[float] = sorted(holes)
        self.max_gap_s = float(max_gap_s)
        breaks = [
            p
            for p in (continuity_problem(a, b, self.ignore) for a, b in zip(unique, unique[1:], strict=False))
            if p
        ]
        if breaks:
            log.warning(
                "telemetry breaks continuity %d time(s): frames there get no telemetry, so no speed "
                "(first: %s)",
                len(breaks),
                breaks[0],
            )

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
        return between_samples(self._samples, i, t, self.ignore, self._holes)

    def _held(self, t: float, k: int) -> Telemetry:
        if not abs(t - self._times[k]) <= self.max_gap_s:  # also rejects NaN
            raise TelemetryError(
                f"no telemetry at t={t:.3f} s: the track covers {self.start_s:.3f}-{self.end_s:.3f} s "
                f"(samples are held for at most {self.max_gap_s:g} s beyond its ends)"
            )
        return at_sample(self._samples, k, t, self.ignore)


def load_telemetry(
    path: str | Path,
    camera: str | None = None,
    fps: float | None = None,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    ignore: Collection[str] = (),
) -> TelemetryTrack:
    """Load a DJI ``.srt`` sidecar or a ``.csv`` flight log into a :class:`TelemetryTrack`.

    ``camera`` names the camera profile (fills ``focal_length_mm``); ``fps`` lets a CSV without
    a time column use ``frame / fps``. ``ignore``: Telemetry fields the run fixes by configuration
    (the command line's ``--altitude`` ...): the file's values stay as logged but are not checked,
    so a fixed value rescues a log whose own is absurd (a ``rel_alt`` of 0 from a take-off on a
    roof, say); the ground model applies the fixed value, live and offline alike. Any problem
    raises :class:`TelemetryError` naming the file.
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
    try:
        return TelemetryTrack(samples, max_gap_s=max_gap_s, ignore=ignore)
    except TelemetryError as exc:
        raise TelemetryError(f"{path}: {exc}") from exc


class TelemetrySource(Protocol):
    """Anything that interpolates telemetry at a video timestamp (``TelemetryTrack``)."""

    def at(self, t: float) -> Telemetry: ...


def attach_telemetry(
    frames: Iterable[Frame], track: TelemetrySource, time_offset_s: float = 0.0
) -> Iterator[Frame]:
    """Yield each frame with ``telemetry = track.at(frame.timestamp_s + time_offset_s)``.

    ``time_offset_s`` is the telemetry clock at video time 0 (positive when the log started first).
    A frame the telemetry does not cover (before take-off, after the log ends, a gap) gets
    ``telemetry=None``: the ground model then disables speeds for it and says why. The number
    of such frames is logged; the run goes on.
    """
    uncovered = 0
    for frame in frames:
        try:
            telemetry = track.at(frame.timestamp_s + time_offset_s)
        except TelemetryError as exc:
            if uncovered == 0:
                log.warning(
                    "frame %d has no usable telemetry (%s): speeds are off until it has", frame.index, exc
                )
            uncovered += 1
            telemetry = None
        yield replace(frame, telemetry=telemetry)
    if uncovered:
        log.warning("%d frame(s) had no usable telemetry", uncovered)
