"""The number on the ticket: a measuring base, the speed over it, and whether it is enforceable.

Pure functions over a track's measured ground positions (:class:`BaseSample`), used by
:class:`pipelines.rules.ViolationDetector` when a vehicle that sped leaves its zone:

* :func:`choose_bases`: the base is the longest contiguous run of the track's trusted positions in
  the zone (one continuous measurement: the speed stage's ``segment``), chosen by time and distance
  and never by which per-frame speeds exceeded the limit (that would bring back the bias of the
  largest of many noisy estimates). It must span ``base_min_s`` and ``base_min_m`` with
  ``base_min_samples`` positions; with ``max_bases`` > 1 a long run is split into up to that many
  equal, non-overlapping bases of that minimum each (an accelerating vehicle).
* :func:`measure`: the speed over each base (:func:`pipelines.speed.base.base_speed`) with its sigma
  (the fit's and the scale's in quadrature: the scale's over the base's positions,
  :func:`base_frac`, else ``altitude_sigma_frac`` of the speed); of m bases the
  highest is reported, its confidence factor raised for m by Sidak's correction:
  k = z(confidence^(1/m)) (:func:`confidence_factor`).
* :func:`decide`: the ticket rule (:class:`pipelines.config.RulesConfig` documents the three) with
  the tolerance at that speed (:func:`tolerance_at`, OIML R 91 by default).

Imports only the engine's config, types, speed fit and scale sigma (:mod:`pipelines.height`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from pipelines.config import RulesConfig, ZoneConfig
from pipelines.height import base_scale_frac, reference_key
from pipelines.speed.base import base_speed
from pipelines.speed.fit import kmh
from pipelines.types import ENFORCEABLE, NOT_ENFORCEABLE, MeasuringBase, ScaleInfo


@dataclass(frozen=True, slots=True)
class BaseSample:
    """One measured ground position of a track (m, the speed stage's stabilised frame)."""

    t: float
    frame: int  # 1-based frame number
    x: float
    y: float
    # its scale there (pipelines.height): the relative sigma, the pitch sensitivity and the point
    # height's sigma (NaN: unknown), and the scale itself (SpeedEstimate's, the frame's ScaleInfo)
    scale_frac: float = math.nan
    scale_per_deg: float = math.nan
    point_frac: float = math.nan
    scale: ScaleInfo | None = None


@dataclass(frozen=True, slots=True)
class TicketMeasurement:
    """The speed over a base: ``sigma_kmh`` (one standard deviation) combines the fit's
    ``fit_sigma_kmh`` and the scale's; ``k`` is the one-sided confidence factor for ``base.of``
    bases."""

    speed_kmh: float
    sigma_kmh: float
    fit_sigma_kmh: float
    k: float
    base: MeasuringBase
    scale_frac: float = math.nan  # the scale's relative sigma over the base (:func:`base_frac`)


@dataclass(frozen=True, slots=True)
class TicketDecision:
    status: str  # ENFORCEABLE | NOT_ENFORCEABLE
    reason: str  # why not enforceable ("" when it is)
    tolerance_kmh: float  # the tolerance at the measured speed


@dataclass(frozen=True, slots=True)
class Tolerance:
    """A site's or zone's tolerance: :func:`tolerance_at` of a speed."""

    kmh: float = 3.0
    percent: float = 3.0
    mode: str = "max"  # "kmh" | "percent" | "max"

    @staticmethod
    def of(cfg: RulesConfig, zone: ZoneConfig | None = None) -> Tolerance:
        """The tolerance in force in ``zone`` (its own values where set, else the site's)."""

        def pick(zone_value, site_value):
            return site_value if zone is None or zone_value is None else zone_value

        return Tolerance(
            kmh=float(pick(zone and zone.tolerance_kmh, cfg.tolerance_kmh)),
            percent=float(pick(zone and zone.tolerance_percent, cfg.tolerance_percent)),
            mode=str(pick(zone and zone.tolerance_mode, cfg.tolerance_mode)),
        )


def tolerance_at(speed_kmh: float, tol: Tolerance) -> float:
    """The tolerance (km/h) at a measured speed: fixed, a share of it, or the larger of both
    (3 km/h and 3 %: OIML R 91's maximum permissible error, 3 km/h up to 100 km/h, 3 % above)."""
    share = tol.percent / 100.0 * max(speed_kmh, 0.0)
    if tol.mode == "kmh":
        return tol.kmh
    if tol.mode == "percent":
        return share
    return max(tol.kmh, share)


def confidence_factor(confidence: float, n_bases: int = 1) -> float:
    """One-sided k for ``confidence`` (0.95 -> 1.645), raised for the highest of ``n_bases``
    independent bases by Sidak's correction: each at confidence^(1/m)."""
    if not 0.5 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0.5, 1), got {confidence}")
    if n_bases < 1:
        raise ValueError(f"n_bases must be at least 1, got {n_bases}")
    return NormalDist().inv_cdf(confidence ** (1.0 / n_bases))


def _long_enough(run: Sequence[BaseSample], cfg: RulesConfig) -> bool:
    if len(run) < max(cfg.base_min_samples, 2):
        return False
    span = run[-1].t - run[0].t
    dist = math.hypot(run[-1].x - run[0].x, run[-1].y - run[0].y)
    return span >= cfg.base_min_s - 1e-9 and dist >= cfg.base_min_m - 1e-9


def choose_bases(run: Sequence[BaseSample], cfg: RulesConfig) -> list[list[BaseSample]]:
    """The bases of a run of one continuous measurement (samples in time order): the whole run,
    or up to ``cfg.max_bases`` equal-time, non-overlapping parts of it that each meet the minimum
    (the most that do); [] when the run itself is too short."""
    if not _long_enough(run, cfg):
        return []
    span = run[-1].t - run[0].t
    dist = math.hypot(run[-1].x - run[0].x, run[-1].y - run[0].y)
    m = min(
        cfg.max_bases,
        int(span / cfg.base_min_s + 1e-9),
        int(dist / cfg.base_min_m + 1e-9) if cfg.base_min_m > 0 else cfg.max_bases,
        len(run) // max(cfg.base_min_samples, 2),
    )
    t = np.array([s.t for s in run])
    for parts in range(max(m, 1), 1, -1):
        edges = run[0].t + span * np.arange(1, parts) / parts
        idx = np.searchsorted(t, edges, side="left")
        pieces = [list(p) for p in np.split(np.arange(len(run)), idx)]
        bases = [[run[i] for i in p] for p in pieces]
        if all(_long_enough(b, cfg) for b in bases):
            return bases
    return [list(run)]


def _pitch_sigma(scale: ScaleInfo) -> float:
    return scale.pitch_sigma_deg


def _height_frac(scale: ScaleInfo) -> float:
    return scale.height_sigma_m / max(scale.height_m, 1e-6)


def base_frac(base: Sequence[BaseSample], default: float) -> float:
    """The scale's relative sigma over a base: from its positions' pitch sensitivities under the
    widest of its scales (:func:`pipelines.height.base_scale_frac`: the error is the same height's and
    pitch's all along; a scale that narrowed during the base left its first positions measured through
    the wider one), each as its source gives it (``ScaleInfo.unmoved``: never narrowed by the traffic's
    pitch), else the mean of its positions' sigmas, else ``default``."""
    per_deg, point = [s.scale_per_deg for s in base], [s.point_frac for s in base]
    # the scale before the traffic's pitch narrowed it: the speed takes the traffic's pitch, the margin
    # not (the traffic holding its speed across the view is an assumption a junction or a queue breaks)
    scales = [s.scale.unmoved or s.scale for s in base if s.scale is not None]
    if scales:  # a base across two references is not enforceable for that (pipelines.height.scale_status)
        last = (scales[-1].source, reference_key(scales[-1].reference))
        scales = [c for c in scales if (c.source, reference_key(c.reference)) == last]
    # the last, and the widest in pitch and in height (a frame's each: a few, not the whole base's)
    candidates = (scales[-1], max(scales, key=_pitch_sigma), max(scales, key=_height_frac)) if scales else ()
    fracs = [base_scale_frac(c, per_deg, point) for c in candidates] or [math.nan]
    frac = max(fracs) if all(math.isfinite(f) for f in fracs) else math.nan
    if math.isfinite(frac):
        return frac
    fracs = [s.scale_frac for s in base if math.isfinite(s.scale_frac)]
    return float(np.mean(fracs)) if fracs else float(default)


def measure(
    run: Sequence[BaseSample],
    cfg: RulesConfig,
    *,
    scale_sigma_frac: float,
) -> TicketMeasurement | None:
    """The ticket speed of a run (:func:`choose_bases`; the highest of its bases), None when the
    run is too short for a base. ``scale_sigma_frac``: the scale's relative sigma where the
    samples say nothing of theirs (:func:`base_frac`)."""
    bases = choose_bases(run, cfg)
    if not bases:
        return None
    best: TicketMeasurement | None = None
    k = confidence_factor(cfg.confidence, len(bases))
    for i, b in enumerate(bases, start=1):
        t = np.array([s.t for s in b])
        xy = np.array([(s.x, s.y) for s in b])
        speed, fit_sigma = base_speed(t, xy)
        speed_kmh, fit_kmh = float(kmh(speed)), float(kmh(fit_sigma))
        frac = base_frac(b, scale_sigma_frac)
        sigma = math.hypot(fit_kmh, frac * speed_kmh)
        base = MeasuringBase(
            start_time_s=b[0].t,
            end_time_s=b[-1].t,
            start_frame=b[0].frame,
            end_frame=b[-1].frame,
            distance_m=speed * (b[-1].t - b[0].t),
            n_samples=len(b),
            index=i,
            of=len(bases),
        )
        if best is None or speed_kmh > best.speed_kmh:
            best = TicketMeasurement(speed_kmh, sigma, fit_kmh, k, base, frac)
    return best


def too_short_reason(run: Sequence[BaseSample], cfg: RulesConfig) -> str:
    """Why the longest run gives no base (for a violation's ``status_reason``)."""
    if not run:
        return "no trusted ground positions in the zone: no measuring base"
    span = run[-1].t - run[0].t
    dist = math.hypot(run[-1].x - run[0].x, run[-1].y - run[0].y)
    return (
        f"measuring base too short: {span:.2f} s, {dist:.1f} m, {len(run)} positions of trusted track "
        f"(needs {cfg.base_min_s:g} s, {cfg.base_min_m:g} m and {cfg.base_min_samples} positions)"
    )


def decide(m: TicketMeasurement, limit_kmh: float, rule: str, tol: Tolerance) -> TicketDecision:
    """Whether a measured speed is enforceable under ``rule`` (see RulesConfig), with the reason
    when it is not. A measurement not above the limit is never enforceable."""
    tolerance = tolerance_at(m.speed_kmh, tol)
    margin = m.k * m.sigma_kmh
    if not math.isfinite(margin):
        return TicketDecision(NOT_ENFORCEABLE, "uncertainty unknown (too few positions)", tolerance)
    if rule == "lower_bound":
        lower = m.speed_kmh - margin
        if lower > limit_kmh + tolerance:
            return TicketDecision(ENFORCEABLE, "", tolerance)
        return TicketDecision(
            NOT_ENFORCEABLE,
            f"lower bound {lower:.1f} km/h (speed - {m.k:.2f} sigma) not above the limit "
            f"{limit_kmh:g} + tolerance {tolerance:.1f} km/h",
            tolerance,
        )
    if margin > tolerance + 1e-9:
        return TicketDecision(
            NOT_ENFORCEABLE,
            f"uncertainty too large: {m.k:.2f} sigma = {margin:.1f} km/h exceeds the tolerance "
            f"{tolerance:.1f} km/h",
            tolerance,
        )
    subtract = tolerance + (margin if rule == "tolerance_and_sigma" else 0.0)
    if m.speed_kmh - subtract > limit_kmh:
        return TicketDecision(ENFORCEABLE, "", tolerance)
    what = "tolerance + k sigma" if rule == "tolerance_and_sigma" else "tolerance"
    return TicketDecision(
        NOT_ENFORCEABLE,
        f"within the {what}: {m.speed_kmh:.1f} - {subtract:.1f} km/h is not above the limit {limit_kmh:g}",
        tolerance,
    )


__all__ = [
    "ENFORCEABLE",
    "NOT_ENFORCEABLE",
    "BaseSample",
    "TicketDecision",
    "TicketMeasurement",
    "Tolerance",
    "choose_bases",
    "confidence_factor",
    "decide",
    "measure",
    "tolerance_at",
    "too_short_reason",
]
