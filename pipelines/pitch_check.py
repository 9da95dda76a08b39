"""The gimbal's pitch checked against the traffic: a vehicle does not speed up as it crosses the view.

A pitch off by ``eps`` degrees stretches the ground unevenly: a displacement at a place and heading
is measured ``1 + per_deg * eps`` times its length, ``per_deg`` the signed relative change per degree
of the pitch used (:class:`pipelines.height.ScaleModel`; every speed carries it as
``SpeedEstimate.scale_per_deg``). In an oblique view it changes several-fold from the image's bottom
to its top (at -45 deg about 1 % a degree near, 7 % far, along the line of sight), so a vehicle that
holds its speed across the view reads faster or slower as it goes: its log speed against its
``per_deg`` is a line of slope ``eps`` (its true speed is the line's intercept, its own). Each track
that crossed enough of the view gives a slope; traffic's accelerations are its noise, different from
track to track (more where a track saw little of the view's change: its sd is taken inversely to the
spread of its ``per_deg``), so the tracks' slopes are pooled by the scale check's biweight
(:func:`pipelines.scale_check.robust_ratio`) with a sandwich standard error from their scatter.

Measured (docs/lab/2026-11-30-issue-39-pitch-check.md): a 30 s 1080p flight at 100 m, -45 deg, 80
vehicles, run through a pitch off by 0, +-0.5, +-1 and +-2 deg: the check reads each within 0.09 deg
(the tracks' scatter 0.08-0.17 deg, 63-73 vehicles). The realistic grid's 8 s flights (12-23 vehicles,
the shipped detector, solid vehicles, lens and shutter, a measured base's pitch 0-2.1 deg off): the
scatter's sigma 0.16-0.80 deg was 1.3 times narrow (rms z 1.34), so ``sigma_floor_deg`` (0.25) joins it
in quadrature (rms z 1.04); then one suspect (the base 2.1 deg off, read 2.6), two ok (both right),
none wrong either way.

Its estimate is also weighed into the scale (``correct``, on by default; :meth:`PitchCheck.observation`):
the ground model moves the pitch the speeds use (and the height where a measured base or the laser ties
the two) by the Gaussian update of the source's prior with the traffic's estimate
(:func:`pipelines.height.with_pitch_observed`), from the next frame on, and narrows the pitch's sigma
with it; the check itself goes on measuring the source's pitch (``update`` takes the move out of the
speeds). A ``suspect`` one still holds the session's tickets for review (``rules.hold_pitch_check``,
through :func:`pipelines.scale_session.hold_for_check`; every violation carries the check): a gimbal
that far off is for an officer to see. The session's summary (``pitch_check``) says ``ok`` where the pitch
used is within ``tolerance_deg`` of the one the traffic gives (``z`` standard errors included),
``suspect`` where it is off by more than that beyond them, else ``unverified`` with the reason (too
few vehicles yet, or not yet determined). What fools it: traffic that brakes or speeds up in one part
of the view more than another (a junction, a queue's tail), which a pitch error cannot be told from.
Pure numpy; each track keeps five running sums (its memory grows with the tracks, not the frames);
restarted when the scale source changes the pitch used; a change to or from the laser's height or a
terrain model's (the frame's choice, under the same pitch: pipelines.ground) changes the height alone,
a step in every track's log speed: each track's samples on either side are fitted apart instead.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from pipelines.config import PitchCheckConfig
from pipelines.scale_check import robust_ratio
from pipelines.types import OK, SCALE_SOURCES, SUSPECT, UNVERIFIED, PitchCheckResult, SpeedEstimate


def track_slope(per_deg: np.ndarray, log_speed: np.ndarray) -> tuple[float, float]:
    """(slope, spread) of one track's log speeds against its ``per_deg``: the least-squares slope (the
    pitch error in degrees its speeds say) and the rms spread of its ``per_deg`` (how much of the view's
    change it saw; NaN slope where it saw none)."""
    x = np.asarray(per_deg, dtype=float)
    y = np.asarray(log_speed, dtype=float)
    return slope_from_sums(len(x), float(x.sum()), float(y.sum()), float((x * x).sum()), float((x * y).sum()))


def slope_from_sums(n: int, sx: float, sy: float, sxx: float, sxy: float) -> tuple[float, float]:
    """:func:`track_slope` from a track's running sums (count, sum of x, of y, of x^2, of x y): what a
    stream keeps of each track, however long the session."""
    if n <= 0:
        return math.nan, 0.0
    cxx = max(sxx - sx * sx / n, 0.0)
    spread = math.sqrt(cxx / n)
    if cxx <= 1e-18:
        return math.nan, spread
    return (sxy - sx * sy / n) / cxx, spread


def pooled_slope(slopes: np.ndarray, spreads: np.ndarray) -> tuple[float, float, int] | None:
    """The tracks' common slope (biweight, each track's sd inversely to its spread, scaled by their
    robust scatter) with its standard error and the tracks counted; None for fewer than two."""
    s, w = np.asarray(slopes, dtype=float), np.asarray(spreads, dtype=float)
    ok = np.isfinite(s) & np.isfinite(w) & (w > 0)
    s, w = s[ok], w[ok]
    if len(s) < 2:
        return None
    standardized = s * w
    scale = 1.4826 * float(np.median(np.abs(standardized - np.median(standardized))))
    if scale <= 0:
        scale = float(np.std(standardized)) or 1e-9
    est = robust_ratio(s, scale / w)
    if est is None or not math.isfinite(est.se):
        return None
    return est.mu, est.se, est.n_inliers


# the sources a frame chooses among under one pitch (pipelines.ground.GroundModel._choose_scale): the
# configuration's or an operator's reference, the laser's, a terrain model's; every source but the
# vehicles' own, whose pitch is the cars' fit
LAYERED = frozenset({"lrf", "terrain"})
SHARED_PITCH = frozenset(SCALE_SOURCES) - {"vehicles"}


def same_pitch(before: str | None, now: str) -> bool:
    """Whether a change of scale source from ``before`` to ``now`` keeps the pitch used (a change to or
    from the laser or a terrain model; any other is an operator's or the vehicles' own pitch)."""
    return before in SHARED_PITCH and now in SHARED_PITCH and (before in LAYERED or now in LAYERED)


@dataclass
class PitchCheck:
    """A session's pitch check from its tracks' speeds (see the module) under ``cfg``; ``update`` with
    each frame's speed estimates, ``result`` when asked."""

    cfg: PitchCheckConfig = field(default_factory=PitchCheckConfig)
    # by (track, height segment): n, sum x, y, x^2, x y (x: per_deg)
    _tracks: dict[tuple[int, int], list[float]] = field(default_factory=dict)
    _source: str | None = None
    _segment: int = 0  # height changes under the same pitch so far
    _current: tuple[float, PitchCheckResult] | None = None  # (stream time, result): current()'s

    def update(self, speeds: Iterable[SpeedEstimate], moved: tuple[float, float] = (0.0, 0.0)) -> None:
        """Keep each trusted estimate's (per_deg, log speed) by its track; a new scale source restarts.
        ``moved``: what the traffic's pitch moved the frame's scale by (the log of the height's ratio,
        the pitch in deg: ``GroundModel.traffic_shift``), taken out again, so that the check goes on
        measuring the pitch its source gives, not its own correction. Whole: a move re-measures every
        track's window (``SpeedEstimator.rescale``), so a speed is measured under its frame's move
        alone."""
        log_h, dp = moved
        for s in speeds:
            if s.scale_source != self._source:
                if same_pitch(self._source, s.scale_source):
                    self._segment += 1
                else:
                    self.reset()
                self._source = s.scale_source
            if s.trusted and s.speed_kmh > 5.0 and math.isfinite(s.scale_per_deg):
                x = s.scale_per_deg
                y = math.log(s.speed_kmh) - log_h - x * dp
                sums = self._tracks.setdefault((int(s.track_id), self._segment), [0.0] * 5)
                sums[0] += 1.0
                sums[1] += x
                sums[2] += y
                sums[3] += x * x
                sums[4] += x * y

    def reset(self) -> None:
        self._tracks.clear()
        self._source = None
        self._current = None

    def current(self, now_s: float, every_s: float = 1.0) -> PitchCheckResult:
        """The result as of ``now_s`` (stream time), pooled again at most every ``every_s`` seconds
        (pooling costs ~2 ms; a live stream's card and its holds need no fresher one)."""
        if self._current is None or not 0.0 <= now_s - self._current[0] < every_s:
            self._current = (now_s, self.result())
        return self._current[1]

    def observation(self, now_s: float) -> tuple[float, float] | None:
        """What the scale is to weigh in (``correct``): the pitch used minus the traffic's and its sigma
        (deg) as of ``now_s``, once enough vehicles give one; None before, or when the check is only one."""
        if not self.cfg.correct:
            return None
        res = self.current(now_s)
        if not (math.isfinite(res.error_deg) and math.isfinite(res.sigma_deg)):
            return None
        return res.error_deg, res.sigma_deg

    def result(self) -> PitchCheckResult:
        cfg = self.cfg
        fits = [slope_from_sums(int(v[0]), *v[1:]) for v in self._tracks.values() if v[0] >= cfg.min_samples]
        fits = [f for f in fits if math.isfinite(f[0]) and f[1] >= cfg.min_spread]
        if len(fits) < cfg.min_vehicles:
            return PitchCheckResult(
                UNVERIFIED,
                n=len(fits),
                reason=f"{len(fits)} of {cfg.min_vehicles} vehicles that crossed enough of the view to tell",
            )
        pooled = pooled_slope(np.array([f[0] for f in fits]), np.array([f[1] for f in fits]))
        if pooled is None:
            return PitchCheckResult(UNVERIFIED, n=len(fits), reason="the vehicles' speeds disagree")
        eps, se, n = pooled
        se = math.hypot(se, cfg.sigma_floor_deg)  # what the tracks' scatter does not show (module)
        if abs(eps) - cfg.z * se > cfg.tolerance_deg:
            return PitchCheckResult(
                SUSPECT,
                eps,
                se,
                n,
                f"the traffic's speeds say the pitch used is {eps:+.1f} +- {se:.1f} deg off: speeds read "
                "faster or slower across the view as they would through that error",
            )
        if abs(eps) + cfg.z * se <= cfg.tolerance_deg:
            return PitchCheckResult(OK, eps, se, n)
        return PitchCheckResult(UNVERIFIED, eps, se, n, f"not yet determined to {cfg.tolerance_deg:g} deg")


__all__ = ["PitchCheck", "PitchCheckResult", "pooled_slope", "same_pitch", "slope_from_sums", "track_slope"]
