"""World-plane geometry (metres, X east, Y north): compass directions, the world -> camera-ground
transform, the ground's surface (flat, or a graded plane) and the homography of a plane above it,
densely sampled polylines, roads and the road layout of a flight."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from eval.simulate.spec import FlightSpec
from pipelines.geometry import camera_rotation, ground_to_image_homography
from pipelines.types import Intrinsics


def compass_dir(heading_deg: float) -> np.ndarray:
    """Unit vector (east, north) of a compass heading (0 north, 90 east)."""
    h = math.radians(heading_deg)
    return np.array([math.sin(h), math.cos(h)])


def world_to_camera_ground(position: np.ndarray, yaw_deg: float) -> np.ndarray:
    """3x3 transform from world metres to the camera-ground frame of pipelines.geometry.

    The camera-ground frame has its origin below the camera, Y along the horizontal viewing
    direction (compass ``yaw_deg``) and X to its right.
    """
    fwd = compass_dir(yaw_deg)
    right = np.array([fwd[1], -fwd[0]])
    return np.array(
        [
            [right[0], right[1], -float(right @ position)],
            [fwd[0], fwd[1], -float(fwd @ position)],
            [0.0, 0.0, 1.0],
        ]
    )


@dataclass(frozen=True, slots=True, eq=False)
class GroundSurface:
    """The ground as a plane (a road's grade): height 0 (the take-off level) at ``origin`` (world
    metres), rising ``gradient`` metres per metre east and north. Heights are along the vertical; a
    vehicle stands on the plane with its sides vertical (a car on an 8 % grade leans 4.6 deg: not drawn)."""

    origin: np.ndarray
    gradient: np.ndarray

    @staticmethod
    def graded(origin: np.ndarray, heading_deg: float, grade_pct: float) -> GroundSurface:
        """The plane through ``origin`` rising ``grade_pct`` % along the compass ``heading_deg``."""
        return GroundSurface(np.asarray(origin, float).copy(), compass_dir(heading_deg) * grade_pct / 100.0)

    def height(self, xy: np.ndarray) -> np.ndarray:
        """Heights (N,) of the ground at world points ``xy`` (N, 2) above the take-off level."""
        return (np.asarray(xy, dtype=np.float64).reshape(-1, 2) - self.origin) @ self.gradient

    def slope_factor(self, headings: np.ndarray) -> np.ndarray:
        """(N,) distance along the ground per metre of horizontal run in each unit direction (N, 2):
        sqrt(1 + (rise per metre along it)^2); a speed along the road is the horizontal one times it."""
        rise = np.asarray(headings, dtype=np.float64).reshape(-1, 2) @ self.gradient
        return np.sqrt(1.0 + rise**2)


def plane_homography(
    intrinsics: Intrinsics,
    altitude_m: float,
    pitch_deg: float,
    world_to_ground: np.ndarray,
    surface: GroundSurface | None = None,
    z_m: float = 0.0,
) -> np.ndarray:
    """3x3 homography: world metres (x, y) on the surface ``z_m`` metres above the ground -> pinhole
    pixels of a camera ``altitude_m`` above the take-off level at ``pitch_deg``, its camera-ground
    frame ``world_to_ground`` (:func:`world_to_camera_ground`). Flat ground (``surface`` None): the
    ground seen from ``altitude_m - z_m``, exactly as the renderer always had it; a graded plane: the
    camera's projection of the points (x, y, height(x, y) + z_m), a plane too."""
    if surface is None:
        return ground_to_image_homography(intrinsics, altitude_m - z_m, pitch_deg) @ world_to_ground
    r = camera_rotation(pitch_deg).T  # camera-from-world
    proj = intrinsics.matrix @ np.column_stack([r, -r @ np.array([0.0, 0.0, altitude_m])])  # 3x4
    gx, gy = surface.gradient
    z_row = np.array([gx, gy, z_m - float(surface.origin @ surface.gradient)])  # z of world (x, y, 1)
    # camera-ground (X, Y) of world (x, y) by world_to_ground; z is the same in both frames
    lift = np.vstack([world_to_ground[0], world_to_ground[1], z_row, [0.0, 0.0, 1.0]])  # 4x3
    h = proj @ lift
    return h / h[2, 2] if abs(h[2, 2]) > 1e-12 else h


@dataclass(frozen=True, slots=True, eq=False)
class Polyline:
    """A densely sampled path in world metres with cumulative arc length."""

    points: np.ndarray  # (N, 2)
    cum: np.ndarray  # (N,)

    @staticmethod
    def from_points(points: np.ndarray) -> Polyline:
        pts = np.asarray(points, dtype=np.float64)
        seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
        return Polyline(pts, np.concatenate([[0.0], np.cumsum(seg)]))

    @property
    def length(self) -> float:
        return float(self.cum[-1])

    def at(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions (N, 2) and unit tangents (N, 2) at arc lengths ``s``."""
        s = np.clip(np.asarray(s, dtype=np.float64), 0.0, self.cum[-1])
        x = np.interp(s, self.cum, self.points[:, 0])
        y = np.interp(s, self.cum, self.points[:, 1])
        idx = np.clip(np.searchsorted(self.cum, s, side="right") - 1, 0, len(self.cum) - 2)
        d = self.points[idx + 1] - self.points[idx]
        d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
        return np.column_stack([x, y]), d

    def offset(self, d: float) -> Polyline:
        """Parallel path ``d`` metres to the right (negative: left)."""
        tang = np.gradient(self.points, axis=0)
        tang /= np.maximum(np.linalg.norm(tang, axis=1, keepdims=True), 1e-12)
        right = np.column_stack([tang[:, 1], -tang[:, 0]])
        return Polyline.from_points(self.points + d * right)

    def reversed(self) -> Polyline:
        return Polyline.from_points(self.points[::-1])


@dataclass(frozen=True, slots=True, eq=False)
class Road:
    centre: Polyline
    lanes_per_direction: int
    lane_width_m: float

    @property
    def half_width(self) -> float:
        return self.lanes_per_direction * self.lane_width_m + 0.5  # + shoulder

    def lanes(self) -> list[Polyline]:
        """Lane centre-lines in driving direction (right-hand traffic)."""
        out = []
        for j in range(self.lanes_per_direction):
            off = (j + 0.5) * self.lane_width_m
            out.append(self.centre.offset(off))
            out.append(self.centre.offset(-off).reversed())
        return out


def road_layout(
    spec: FlightSpec,
    bounds: tuple[float, float, float, float],
    centre: np.ndarray,
    heading: float,
    rng: np.random.Generator,
) -> tuple[list[Road], list[np.ndarray]]:
    """The roads of ``spec.layout`` through ``centre`` (long enough for every vehicle's whole drive)
    and the points where roads cross."""
    x0, y0, x1, y1 = bounds
    vmax = spec.speeding_speed_kmh[1] / 3.6 * 1.3
    half_len = math.hypot(x1 - x0, y1 - y0) / 2 + vmax * spec.duration_s + 80.0
    s = np.arange(-half_len, half_len + 0.5, 0.5)
    c = centre
    d = compass_dir(heading)
    nrm = np.array([d[1], -d[0]])

    def straight(direction: np.ndarray) -> Polyline:
        return Polyline.from_points(c[None, :] + s[:, None] * direction[None, :])

    lanes, lw = spec.lanes_per_direction, spec.lane_width_m
    if spec.layout == "straight":
        return [Road(straight(d), lanes, lw)], []
    if spec.layout == "curved":
        span = max(x1 - x0, y1 - y0)
        wavelength = float(np.clip(span * rng.uniform(0.9, 1.4), 120.0, 600.0))
        amp = float(np.clip(wavelength * rng.uniform(0.08, 0.13), 8.0, 60.0))
        phase = rng.uniform(0, 2 * math.pi)
        off = amp * np.sin(2 * math.pi * s / wavelength + phase)
        pts = c[None, :] + s[:, None] * d[None, :] + off[:, None] * nrm[None, :]
        return [Road(Polyline.from_points(pts), lanes, lw)], []
    # intersection: the main road and a crossing one (one lane fewer per direction when possible)
    cross = Road(straight(nrm), max(1, lanes - 1) if lanes > 1 else 1, lw)
    return [Road(straight(d), lanes, lw), cross], [c.copy()]
