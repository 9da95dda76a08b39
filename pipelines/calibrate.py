"""A measured base: the camera's height above the road (and the gimbal's pitch bias) from lines of
known length on the road.

Police speed enforcement measured bases long before drones: time over a known distance. Here an
officer draws a line on a frame between two road marks (a dash period, a stop line to a sign) and
types its length, measured with a wheel or read off a map. Over flat ground every ground distance
scales with the camera's height, so one line gives the height above the road at that moment; lines
in two directions also give the pitch bias (a pitch error stretches distances along the line of
sight about twice as much as across it).

:func:`solve_base` fits (height, pitch bias) by Gauss-Newton: each line's length residual is
weighted by its uncertainty (the typed length's, ``length_sigma_frac``, and the clicks',
``click_sigma_px`` at each end along the line), and the pitch bias has the gimbal's prior
(``pitch_sigma_deg``) as a pseudo-observation, so one line leaves it at 0 with the prior's sigma and
two or more in different directions determine it. The covariance is the inverse of the normal
matrix: the clicks' and the lengths' noise, stated. Where the residuals show more than that noise
explains (their chi-square above its 95 % point: a mistyped length, a mis-clicked mark) it is
inflated by chi-square over the degrees of freedom; inflating it whenever chi-square passes its
degrees of freedom (a third of honest solves with three lines) made the sigma 1.2 times too wide.
:meth:`BaseSolution.reference` turns it into the :class:`~pipelines.height.HeightReference` the
engine uses from then on (the take-off point's height above the road: the solved height minus the
drone's altitude reading on that frame).

Bad input gets :class:`BaseError` with one line saying what to change: no line, a line of zero
length or off the image, a length out of range, a point above the horizon, a solution the drone's
reading contradicts. :func:`share_on_mask` says how much of a line lies on the road mask.

:func:`solve_base_on_frame` is the one way a base is measured on a frame, for ``airpatrol calibrate``
and the live server alike: the frame's geometry as the drone reports it (:func:`reading_projector`:
its intrinsics, raw altitude reading and gimbal pitch, resolved by the ground model with no height
reference applied, since that is what is measured), then :func:`solve_base`. A frame that cannot be
measured on raises :class:`FrameScaleError` (a :class:`BaseError` with a code).

Numpy (scipy for the chi-square's point), the engine's geometry and its ground model (for the
frame's reading).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import chdtri

from pipelines.config import CameraConfig
from pipelines.errors import AirPatrolError
from pipelines.geometry import GroundProjector
from pipelines.ground import GroundModel, scale_priors
from pipelines.height import HeightReference, pitch_sigma_on_road
from pipelines.lens import LensModel
from pipelines.types import Frame, Intrinsics

MIN_LINE_PX = 10.0  # a shorter line is a slip of the mouse
LENGTH_RANGE_M = (0.5, 1000.0)
MAX_LINES = 20
MAX_PITCH_BIAS_DEG = 10.0
ITERATIONS = 20
MISFIT_LEVEL = 0.95  # residuals above this chi-square point say the lines disagree more than their noise


class BaseError(AirPatrolError, ValueError):
    """A measured base that cannot be used; the message says why and what to change."""


@dataclass(frozen=True, slots=True)
class BaseLine:
    """A line on a frame between two road marks (pixels) and its length on the road (metres);
    ``length_sigma_m``: its uncertainty (None: the solve's ``length_sigma_frac`` of the length)."""

    p1: tuple[float, float]
    p2: tuple[float, float]
    length_m: float
    length_sigma_m: float | None = None

    @property
    def pixels(self) -> float:
        return math.hypot(self.p2[0] - self.p1[0], self.p2[1] - self.p1[1])

    def to_dict(self) -> dict:
        return {
            "p1": [round(v, 2) for v in self.p1],
            "p2": [round(v, 2) for v in self.p2],
            "length_m": self.length_m,
            "length_sigma_m": self.length_sigma_m,
        }


@dataclass(frozen=True, slots=True)
class BaseSolution:
    """The solved height above the road and pitch bias, with their sigmas (one standard deviation);
    ``pitch_solved``: the lines determined the pitch bias (their directions differ enough), else it
    is the prior's 0 +- ``pitch_sigma_deg``; ``residuals_m``: each line's solved minus typed
    length; ``altitude_reading_m``: the drone's reading on the frame the lines were drawn on."""

    height_m: float
    height_sigma_m: float
    pitch_bias_deg: float
    pitch_sigma_deg: float
    pitch_solved: bool
    residuals_m: tuple[float, ...]
    altitude_reading_m: float
    pitch_reading_deg: float
    lines: tuple[BaseLine, ...]
    height_pitch_corr: float = 0.0  # the correlation of the two solved values' errors

    @property
    def takeoff_above_road_m(self) -> float:
        return self.height_m - self.altitude_reading_m

    def describe(self) -> str:
        pitch = (
            f"pitch bias {self.pitch_bias_deg:+.2f} +- {self.pitch_sigma_deg:.2f} deg"
            if self.pitch_solved
            else f"pitch not determined (one direction): +- {self.pitch_sigma_deg:.2f} deg"
        )
        return (
            f"{len(self.lines)} line(s): {self.height_m:.2f} +- {self.height_sigma_m:.2f} m above the road "
            f"(the drone reads {self.altitude_reading_m:.1f} m: take-off {self.takeoff_above_road_m:+.2f} m "
            f"above the road), {pitch}"
        )

    def reference(self, at_time_s: float | None, set_by: str = "", set_at: str = "") -> HeightReference:
        return HeightReference(
            source="measured_base",
            takeoff_above_road_m=self.takeoff_above_road_m,
            sigma_m=self.height_sigma_m,
            pitch_bias_deg=self.pitch_bias_deg,
            pitch_sigma_deg=self.pitch_sigma_deg,
            at_time_s=at_time_s,
            set_by=set_by,
            set_at=set_at,
            detail=self.describe(),
            height_pitch_corr=self.height_pitch_corr,
        )

    def to_dict(self) -> dict:
        return {
            "height_above_road_m": round(self.height_m, 3),
            "height_sigma_m": round(self.height_sigma_m, 3),
            "pitch_bias_deg": round(self.pitch_bias_deg, 3),
            "pitch_sigma_deg": round(self.pitch_sigma_deg, 3),
            "pitch_solved": self.pitch_solved,
            "height_pitch_corr": round(self.height_pitch_corr, 4),
            "takeoff_above_road_m": round(self.takeoff_above_road_m, 3),
            "altitude_reading_m": self.altitude_reading_m,
            "pitch_reading_deg": self.pitch_reading_deg,
            "residuals_m": [round(r, 3) for r in self.residuals_m],
            "lines": [ln.to_dict() for ln in self.lines],
            "summary": self.describe(),
        }


def _check_lines(lines: Sequence[BaseLine], intrinsics: Intrinsics) -> None:
    if not lines:
        raise BaseError("a measured base needs at least one line between two road marks")
    if len(lines) > MAX_LINES:
        raise BaseError(f"at most {MAX_LINES} lines, got {len(lines)}")
    lo, hi = LENGTH_RANGE_M
    for i, ln in enumerate(lines, start=1):
        pts = (*ln.p1, *ln.p2)
        if not all(math.isfinite(v) for v in pts):
            raise BaseError(f"line {i}: its end points must be numbers")
        for u, v in (ln.p1, ln.p2):
            if not (0 <= u <= intrinsics.width and 0 <= v <= intrinsics.height):
                raise BaseError(
                    f"line {i}: point ({u:.0f}, {v:.0f}) is outside the {intrinsics.width}x{intrinsics.height} frame"
                )
        if ln.pixels < MIN_LINE_PX:
            raise BaseError(
                f"line {i} is {ln.pixels:.1f} px long: draw it between two marks at least {MIN_LINE_PX:g} px apart"
            )
        if not (math.isfinite(ln.length_m) and lo <= ln.length_m <= hi):
            raise BaseError(f"line {i}: length {ln.length_m} m is out of range ({lo:g}-{hi:g} m)")
        if ln.length_sigma_m is not None and not (0 < ln.length_sigma_m < ln.length_m / 2):
            raise BaseError(
                f"line {i}: length sigma {ln.length_sigma_m} m must be positive and under half the length"
            )


def _lengths(
    lines: Sequence[BaseLine], intrinsics: Intrinsics, height: float, pitch: float, lens: LensModel | None
) -> tuple[np.ndarray, np.ndarray]:
    """Each line's ground length at (height, pitch) through the lens, and its change per pixel of
    each end moved along the line (root-sum-square of the two ends): NaN where a point is above the
    horizon."""
    proj = GroundProjector.create(intrinsics, height, max(min(pitch, -1e-3), -90.0), lens)
    p1 = np.array([ln.p1 for ln in lines], dtype=np.float64)
    p2 = np.array([ln.p2 for ln in lines], dtype=np.float64)
    unit = (p2 - p1) / np.linalg.norm(p2 - p1, axis=1, keepdims=True)
    g1, g2 = proj.to_ground(p1), proj.to_ground(p2)
    length = np.linalg.norm(g2 - g1, axis=1)
    d1 = np.linalg.norm(g2 - proj.to_ground(p1 - unit), axis=1) - length
    d2 = np.linalg.norm(proj.to_ground(p2 + unit) - g1, axis=1) - length
    return length, np.hypot(d1, d2)


def misfit_inflation(chi2: float, dof: int, level: float = MISFIT_LEVEL) -> float:
    """The factor a fit's covariance is widened by for residuals of chi-square ``chi2`` over ``dof``
    degrees of freedom: 1 where the stated noise explains them (below the chi-square's ``level``
    point), else ``chi2 / dof`` (the noise the residuals show)."""
    if dof <= 0 or not math.isfinite(chi2) or chi2 <= float(chdtri(dof, 1.0 - level)):
        return 1.0
    return chi2 / dof


def solve_base(
    lines: Sequence[BaseLine],
    intrinsics: Intrinsics,
    altitude_reading_m: float,
    pitch_deg: float,
    *,
    click_sigma_px: float = 1.5,
    length_sigma_frac: float = 0.005,
    pitch_sigma_deg: float = 1.0,
    lens: LensModel | None = None,
) -> BaseSolution:
    """Solve the height above the road and the pitch bias from ``lines`` drawn on a frame whose
    intrinsics, altitude reading (above take-off) and reported gimbal pitch are given; ``lens``: the
    video's distortion, undone on the lines' ends (pipelines.lens)."""
    lines = tuple(lines)
    _check_lines(lines, intrinsics)
    if not (math.isfinite(altitude_reading_m) and altitude_reading_m > 0):
        raise BaseError(f"the frame's altitude reading must be positive, got {altitude_reading_m}")
    if not (-90.0 <= pitch_deg < 0):
        raise BaseError(f"the frame's gimbal pitch must be in [-90, 0) deg, got {pitch_deg}")
    typed = np.array([ln.length_m for ln in lines])
    typed_sigma = np.array(
        [
            ln.length_sigma_m if ln.length_sigma_m is not None else length_sigma_frac * ln.length_m
            for ln in lines
        ]
    )
    unit_len, _ = _lengths(lines, intrinsics, 1.0, pitch_deg, lens)
    if not np.all(np.isfinite(unit_len)) or np.any(unit_len <= 0):
        bad = int(np.flatnonzero(~np.isfinite(unit_len) | (unit_len <= 0))[0]) + 1
        raise BaseError(f"line {bad}: a point is at or above the horizon; draw the line on the road")
    prior = max(pitch_sigma_deg, 1e-3)

    def residuals(h: float, bias: float) -> tuple[np.ndarray, np.ndarray]:
        length, per_px = _lengths(lines, intrinsics, h, pitch_deg + bias, lens)
        sigma = np.hypot(typed_sigma, click_sigma_px * per_px)
        return np.append((length - typed) / sigma, bias / prior), length

    h = float(np.median(typed / unit_len))
    bias = 0.0
    for _ in range(ITERATIONS):
        r, _ = residuals(h, bias)
        if not np.all(np.isfinite(r)):
            raise BaseError("the lines cannot be solved: a point falls above the horizon at the solved pitch")
        jac = np.empty((len(r), 2))
        dh, db = 1e-4 * h, 1e-3
        jac[:, 0] = (residuals(h + dh, bias)[0] - r) / dh
        jac[:, 1] = (residuals(h, bias + db)[0] - r) / db
        step = np.linalg.lstsq(jac, -r, rcond=None)[0]
        h, bias = (
            h + float(step[0]),
            float(np.clip(bias + step[1], -3 * MAX_PITCH_BIAS_DEG, 3 * MAX_PITCH_BIAS_DEG)),
        )
        if h <= 0 or not math.isfinite(h):
            raise BaseError("the lines give no positive height: check the points and the lengths")
        if abs(step[0]) < 1e-6 * h and abs(step[1]) < 1e-6:
            break
    r, length = residuals(h, bias)
    cov = np.linalg.pinv(jac.T @ jac)
    cov = cov * misfit_inflation(float(r @ r), len(lines) - 1)  # lines + the prior, minus 2 unknowns
    h_sigma, bias_sigma = (math.sqrt(max(float(cov[i, i]), 0.0)) for i in (0, 1))
    corr = float(cov[0, 1]) / (h_sigma * bias_sigma) if h_sigma > 0 and bias_sigma > 0 else 0.0
    _check_solution(h, bias, altitude_reading_m)
    return BaseSolution(
        height_m=h,
        height_sigma_m=h_sigma,
        pitch_bias_deg=bias,
        pitch_sigma_deg=bias_sigma,
        pitch_solved=bias_sigma < 0.5 * prior,
        residuals_m=tuple(float(v) for v in length - typed),
        altitude_reading_m=float(altitude_reading_m),
        pitch_reading_deg=float(pitch_deg),
        lines=lines,
        height_pitch_corr=max(-1.0, min(1.0, corr)),
    )


def _check_solution(height: float, bias: float, reading: float) -> None:
    if abs(bias) > MAX_PITCH_BIAS_DEG:
        raise BaseError(
            f"the lines imply a gimbal pitch off by {bias:+.1f} deg (more than {MAX_PITCH_BIAS_DEG:g}): "
            "check the points and the lengths"
        )
    if height <= 1.0 or abs(height - reading) > max(30.0, 0.5 * reading):
        raise BaseError(
            f"the lines put the camera {height:.1f} m above the road but the drone reads {reading:.1f} m: "
            "check the points and the lengths"
        )


def share_on_mask(
    mask: np.ndarray, p1: tuple[float, float], p2: tuple[float, float], samples: int = 50
) -> float:
    """The share of points along a line (pixels of the mask's frame) that lie on the road mask."""
    m = np.asarray(mask, dtype=bool)
    t = np.linspace(0.0, 1.0, samples)
    u = np.clip(np.round(p1[0] + t * (p2[0] - p1[0])).astype(int), 0, m.shape[1] - 1)
    v = np.clip(np.round(p1[1] + t * (p2[1] - p1[1])).astype(int), 0, m.shape[0] - 1)
    return float(m[v, u].mean())


class FrameScaleError(BaseError):
    """A frame a base cannot be measured on: ``code`` is ``no_altitude`` (no altitude reading) or
    ``no_scale`` (no ground scale: the ground model's reason)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def reading_projector(frame: Frame, camera: CameraConfig) -> GroundProjector:
    """``frame``'s geometry as the drone reports it: its intrinsics, its altitude reading (above
    take-off, before any height reference) and its gimbal pitch (before any measured bias), resolved
    as the engine resolves them (overrides, then telemetry)."""
    tel = frame.telemetry
    if camera.altitude_m is None and (tel is None or tel.altitude_m is None):
        raise FrameScaleError(
            "no_altitude",
            f"frame {frame.number} has no altitude reading: a measured base needs the drone's altitude",
        )
    model = GroundModel(camera.model_copy(update={"height_reference": None, "takeoff_above_road_m": None}))
    projector = model.projector(frame)
    if projector is None:
        raise FrameScaleError(
            "no_scale", f"frame {frame.number} cannot be measured on: {model.status.reason}"
        )
    return projector


def solve_base_on_frame(
    frame: Frame, lines: Sequence[BaseLine], camera: CameraConfig, set_by: str = "", set_at: str = ""
) -> tuple[BaseSolution, HeightReference]:
    """The measured base of ``lines`` on ``frame``: (the solution, the reference it makes from that
    frame's time on), against the frame's own reading (:func:`reading_projector`)."""
    proj = reading_projector(frame, camera)
    solution = solve_base(
        lines,
        proj.intrinsics,
        proj.altitude_m,
        proj.pitch_deg,
        pitch_sigma_deg=pitch_sigma_on_road(scale_priors(camera)),  # against the road's plane
        lens=proj.lens,
    )
    return solution, solution.reference(frame.timestamp_s, set_by=set_by, set_at=set_at)


__all__ = [
    "BaseError",
    "BaseLine",
    "BaseSolution",
    "FrameScaleError",
    "reading_projector",
    "share_on_mask",
    "solve_base",
    "solve_base_on_frame",
]
