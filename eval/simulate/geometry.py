"""World-plane geometry (metres, X east, Y north): compass directions, the world -> camera-ground
transform, densely sampled polylines, roads and the road layout of a flight."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from eval.simulate.spec import FlightSpec


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
