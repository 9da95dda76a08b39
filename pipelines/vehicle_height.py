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
0.75 m up under a camera flying 10 m/s along the road at 30 m: 0.25 m/s, 1.8 % of 50 km/h. An error
in ``h`` then acts on the vehicle's motion relative to the camera, and so does its sigma
(:func:`moving_camera_factor`).

The effective height is measured, not assumed (docs/lab/2026-11-28-issue-39-vehicle-height.md): on
the simulator's solid vehicles (``FlightSpec.vehicle_height``) at 30 to 100 m, straight down and at
-45 deg, exact boxes of the whole visible vehicle move as a point at 0.36-0.49 of a car's height
(0.54-0.73 m of 1.5), 0.32-0.58 of a van's, 0.36-0.64 of a bus's and a truck's; the shipped
detector's boxes, which hug the simulated roofs more, at 0.33-0.57 of a car's (0.99 at 30 m straight
down). The defaults are half the class's typical height (car 1.5 m, van 2.2, motorcycle 1.2) with a
sigma of 40 % of it; a truck's 0.7 of its 3.3 m: on the realistic grid (its 3.1 m box trucks, the
shipped detector, 2026-11-29) trucks' tickets read +5.1 km/h (median, z 2.6) at 30 m and +1.4 at
60 m with half the height, as a point at the roof: a box truck's flat roof is most of what the camera
sees. A bus's likewise, 2.3 m of its 3.1 (0.74): at half its height (1.55 m) the grid's 13 buses read
+1.6 % fast (median; quartiles +0.1 to +3.6 %) at 30 and 60 m, at 2.3 m +0.4 % (-1.0 to +2.2 %), the
pooled per-frame MAE 0.98 -> 0.97 km/h (docs/lab/2026-11-30-issue-39-tall-vehicles.md). Too high a
point reads a vehicle slow (the driver's side); too low, fast. The term is part of the scale's
relative sigma a speed and a violation carry (``scale.sigma_frac``): the metres per pixel at the
point measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

# Effective height (m) above the road of the point a vehicle of each class is measured at: half its
# typical height, a truck's and a bus's about 0.7 (see the module docstring). "vehicle": a detection
# without a class.
POINT_HEIGHT_M: dict[str, float] = {
    "car": 0.75,
    "van": 1.1,
    "truck": 2.3,
    "bus": 2.3,
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
# a vehicle (nearly) stopped under a moving camera: its relative sigma is meaningless, and capped
MAX_MOVING_FACTOR = 10.0


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


def moving_camera_factor(step_m: np.ndarray, camera_step_m: np.ndarray | None) -> np.ndarray:
    """(N,) how much a point height's error weighs on a step under a moving camera, relative to a
    hovering one's: ``|1 - (c . d) / |d|^2|`` for the vehicle's ground step ``d`` and the camera's
    ``c`` over the same interval (N, 2 each; NaN or None: 1, as hovering), at most
    ``MAX_MOVING_FACTOR``. A point ``h`` up lies on the road at ``C + (x - C) H / (H - h)`` (``C``
    the camera's nadir); the step taken with a told height ``h'`` is off from the true ``dx`` by
    ``(h - h') / (H - h) (dx - dc)``: the error acts on the vehicle's motion *relative to the
    camera*. A vehicle coming at 50 km/h under a camera flying 10 m/s the other way: 1.7 times the
    hovering sigma; one driving with it: 0.3."""
    d = np.asarray(step_m, dtype=np.float64).reshape(-1, 2)
    if camera_step_m is None:
        return np.ones(len(d))
    c = np.asarray(camera_step_m, dtype=np.float64).reshape(-1, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.abs(1.0 - np.sum(c * d, axis=1) / np.sum(d * d, axis=1))
    return np.where(np.isfinite(f), np.minimum(f, MAX_MOVING_FACTOR), 1.0)


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
    "moving_camera_factor",
    "point_heights",
    "sigma_frac",
    "step_factor",
    "with_point_sigma",
]
