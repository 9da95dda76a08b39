"""The camera's pitch from the cars on the road, where nothing gives it (no telemetry, no configured
pitch: a dataset, a phone without metadata), for the vehicles' own scale (pure functions).

Cars are about one size everywhere in the frame. Measured through a pitch that is not the camera's,
they are not: taken for nadir, an oblique view's far cars (at the top of the image) measure smaller
than its near ones; taken for more oblique than it is, the other way round. The trend of the cars'
log size ratio (:func:`pipelines.scale_check.observe`) against their row in the image
(:func:`row_trend`) is therefore zero at the camera's pitch and changes sign across it; the height
does not enter it (a height scales every car alike), so the pitch is found first, at any height,
and the height then from the cars at that pitch.

:func:`fit_pitch` measures the trend at candidate pitches from nadir to 20 deg above the horizon
(every car seen at one of them: its box, the image direction it moves in, which turns into a ground
heading through each candidate) and takes the pitch where it crosses zero, with its sigma from the
trend's standard error over its slope against the pitch. Where it crosses nowhere and the trend at
nadir is within its uncertainty, the view is nadir.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipelines.displacement import box_anchors
from pipelines.geometry import GroundProjector, apply_homography
from pipelines.lens import LensModel, undistort_points
from pipelines.scale_check import VehiclePrior, observe
from pipelines.types import Intrinsics

PITCHES = np.arange(-90.0, -19.9, 5.0)  # the candidates (deg); the crossing interpolated between two
SCALE_HEIGHT_M = 50.0  # the height the candidates are measured at: the trend does not depend on it
# what the fit's own sigma leaves out (the cars' shape model, the detector's shadows): on the
# scale-check bench's six oblique flights the fitted pitch missed the true one by 0.2-11 deg (median
# 4.5; their own sigmas 1-11 deg); with this floor 4 of 6 are within one sigma, 5 within two
# (python -m eval.derived_scale_bench; docs/lab/2026-11-29-issue-40-no-telemetry.md)
PITCH_FLOOR_DEG = 5.0
# a stream's finder: the observations it keeps (about 60 vehicles' worth, every third frame of each;
# a fit of that many takes 0.2-0.5 s on a 2-core VM), frames between two tries, or fewer where this
# many more vehicles have come
BUFFER, FIT_EVERY, NEW_VEHICLES = 600, 150, 4


@dataclass(frozen=True, slots=True)
class PitchFit:
    """The pitch the cars give, its sigma (deg), and the vehicles behind it."""

    pitch_deg: float
    sigma_deg: float
    n: int


def row_trend(log_ratios: np.ndarray, sd: np.ndarray, rows: np.ndarray) -> tuple[float, float, int]:
    """(slope, its standard error, vehicles used) of the vehicles' log size ratios (their sd ``sd``)
    against their ``rows`` in the image (a share of its height from the middle: -0.5 the top, 0.5 the
    bottom): weighted least squares, with a sandwich standard error from the actual residuals, after
    leaving out the values beyond four robust sds of the median (vans labelled as cars, false
    boxes). NaN, NaN where the rows do not spread."""
    y, x, s = (np.asarray(a, dtype=float) for a in (log_ratios, rows, sd))
    ok = np.isfinite(y) & np.isfinite(x) & np.isfinite(s) & (s > 0)
    y, x, w = y[ok], x[ok], 1.0 / s[ok] ** 2
    if len(y) < 3:
        return math.nan, math.nan, len(y)
    r0 = y - np.median(y)
    keep = np.abs(r0) <= 4.0 * max(1.4826 * float(np.median(np.abs(r0))), 1e-6)
    y, x, w = y[keep], x[keep], w[keep]
    xm, ym = float(np.average(x, weights=w)), float(np.average(y, weights=w))
    sxx = float((w * (x - xm) ** 2).sum())
    if sxx <= 1e-12:
        return math.nan, math.nan, len(y)
    slope = float((w * (x - xm) * (y - ym)).sum()) / sxx
    resid = y - ym - slope * (x - xm)
    se = math.sqrt(float((w**2 * (x - xm) ** 2 * resid**2).sum())) / sxx
    return slope, se, len(y)


def image_directions(proj: GroundProjector, xyxy: np.ndarray, velocities: np.ndarray) -> np.ndarray:
    """(N, 2) unit directions, in the ideal (undistorted) image, in which vehicles at ``xyxy`` move
    with the ground ``velocities`` (N, 2) measured through ``proj``: what of their motion does not
    depend on the pitch it was measured through. NaN where there is none."""
    xyxy = np.asarray(xyxy, dtype=float).reshape(-1, 4)
    if not len(xyxy):
        return np.zeros((0, 2))
    px = undistort_points(box_anchors(xyxy), proj.intrinsics, proj.lens)
    ground = apply_homography(proj.image_to_ground, px)
    v = np.asarray(velocities, dtype=float).reshape(-1, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        step = ground + v / np.linalg.norm(v, axis=1, keepdims=True)
        d = apply_homography(np.linalg.inv(proj.image_to_ground), step) - px
        return d / np.linalg.norm(d, axis=1, keepdims=True)


def trend_at(
    pitch: float,
    intrinsics: Intrinsics,
    xyxy: np.ndarray,
    directions: np.ndarray,
    ids: np.ndarray,
    prior: VehiclePrior,
    margin_px: float,
    lens: LensModel | None = None,
) -> tuple[float, float, int]:
    """:func:`row_trend` of the vehicles' median log ratios measured through ``pitch``: each
    observation's box (N, 4) and image direction of motion (N, 2), its vehicle ``ids`` (N,)."""
    proj = GroundProjector.create(intrinsics, SCALE_HEIGHT_M, pitch, lens)
    px = undistort_points(box_anchors(xyxy), intrinsics, lens)
    ahead = proj.to_ground(px + 5.0 * directions, ideal=True)
    here = proj.to_ground(px, ideal=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        headings = (ahead - here) / np.linalg.norm(ahead - here, axis=1, keepdims=True)
    fine = np.isfinite(headings).all(axis=1)
    o = observe(proj, xyxy[fine], headings[fine], prior, margin_px=margin_px)
    rows = ((xyxy[fine, 1] + xyxy[fine, 3]) / 2 / intrinsics.height) - 0.5
    vid = ids[fine]
    mids, sds, where = [], [], []
    for v in np.unique(vid):
        sel = (vid == v) & np.isfinite(o.log_ratio)
        if sel.sum() >= 2:
            mids.append(float(np.median(o.log_ratio[sel])))
            sds.append(math.sqrt(float(np.median(o.var_prior[sel]))))
            where.append(float(np.median(rows[sel])))
    return row_trend(np.array(mids), np.array(sds), np.array(where))


def fit_pitch(
    intrinsics: Intrinsics,
    xyxy: np.ndarray,
    directions: np.ndarray,
    ids: np.ndarray,
    prior: VehiclePrior,
    *,
    margin_px: float = 0.0,
    z: float = 2.5,
    min_vehicles: int = 10,
    lens: LensModel | None = None,
) -> PitchFit | None:
    """The pitch at which the cars' sizes do not trend across the image (see the module), from
    their boxes (N, 4; the frame's own pixels: the lens is undone on their anchors), the ideal-image directions they
    move in (N, 2: :func:`image_directions`) and their vehicle ``ids``; None where fewer than
    ``min_vehicles`` vehicles measure or the trend never crosses zero (nor is within ``z`` standard
    errors of it at nadir)."""
    xyxy = np.asarray(xyxy, dtype=float).reshape(-1, 4)
    directions = np.asarray(directions, dtype=float).reshape(-1, 2)
    ids = np.asarray(ids)
    ok = np.isfinite(directions).all(axis=1)
    xyxy, directions, ids = xyxy[ok], directions[ok], ids[ok]
    args = (intrinsics, xyxy, directions, ids, prior, margin_px, lens)
    return find_crossing(lambda p: trend_at(p, *args), min_vehicles=min_vehicles, z=z)


def find_crossing(
    trend: Callable[[float], tuple[float, float, int]], *, min_vehicles: int, z: float
) -> PitchFit | None:
    """Where ``trend`` (the cars' :func:`row_trend` measured through a pitch: slope, its standard
    error, vehicles) crosses zero from far cars small to far cars large, among :data:`PITCHES` and
    interpolated between two, with its sigma; nadir where it crosses nowhere and the trend there is
    within ``z`` standard errors of zero; None where fewer than ``min_vehicles`` measure, or neither.
    :func:`fit_pitch`'s search, for any way of measuring the trend (``eval.still_scale``: stills,
    each through its own altitude)."""
    trends = [trend(float(p)) for p in PITCHES]
    slopes = np.array([t[0] for t in trends])
    n = max((t[2] for t in trends), default=0)
    if n < min_vehicles or not np.isfinite(slopes[0]):
        return None
    for i in range(len(PITCHES) - 1):
        a, b = slopes[i], slopes[i + 1]
        if np.isfinite(a) and np.isfinite(b) and a > 0 >= b:  # far cars small, then large
            p = float(PITCHES[i] + (PITCHES[i + 1] - PITCHES[i]) * a / (a - b))
            fine = trend(p)
            return PitchFit(p, _sigma(PITCHES[i], PITCHES[i + 1], fine, b, a), fine[2])
    if abs(slopes[0]) <= z * trends[0][1]:  # no crossing, and none needed: nadir
        return PitchFit(-90.0, _sigma(PITCHES[0], PITCHES[1], trends[0], slopes[1]), trends[0][2])
    return None


class PitchFinder:
    """A stream's cars kept for :func:`fit_pitch` (a stream that gives no pitch, measured at the
    vehicles' own scale): each observation's box, its ideal-image direction of motion and its
    vehicle, the last ``BUFFER``; :attr:`fit` is the last fit's."""

    def __init__(self, prior: VehiclePrior, margin_px: float, z: float, min_vehicles: int) -> None:
        self.prior, self.margin_px, self.z, self.min_vehicles = prior, margin_px, z, min_vehicles
        self._obs: deque[tuple[int, np.ndarray, np.ndarray]] = deque(maxlen=BUFFER)
        self._camera: tuple[Intrinsics, LensModel | None] | None = None
        self._fitted_at: int | None = None
        self._vehicles_at = 0  # vehicles kept at the last try
        self.fit: PitchFit | None = None
        self.pending = False  # a fit started and not taken yet

    def add(self, proj: GroundProjector, xyxy: np.ndarray, ids: np.ndarray, velocities: np.ndarray) -> None:
        """One frame's compared boxes (N, 4), their vehicles and ground velocities through ``proj``."""
        if self._camera is not None and self._camera[0] != proj.intrinsics:
            self._obs.clear()  # another image size or zoom: the boxes measured before say nothing
        self._camera = (proj.intrinsics, proj.lens)
        for tid, box, d in zip(ids, xyxy, image_directions(proj, xyxy, velocities), strict=True):
            if np.isfinite(d).all():
                self._obs.append((int(tid), np.asarray(box, dtype=float), d))

    @property
    def vehicles(self) -> int:
        """The vehicles the kept observations are of."""
        return len({o[0] for o in self._obs})

    def due(self, frame: int) -> bool:
        """Whether a fit is worth trying at the stream's ``frame``: with ``min_vehicles`` vehicles kept,
        ``FIT_EVERY`` frames after the last try, or sooner where ``NEW_VEHICLES`` more have come; never
        while one is pending."""
        vehicles = self.vehicles
        if vehicles < self.min_vehicles or self.pending:
            return False
        if self._fitted_at is None or vehicles >= self._vehicles_at + NEW_VEHICLES:
            return True
        return frame - self._fitted_at >= FIT_EVERY

    def start(self, frame: int) -> tuple[tuple, dict] | None:
        """A fit's inputs at the stream's ``frame`` (``fit_pitch(*args, **kwargs)``: copies, to run on
        another thread while observations come in), the try counted; None where nothing is kept.
        :meth:`take` its result; until then :attr:`pending` (no other try is due)."""
        self._fitted_at = frame
        self._vehicles_at = self.vehicles
        if self._camera is None or not self._obs:
            return None
        self.pending = True
        ids = np.array([o[0] for o in self._obs])
        xyxy = np.array([o[1] for o in self._obs])
        directions = np.array([o[2] for o in self._obs])
        kwargs = {
            "margin_px": self.margin_px,
            "z": self.z,
            "min_vehicles": self.min_vehicles,
            "lens": self._camera[1],
        }
        return (self._camera[0], xyxy, directions, ids, self.prior), kwargs

    def take(self, fit: PitchFit | None) -> PitchFit | None:
        """A fit's result (None: the cars gave none; the last one found stays), its sigma floored."""
        self.pending = False
        if fit is not None:
            self.fit = PitchFit(fit.pitch_deg, max(fit.sigma_deg, PITCH_FLOOR_DEG), fit.n)
        return self.fit

    def refit(self, frame: int) -> PitchFit | None:
        """Fit the pitch from the kept observations now (:attr:`fit` keeps the last one found)."""
        job = self.start(frame)
        return self.fit if job is None else self.take(fit_pitch(*job[0], **job[1]))


def _sigma(p0: float, p1: float, at: tuple[float, float, int], s1: float, s0: float | None = None) -> float:
    """The pitch's sigma: the trend's standard error over its slope against the pitch there."""
    s0 = at[0] if s0 is None else s0
    per_deg = abs(s1 - s0) / abs(p1 - p0)
    return float(at[1] / per_deg) if per_deg > 0 else math.inf


__all__ = [
    "PITCHES",
    "PITCH_FLOOR_DEG",
    "PitchFinder",
    "PitchFit",
    "find_crossing",
    "fit_pitch",
    "image_directions",
    "row_trend",
    "trend_at",
]
