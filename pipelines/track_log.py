"""A track's measured ground positions, as :class:`pipelines.rules.ViolationDetector` keeps them:
the samples a ticket's measuring base is chosen from (:func:`longest_run`), the one whose box and
snapshot a violation shows (:func:`shown_sample`), and the record a violation carries for its
evidence (:func:`trace_of`: every sample as a :class:`~pipelines.types.TrackPoint`).

Pure data and functions; imports only the engine's types.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from pipelines.ticket import BaseSample
from pipelines.types import MeasuringBase, ScaleInfo, Telemetry, TrackPoint


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


@dataclass(slots=True, eq=False)
class TrackLog:
    samples: deque[TrackSample] = field(default_factory=deque)
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
