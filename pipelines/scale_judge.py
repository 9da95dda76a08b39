"""How a session's scale check weighs its rulers (pure functions; the session's state is
:class:`pipelines.scale_session.ScaleCheck`): the cars' sizes (:func:`car_estimate`) and the lane
lines' spacing (:func:`lane_estimate`), each an :class:`Estimate` with the part of its error more
data does not shrink; their inverse-variance mean (:func:`combine`) unless they disagree beyond
their uncertainty (:func:`disagreement`); the status against the tolerance (:func:`judge`).

Where there is no altitude to check (a dataset, a phone without metadata), the same combination is
the scale itself (:func:`derived_result`, :mod:`pipelines.ground`'s ``vehicles`` source): the height
above the road that makes the cars their fleet's size and the lanes their width.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipelines.config import ScaleCheckConfig
from pipelines.pitch_fit import row_trend
from pipelines.scale_check import OK, SUSPECT, UNVERIFIED, RobustRatio, ScaleCheckResult, robust_ratio
from pipelines.types import RulerReading

# how well the lane lines give the lane width through exact telemetry (log), beyond the lane width's
# own uncertainty: simulated frames from 30 to 150 m, nadir and oblique, 3.0-3.75 m lanes, read
# within 1 % (tests/pipelines/test_lane_ruler.py); one real road's frames scatter 0.8 % (docs/lab)
LANE_FLOOR = 0.01


@dataclass(frozen=True, slots=True)
class Estimate:
    """One ruler's log ratio ``mu``, its standard error ``se`` and the part of it that more data
    does not shrink (``floor``: the detector's margin, the lane width's own uncertainty), from ``n``
    vehicles or lane frames."""

    ruler: str
    mu: float
    se: float
    floor: float
    n: int
    rulers: tuple[Estimate, ...] = ()  # a combination's rulers, each one's own estimate

    def reading(self) -> RulerReading:
        return RulerReading(self.ruler, math.exp(self.mu), math.exp(self.mu) * self.se, self.n)

    @property
    def parts(self) -> tuple[RulerReading, ...]:
        """A combination's rulers, each one's reading."""
        return tuple(e.reading() for e in self.rulers)


def car_estimate(
    values: np.ndarray, cfg: ScaleCheckConfig, too_few: Callable[[int], str]
) -> Estimate | ScaleCheckResult:
    """The cars' ruler from their :func:`track_value` rows (n, 6; n, 4 without their boxes' shape,
    which is then not judged), or why there is none: the unverified result the cars alone would
    give (boxes not shaped like cars among the reasons: :func:`loose_boxes`)."""
    steady = values[values[:, 2] > 0] if len(values) else np.zeros((0, 4))
    if len(values) >= cfg.min_vehicles and len(steady) < len(values) / 2:
        return ScaleCheckResult(
            UNVERIFIED,
            n=len(steady),
            reason=f"{len(values) - len(steady)} of {len(values)} vehicles' boxes change size from frame to "
            "frame: false or partial boxes, or a pitch that is not the camera's; no ruler",
        )
    if len(steady) < cfg.min_vehicles:
        return ScaleCheckResult(UNVERIFIED, n=len(steady), reason=too_few(len(steady)))
    est = robust_ratio(steady[:, 0], steady[:, 1])
    if est is None or not math.isfinite(est.se):
        return ScaleCheckResult(UNVERIFIED, n=len(steady), reason="the vehicles' sizes disagree")
    margin_se = cfg.box_margin_sigma_px * float(np.mean(steady[:, 3]))
    se = math.hypot(est.se, margin_se)
    if (loose := loose_boxes(steady, cfg)) is not None:
        ratio = math.exp(est.mu)
        return ScaleCheckResult(UNVERIFIED, ratio, ratio * se, est.n, reason=loose)
    if est.spread > cfg.max_spread:
        ratio = math.exp(est.mu)
        return ScaleCheckResult(
            UNVERIFIED,
            ratio,
            ratio * se,
            est.n,
            reason=f"the vehicles' sizes scatter {est.spread:.1f} times more than cars' do: too many false, "
            "partial or mislabelled boxes to judge the scale",
        )
    return Estimate("cars", est.mu, se, margin_se, est.n)


def box_shape(values: np.ndarray, cfg: ScaleCheckConfig) -> RobustRatio | None:
    """The margin (px a side beyond ``box_margin_px``) the cars' boxes' shape says they have, pooled
    over the vehicles (their :func:`track_value` rows' last two columns; ``mu`` px, ``se``); None with
    fewer than ``min_vehicles`` that tell it."""
    rows = _shaped(values)
    if len(rows) < cfg.min_vehicles:
        return None
    est = robust_ratio(rows[:, 4], rows[:, 5])
    return est if est is not None and math.isfinite(est.se) else None


def _shaped(values: np.ndarray) -> np.ndarray:
    """The rows whose boxes' shape tells a margin (a finite value and sd); none without the columns."""
    if values.ndim != 2 or values.shape[1] < 6:
        return np.zeros((0, 6))
    return values[np.isfinite(values[:, 4]) & np.isfinite(values[:, 5]) & (values[:, 5] > 0)]


def loose_boxes(values: np.ndarray, cfg: ScaleCheckConfig) -> str | None:
    """Why the cars cannot be a ruler where their boxes' shape says so, else None: a wrong scale
    makes a car's box longer and wider alike, a margin other than ``box_margin_px`` (shadows boxed
    with the cars, another detector's, another fleet's shape) its shorter extent more. The vehicles'
    looseness (their :func:`track_value` rows' last two columns: px a side beyond the margin, sd)
    pooled: beyond ``z`` standard errors and the margin's own sigma, and moving the cars' reading by
    more than half the tolerance, the cars' size says nothing about the scale."""
    est = box_shape(values, cfg)
    if est is None:
        return None
    shift = abs(est.mu) * float(np.mean(_shaped(values)[:, 3]))  # what it moves the cars' log ratio by
    if abs(est.mu) <= cfg.z * math.hypot(est.se, cfg.box_margin_sigma_px) or shift <= cfg.tolerance / 2:
        return None
    return (
        f"the cars' boxes are not shaped like cars: their length and width disagree by what a margin "
        f"{est.mu:+.1f} px a side beyond the detector's ({cfg.box_margin_px:g} px) would make (+-{est.se:.1f} px, "
        f"{est.n} vehicles): shadows boxed with the cars, another detector's margin or another fleet's cars; "
        "their size cannot tell the scale"
    )


def lane_estimate(log_ratios: np.ndarray, cfg: ScaleCheckConfig) -> Estimate | None:
    """The lanes' ruler from its frames' log ratios (the measured lane width over ``lane_width_m``;
    :mod:`pipelines.lane_ruler`): their median, its standard error from their scatter, and the
    floor the lane width's own uncertainty and the line centres' (``LANE_FLOOR``) set."""
    x = np.asarray(log_ratios, dtype=float)
    x = x[np.isfinite(x)]
    if len(x) < cfg.min_lane_frames:
        return None
    mu = float(np.median(x))
    scatter = 1.4826 * float(np.median(np.abs(x - mu))) * math.sqrt(math.pi / 2 / len(x))
    floor = math.hypot(LANE_FLOOR, cfg.lane_width_sigma_m / cfg.lane_width_m)
    return Estimate("lanes", mu, math.hypot(scatter, floor), floor, len(x))


def disagreement(
    cars: Estimate, lane: Estimate, readings: tuple[RulerReading, ...], n: int, cfg: ScaleCheckConfig
) -> ScaleCheckResult:
    """Two rulers that disagree beyond their uncertainty: ``suspect`` when either alone is off by
    more than the suspect share beyond its own ``z`` standard errors (the ratio is that ruler's; its
    session's tickets are held for review: a review costs less than a wrong ticket), else
    ``unverified``."""
    both = (
        f"the cars ({math.exp(cars.mu):.2f}) and the lanes ({math.exp(lane.mu):.2f}) disagree beyond their "
        "uncertainty"
    )
    e = _most_off((lane, cars), cfg)
    if e is None:
        return ScaleCheckResult(
            UNVERIFIED,
            n=n,
            rulers=readings,
            reason=f"{both}: lanes narrower or wider than the site's, or the detector's boxes looser than it allows",
        )
    ratio = math.exp(e.mu)
    reason = f"{_off_reason(f'{e.ruler} alone', e.ruler == 'lanes', e.mu)} ({both})"
    return ScaleCheckResult(SUSPECT, ratio, ratio * e.se, n, reason=reason, rulers=readings)


def _most_off(rulers: tuple[Estimate, ...], cfg: ScaleCheckConfig) -> Estimate | None:
    """Of ``rulers``, each judged alone, the one furthest beyond the suspect share in its own
    standard errors; None where none is beyond."""
    off = [e for e in rulers if _beyond(e.mu, e.se, cfg)]
    tol = math.log1p(cfg.suspect_share)
    return max(off, key=lambda r: (abs(r.mu) - tol) / r.se) if off else None


def _beyond(mu: float, se: float, cfg: ScaleCheckConfig) -> bool:
    """A log ratio off by more than the suspect share (``suspect_tolerance``, else the tolerance)
    beyond ``z`` standard errors: suspect."""
    return abs(mu) > math.log1p(cfg.suspect_share) + cfg.z * se


def _off_reason(what: str, lanes_only: bool, mu: float) -> str:
    """Why a scale is suspect: what measured it (``what``: "cars", "lanes alone", ...) and how far
    off it is (``mu``: the log ratio)."""
    ratio = math.exp(mu)
    size = "the width they are built to" if lanes_only else "their usual size"
    return (
        f"the {what} measure {ratio:.2f} times {size} through the telemetry: its scale looks "
        f"{abs(ratio - 1) * 100:.0f} % too {'large' if mu > 0 else 'small'}"
    )


def combine(
    values: np.ndarray,
    cfg: ScaleCheckConfig,
    too_few: Callable[[int], str],
    lanes: np.ndarray | None = None,
    fleet_sigma: float = 0.0,
) -> Estimate | ScaleCheckResult:
    """The rulers' reading from the vehicles' :func:`track_value` rows (n, 6) and the lane frames'
    log ratios (``lanes``): the inverse-variance mean of those that read (``ruler`` "cars", "lanes"
    or "cars and the lanes", ``parts`` each one's reading), or the result that says why there is
    none: unverified while neither ruler has enough (``too_few(n)`` says why for the cars), when the
    cars' boxes are not steady or scatter beyond a car fleet's and no lanes stand in, or when the two
    disagree beyond their uncertainty (then suspect where either alone is off: :func:`disagreement`).
    A ruler's standard error shrinks with its vehicles or frames down to its floor (the detector's
    margin, ``box_margin_sigma_px`` times the vehicles' mean sensitivity to it; the lane width's
    sigma); ``fleet_sigma`` adds how well the fleet's mean size is known to the cars' (where they
    are the scale, not its check)."""
    car = car_estimate(values, cfg, too_few)
    cars = car if isinstance(car, Estimate) else None
    if cars is not None and fleet_sigma > 0:
        cars = dataclasses.replace(
            cars, se=math.hypot(cars.se, fleet_sigma), floor=math.hypot(cars.floor, fleet_sigma)
        )
    lane = None if lanes is None else lane_estimate(lanes, cfg)
    rulers = [e for e in (cars, lane) if e is not None]
    if not rulers:
        return car  # the cars' own unverified result
    if (
        cars is not None
        and lane is not None
        and abs(cars.mu - lane.mu) > cfg.z * math.hypot(cars.se, lane.se)
    ):
        return disagreement(cars, lane, tuple(e.reading() for e in rulers), car.n, cfg)
    weights = [1.0 / e.se**2 for e in rulers]
    mu = sum(w * e.mu for w, e in zip(weights, rulers, strict=True)) / sum(weights)
    floor = (
        0.0 if any(e.floor <= 0 for e in rulers) else 1.0 / math.sqrt(sum(1.0 / e.floor**2 for e in rulers))
    )
    what = " and the ".join(e.ruler for e in rulers)
    return Estimate(what, mu, 1.0 / math.sqrt(sum(weights)), floor, car.n, tuple(rulers))


def judge(
    values: np.ndarray,
    cfg: ScaleCheckConfig,
    too_few: Callable[[int], str],
    lanes: np.ndarray | None = None,
) -> ScaleCheckResult:
    """The check's result (:func:`combine`'s rulers) against the tolerance: suspect when off by more
    than the suspect share (``suspect_tolerance``, else the tolerance) beyond ``z`` standard errors,
    ok when within the tolerance ``z`` included, else unverified (the rulers too coarse for the
    tolerance, or not yet determined to it)."""
    est = combine(values, cfg, too_few, lanes)
    if isinstance(est, ScaleCheckResult):
        return est
    mu, se, floor = est.mu, est.se, est.floor
    ratio = math.exp(mu)
    base = ScaleCheckResult(UNVERIFIED, ratio, ratio * se, est.n, rulers=est.parts)
    lanes_only, with_lanes = est.ruler == "lanes", "lanes" in est.ruler
    off, tol, z = abs(mu), math.log1p(cfg.tolerance), cfg.z
    if _beyond(mu, se, cfg):
        return dataclasses.replace(
            base,
            status=SUSPECT,
            reason=f"{_off_reason(est.ruler, lanes_only, mu)} (every speed as much too {'high' if mu > 0 else 'low'})",
        )
    # rulers that agree within their uncertainty, one of them off on its own: the other's bias may
    # have pulled the mean back (cars whose boxes are tighter than the margin allows, beside lanes
    # that read 10 % wide); a review costs less than a wrong ticket
    if len(est.rulers) > 1 and (e := _most_off(est.rulers, cfg)) is not None:
        return dataclasses.replace(
            base,
            status=SUSPECT,
            ratio=math.exp(e.mu),
            sigma=math.exp(e.mu) * e.se,
            reason=f"{_off_reason(f'{e.ruler} alone', e.ruler == 'lanes', e.mu)} (the {est.ruler} together: "
            f"{ratio:.2f})",
        )
    if off + z * se <= tol:
        return dataclasses.replace(base, status=OK)
    if z * floor > tol:
        limit = (
            f"the {est.ruler} alone leave +-{100 * floor:.0f} %"
            if with_lanes
            else f"the detector's box margin alone is +-{100 * floor:.0f} % of their size"
        )
        return dataclasses.replace(
            base,
            status=UNVERIFIED,
            reason=f"the {'rulers are too coarse' if with_lanes else 'cars are too small in the image'} to judge "
            f"to {cfg.tolerance:.0%}: {limit}",
        )
    return dataclasses.replace(base, status=UNVERIFIED, reason=f"not yet determined to {cfg.tolerance:.0%}")


def view_check(
    est: Estimate,
    values: np.ndarray,
    rows: np.ndarray,
    cfg: ScaleCheckConfig,
    pitch: str,
    too_few: Callable[[int], str],
) -> Estimate | ScaleCheckResult:
    """The rulers' reading where it is the scale itself (no altitude), tested against the view it
    was measured in: cars whose size trends with their row in the image (``rows``: each vehicle's
    median box centre, a share of the height from the middle; ``values`` their :func:`track_value`
    rows) say the camera is tilted otherwise than the pitch in use (a tilted camera taken for nadir,
    ``pitch``): a height from them would hold at one row only. Unverified, with the reason, where
    the trend is beyond ``z`` standard errors and moves a car's size by more than the tolerance
    from the middle to the top or the bottom; the lanes alone cannot tell, so they give no height."""
    if "cars" not in est.ruler:
        car = car_estimate(values, cfg, too_few)
        why = car.reason if isinstance(car, ScaleCheckResult) else ""
        return ScaleCheckResult(
            UNVERIFIED,
            n=est.n,
            reason=f"{why}; the lanes alone cannot tell whether the view is the one measured in: no scale",
            rulers=est.parts,
        )
    steady = values[:, 2] > 0
    slope, se, n = row_trend(values[steady, 0], values[steady, 1], rows[steady])
    if n < cfg.min_vehicles or not math.isfinite(slope):
        return est
    if abs(slope) <= cfg.z * se or abs(slope) / 2 <= math.log1p(cfg.tolerance):
        return est
    return ScaleCheckResult(
        UNVERIFIED,
        n=est.n,
        reason=f"the cars measure {100 * math.expm1(slope):+.0f} % from the top of the image to its bottom: "
        f"the camera is tilted otherwise than the pitch in use ({pitch}); set the gimbal pitch "
        "(camera.pitch_deg, --pitch)",
        rulers=est.parts,
    )


def derived_result(est: Estimate | ScaleCheckResult, height_m: float) -> ScaleCheckResult:
    """The check of a scale the rulers themselves gave (no altitude: the ``vehicles`` source), its
    rulers' reading ``est`` against the height in use, ``height_m``: nothing independent checks it,
    so at best unverified, with the height the rulers give; suspect only where the cars and the
    lanes disagree (:func:`disagreement`)."""
    if isinstance(est, ScaleCheckResult):
        return est
    ratio = math.exp(est.mu)
    return ScaleCheckResult(
        UNVERIFIED,
        ratio,
        ratio * est.se,
        est.n,
        reason=f"the scale is the {est.ruler}' own (no altitude): {height_m / ratio:.1f} m above the road "
        f"+- {100 * est.se:.1f} %, nothing independent checks it",
        rulers=est.parts,
    )


__all__ = [
    "LANE_FLOOR",
    "Estimate",
    "box_shape",
    "car_estimate",
    "combine",
    "derived_result",
    "disagreement",
    "judge",
    "lane_estimate",
    "loose_boxes",
    "view_check",
]
