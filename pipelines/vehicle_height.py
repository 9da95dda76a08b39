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

The class comes from the detector, which now and then calls a car a bus and a box truck a car or a
van: a car measured at a bus's 2.3 m reads 5 % slow at 30 m (a 1.41 m car on the realistic grid, 50
frames, 42.3 km/h at 45), a truck measured at a car's 0.75 m fast. Its box's size on the ground tells
them apart (:func:`bounded_by_size`, ``speed.point_size_bounds_m``): a box under 5.0 m (sqrt of its
area) is measured no higher than a van's point, one of 6.5 m or more no lower than a truck's. On the
realistic grid (the shipped detector, 82,688 matched boxes) cars' and SUVs' boxes are 2.9-5.0 m (5th
to 95th percentile; those called a bus or a truck 3.3-4.7), vans' 3.5-5.9, trucks' and buses'
5.0-9.5 (those called a car 4.3-6.9); the whole outline of a car at 30 m straight down (the oracle's
exact boxes) 4.1-5.0. The lower bound only lowers a bus's or a truck's point, the direction that
reads fast, so its sigma stays the class's (:func:`measured_points`); the upper one only raises
(docs/lab/2026-11-30-issue-39-size-bounds.md).
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
# a box's size on the ground (m) under which its point is no higher than a van's, and at which it is
# at least a truck's (bounded_by_size)
POINT_SIZE_BOUNDS_M = (5.0, 6.5)
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


def bounded_by_size(
    heights: np.ndarray,
    sizes_m: np.ndarray,
    table: Mapping[str, float],
    bounds_m: tuple[float, float] | None,
) -> np.ndarray:
    """(N,) each detection's point height with its box's size on the ground (m, the speed stage's
    ``ground_sizes``: sqrt of the area) as a bound on its class: a box smaller than ``bounds_m[0]``
    is measured no higher than a van's point, one at least ``bounds_m[1]`` no lower than the lower
    of a truck's and a bus's; NaN sizes (a box cut by the border) and ``bounds_m`` None keep the
    class's (module docstring)."""
    h = np.asarray(heights, dtype=np.float64).reshape(-1)
    if bounds_m is None:
        return h
    size = np.asarray(sizes_m, dtype=np.float64).reshape(-1)
    small, large = bounds_m
    fallback = float(table.get("vehicle", 0.0))
    cap = float(table.get("van", fallback))
    floor = min(float(table.get("truck", fallback)), float(table.get("bus", fallback)))
    known = np.isfinite(size)
    h = np.where(known & (size < small), np.minimum(h, cap), h)
    return np.where(known & (size >= large), np.maximum(h, floor), h)


def measured_points(
    class_names: Sequence[str] | np.ndarray | None,
    sizes_m: np.ndarray | None,
    table: Mapping[str, float],
    bounds_m: tuple[float, float] | None,
    n: int,
) -> tuple[np.ndarray, np.ndarray]:
    """((n,) the height each detection's point is measured at: its class's bounded by its box's size
    (:func:`bounded_by_size`; ``sizes_m`` None: unbounded), (n,) the height whose share is its
    sigma (:func:`sigma_frac`): the higher of that and its class's, so a point its size lowered
    keeps its class's uncertainty)."""
    told = point_heights(class_names, table, n)
    heights = told if sizes_m is None else bounded_by_size(told, sizes_m, table, bounds_m)
    return heights, np.maximum(heights, told)


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


def sigma_frac(
    point_height_m: np.ndarray,
    camera_height_m: np.ndarray,
    sigma_share: float,
    sigma_height_m: np.ndarray | None = None,
) -> np.ndarray:
    """(N,) the speed's relative sigma from the point height's: ``sigma_share * h / (H - h)`` (the
    derivative of ``1 - h / H`` over the factor); 0 for a point on the road, NaN where
    :func:`step_factor` is. ``sigma_height_m``: the height whose share is the sigma, where it is not
    the point's own (a point its box's size lowered keeps its class's uncertainty)."""
    h = np.asarray(point_height_m, dtype=np.float64).reshape(-1)
    big_h = np.asarray(camera_height_m, dtype=np.float64).reshape(-1)
    factor = step_factor(h, big_h)
    s = h if sigma_height_m is None else np.asarray(sigma_height_m, dtype=np.float64).reshape(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = sigma_share * s / (big_h - h)
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
    "POINT_SIZE_BOUNDS_M",
    "ON_THE_ROAD",
    "POINT_HEIGHT_M",
    "POINT_HEIGHT_SIGMA_FRAC",
    "bounded_by_size",
    "measured_points",
    "moving_camera_factor",
    "point_heights",
    "sigma_frac",
    "step_factor",
    "with_point_sigma",
]
