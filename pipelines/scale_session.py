"""A session's scale check, updated frame by frame: :class:`ScaleCheck` (the measurement is
:mod:`pipelines.scale_check`).

Each frame, the tracked vehicles labelled as cars that the detector boxed on this frame (not carried
by optical flow), whole in the image, large enough and moving (their heading is their ground
velocity's) are compared with the prior's car. A track counts once it has ``min_observations``
frames (its median), and the session's ratio is the biweight mean over tracks. Its status:

* ``unverified``, with the reason: no usable view, too few cars yet, the vehicles stand still (a jam,
  a car park), only other classes, sizes scattered far beyond a car fleet's (false or partial boxes),
  boxes not shaped like cars (shadows boxed with them, another detector's margin: the cars withdrawn,
  :func:`pipelines.scale_judge.loose_boxes`), or not yet determined to the tolerance;
* ``ok``: the ratio is within ``tolerance`` of 1, ``z`` standard errors included;
* ``suspect``: it is off by more than ``tolerance`` beyond ``z`` standard errors.

The check starts again when the scale's source, the height reference, the camera or its zoom
changes: it checks the scale in use, not a mixture.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np
import supervision as sv

from pipelines.config import ScaleCheckConfig
from pipelines.displacement import touches_border
from pipelines.geometry import GroundProjector
from pipelines.height import DerivedHeight, reference_key
from pipelines.lagged import LaggedWork
from pipelines.lane_ruler import LaneMeasure, lane_search, measure_frame
from pipelines.pitch_fit import PitchFinder, PitchFit, fit_pitch
from pipelines.scale_check import CAR_PRIORS, UNVERIFIED, ScaleCheckResult, VehiclePrior, observe
from pipelines.scale_judge import Estimate, box_shape, combine, derived_result, judge, view_check
from pipelines.types import (
    EXTRAPOLATED_KEY,
    NOT_ENFORCEABLE,
    PROPAGATED_KEY,
    Frame,
    PitchCheckResult,
    ScaleInfo,
    Violation,
)

MAX_OBSERVATIONS = 60  # per track (6 s at 30 fps, every third frame): its median is settled long before
# a track unseen for FINISHED_AFTER frames is done: its value kept, its observations let go (looked
# for every SWEEP_EVERY frames); the status a frame carries is judged again every EVAL_EVERY frames
FINISHED_AFTER, SWEEP_EVERY, EVAL_EVERY = 300, 150, 10
OBSERVE_GAP = 3  # frames between two observations of one vehicle
# a track whose box sizes scatter (robust sd of its log ratios) beyond this many times the pixel
# noise, and beyond STEADY_FLOOR, is not a whole vehicle's: a false or partial box
STEADY_SIGMAS, STEADY_FLOOR = 3.0, 0.08


# a vehicle's row in the check's table: median log ratio, its sd, steady (1/0), per margin px, and
# how much looser than the margin its boxes are for a car's shape (px a side) with its sd
TrackValueRow = tuple[float, float, bool, float, float, float]
COLUMNS = 6


@dataclass
class _Track:
    log_ratios: list[float] = field(default_factory=list)
    var: list[float] = field(default_factory=list)
    var_prior: list[float] = field(default_factory=list)
    per_margin: list[float] = field(default_factory=list)
    loose: list[tuple[float, float, float]] = field(default_factory=list)  # Observation's loose_*
    labels: Counter = field(default_factory=Counter)
    rows: list[float] = field(default_factory=list)  # its boxes' centre rows (share of the height, centre 0)
    last_frame: int = 0  # the check's frame count when last observed
    _value: TrackValueRow | None = None  # cached until the next observation

    def add(
        self,
        log_ratio: float,
        var: float,
        var_prior: float,
        per_margin: float,
        loose: tuple[float, float, float],
    ) -> None:
        self.log_ratios.append(log_ratio)
        self.var.append(var)
        self.var_prior.append(var_prior)
        self.per_margin.append(per_margin)
        self.loose.append(loose)
        self._value = None

    def value(self) -> TrackValueRow:
        if self._value is None:
            self._value = track_value(
                self.log_ratios,
                self.var,
                self.var_prior,
                self.per_margin,
                np.array(self.loose).reshape(-1, 3),
            )
        return self._value


def track_value(
    log_ratios: Sequence[float] | np.ndarray,
    var: Sequence[float] | np.ndarray,
    var_prior: Sequence[float] | np.ndarray,
    per_margin: Sequence[float] | np.ndarray,
    loose: np.ndarray | None = None,
) -> TrackValueRow:
    """One vehicle's (median log ratio, its sd, whether its boxes hold their size, how much it moves
    per pixel of the detector's margin, how much looser than the margin its boxes are for a car's
    shape and that one's sd) from its frames (pipelines.scale_check.observe; ``loose`` (n, 3): each
    frame's ``loose_px``, ``loose_var``, ``loose_var_prior``; None: NaN): the vehicle's own size part
    of an sd does not average out over frames, the pixel noise does. A vehicle's box keeps its size
    from frame to frame within the pixel noise; a false or partial box does not."""
    x = np.asarray(log_ratios, dtype=float)
    var, var_prior = np.asarray(var, dtype=float), np.asarray(var_prior, dtype=float)
    mid, sd, noise = _median_sd(x, var, var_prior)
    within = 1.4826 * float(np.median(np.abs(x - mid)))
    steady = within <= max(STEADY_SIGMAS * math.sqrt(noise), STEADY_FLOOR)
    loose_mid = loose_sd = math.nan
    if loose is not None:
        lo = np.asarray(loose, dtype=float).reshape(-1, 3)
        lo = lo[np.isfinite(lo).all(axis=1)]
        if len(lo):
            loose_mid, loose_sd, _ = _median_sd(lo[:, 0], lo[:, 1], lo[:, 2])
    return mid, sd, steady, float(np.median(per_margin)), loose_mid, loose_sd


def _median_sd(x: np.ndarray, var: np.ndarray, var_prior: np.ndarray) -> tuple[float, float, float]:
    """Frames' values ``x`` of one vehicle: their median, its sd, of which ``var_prior`` (the
    vehicle's own) does not average out over frames and the rest (pixel noise) does, and that
    noise's variance (median over the frames)."""
    prior = float(np.median(var_prior))
    noise = float(np.median(np.clip(var - var_prior, 0.0, None)))
    sd = math.sqrt(prior + noise / len(x) * math.pi / 2)  # a median's efficiency
    return float(np.median(x)), sd, noise


def prior_of(cfg: ScaleCheckConfig) -> VehiclePrior:
    """The configured car prior: ``prior`` when given, else the region's (pipelines.scale_check)."""
    if cfg.prior is not None:
        return VehiclePrior(**cfg.prior.model_dump())
    return CAR_PRIORS[cfg.region]


def session_key(frame: Frame, scale: ScaleInfo | None) -> tuple:
    """What the check must start again on: the scale's source and reference (the laser's provisional
    one confirmed is the same laser's), the camera, its zoom, and where the scale is the vehicles'
    own, the pitch it is measured at (a new fit of the cars': the log ratios kept were measured
    through another view)."""
    tel, ref = frame.telemetry, None if scale is None else scale.reference
    return (
        None if scale is None else scale.source,
        "lrf" if ref is not None and ref.source == "lrf" else reference_key(ref),
        None if tel is None else tel.camera,
        None if tel is None or tel.focal_length_mm is None else round(tel.focal_length_mm, 2),
        None if tel is None else round(tel.digital_zoom, 3),
        round(scale.pitch_deg, 1) if scale is not None and scale.source == "vehicles" else None,
    )


class ScaleCheck:
    """The scale check of one stream (offline or live): :meth:`update` every frame, :attr:`result`."""

    def __init__(self, cfg: ScaleCheckConfig) -> None:
        self.cfg = cfg
        self.prior = prior_of(cfg)
        self._key: tuple | None = None
        self.resets = 0  # times the check started again (session_key changed)
        # a stream with neither altitude nor pitch: its cars kept to fit the pitch (pipelines.pitch_fit)
        self.finder: PitchFinder | None = None
        self._collect = False
        self._seen = 0  # frames updated, over restarts
        # the lane frames and the pitch's refits run off the frame's path, taken lag_frames later
        self._work = LaggedWork(cfg.lag_frames, "scale-check")
        self._session = 0  # counts restarts: a lane frame measured before one is let go
        self.reset()

    def reset(self, why: str = "") -> None:
        self._session += 1
        self._tracks: dict[int, _Track] = {}
        self._done: list[TrackValueRow] = []  # the values of finished vehicles it counts
        self._done_rows: list[float] = []  # ... and their median rows in the image
        self._frames = self._evaluated_at = 0
        self._skipped: Counter = Counter()  # why boxes were not compared, over the session
        self._lanes: list[float] = []  # the lane frames' log ratios (measured width over lane_width_m)
        self._lane_misses = 0  # lane frames that found no lines
        self._lane_wait = 0  # frames until the next lane measurement
        # the vehicles' own scale (no altitude: ScaleInfo.source "vehicles"): every log ratio is kept
        # against the first height measured at (_anchor), the rulers read against the one in use
        self._anchor: float | None = None
        self._in_use = math.nan
        self._shift = 0.0  # log(_anchor / the height this frame is measured at)
        self._derived: DerivedHeight | None = None  # the height the rulers gave when last judged
        self._pitch = ""  # the pitch measured with, for a reason
        self._dirty = False
        self._restarted = why
        self.resets += 1 if why else 0
        self._result = ScaleCheckResult(UNVERIFIED, reason=why or "no vehicles yet")

    @property
    def result(self) -> ScaleCheckResult:
        """The check now, every vehicle so far counted."""
        if self._dirty:
            self._result = self._evaluate()
            self._dirty = False
            self._evaluated_at = self._frames
        return self._result

    def current(self) -> ScaleCheckResult:
        """The check as a frame carries it: judged again at most every ``EVAL_EVERY`` frames (a long
        session's thousands of vehicles are not weighed again on every frame)."""
        if self._dirty and (self._frames - self._evaluated_at >= EVAL_EVERY or not self._evaluated_at):
            return self.result
        return self._result

    def no_view(self, reason: str) -> None:
        """A frame without a ground projection: until the check has tracks, that is the reason."""
        if not self._tracks and not self._done:
            self._result = ScaleCheckResult(UNVERIFIED, reason=f"no usable view: {reason}")

    def update(
        self,
        frame: Frame,
        proj: GroundProjector,
        scale: ScaleInfo | None,
        tracked: sv.Detections,
        ids: np.ndarray,
        velocity: Callable[[int], np.ndarray | None],
        gray: np.ndarray | None = None,
        road_mask: np.ndarray | None = None,
        *,
        pitch_known: bool = True,
    ) -> None:
        """Compare this frame's usable boxes with the prior (``velocity(track id)``: its ground
        velocity in m/s, None while unknown) and, every ``lane_every`` frames, the lane lines inside
        ``road_mask`` (the grey frame ``gray``) with the site's lane width. ``pitch_known``: False
        where the pitch is an assumption or the cars' fit (the vehicles' own scale then fits it)."""
        if not self.cfg.enabled:
            return
        self._seen += 1
        key = session_key(frame, scale)
        if self._key is not None and key != self._key:
            self.reset(why=_change(self._key, key))
        self._key = key
        self._work.tick()  # what was measured off the frame's path lag_frames ago
        self._shift = 0.0
        self._pitch = "" if scale is None else f"{scale.pitch_deg:.0f} deg"
        derived = scale is not None and scale.source == "vehicles"
        self._collect = derived and not pitch_known
        if self._collect and self.finder is None:
            self.finder = PitchFinder(self.prior, self.cfg.box_margin_px, self.cfg.z, self.cfg.min_vehicles)
        if derived:
            self._anchor = self._anchor or proj.altitude_m
            self._in_use = proj.altitude_m
            self._shift = math.log(self._anchor / proj.altitude_m)
        labels, carried, velocities = frame_inputs(tracked, ids, velocity)
        self.observe_frame(frame.width, frame.height, proj, tracked.xyxy, ids, labels, carried, velocities)
        self._lane_wait -= 1
        if self.cfg.lanes and gray is not None and road_mask is not None and self._lane_wait <= 0:
            self._lane_wait = self.cfg.lane_every  # counted in frames processed: dropped frames skip nothing
            if road_mask.shape[:2] != gray.shape[:2]:
                size = (gray.shape[1], gray.shape[0])
                road_mask = cv2.resize(road_mask.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST)
            else:
                road_mask = road_mask.copy()
            session, shift = self._session, self._shift
            self._work.submit(  # on copies: nothing the engine holds is shared with the running step
                measure_frame,
                gray.copy(),
                road_mask,
                np.array(tracked.xyxy, dtype=float),
                proj,
                *lane_search(self.cfg),
                take=lambda lanes: self.observe_lanes(lanes, shift) if session == self._session else None,
            )

    def observe_lanes(self, lanes: LaneMeasure, shift: float | None = None) -> None:
        """One lane frame's measurement (:func:`pipelines.lane_ruler.measure_frame`), ``shift`` the
        log of the first height over the one it was measured at (None: this frame's)."""
        if lanes.found:
            shift = self._shift if shift is None else shift
            self._lanes.append(math.log(lanes.width_m / self.cfg.lane_width_m) + shift)
            self._dirty = True
        else:
            self._lane_misses += 1

    def drain(self) -> None:
        """A stream's end: the lane frame or pitch fit still running is waited for and counted, and
        the check judged with them (a fit that judgement asks for is run and counted too)."""
        for _ in range(2):  # a second fit is not due on the same frame (PitchFinder.due)
            _ = self.result
            self._work.drain()

    def stop(self) -> None:
        """A stream closed: what still runs is let go, and the check's thread stopped."""
        self._work.stop()

    def observe_frame(
        self,
        width: int,
        height: int,
        proj: GroundProjector,
        xyxy: np.ndarray,
        ids: np.ndarray,
        labels: Sequence[str],
        carried: np.ndarray,
        velocities: np.ndarray,
    ) -> None:
        """One frame's boxes compared with the prior (:func:`frame_inputs` gives the rest)."""
        self._frames += 1
        if self._frames % SWEEP_EVERY == 0:
            self._sweep()
        rows, headings, why = usable(self.cfg, width, height, xyxy, labels, carried, velocities)
        self._skipped.update(w for w in why if w)
        # a vehicle's box hardly changes from one frame to the next: every OBSERVE_GAP-th is enough
        due = [j for j, i in enumerate(rows) if self._due(int(ids[i]))]
        rows, headings = rows[due], headings[due]
        if self._collect and self.finder is not None and len(rows):
            self.finder.add(proj, np.asarray(xyxy, dtype=float)[rows], ids[rows], velocities[rows])
        if not len(rows):
            self._dirty |= not self._tracks  # the reason nothing is measured may have changed
            return
        obs = observe(
            proj,
            np.asarray(xyxy, dtype=float)[rows],
            headings,
            self.prior,
            margin_px=self.cfg.box_margin_px,
            sigma_px=self.cfg.box_sigma_px,
            vehicle_sigma_px=self.cfg.box_vehicle_sigma_px,
        )
        for j, i in enumerate(rows):
            if not np.isfinite(obs.log_ratio[j]):
                continue
            tr = self._tracks.setdefault(int(ids[i]), _Track())
            tr.labels[labels[i]] += 1
            tr.last_frame = self._frames
            if len(tr.log_ratios) < MAX_OBSERVATIONS:
                tr.rows.append(float((xyxy[i][1] + xyxy[i][3]) / 2 / height - 0.5))
                tr.add(
                    float(obs.log_ratio[j]) + self._shift,
                    float(obs.var[j]),
                    float(obs.var_prior[j]),
                    float(obs.per_margin_px[j]),
                    (float(obs.loose_px[j]), float(obs.loose_var[j]), float(obs.loose_var_prior[j])),
                )
                self._dirty = True

    def _due(self, tid: int) -> bool:
        t = self._tracks.get(tid)
        return t is None or self._frames - t.last_frame >= OBSERVE_GAP

    def _counts(self, t: _Track) -> bool:
        return (
            len(t.log_ratios) >= self.cfg.min_observations
            and t.labels.most_common(1)[0][0] in self.cfg.classes
        )

    def _sweep(self) -> None:
        """Keep only the values of the vehicles gone for ``FINISHED_AFTER`` frames (a shift's
        thousands of vehicles in a few numbers each)."""
        gone = [tid for tid, t in self._tracks.items() if self._frames - t.last_frame > FINISHED_AFTER]
        for tid in gone:
            t = self._tracks.pop(tid)
            if self._counts(t):
                self._done.append(t.value())
                self._done_rows.append(float(np.median(t.rows)))

    def _table(self, counted: list[_Track]) -> np.ndarray:
        """The :func:`track_value` rows of the finished vehicles and of ``counted``, those still
        followed that count."""
        return np.array(self._done + [t.value() for t in counted], dtype=float).reshape(-1, COLUMNS)

    def _counted(self) -> list[_Track]:
        return [t for t in self._tracks.values() if self._counts(t)]

    def _evaluate(self) -> ScaleCheckResult:
        counted = self._counted()
        lanes = np.array(self._lanes, dtype=float)
        table = self._table(counted)
        if self._anchor is None:
            return judge(table, self.cfg, self._too_few, lanes)
        back = math.log(self._in_use / self._anchor)  # the rulers against the height in use
        table[:, 0] += back
        # a pitch the cars themselves fit (+-5 deg) bends their boxes' shape as much as a margin does:
        # there the fit and the view's test judge the view, not the shape (pipelines.scale_judge.loose_boxes)
        shaped = table[:, :4] if self._collect else table
        est = combine(shaped, self.cfg, self._too_few, lanes + back, fleet_sigma=self.cfg.fleet_sigma)
        # the view's test reads the cars' sizes alone (a tilt taken for nadir also bends their shape:
        # the tilt is the reason to give)
        sizes = est
        if not isinstance(est, Estimate) and shaped is table:  # the shape withdrew them? their sizes
            sizes = combine(
                table[:, :4], self.cfg, self._too_few, lanes + back, fleet_sigma=self.cfg.fleet_sigma
            )
        if isinstance(sizes, Estimate):
            image_rows = np.array(self._done_rows + [float(np.median(t.rows)) for t in counted])
            tilted = view_check(sizes, table, image_rows, self.cfg, self._pitch, self._too_few)
            est = tilted if isinstance(tilted, ScaleCheckResult) else est
        self._derived = (
            DerivedHeight(self._in_use / math.exp(est.mu), est.se, est.n, est.ruler)
            if isinstance(est, Estimate)
            else None
        )
        finder = self.finder if self._collect else None
        if finder is not None and (self._derived is None or finder.fit is None) and finder.due(self._seen):
            job = finder.start(self._seen)  # no height at this pitch, or none fitted yet: the cars' own pitch
            if job is not None:
                self._work.submit(fit_pitch, *job[0], **job[1], take=self._take_fit, lost=self._fit_lost)
        if finder is not None and finder.fit is None:  # a height waits for the pitch it rests on
            self._derived = None
            est = ScaleCheckResult(
                UNVERIFIED,
                n=getattr(est, "n", 0),
                reason=f"no pitch known: the cars give none yet ({finder.vehicles} vehicles kept)",
            )
        return derived_result(est, self._in_use)

    def _take_fit(self, fit: PitchFit | None) -> None:
        if self.finder is not None:
            self.finder.take(fit)
            self._dirty = True  # a height may now be judged at it

    def _fit_lost(self) -> None:
        if self.finder is not None:
            self.finder.take(None)  # the next one is due as if it had found nothing

    def fitted_pitch(self) -> PitchFit | None:
        """The pitch the cars give where the scale is theirs and no pitch is known (None: none yet), as
        a frame's check last judged it (:meth:`current`)."""
        self.current()
        return None if self.finder is None else self.finder.fit

    def derived_height(self) -> DerivedHeight | None:
        """The camera's height above the road the rulers give, where the scale is theirs (no altitude:
        the ``vehicles`` source), as a frame's check last judged it (:meth:`current`); None while they
        give none (too few vehicles, rulers that disagree) or the scale is another's."""
        self.current()
        return self._derived if self._anchor is not None else None

    def _too_few(self, n: int) -> str:
        skipped = self._skipped
        if not self._tracks and not self._done and skipped:
            top = skipped.most_common(1)[0][0]
            return {
                "standing": "the vehicles are standing (a jam or a car park): no heading to measure along",
                "other class": f"no {' or '.join(self.cfg.classes)} yet (only other classes)",
                "too small": f"the vehicles are too small in the image (under {self.cfg.min_box_px:g} px)",
                "cut by the border": "the vehicles are cut by the image border",
            }.get(top, "no vehicle measured yet")
        text = f"too few vehicles yet ({n} of {self.cfg.min_vehicles})"
        if skipped:
            top, count = skipped.most_common(1)[0]
            text += f"; boxes left out most: {top} ({count})"
        return f"{self._restarted}; {text}" if self._restarted else text

    def summary(self) -> dict[str, object]:
        """The check for summary.json and a live session's info: its result, the prior, what was left out."""
        out = self.result.to_dict()
        out["prior"] = {
            "length_m": self.prior.length_m,
            "width_m": self.prior.width_m,
            "height_m": self.prior.height_m,
        }
        out["tolerance"] = self.cfg.tolerance
        out["suspect_tolerance"] = self.cfg.suspect_share
        out["skipped"] = dict(self._skipped)
        # the margin the cars' boxes' shape says they have beyond box_margin_px (px a side): where it
        # is far off, the cars do not judge (pipelines.scale_judge.loose_boxes); a measured margin
        table = self._table(self._counted())
        shape = box_shape(table[table[:, 2] > 0], self.cfg)
        out["box_shape"] = (
            None
            if shape is None
            else {"margin_beyond_px": round(shape.mu, 2), "sigma_px": round(shape.se, 2), "vehicles": shape.n}
        )
        out["restarts"] = self.resets
        out["vehicles_open"] = len(self._tracks)  # still followed; the others kept as their values
        if self._anchor is not None:  # no altitude: the scale is the rulers' own
            d, fit = self._derived, self.fitted_pitch()
            out["derived"] = {
                "height_m": None if d is None else round(d.height_m, 2),
                "sigma_pct": None if d is None else round(100 * d.sigma_frac, 2),
                "rulers": None if d is None else d.rulers,
                "pitch_fitted_deg": None if fit is None else round(fit.pitch_deg, 2),
                "pitch_sigma_deg": None if fit is None else round(fit.sigma_deg, 2),
            }
        out["lanes"] = {
            "width_m": self.cfg.lane_width_m,
            "sigma_m": self.cfg.lane_width_sigma_m,
            "frames_measured": len(self._lanes),
            "frames_without_lines": self._lane_misses,
            "measured_width_m": round(self.cfg.lane_width_m * math.exp(float(np.median(self._lanes))), 3)
            if self._lanes
            else None,
        }
        return out


def frame_inputs(
    tracked: sv.Detections, ids: np.ndarray, velocity: Callable[[int], np.ndarray | None]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """A frame's tracked boxes as the check takes them: their labels, whether each was carried (not
    detected on this frame: propagated by optical flow, extrapolated) and their tracks' ground
    velocities (N, 2; m/s, NaN while unknown or carried)."""
    n = len(tracked)
    names = tracked.data.get("class_name")
    labels = ["vehicle"] * n if names is None else [str(v) for v in names]
    carried = np.zeros(n, bool)
    for name in (PROPAGATED_KEY, EXTRAPOLATED_KEY):
        if name in tracked.data:
            carried |= np.asarray(tracked.data[name], dtype=bool)
    velocities = np.full((n, 2), np.nan)
    for i in range(n):
        v = None if carried[i] else velocity(int(ids[i]))
        if v is not None:
            velocities[i] = v
    return labels, carried, velocities


def usable(
    cfg: ScaleCheckConfig,
    width: int,
    height: int,
    xyxy: np.ndarray,
    labels: Sequence[str],
    carried: np.ndarray,
    velocities: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Which boxes (N, 4) of one frame to compare: (their rows, their unit ground headings (M, 2),
    and for every box why it is not compared, "" when it is). ``carried``: boxes not detected on
    this frame (propagated by optical flow, extrapolated); ``velocities`` (N, 2): the tracks'
    ground velocities (m/s; NaN while unknown)."""
    xyxy = np.asarray(xyxy, dtype=float).reshape(-1, 4)
    n = len(xyxy)
    border = touches_border(xyxy, width, height)
    small = np.minimum(xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]) < cfg.min_box_px
    speed = np.hypot(velocities[:, 0], velocities[:, 1]) if n else np.zeros(0)
    why = []
    for i in range(n):
        reasons = (
            (carried[i], "carried"),
            (labels[i] not in cfg.classes, "other class"),
            (border[i], "cut by the border"),
            (small[i], "too small"),
            (not np.isfinite(speed[i]), "no heading yet"),
            (speed[i] * 3.6 < cfg.min_speed_kmh, "standing"),
        )
        why.append(next((w for bad, w in reasons if bad), ""))
    rows = np.array([i for i in range(n) if not why[i]], dtype=int)
    headings = velocities[rows] / speed[rows, None] if len(rows) else np.zeros((0, 2))
    return rows, headings, why


def _change(old: tuple, new: tuple) -> str:
    names = (
        "scale source",
        "height reference",
        "camera",
        "focal length",
        "zoom",
        "pitch fitted from the vehicles",
    )
    what = [n for n, a, b in zip(names, old, new, strict=True) if a != b]
    return f"restarted: the {', '.join(what)} changed"


def hold_for_check(
    v: Violation, check: ScaleCheckResult | PitchCheckResult, hold: Sequence[str], later: bool = False
) -> Violation:
    """``v`` with the session's scale check (or pitch check: pipelines.pitch_check); held for review
    (not enforceable, the check in the reason) when it was enforceable and the check's status is one
    the site holds. ``later``: only a violation that would be held changes (one closed before the
    check turned)."""
    held = v.enforceable and check.status in hold
    if later and not held:
        return v
    field = "pitch_check" if isinstance(check, PitchCheckResult) else "scale_check"
    v = dataclasses.replace(v, **{field: check})
    if held:
        when = " (found after it closed)" if later else ""
        v = dataclasses.replace(
            v, status=NOT_ENFORCEABLE, status_reason=f"held for review: {check.describe()}{when}"
        )
    return v


__all__ = ["ScaleCheck", "frame_inputs", "hold_for_check", "prior_of", "session_key", "track_value", "usable"]
