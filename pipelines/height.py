"""The camera's height above the road, where it comes from, and how well the scale is known.

A drone reports its height above the take-off point (DJI ``rel_alt``, Cloud API ``elevation``),
not above the road it films: a pilot who took off 8 m below the road and flies 60 m above it reads
68 m, and every speed is 13 % high. Every speed therefore rests on a *height reference*, and on how
well that is known; the scale's relative uncertainty goes into every speed's sigma, so the ticket
rule (:mod:`pipelines.ticket`) stays honest whatever the source:

* ``flight`` / ``operator``: the drone's altitude (or one an operator typed for a stream without
  telemetry) with nothing said about the road's level: the height above the road is that reading,
  uncertain by ``camera.unknown_ground_sigma_m`` (the road's level against the take-off point) and
  the barometer's ``camera.baro_sigma_m``. Wide on purpose, and no ticket rests on it
  (``rules.enforceable_scale_sources``).
* ``site``: the take-off point's height above the road, given for the site or the session
  (``camera.takeoff_above_road_m``, the pilot took off on the road: 0), to
  ``camera.takeoff_above_road_sigma_m``, plus the barometer's error since take-off.
* ``measured_base``: solved from lines of known length on the road (:mod:`pipelines.calibrate`): the
  height (and with lines in two directions the gimbal's pitch bias) at one moment, to the solve's
  sigma; the barometer then drifts ``camera.baro_drift_m_per_min`` from that moment on.
* ``lrf``: the laser rangefinder of an enterprise payload, its slant range to the image's centre
  where that is the road's (:mod:`pipelines.rangefinder`), pooled over the last minute's readings.

Where the laser and another reference both give one, each frame uses the one that leaves the speed
at the image's centre less uncertain (:func:`centre_sigma_frac`), keeping the one in use unless the
other is clearly better: a ticket's base measured across a change of reference is not enforceable.

The gimbal's pitch is uncertain by ``camera.pitch_sigma_deg`` (a measured base with lines in two
directions measures it); how much that moves a speed depends on where the vehicle is and which way
it moves (nothing at nadir, about 2 cot(depression) per radian along the line of sight of an oblique
view), so :class:`ScaleModel` works it out per track from the frame's ground mapping.

Pure: numpy and the engine's geometry and types only.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.geometry import apply_homography, ground_to_image_homography, image_to_ground_homography
from pipelines.types import (
    ENFORCEABLE,
    NOT_ENFORCEABLE,
    REFERENCE_SOURCES,
    SCALE_SOURCES,
    HeightReference,
    Intrinsics,
    ScaleInfo,
)
from pipelines.vehicle_height import with_point_sigma


@dataclass(frozen=True, slots=True)
class ScalePriors:
    """The uncertainties of the sources (metres, degrees; one sigma): ``pipelines.config.CameraConfig``."""

    unknown_ground_sigma_m: float = 5.0
    takeoff_above_road_sigma_m: float = 0.5
    baro_sigma_m: float = 1.0
    baro_drift_m_per_min: float = 0.06
    pitch_sigma_deg: float = 1.0
    ground_tilt_sigma_deg: float = 1.0


@dataclass(frozen=True, slots=True)
class DerivedHeight:
    """The camera's height above the road as the scale check's rulers give it where there is no
    altitude (the ``vehicles`` source: :meth:`pipelines.scale_session.ScaleCheck.derived_height`):
    the height, its relative sigma, the vehicles behind it and the rulers that read."""

    height_m: float
    sigma_frac: float
    n: int
    rulers: str = "cars"


def pitch_sigma_on_road(priors: ScalePriors, source: str = "") -> float:
    """The pitch's sigma against the road's plane where nothing measured it: the gimbal's, and for a
    source that does not know the road's plane the road's own tilt (a grade along the view is to the
    camera a pitch error: ``ground_tilt_sigma_deg``); a terrain model lifts every point onto the
    ground, so only the gimbal's. A measured base's prior on the pitch (its lines solve the pitch
    against the road's plane)."""
    if source == "terrain":
        return priors.pitch_sigma_deg
    return math.hypot(priors.pitch_sigma_deg, priors.ground_tilt_sigma_deg)


def height_above_road(
    reading_m: float,
    time_s: float,
    reference: HeightReference | None,
    priors: ScalePriors,
    *,
    source: str = "flight",
) -> tuple[float, float, str]:
    """(height above the road, its sigma, the scale source) for an altitude ``reading_m`` at stream
    time ``time_s``. ``source``: where the reading came from without a reference (flight |
    operator)."""
    if reference is None:
        return reading_m, math.hypot(priors.unknown_ground_sigma_m, priors.baro_sigma_m), source
    height = reading_m + reference.takeoff_above_road_m
    if reference.at_time_s is None:  # from take-off: the barometer's error since
        drift = priors.baro_sigma_m
    else:
        drift = priors.baro_drift_m_per_min * abs(time_s - reference.at_time_s) / 60.0
        drift = min(drift, priors.baro_sigma_m * 3.0)
    return height, math.hypot(reference.sigma_m, drift), reference.source


class ScaleModel:
    """The relative speed error one degree of pitch error gives a vehicle at a ground point moving
    in a direction, for one frame's geometry: the ground -> ground map that a pitch off by
    ``step_deg`` makes of the true one (through the image), differentiated along the motion. Signed:
    the relative change of the measured displacement per degree added to the pitch used."""

    def __init__(self, intrinsics: Intrinsics, height_m: float, pitch_deg: float, step_deg: float = 0.5):
        other = max(-90.0, min(pitch_deg + (step_deg if pitch_deg - step_deg < -90.0 else -step_deg), -1e-3))
        self.step_deg = other - pitch_deg  # signed: the pitch used minus the true one
        to_image = ground_to_image_homography(intrinsics, height_m, pitch_deg)
        self._warp = image_to_ground_homography(intrinsics, height_m, other) @ to_image

    def _change(self, g: np.ndarray, base: np.ndarray, unit: np.ndarray) -> np.ndarray:
        eps = 0.5  # metres
        step = apply_homography(self._warp, g + eps * unit)
        return (np.linalg.norm(step - base, axis=1) / eps - 1.0) / self.step_deg

    def pitch_frac_per_deg(self, ground_xy: np.ndarray, direction_xy: np.ndarray | None = None) -> np.ndarray:
        """(N,) signed relative change of a ground displacement per degree of pitch at ``ground_xy``
        (N, 2) along ``direction_xy`` (N, 2; None or a zero row: the larger of the two axes'); NaN
        where the point is not on the ground."""
        g = np.asarray(ground_xy, dtype=np.float64).reshape(-1, 2)
        n = len(g)
        d = (
            np.zeros((n, 2))
            if direction_xy is None
            else np.asarray(direction_xy, dtype=np.float64).reshape(-1, 2)
        )
        norm = np.hypot(d[:, 0], d[:, 1])
        base = apply_homography(self._warp, g)
        across = self._change(g, base, np.array([1.0, 0.0]))
        along = self._change(g, base, np.array([0.0, 1.0]))
        out = np.where(np.abs(along) >= np.abs(across), along, across)
        moving = norm > 1e-9
        if moving.any():
            out[moving] = self._change(g[moving], base[moving], d[moving] / norm[moving, None])
        return np.where(np.isfinite(out), out, np.nan)


def scale_sigma_frac(
    height_m: float,
    height_sigma_m: float,
    pitch_sigma_deg: float,
    pitch_frac_per_deg: np.ndarray | float,
    height_pitch_cov: float = 0.0,
) -> np.ndarray:
    """Relative sigma of a speed from the scale: the height's (a speed scales with the height over
    flat ground) and the pitch's (``pitch_frac_per_deg``, signed, from :class:`ScaleModel`), with
    their covariance (m deg: a measured base solves both from the same lines, so along the lines'
    direction their errors cancel) - var = (sh/h)^2 + (s sp)^2 + 2 s cov / h."""
    per_deg = np.nan_to_num(np.asarray(pitch_frac_per_deg, dtype=np.float64), nan=0.0)
    h = max(height_m, 1e-6)
    var = (height_sigma_m / h) ** 2 + (pitch_sigma_deg * per_deg) ** 2 + 2.0 * per_deg * height_pitch_cov / h
    return np.sqrt(np.maximum(var, 0.0))


@dataclass(frozen=True, slots=True, eq=False)
class ScaleTerms:
    """Each of N tracks' scale sigma now and what it is made of: ``frac`` the relative sigma of its
    speed (the height's and the pitch's, the point height's in quadrature; NaN: the speed stage's
    default), ``per_deg`` the signed relative change of its displacement per degree of pitch where
    it is, along its travel (:class:`ScaleModel`; NaN: none), ``point`` its measured point height's
    relative sigma (0 on the road; :func:`pipelines.vehicle_height.sigma_frac`)."""

    frac: np.ndarray
    per_deg: np.ndarray
    point: np.ndarray


def track_scale_terms(
    scale: ScaleInfo | None,
    model: ScaleModel | None,
    ground_xy: np.ndarray,
    directions_xy: np.ndarray,
    point_frac: np.ndarray,
    default_frac: float,
) -> ScaleTerms:
    """:class:`ScaleTerms` of tracks at ``ground_xy`` travelling along ``directions_xy`` (N, 2 each)
    under ``scale`` and this frame's ``model`` (either None: no pitch sensitivity, the default's
    sigma)."""
    point = np.asarray(point_frac, dtype=np.float64).reshape(-1)
    per_deg = np.full(len(point), np.nan)
    fracs = None
    if scale is not None and model is not None:
        per_deg = model.pitch_frac_per_deg(ground_xy, directions_xy)
        fracs = scale_sigma_frac(
            scale.height_m, scale.height_sigma_m, scale.pitch_sigma_deg, per_deg, scale.height_pitch_cov
        )
    return ScaleTerms(with_point_sigma(fracs, point, default_frac), per_deg, point)


def base_scale_frac(scale: ScaleInfo | None, per_deg: Sequence[float], point: Sequence[float]) -> float:
    """The relative scale sigma of a speed measured over a base of positions (:mod:`pipelines.ticket`),
    each with its ``per_deg`` and ``point`` (:class:`ScaleTerms`). The height's and the pitch's errors
    are the same at every position, so the base's displacement is off by the mean of the local
    errors, dh / h + mean(per_deg) dp: its sigma is the one at the mean sensitivity, not the mean of
    the positions' sigmas (wider wherever the sensitivity changes along the base: a measured base
    cancels the pitch's error against the height's where its lines are and less elsewhere, and a
    pitch error changes sign across a nadir image). The point height's (one vehicle's, the same
    all along) in quadrature, its mean. NaN without a scale, or where a position has no
    sensitivity (not on the ground)."""
    pd = np.asarray(per_deg, dtype=np.float64).reshape(-1)
    if scale is None or not pd.size or not np.all(np.isfinite(pd)):
        return math.nan
    frac = scale_sigma_frac(
        scale.height_m, scale.height_sigma_m, scale.pitch_sigma_deg, float(pd.mean()), scale.height_pitch_cov
    )
    point = np.nan_to_num(np.asarray(point, dtype=np.float64).reshape(-1), nan=0.0)
    return math.hypot(float(frac), float(point.mean()) if point.size else 0.0)


def travel_directions(velocities: Sequence[np.ndarray | None], disp: np.ndarray) -> np.ndarray:
    """(N, 2) each track's direction of travel for its scale sigma: its fitted velocity, else its
    step now (``disp``, (N, 2) m) when longer than 5 cm, else zeros (:class:`ScaleModel`: the worse axis)."""
    steps = np.asarray(disp, dtype=np.float64).reshape(-1, 2)
    out = np.zeros((len(steps), 2))
    for i, velocity in enumerate(velocities):
        if velocity is not None:
            out[i] = velocity
        elif np.all(np.isfinite(steps[i])) and float(np.hypot(*steps[i])) > 0.05:
            out[i] = steps[i]
    return out


def centre_pitch_frac_per_deg(pitch_deg: float) -> float:
    """How much a degree of pitch error stretches the ground at the image's centre along the line of
    sight, as a fraction: 2 cot(depression) per radian (across it, half that); 0 straight down."""
    depression = math.radians(max(1.0, min(90.0, -pitch_deg)))
    return 2.0 * math.cos(depression) / math.sin(depression) * math.pi / 180.0


def centre_sigma_frac(scale: ScaleInfo) -> float:
    """The relative speed sigma ``scale`` gives a vehicle at the image's centre, the worse of its
    moving along the line of sight and across it (:func:`centre_pitch_frac_per_deg` and half of it):
    how two sources are weighed against each other."""
    per_deg = np.array([1.0, 0.5]) * centre_pitch_frac_per_deg(scale.pitch_deg)
    return float(
        np.max(
            scale_sigma_frac(
                scale.height_m, scale.height_sigma_m, scale.pitch_sigma_deg, per_deg, scale.height_pitch_cov
            )
        )
    )


def reference_key(reference: HeightReference | None) -> object:
    """What a change of height reference is: an operator's or the configuration's reference is one
    reference; the laser rangefinder's, refined by each reading, and the terrain model's, met anew by
    each frame's ray, are one source each (the laser's provisional reference another: its first readings
    confirmed by more is a change of reference)."""
    if reference is not None and reference.source == "lrf" and reference.provisional:
        return ("lrf", "provisional")
    return reference.source if reference is not None and reference.source in ("lrf", "terrain") else reference


def run_scale(scales: Sequence[ScaleInfo | None], frac: float) -> ScaleInfo | None:
    """The scale a run of positions was measured with (its last known), carrying the run's mean
    relative sigma ``frac``."""
    last = next((s for s in reversed(scales) if s is not None), None)
    return None if last is None else dataclasses.replace(last, sigma_frac=frac)


def with_pitch_observed(scale: ScaleInfo, error_deg: float, sigma_deg: float) -> ScaleInfo:
    """``scale`` updated by an observation of its pitch's error: the traffic says the pitch used is
    ``error_deg`` +- ``sigma_deg`` off (:mod:`pipelines.pitch_check`). The height's and the pitch's
    errors (dh, dp) have the prior covariance [[sh^2, c], [c, sp^2]] (``height_pitch_cov`` c: a measured
    base's or the laser's, whose height rests on the same pitch); the observation is dp + noise, so the
    Gaussian update moves the pitch by ``-sp^2 e / (sp^2 + s^2)`` and the height by ``-c e / (sp^2 + s^2)``
    and narrows both (the pitch to ``sp s / sqrt(sp^2 + s^2)``). The pitch moved is added to
    ``pitch_from_traffic_deg`` and the scale as it was kept as ``unmoved`` (a ticket's margin keeps its
    sigmas: :func:`pipelines.ticket.base_frac`); the pitch stays at or above -90 (the move is cut
    there, the height's with it). Unchanged without a finite observation or a pitch prior."""
    sp2 = scale.pitch_sigma_deg**2
    if not (math.isfinite(error_deg) and math.isfinite(sigma_deg) and sigma_deg > 0 and sp2 > 0):
        return scale
    denom = sp2 + sigma_deg**2
    share = 1.0
    move = -sp2 * error_deg / denom
    if scale.pitch_deg + move < -90.0:
        share = max(0.0, (-90.0 - scale.pitch_deg) / move) if move else 0.0
        move *= share
    c = scale.height_pitch_cov
    height = scale.height_m - share * c * error_deg / denom
    height_var = max(scale.height_sigma_m**2 - c * c / denom, 0.0)
    return dataclasses.replace(
        scale,
        height_m=height,
        height_sigma_m=math.sqrt(height_var),
        pitch_deg=scale.pitch_deg + move,
        pitch_sigma_deg=math.sqrt(sp2 * sigma_deg**2 / denom),
        height_pitch_cov=c * sigma_deg**2 / denom,
        pitch_from_traffic_deg=scale.pitch_from_traffic_deg + move,
        unmoved=scale.unmoved or scale,
    )


def scale_status(
    status: str,
    reason: str,
    scale: ScaleInfo | None,
    references: int,
    enforceable_sources: Sequence[str],
    m: Any,
) -> tuple[str, str]:
    """A ticket's (status, reason) once its scale is weighed: not enforceable when its positions
    were measured under more than one height reference, on a provisional one (the laser's first
    readings), or when its scale's source is not one a ticket may rest on; an uncertainty too large
    that is mostly the scale's says so. ``m``: the ticket's measurement (``speed_kmh``,
    ``fit_sigma_kmh``)."""
    if status == ENFORCEABLE and references > 1:
        return NOT_ENFORCEABLE, "the height reference changed during the measuring base"
    if scale is None:
        return status, reason
    if status == ENFORCEABLE and scale.reference is not None and scale.reference.provisional:
        return (
            NOT_ENFORCEABLE,
            f"a provisional laser reference, on fewer readings than one needs: the {scale.describe()}",
        )
    if status == ENFORCEABLE and scale.source not in enforceable_sources:
        return NOT_ENFORCEABLE, (
            f"the {scale.describe()}: a ticket needs the take-off height above the road, a measured base or "
            "the laser rangefinder"
        )
    if reason.startswith("uncertainty too large") and scale.sigma_frac * m.speed_kmh > m.fit_sigma_kmh:
        reason += f"; mostly the {scale.describe()}"
        if scale.source in ("flight", "operator"):
            reason += ": measure a base or set the take-off height above the road"
    return status, reason


__all__ = [
    "DerivedHeight",
    "REFERENCE_SOURCES",
    "SCALE_SOURCES",
    "HeightReference",
    "ScaleInfo",
    "ScaleModel",
    "ScalePriors",
    "ScaleTerms",
    "base_scale_frac",
    "centre_sigma_frac",
    "height_above_road",
    "reference_key",
    "run_scale",
    "scale_status",
    "scale_sigma_frac",
    "track_scale_terms",
    "travel_directions",
]
