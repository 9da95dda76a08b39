"""A track's measured ground positions, as :class:`pipelines.rules.ViolationDetector` keeps them:
the samples a ticket's measuring base is chosen from (:func:`longest_run`), the one whose box and
snapshot a violation shows (:func:`shown_sample`), and the record a violation carries for its
evidence (:func:`trace_of`: every sample as a :class:`~pipelines.types.TrackPoint`).

Pure data and functions; imports only the engine's types.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipelines.ticket import BaseSample
from pipelines.types import Frame, MeasuringBase, ScaleInfo, Telemetry, TrackPoint


@dataclass(slots=True, eq=False)
class TrackSample:
    """One measured ground position of a track, with what a violation shows of that frame."""

    t: float
    frame: int
    x: float  # the speed stage's stabilised ground position (m)
    y: float
    segment: int
    trusted: bool
    zone: str | None
    bbox: tuple[float, float, float, float]
    ground: tuple[float, float] | None  # from the point below the drone (m)
    telemetry: Telemetry | None
    class_name: str
    snapshot: np.ndarray | None = None
    scale_frac: float = math.nan  # SpeedEstimate.scale_sigma_frac; ``scale``: the frame's (pipelines.height)
    scale_per_deg: float = math.nan  # SpeedEstimate's
    point_frac: float = math.nan  # SpeedEstimate.point_sigma_frac
    scale: ScaleInfo | None = None
    speed_kmh: float = math.nan  # the frame's per-frame speed estimate and its sigma
    sigma_kmh: float = math.nan
    gsd_m_per_px: float = math.nan  # the local ground size of a pixel at the box's anchor


@dataclass(frozen=True, slots=True)
class SeenBox:
    """A track's box in one frame, kept for a while whether or not it had a speed: what a sample
    the speed stage hands in later (:attr:`~pipelines.types.SpeedEstimate.earlier`) shows of its frame."""

    t: float
    frame: int
    bbox: tuple[float, float, float, float]
    ground: tuple[float, float] | None
    telemetry: Telemetry | None
    class_name: str
    gsd_m_per_px: float = math.nan

    @classmethod
    def of(cls, frame: Frame, detections: Any, i: int, gxy: np.ndarray | None, gsd: float) -> SeenBox:
        """Detection ``i``'s (of supervision's ``Detections``) in ``frame``; ``gxy``: the frame's
        positions below the drone."""
        box = detections.xyxy[i]
        names = detections.data.get("class_name") if detections.data else None
        ground = None
        if gxy is not None and i < len(gxy) and np.all(np.isfinite(gxy[i])):
            ground = (float(gxy[i, 0]), float(gxy[i, 1]))
        bbox = (float(box[0]), float(box[1]), float(box[2]), float(box[3]))
        name = str(names[i]) if names is not None else "vehicle"
        return cls(frame.timestamp_s, frame.number, bbox, ground, frame.telemetry, name, gsd)


SEEN_KEPT = 90  # frames of a track's boxes kept for its earlier positions (3 s at 30 fps)
SEEN_MATCH_S = 0.05  # an earlier position's time (its frame's, plus its row's readout) to its frame's


def earlier_samples(
    earlier: Sequence[tuple[float, float, float]],
    seen: Sequence[SeenBox],
    zone_of: Callable[[tuple[float, float, float, float]], str | None],
    template: TrackSample,
) -> list[TrackSample]:
    """The samples of a segment's positions before its first estimate (``earlier``: time, x, y), each
    with its own frame's box, position below the drone, telemetry and zone (``zone_of`` its box), the
    rest (segment, trust, scale) the first estimate's sample's (``template``), no per-frame speed; a
    position whose frame was not seen is left out."""
    out: list[TrackSample] = []
    times = np.array([b.t for b in seen], dtype=np.float64)
    for t, x, y in earlier:
        if not len(times):
            break
        k = int(np.argmin(np.abs(times - t)))
        if abs(times[k] - t) > SEEN_MATCH_S or (out and t <= out[-1].t):
            continue
        b = seen[k]
        out.append(
            dataclasses.replace(
                template, t=float(t), frame=b.frame, x=float(x), y=float(y), zone=zone_of(b.bbox),
                bbox=b.bbox, ground=b.ground, telemetry=b.telemetry, class_name=b.class_name,
                snapshot=None, speed_kmh=math.nan, sigma_kmh=math.nan, gsd_m_per_px=b.gsd_m_per_px,
            )
        )  # fmt: skip
    return out


@dataclass(slots=True, eq=False)
class TrackLog:
    samples: deque[TrackSample] = field(default_factory=deque)
    seen: deque[SeenBox] = field(default_factory=lambda: deque(maxlen=SEEN_KEPT))  # its recent boxes
    last_seen: float = -math.inf
    last_snapshot: float = -math.inf


def base_sample(s: TrackSample) -> BaseSample:
    """The sample as a ticket's measuring base sees it (:mod:`pipelines.ticket`)."""
    return BaseSample(s.t, s.frame, s.x, s.y, s.scale_frac, s.scale_per_deg, s.point_frac, s.scale)


def longest_run(samples: Iterable[TrackSample], zone: str) -> list[TrackSample]:
    """The longest (in time) contiguous run of trusted samples of one segment in ``zone``: the
    stretch of one continuous measurement a measuring base is taken from."""
    runs: list[list[TrackSample]] = []
    run: list[TrackSample] = []
    for s in samples:
        usable = s.zone == zone and s.trusted
        if run and (not usable or s.segment != run[-1].segment):
            runs.append(run)
            run = []
        if usable:
            run.append(s)
    if run:
        runs.append(run)
    return max(runs, key=lambda r: r[-1].t - r[0].t, default=[])  # the first of equal ones


def shown_sample(run: Sequence[TrackSample], base: MeasuringBase | None) -> TrackSample | None:
    """The sample whose box and snapshot a violation shows: of those with a snapshot, the one
    nearest the middle of the base (of the run without a base); None when none has one."""
    with_snapshot = [s for s in run if s.snapshot is not None]
    if not with_snapshot:
        return None
    if base is not None:
        inside = [s for s in with_snapshot if base.start_time_s <= s.t <= base.end_time_s]
        with_snapshot = inside or with_snapshot
        mid = (base.start_time_s + base.end_time_s) / 2.0
    else:
        mid = (run[0].t + run[-1].t) / 2.0
    return min(with_snapshot, key=lambda s: abs(s.t - mid))


def trace_of(
    samples: Iterable[TrackSample], run: Sequence[TrackSample], base: MeasuringBase | None
) -> tuple[TrackPoint, ...]:
    """Every kept sample of a track as the record a violation carries; ``in_base``: the sample is one
    of ``run``'s (the measured run) inside the base's time span."""
    in_run = {id(s) for s in run}
    lo, hi = (base.start_time_s, base.end_time_s) if base is not None else (math.inf, -math.inf)
    return tuple(
        TrackPoint(
            t=s.t,
            frame=s.frame,
            x_m=s.x,
            y_m=s.y,
            segment=s.segment,
            trusted=s.trusted,
            zone=s.zone,
            bbox_xyxy=s.bbox,
            ground_xy_m=s.ground,
            speed_kmh=s.speed_kmh,
            sigma_kmh=s.sigma_kmh,
            gsd_m_per_px=s.gsd_m_per_px,
            in_base=id(s) in in_run and lo - 1e-9 <= s.t <= hi + 1e-9,
            telemetry=s.telemetry,
        )
        for s in samples
    )


__all__ = ["TrackLog", "TrackSample", "longest_run", "shown_sample", "trace_of"]
