"""Vehicles have height: the point a vehicle is measured at is above the road.

The engine measures a vehicle by its box (the centre, or the bottom edge's centre in an oblique view)
and the optical flow inside it. Neither is on the road: a box bounds the whole visible vehicle (its
roof reaches out farther from the image's nadir than its wheels), and the flow follows the roof, the
bonnet and the windows. A point ``h`` metres above the road, seen by a camera ``H`` metres above it,
lies on the same viewing ray as the road point ``H / (H - h)`` times as far from the camera's nadir,
at any pitch (the plane ``z = h`` is the road seen from ``H - h``); projected onto the road as if it
were on it, every step of it is that much longer. For a car measured 0.75 m up, 2.6 % too fast at
30 m, 1.3 % at 60 m, 0.5 % at 150 m; a bus or a truck twice that.

Each ground step is therefore scaled by ``1 - h / H`` (:func:`step_factor`, in
:meth:`pipelines.geometry.GroundProjector.ground_step`; ``H`` the camera's height above the ground
under the vehicle, the terrain model's where there is one), with ``h`` the *effective* height of the
measured point for the vehicle's class (``speed.point_height_m``), and the speed's sigma carries the
uncertainty of ``h`` (``speed.point_height_sigma_frac`` of it: :func:`sigma_frac`), shared by all of
one vehicle's steps like the scale's.

A camera that moves sees the raised point move against the road by ``h / H`` of its own motion
(parallax): the step measured against the road, scaled, is ``u - (h / H) c`` for a vehicle at ``u``
under a camera at ``c``. The step adds ``h / H`` of the camera's step back (``camera_step_m`` of
``ground_step``, from the camera's nadir carried by the ego-motion: pipelines.displacement). A car
0.75 m up under a camera flying 10 m/s along the road at 30 m: 0.25 m/s, 1.8 % of 50 km/h.

The effective height is measured, not assumed (docs/lab/2026-11-28-issue-39-vehicle-height.md): on
the simulator's solid vehicles (``FlightSpec.vehicle_height``) at 30 to 100 m, straight down and at
-45 deg, exact boxes of the whole visible vehicle move as a point at 0.36-0.49 of a car's height
(0.54-0.73 m of 1.5), 0.32-0.58 of a van's, 0.36-0.64 of a bus's and a truck's; the shipped
detector's boxes, which hug the simulated roofs more, at 0.33-0.57 of a car's (0.99 at 30 m straight
down). The defaults are half the class's typical height (car 1.5 m, van 2.2, truck 3.3, bus 3.1,
motorcycle 1.2) with a sigma of 40 % of it. The term is part of the scale's relative sigma a speed
and a violation carry (``scale.sigma_frac``): the metres per pixel at the point measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

# Effective height (m) above the road of the point a vehicle of each class is measured at: half its
# typical height (see the module docstring). "vehicle": a detection without a class.
POINT_HEIGHT_M: dict[str, float] = {
    "car": 0.75,
    "van": 1.1,
    "truck": 1.65,
    "bus": 1.55,
    "motorcycle": 0.6,
    "vehicle": 0.75,
}
# every class on the road: a world of flat vehicles (the simulator's sprites), speed.point_height_m
ON_THE_ROAD: dict[str, float] = dict.fromkeys(POINT_HEIGHT_M, 0.0)
POINT_HEIGHT_SIGMA_FRAC = 0.4
MAX_POINT_HEIGHT_M = 5.0  # a point higher than a double-decker's roof is a configuration error
# a camera this close over the point (H <= MIN_CLEARANCE x h) measures nothing at that point: its
# step would be scaled by less than a half
MIN_CLEARANCE = 2.0


def point_heights(
    class_names: Sequence[str] | np.ndarray | None, table: Mapping[str, float], n: int
) -> np.ndarray:
    """(n,) the effective point height of each detection by its class name; a class the table does
    not name gets its ``vehicle`` entry (0 where there is none); no names: ``vehicle`` for all."""
    fallback = float(table.get("vehicle", 0.0))
    if class_names is None:
        return np.full(n, fallback)
    return np.array([float(table.get(str(c), fallback)) for c in class_names], dtype=np.float64).reshape(-1)


def step_factor(point_height_m: np.ndarray, camera_height_m: np.ndarray) -> np.ndarray:
    """(N,) what a ground step of a point ``point_height_m`` above the road, projected onto the road
    from a camera ``camera_height_m`` above it, is multiplied by to be the vehicle's: ``1 - h / H``;
    NaN where the camera is not at least :data:`MIN_CLEARANCE` times as high as the point, or either
    height is not finite."""
    h = np.asarray(point_height_m, dtype=np.float64).reshape(-1)
    big_h = np.asarray(camera_height_m, dtype=np.float64).reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 1.0 - h / big_h
    ok = np.isfinite(out) & (big_h >= MIN_CLEARANCE * h) & (big_h > 0)
    return np.where(ok, out, np.nan)


def sigma_frac(point_height_m: np.ndarray, camera_height_m: np.ndarray, sigma_share: float) -> np.ndarray:
    """(N,) the speed's relative sigma from the point height's: ``sigma_share * h / (H - h)`` (the
    derivative of ``1 - h / H`` over the factor); 0 for a point on the road, NaN where
    :func:`step_factor` is."""
    h = np.asarray(point_height_m, dtype=np.float64).reshape(-1)
    big_h = np.asarray(camera_height_m, dtype=np.float64).reshape(-1)
    factor = step_factor(h, big_h)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = sigma_share * h / (big_h - h)
    return np.where(np.isfinite(factor), np.where(h == 0, 0.0, out), np.nan)


def with_point_sigma(
    scale_frac: np.ndarray | None, point_frac: np.ndarray, default_frac: float
) -> np.ndarray:
    """The scale's relative sigma per track (NaN or None: the speed stage's ``default_frac``) with the
    point height's added in quadrature. Where the point adds nothing (on the road, or NaN: no step)
    the scale's is returned as it was, NaN included."""
    point = np.nan_to_num(np.asarray(point_frac, dtype=np.float64).reshape(-1), nan=0.0)
    base = (
        np.full(len(point), np.nan) if scale_frac is None else np.asarray(scale_frac, np.float64).reshape(-1)
    )
    out = np.hypot(np.where(np.isfinite(base), base, float(default_frac)), point)
    return np.where(point == 0, base, out)


__all__ = [
    "MAX_POINT_HEIGHT_M",
    "ON_THE_ROAD",
    "POINT_HEIGHT_M",
    "POINT_HEIGHT_SIGMA_FRAC",
    "point_heights",
    "sigma_frac",
    "step_factor",
    "with_point_sigma",
]
