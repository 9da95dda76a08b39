"""Synthetic drone flights over procedural roads, with exact ground truth.

A flight is a ground plane in metres (X east, Y north) carrying a procedural texture (grass, soil,
buildings, trees, asphalt roads with lane markings) and vehicles that drive along lane centre-lines
with known speeds and accelerations. A drone at a chosen altitude drifts, yaws and looks down through
a gimbal at a chosen pitch with the intrinsics of a real camera profile. Each frame is rendered by
warping the pre-rendered ground layer with :func:`pipelines.geometry.ground_to_image_homography`
composed with the drone's world -> camera-ground transform, then projecting vehicle sprites
(procedural, or real aerial crops cut from YOLO-labelled images) through the same homography.

Outputs of :func:`simulate_flight` (one folder per flight)::

    video.mp4            H.264, constant frame rate (pts = frame index)
    video.SRT            DJI <font>-style telemetry (altitude, gimbal pitch/yaw, focal length, GPS)
    gt/gt.txt            MOTChallenge: frame(1-based),id,x,y,w,h,1,class,visibility
    gt/speeds.csv        frame,time_s,id,speed_kmh,ground_x_m,ground_y_m
    gt/violations.json   ground-truth speeding events for the spec's limit and minimum duration
    gt/vehicles.json     per-vehicle truth (class, size, lane, initial speed, acceleration)
    road_mask/NNNNNN.png exact road masks (255 = road) every ``mask_every`` frames (0-based index)
    seqinfo.ini          MOTChallenge sequence info (+ altitude, pitch, camera)
    flight.yaml          the spec; ``FlightSpec.from_yaml`` reads it back and reproduces the flight

MOT class ids of simulated vehicles: see :data:`SIM_CLASS_IDS`. Everything is deterministic by seed.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import json
import logging
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import yaml

from pipelines.camera import equivalent_35mm, get_profile, intrinsics_for
from pipelines.config import read_yaml_mapping
from pipelines.errors import AirPatrolError
from pipelines.geometry import apply_homography, ground_to_image_homography
from pipelines.types import Intrinsics, Telemetry

log = logging.getLogger(__name__)

# Canonical class names and the MOT class column used for simulated flights.
SIM_CLASS_IDS: dict[str, int] = {"car": 1, "van": 2, "truck": 3, "bus": 4, "motorcycle": 5}
SIM_CLASS_NAMES: dict[int, str] = {v: k for k, v in SIM_CLASS_IDS.items()}

# Nominal (length, width) in metres; each vehicle varies by a few percent.
VEHICLE_DIMS_M: dict[str, tuple[float, float]] = {
    "car": (4.5, 1.8),
    "van": (5.3, 2.0),
    "truck": (8.5, 2.5),
    "bus": (12.0, 2.55),
    "motorcycle": (2.1, 0.8),
}
# YOLO class ids of the aerial-cars dataset (aerial.names: car, truck, bus, minibus, cyclist).
AERIAL_CARS_CLASSES: dict[int, str] = {0: "car", 1: "truck", 2: "bus", 3: "van"}

MAX_TEXTURE_PX = 4096
LAYOUTS = ("straight", "curved", "intersection")


class SimulationError(AirPatrolError, ValueError):
    """A flight spec that cannot be simulated; the message says what to change."""


# --------------------------------------------------------------------------------------------------
# Spec
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FlightSpec:
    """Everything that defines one simulated flight. Units: metres, seconds, degrees, km/h."""

    seed: int = 0
    duration_s: float = 10.0
    fps: float = 30.0
    width: int = 1280
    height: int = 720
    camera: str = "dji_mavic_3"
    focal_length_mm: float | None = None  # real focal length; None -> the profile's
    altitude_m: float = 100.0
    climb_rate_mps: float = 0.0
    pitch_deg: float = -90.0  # DJI: -90 nadir
    drift_mps: tuple[float, float] = (1.0, 0.5)  # drone velocity (east, north)
    yaw_deg: float = 0.0  # initial camera heading, compass (0 north, clockwise)
    yaw_rate_dps: float = 1.0
    layout: str = "straight"  # straight | curved | intersection
    road_heading_deg: float | None = None  # compass heading of the main road; None -> random by seed
    lanes_per_direction: int = 2
    lane_width_m: float = 3.5
    n_vehicles: int = 14
    class_mix: tuple[tuple[str, float], ...] = (
        ("car", 0.72),
        ("van", 0.12),
        ("truck", 0.07),
        ("bus", 0.05),
        ("motorcycle", 0.04),
    )
    speed_limit_kmh: float = 50.0
    normal_speed_kmh: tuple[float, float] = (25.0, 45.0)
    speeding_speed_kmh: tuple[float, float] = (58.0, 85.0)
    speeding_fraction: float = 0.3
    accel_sigma_mps2: float = 0.5
    min_violation_s: float = 0.5
    min_visibility: float = 0.5  # for a frame to count towards a ground-truth violation
    sprites_dir: str | None = None  # image + YOLO txt pairs; crops are cut at run time, never stored
    real_sprite_fraction: float = 0.6  # share of vehicles drawn with real crops when sprites_dir is set
    mask_every: int = 10  # write the road mask of every N-th frame (0: none)
    noise_sigma: float = 2.0  # sensor noise (grey levels)
    crf: int = 20
    preset: str = "veryfast"
    latitude: float = 37.3889
    longitude: float = 126.6630
    ground_elevation_m: float = 12.0
    start_time: str = "2025-06-01T10:00:00"

    def __post_init__(self) -> None:
        problems = []
        if not self.duration_s > 0:
            problems.append("duration_s must be positive")
        if not 1 <= self.fps <= 240:
            problems.append("fps must be in [1, 240]")
        if self.width < 64 or self.height < 64 or self.width % 2 or self.height % 2:
            problems.append("width and height must be even and at least 64")
        if not self.altitude_m > 1:
            problems.append("altitude_m must be above 1 m")
        if not -90.0 <= self.pitch_deg <= -20.0:
            problems.append("pitch_deg must be in [-90, -20] (camera looking down)")
        if self.layout not in LAYOUTS:
            problems.append(f"layout must be one of {', '.join(LAYOUTS)}")
        if not 1 <= self.lanes_per_direction <= 4:
            problems.append("lanes_per_direction must be 1-4")
        if self.n_vehicles < 0:
            problems.append("n_vehicles must be >= 0")
        if not 0 <= self.speeding_fraction <= 1 or not 0 <= self.real_sprite_fraction <= 1:
            problems.append("fractions must be in [0, 1]")
        for name in ("normal_speed_kmh", "speeding_speed_kmh"):
            lo, hi = getattr(self, name)
            if not 0 < lo <= hi:
                problems.append(f"{name} must be (low, high) with 0 < low <= high")
        for cls, weight in self.class_mix:
            if cls not in VEHICLE_DIMS_M or weight < 0:
                problems.append(f"class_mix: unknown class {cls!r} or negative weight")
        if self.mask_every < 0:
            problems.append("mask_every must be >= 0")
        try:
            get_profile(self.camera)
        except ValueError as exc:
            problems.append(str(exc))
        if problems:
            raise SimulationError("invalid flight spec: " + "; ".join(problems))

    @property
    def n_frames(self) -> int:
        return max(1, int(round(self.duration_s * self.fps)))

    @property
    def fps_fraction(self) -> Fraction:
        return Fraction(self.fps).limit_denominator(1001)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "class_mix":
                value = {k: float(w) for k, w in value}
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FlightSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SimulationError(f"unknown flight spec keys: {', '.join(unknown)}")
        kwargs = dict(data)
        if "class_mix" in kwargs and isinstance(kwargs["class_mix"], dict):
            kwargs["class_mix"] = tuple((str(k), float(v)) for k, v in kwargs["class_mix"].items())
        for name in ("drift_mps", "normal_speed_kmh", "speeding_speed_kmh"):
            if name in kwargs and kwargs[name] is not None:
                kwargs[name] = tuple(float(v) for v in kwargs[name])
        try:
            return cls(**kwargs)
        except TypeError as exc:
            raise SimulationError(f"invalid flight spec: {exc}") from exc

    @classmethod
    def from_yaml(cls, path: str | Path) -> FlightSpec:
        return cls.from_dict(read_yaml_mapping(path, "flight spec", SimulationError))

    def replace(self, **changes: Any) -> FlightSpec:
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


@dataclass(frozen=True, slots=True)
class SimulatedFlight:
    """Paths and metadata of one generated flight."""

    out_dir: Path
    video: Path
    srt: Path
    gt: Path
    speeds: Path
    violations: Path
    vehicles: Path
    road_mask_dir: Path | None
    seqinfo: Path
    spec_path: Path
    spec: FlightSpec
    n_frames: int
    fps: float
    width: int
    height: int
    intrinsics: Intrinsics
    texture_res_m: float
    n_vehicles: int
    n_violations: int
    elapsed_s: float = 0.0


# --------------------------------------------------------------------------------------------------
# Geometry helpers
# --------------------------------------------------------------------------------------------------


def _compass_dir(heading_deg: float) -> np.ndarray:
    """Unit vector (east, north) of a compass heading (0 north, 90 east)."""
    h = math.radians(heading_deg)
    return np.array([math.sin(h), math.cos(h)])


def world_to_camera_ground(position: np.ndarray, yaw_deg: float) -> np.ndarray:
    """3x3 transform from world metres to the camera-ground frame of pipelines.geometry.

    The camera-ground frame has its origin below the camera, Y along the horizontal viewing
    direction (compass ``yaw_deg``) and X to its right.
    """
    fwd = _compass_dir(yaw_deg)
    right = np.array([fwd[1], -fwd[0]])
    return np.array(
        [
            [right[0], right[1], -float(right @ position)],
            [fwd[0], fwd[1], -float(fwd @ position)],
            [0.0, 0.0, 1.0],
        ]
    )


def _kinematics(
    v0: float, accel: float, t: np.ndarray, v_lo: float, v_hi: float
) -> tuple[np.ndarray, np.ndarray]:
    """Distance and speed at times ``t`` for constant acceleration, speed clamped to [v_lo, v_hi]."""
    t = np.asarray(t, dtype=np.float64)
    if accel == 0 or (accel > 0 and v0 >= v_hi) or (accel < 0 and v0 <= v_lo):
        v_end = v0
        return v_end * t, np.full_like(t, v_end)
    v_sat = v_hi if accel > 0 else v_lo
    t_sat = (v_sat - v0) / accel
    s_sat = v0 * t_sat + 0.5 * accel * t_sat**2
    before = t < t_sat
    s = np.where(before, v0 * t + 0.5 * accel * t**2, s_sat + v_sat * (t - t_sat))
    v = np.where(before, v0 + accel * t, v_sat)
    return s, v


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


# --------------------------------------------------------------------------------------------------
# Ground texture
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class GroundLayer:
    """The rendered ground: BGR texture, road mask and the texture-pixel -> world transform."""

    texture: np.ndarray  # H x W x 3 uint8
    texture_half: np.ndarray  # pyrDown of texture (far field of oblique views)
    road_mask: np.ndarray  # H x W uint8 (255 road)
    res_m: float
    tex_to_world: np.ndarray  # 3x3

    @property
    def world_to_tex(self) -> np.ndarray:
        return np.linalg.inv(self.tex_to_world)


def _noise(shape: tuple[int, int], cell_px: float, rng: np.random.Generator) -> np.ndarray:
    """Smooth value noise in [-1, 1] with features of about ``cell_px`` pixels."""
    h, w = shape
    gh, gw = max(2, int(h / max(cell_px, 1.0)) + 2), max(2, int(w / max(cell_px, 1.0)) + 2)
    small = rng.uniform(-1.0, 1.0, (gh, gw)).astype(np.float32)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


class _GroundPainter:
    def __init__(self, bounds: tuple[float, float, float, float], res: float, rng: np.random.Generator):
        x0, y0, x1, y1 = bounds
        self.res = res
        self.rng = rng
        self.w = int(math.ceil((x1 - x0) / res)) + 1
        self.h = int(math.ceil((y1 - y0) / res)) + 1
        self.tex_to_world = np.array([[res, 0.0, x0], [0.0, -res, y1], [0.0, 0.0, 1.0]])
        self.world_to_tex = np.linalg.inv(self.tex_to_world)

    def px(self, pts: np.ndarray) -> np.ndarray:
        return apply_homography(self.world_to_tex, np.asarray(pts, dtype=np.float64).reshape(-1, 2))

    def fixed(self, pts: np.ndarray) -> np.ndarray:
        """World points -> int32 pixel coordinates with 4 fractional bits (cv2 ``shift=4``)."""
        return np.round(self.px(pts) * 16).astype(np.int32)

    def m(self, metres: float) -> float:
        return metres / self.res

    def paint(self, roads: Sequence[Road], crossings: Sequence[np.ndarray]) -> GroundLayer:
        rng, h, w = self.rng, self.h, self.w
        # --- background: grass / soil fields with multi-scale texture
        big = _noise((h, w), self.m(60.0), rng)
        mid = _noise((h, w), self.m(9.0), rng)
        fine = _noise((h, w), self.m(1.6), rng)
        finer = _noise((h, w), max(self.m(0.45), 1.5), rng)
        soil = np.clip(big * 1.6, -1, 1) * 0.5 + 0.5  # 0 grass .. 1 soil
        grass = np.array([62, 118, 86], np.float32)
        dry = np.array([88, 132, 150], np.float32)
        base = grass[None, None, :] * (1 - soil[..., None]) + dry[None, None, :] * soil[..., None]
        shade = 1.0 + 0.16 * mid + 0.10 * fine + 0.08 * finer
        tex = base * shade[..., None]
        del big, soil, base
        tex += rng.normal(0.0, 5.0, (h, w, 1)).astype(np.float32)
        tex = np.clip(tex, 0, 255).astype(np.uint8)

        # --- road corridors (asphalt + sidewalks) as masks first: buildings must avoid them
        road_mask = np.zeros((h, w), np.uint8)
        corridor = np.zeros((h, w), np.uint8)
        for road in roads:
            pts = self.fixed(road.centre.points).reshape(-1, 1, 2)
            cv2.polylines(
                road_mask, [pts], False, 255, max(1, int(round(self.m(2 * road.half_width)))), cv2.LINE_8, 4
            )
            cv2.polylines(
                corridor, [pts], False, 255, int(round(self.m(2 * road.half_width + 16.0))), cv2.LINE_8, 4
            )
        sidewalk = np.zeros((h, w), np.uint8)
        for road in roads:
            pts = self.fixed(road.centre.points).reshape(-1, 1, 2)
            cv2.polylines(
                sidewalk, [pts], False, 255, int(round(self.m(2 * road.half_width + 5.0))), cv2.LINE_8, 4
            )

        self._buildings_and_trees(tex, corridor)

        # sidewalks / kerbs: light concrete
        concrete = np.array([150, 158, 162], np.float32)
        sw = sidewalk > 0
        tex[sw] = np.clip(concrete * (1.0 + 0.06 * mid[sw, None] + 0.05 * finer[sw, None]), 0, 255).astype(
            np.uint8
        )

        # asphalt with patches and wear
        patches = np.clip(_noise((h, w), self.m(14.0), rng) * 2.5, -1, 1)
        asphalt = np.array([74, 74, 78], np.float32)
        rm = road_mask > 0
        val = asphalt * (1.0 + 0.10 * patches[rm, None] + 0.06 * fine[rm, None] + 0.07 * finer[rm, None])
        val += rng.normal(0.0, 4.0, (int(rm.sum()), 1)).astype(np.float32)
        tex[rm] = np.clip(val, 0, 255).astype(np.uint8)
        del patches, mid, fine, finer, val

        self._markings(tex, roads, road_mask)
        for crossing in crossings:
            self._crosswalks(tex, roads, crossing)
        texture_half = cv2.pyrDown(tex)
        return GroundLayer(tex, texture_half, road_mask, self.res, self.tex_to_world)

    def _buildings_and_trees(self, tex: np.ndarray, corridor: np.ndarray) -> None:
        rng = self.rng
        area_m2 = self.w * self.h * self.res**2
        roof_colours = np.array(
            [[120, 120, 125], [70, 80, 150], [95, 100, 110], [160, 165, 170], [60, 70, 90], [130, 150, 175]],
            np.float32,
        )
        n_buildings = int(area_m2 / 900)
        for _ in range(n_buildings):
            cx, cy = rng.uniform(0, self.w), rng.uniform(0, self.h)
            bl, bw = self.m(rng.uniform(8, 28)), self.m(rng.uniform(7, 18))
            ang = rng.uniform(0, 180)
            rect = ((cx, cy), (bl, bw), ang)
            box = cv2.boxPoints(rect)
            x0, y0 = np.floor(box.min(0)).astype(int)
            x1, y1 = np.ceil(box.max(0)).astype(int)
            if x0 < 0 or y0 < 0 or x1 >= self.w or y1 >= self.h or corridor[y0:y1, x0:x1].any():
                continue
            colour = roof_colours[rng.integers(len(roof_colours))] * rng.uniform(0.85, 1.15)
            shadow = box + np.array([self.m(2.0), self.m(1.5)], np.float32)
            cv2.fillConvexPoly(tex, np.round(shadow * 16).astype(np.int32), (35, 45, 40), cv2.LINE_AA, 4)
            cv2.fillConvexPoly(tex, np.round(box * 16).astype(np.int32), colour.tolist(), cv2.LINE_AA, 4)
            # gable: one half darker, a ridge line, a few roof fixtures
            half = np.array([box[0], box[1], (box[1] + box[2]) / 2, (box[0] + box[3]) / 2], np.float32)
            cv2.fillConvexPoly(
                tex, np.round(half * 16).astype(np.int32), (colour * 0.78).tolist(), cv2.LINE_AA, 4
            )
            a, b = (box[0] + box[3]) / 2, (box[1] + box[2]) / 2
            cv2.line(
                tex,
                tuple(np.round(a * 16).astype(int)),
                tuple(np.round(b * 16).astype(int)),
                (colour * 1.15).clip(0, 255).tolist(),
                max(1, int(self.m(0.3))),
                cv2.LINE_AA,
                4,
            )
            for _ in range(int(rng.integers(0, 4))):
                p = box[0] + (box[2] - box[0]) * rng.uniform(0.2, 0.8, 2).astype(np.float32)
                s = self.m(rng.uniform(0.8, 2.0))
                cv2.rectangle(
                    tex,
                    tuple((p * 16).astype(int)),
                    tuple(((p + s) * 16).astype(int)),
                    (200, 200, 200),
                    -1,
                    cv2.LINE_AA,
                    4,
                )
        n_trees = int(area_m2 / 220)
        for _ in range(n_trees):
            cx, cy = rng.uniform(0, self.w), rng.uniform(0, self.h)
            r = self.m(rng.uniform(1.8, 4.5))
            ix, iy = int(cx), int(cy)
            if corridor[iy, ix] or ix < r or iy < r or ix + r >= self.w or iy + r >= self.h:
                continue
            c16 = np.array([cx, cy]) * 16
            green = np.array([40, 85, 45], np.float32) * rng.uniform(0.75, 1.25)
            cv2.circle(
                tex,
                tuple((c16 + np.array([self.m(1.6), self.m(1.2)]) * 16).astype(int)),
                int(r * 16),
                (30, 45, 35),
                -1,
                cv2.LINE_AA,
                4,
            )
            cv2.circle(tex, tuple(c16.astype(int)), int(r * 16), green.tolist(), -1, cv2.LINE_AA, 4)
            cv2.circle(
                tex,
                tuple((c16 - r * 4).astype(int)),
                int(r * 8),
                (green * 1.3).clip(0, 255).tolist(),
                -1,
                cv2.LINE_AA,
                4,
            )

    def _stroke(self, layer: np.ndarray, pts_world: np.ndarray, width_m: float) -> None:
        """Draw a line of ``width_m`` metres into an alpha layer (sub-pixel widths fade)."""
        width_px = self.m(width_m)
        thick = max(1, int(round(width_px)))
        strength = int(round(255 * min(1.0, width_px / thick)))
        pts = self.fixed(pts_world).reshape(-1, 1, 2)
        cv2.polylines(layer, [pts], False, strength, thick, cv2.LINE_AA, 4)

    def _markings(self, tex: np.ndarray, roads: Sequence[Road], road_mask: np.ndarray) -> None:
        white = np.array([225, 228, 230], np.float32)
        for i, road in enumerate(roads):
            layer = np.zeros(road_mask.shape, np.uint8)
            n, lw = road.lanes_per_direction, road.lane_width_m
            for k in range(-n, n + 1):
                line = road.centre.offset(k * lw) if k else road.centre
                if abs(k) == n or k == 0:  # edges and centre: solid
                    self._stroke(layer, line.points, 0.15)
                    if k == 0:
                        self._stroke(layer, road.centre.offset(0.3).points, 0.12)
                    continue
                dash, gap = 3.0, 6.0
                s = 0.0
                while s < line.length:
                    seg = np.linspace(s, min(s + dash, line.length), 4)
                    self._stroke(layer, line.at(seg)[0], 0.13)
                    s += dash + gap
            # markings stop where another road's asphalt crosses this one
            for j, other in enumerate(roads):
                if j != i:
                    pts = self.fixed(other.centre.points).reshape(-1, 1, 2)
                    cv2.polylines(
                        layer, [pts], False, 0, int(round(self.m(2 * other.half_width))), cv2.LINE_8, 4
                    )
            alpha = layer.astype(np.float32)[..., None] / 255.0
            sel = layer > 0
            tex[sel] = (tex[sel] * (1 - alpha[sel]) + white * alpha[sel]).astype(np.uint8)

    def _crosswalks(self, tex: np.ndarray, roads: Sequence[Road], crossing: np.ndarray) -> None:
        """Zebra stripes on every road, just outside the crossing with the other roads."""
        white = (222, 226, 228)
        for i, road in enumerate(roads):
            s_c = float(road.centre.cum[np.argmin(np.linalg.norm(road.centre.points - crossing, axis=1))])
            clearance = max(r.half_width for j, r in enumerate(roads) if j != i) + 2.5
            for sign in (-1.0, 1.0):
                s_mid = s_c + sign * (clearance + 1.5)
                pos, tang = road.centre.at(np.array([s_mid]))
                pos, tang = pos[0], tang[0]
                right = np.array([tang[1], -tang[0]])
                stripes = np.arange(-road.half_width + 0.75, road.half_width - 0.5, 1.0)
                for off in stripes:
                    c = pos + right * off
                    quad = np.array(
                        [
                            c - tang * 1.5 - right * 0.25,
                            c + tang * 1.5 - right * 0.25,
                            c + tang * 1.5 + right * 0.25,
                            c - tang * 1.5 + right * 0.25,
                        ]
                    )
                    cv2.fillConvexPoly(tex, self.fixed(quad), white, cv2.LINE_AA, 4)
                stop = pos - sign * tang * 2.5
                # stop line across the incoming lanes only
                line = (
                    np.array([stop, stop + right * (road.half_width - 0.5)])
                    if sign < 0
                    else np.array([stop, stop - right * (road.half_width - 0.5)])
                )
                layer_pts = self.fixed(line).reshape(-1, 1, 2)
                cv2.polylines(tex, [layer_pts], False, white, max(1, int(round(self.m(0.4)))), cv2.LINE_AA, 4)


# --------------------------------------------------------------------------------------------------
# Vehicle sprites
# --------------------------------------------------------------------------------------------------

CAR_COLOURS_BGR = (
    ((236, 236, 234), 0.24),
    ((188, 190, 194), 0.15),
    ((118, 118, 124), 0.14),
    ((32, 32, 35), 0.19),
    ((38, 40, 178), 0.08),
    ((150, 82, 40), 0.08),
    ((88, 52, 30), 0.05),
    ((60, 112, 52), 0.03),
    ((40, 196, 232), 0.02),
    ((168, 198, 214), 0.02),
)


@dataclass(frozen=True, slots=True, eq=False)
class Sprite:
    """Top view of a vehicle, front pointing to +x (image right), BGRA uint8."""

    image: np.ndarray
    class_name: str
    aspect: float  # width / length of the vehicle body
    real: bool = False


def _rounded_rect(img: np.ndarray, x0: float, y0: float, x1: float, y1: float, r: float, colour) -> None:
    r = max(0.0, min(r, (x1 - x0) / 2, (y1 - y0) / 2))
    s = 16
    p = lambda x, y: (int(round(x * s)), int(round(y * s)))  # noqa: E731
    cv2.rectangle(img, p(x0 + r, y0), p(x1 - r, y1), colour, -1, cv2.LINE_AA, 4)
    cv2.rectangle(img, p(x0, y0 + r), p(x1, y1 - r), colour, -1, cv2.LINE_AA, 4)
    for cx, cy in ((x0 + r, y0 + r), (x1 - r, y0 + r), (x0 + r, y1 - r), (x1 - r, y1 - r)):
        cv2.circle(img, p(cx, cy), int(round(r * s)), colour, -1, cv2.LINE_AA, 4)


def procedural_sprite(class_name: str, rng: np.random.Generator, px_per_m: float = 24.0) -> Sprite:
    """Draw a top-view vehicle: body, windscreen, rear window, roof, mirrors (front at +x)."""
    length, width = VEHICLE_DIMS_M[class_name]
    lw, ww = int(round(length * px_per_m)), int(round(width * px_per_m))
    img = np.zeros((ww, lw, 4), np.uint8)
    colours = [c for c, _ in CAR_COLOURS_BGR]
    weights = np.array([w for _, w in CAR_COLOURS_BGR])
    body = np.array(colours[rng.choice(len(colours), p=weights / weights.sum())], np.float64)
    body = np.clip(body * rng.uniform(0.9, 1.08), 0, 255)
    glass = (38, 34, 30, 255)
    L, W = lw - 1.0, ww - 1.0
    dark = tuple((body * 0.72).tolist()) + (255,)
    light = tuple(np.clip(body * 1.12 + 8, 0, 255).tolist()) + (255,)
    bodyc = tuple(body.tolist()) + (255,)
    if class_name == "motorcycle":
        cv2.ellipse(
            img,
            (lw // 2 * 16, ww // 2 * 16),
            (int(L / 2 * 16), int(W / 2.6 * 16)),
            0,
            0,
            360,
            (30, 30, 30, 255),
            -1,
            cv2.LINE_AA,
            4,
        )
        cv2.ellipse(
            img,
            (int(L * 0.62 * 16), ww // 2 * 16),
            (int(L * 0.18 * 16), int(W * 0.32 * 16)),
            0,
            0,
            360,
            bodyc,
            -1,
            cv2.LINE_AA,
            4,
        )
        cv2.circle(
            img, (int(L * 0.42 * 16), ww // 2 * 16), int(W * 0.34 * 16), (40, 40, 40, 255), -1, cv2.LINE_AA, 4
        )
        cv2.circle(img, (int(L * 0.42 * 16), ww // 2 * 16), int(W * 0.26 * 16), light, -1, cv2.LINE_AA, 4)
    elif class_name in ("truck", "bus"):
        if class_name == "truck":
            cab = 0.24 * L
            cargo = (np.array([225, 228, 230]) if rng.random() < 0.5 else body * 0.9 + 20).clip(0, 255)
            _rounded_rect(img, 0, 0, L - cab - 0.02 * L, W, 0.03 * W, tuple(cargo.tolist()) + (255,))
            cv2.rectangle(
                img,
                (int(0.05 * L * 16), int(0.1 * W * 16)),
                (int((L - cab - 0.06 * L) * 16), int(0.9 * W * 16)),
                tuple((cargo * 0.92).tolist()) + (255,),
                max(1, int(0.02 * W)),
                cv2.LINE_AA,
                4,
            )
            _rounded_rect(img, L - cab, 0.03 * W, L, 0.97 * W, 0.12 * W, bodyc)
            _rounded_rect(img, L - 0.10 * L, 0.12 * W, L - 0.02 * L, 0.88 * W, 0.05 * W, glass)
        else:
            _rounded_rect(img, 0, 0, L, W, 0.08 * W, bodyc)
            _rounded_rect(img, L - 0.045 * L, 0.08 * W, L - 0.005 * L, 0.92 * W, 0.04 * W, glass)
            for k in range(3):
                x = (0.18 + 0.25 * k) * L
                cv2.rectangle(
                    img,
                    (int(x * 16), int(0.28 * W * 16)),
                    (int((x + 0.09 * L) * 16), int(0.72 * W * 16)),
                    (205, 208, 210, 255),
                    -1,
                    cv2.LINE_AA,
                    4,
                )
            cv2.line(
                img,
                (int(0.03 * L * 16), int(0.5 * W * 16)),
                (int(0.93 * L * 16), int(0.5 * W * 16)),
                dark,
                max(1, int(0.03 * W)),
                cv2.LINE_AA,
                4,
            )
    else:  # car / van
        _rounded_rect(img, 0, 0, L, W, 0.22 * W, bodyc)
        if class_name == "van":
            ws0, ws1, rw0, rw1 = 0.80, 0.90, 0.02, 0.06
        else:
            ws0, ws1, rw0, rw1 = 0.58, 0.72, 0.12, 0.22
        # hood / boot slightly darker, roof lighter
        _rounded_rect(
            img, ws1 * L, 0.06 * W, 0.98 * L, 0.94 * W, 0.18 * W, dark if rng.random() < 0.3 else bodyc
        )
        pts = np.array([[ws0 * L, 0.12 * W], [ws1 * L, 0.04 * W], [ws1 * L, 0.96 * W], [ws0 * L, 0.88 * W]])
        cv2.fillConvexPoly(img, np.round(pts * 16).astype(np.int32), glass, cv2.LINE_AA, 4)
        pts = np.array([[rw0 * L, 0.08 * W], [rw1 * L, 0.14 * W], [rw1 * L, 0.86 * W], [rw0 * L, 0.92 * W]])
        cv2.fillConvexPoly(img, np.round(pts * 16).astype(np.int32), glass, cv2.LINE_AA, 4)
        roof = (40, 40, 42, 255) if rng.random() < 0.12 else light
        _rounded_rect(img, rw1 * L + 0.01 * L, 0.16 * W, ws0 * L - 0.01 * L, 0.84 * W, 0.1 * W, roof)
        # side windows as thin dark strips, mirrors
        cv2.line(
            img,
            (int(rw1 * L * 16), int(0.1 * W * 16)),
            (int(ws0 * L * 16), int(0.1 * W * 16)),
            glass,
            max(1, int(0.05 * W)),
            cv2.LINE_AA,
            4,
        )
        cv2.line(
            img,
            (int(rw1 * L * 16), int(0.9 * W * 16)),
            (int(ws0 * L * 16), int(0.9 * W * 16)),
            glass,
            max(1, int(0.05 * W)),
            cv2.LINE_AA,
            4,
        )
        for y in (0.0, W):
            cv2.circle(img, (int(ws1 * L * 16), int(y * 16)), int(0.07 * W * 16), dark, -1, cv2.LINE_AA, 4)
        # lights
        cv2.line(
            img,
            (int(0.995 * L * 16), int(0.15 * W * 16)),
            (int(0.995 * L * 16), int(0.3 * W * 16)),
            (220, 235, 240, 255),
            max(1, int(0.04 * W)),
            cv2.LINE_AA,
            4,
        )
        cv2.line(
            img,
            (int(0.995 * L * 16), int(0.7 * W * 16)),
            (int(0.995 * L * 16), int(0.85 * W * 16)),
            (220, 235, 240, 255),
            max(1, int(0.04 * W)),
            cv2.LINE_AA,
            4,
        )
    return Sprite(img, class_name, width / length, real=False)


def load_sprite_crops(
    sprites_dir: str | Path, class_map: dict[int, str] | None = None, max_per_class: int = 400
) -> list[Sprite]:
    """Cut vehicle crops from image + YOLO-txt pairs (``class xc yc w h`` normalised).

    Only boxes clearly elongated along an image axis are kept (the box then is the vehicle's
    footprint); they are rotated so the vehicle's long side runs along +x. Crops live in memory only.
    """
    class_map = AERIAL_CARS_CLASSES if class_map is None else class_map
    root = Path(sprites_dir)
    if not root.is_dir():
        raise SimulationError(f"sprites folder not found: {root}")
    images = sorted(p for p in root.rglob("*") if p.suffix.lower() in {".jpg", ".jpeg", ".png"})
    sprites: list[Sprite] = []
    counts: dict[str, int] = {}
    for img_path in images:
        label = img_path.with_suffix(".txt")
        if not label.exists():
            continue
        image = None
        for line in label.read_text().splitlines():
            parts = line.split()
            if len(parts) < 5:
                continue
            cls = class_map.get(int(float(parts[0])))
            if cls is None or counts.get(cls, 0) >= max_per_class:
                continue
            if image is None:
                image = cv2.imread(str(img_path), cv2.IMREAD_COLOR)
                if image is None:
                    break
            ih, iw = image.shape[:2]
            xc, yc, bw, bh = (float(v) for v in parts[1:5])
            x0, x1 = int(round((xc - bw / 2) * iw)), int(round((xc + bw / 2) * iw))
            y0, y1 = int(round((yc - bh / 2) * ih)), int(round((yc + bh / 2) * ih))
            x0, y0, x1, y1 = max(0, x0), max(0, y0), min(iw, x1), min(ih, y1)
            w, h = x1 - x0, y1 - y0
            if min(w, h) < 8:
                continue
            ratio = max(w, h) / min(w, h)
            if ratio < 1.6:  # diagonal vehicle: its box holds background too
                continue
            crop = image[y0:y1, x0:x1]
            if h > w:
                crop = cv2.rotate(crop, cv2.ROTATE_90_CLOCKWISE)
            ch, cw = crop.shape[:2]
            alpha = np.zeros((ch, cw), np.uint8)
            _rounded_rect(alpha, 0.5, 0.5, cw - 1.5, ch - 1.5, 0.25 * ch, 255)
            alpha = cv2.GaussianBlur(alpha, (0, 0), max(0.6, 0.04 * ch))
            sprites.append(Sprite(np.dstack([crop, alpha]), cls, ch / cw, real=True))
            counts[cls] = counts.get(cls, 0) + 1
    log.info("cut %d vehicle crops from %s (%s)", len(sprites), root, counts)
    if not sprites:
        raise SimulationError(f"no usable vehicle crops (image + YOLO txt pairs) in {root}")
    return sprites


# --------------------------------------------------------------------------------------------------
# Traffic
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Vehicle:
    id: int
    class_name: str
    length_m: float
    width_m: float
    road: int
    lane: int
    s0: float
    v0_mps: float
    accel_mps2: float
    v_lo_mps: float
    v_hi_mps: float
    speeding: bool
    sprite: Sprite
    positions: np.ndarray = field(repr=False)  # (n_frames, 2) world metres
    headings: np.ndarray = field(repr=False)  # (n_frames, 2) unit forward vectors
    speeds_mps: np.ndarray = field(repr=False)  # (n_frames,)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "class_name": self.class_name,
            "class_id": SIM_CLASS_IDS[self.class_name],
            "length_m": round(self.length_m, 3),
            "width_m": round(self.width_m, 3),
            "road": self.road,
            "lane": self.lane,
            "initial_speed_kmh": round(self.v0_mps * 3.6, 3),
            "accel_mps2": round(self.accel_mps2, 4),
            "speed_band_kmh": [round(self.v_lo_mps * 3.6, 2), round(self.v_hi_mps * 3.6, 2)],
            "speeding": self.speeding,
            "real_sprite": self.sprite.real,
        }


# --------------------------------------------------------------------------------------------------
# Scene
# --------------------------------------------------------------------------------------------------


class Scene:
    """A fully specified flight: ground layer, roads, vehicles and the camera path.

    Building a scene is deterministic by ``spec.seed``; frames can be rendered in any order.
    """

    def __init__(self, spec: FlightSpec, sprites: Sequence[Sprite] | None = None):
        self.spec = spec
        profile = get_profile(spec.camera)
        self.profile = profile
        self.intrinsics = intrinsics_for(profile, spec.width, spec.height, spec.focal_length_mm)
        self.focal_mm = profile.focal_length_mm if spec.focal_length_mm is None else spec.focal_length_mm
        n = spec.n_frames
        self.times = np.array([float(Fraction(k) / spec.fps_fraction) for k in range(n)])
        drift = np.asarray(spec.drift_mps, dtype=np.float64)
        self.drone_xy = self.times[:, None] * drift[None, :]
        self.yaw = spec.yaw_deg + spec.yaw_rate_dps * self.times
        self.altitude = spec.altitude_m + spec.climb_rate_mps * self.times
        if self.altitude.min() <= 1.0:
            raise SimulationError("the drone would descend below 1 m; lower climb_rate_mps")
        tilt = 90.0 + spec.pitch_deg
        top_ray = tilt + math.degrees(math.atan(self.intrinsics.cy / self.intrinsics.fy))
        if top_ray > 80.0:
            raise SimulationError(
                f"the image top is {top_ray:.0f} deg from nadir, too close to the horizon (limit 80): "
                "steepen the pitch or lower the focal length"
            )
        self._h0_cache: dict[float, np.ndarray] = {}
        rng_world = np.random.default_rng([spec.seed, 1])
        rng_traffic = np.random.default_rng([spec.seed, 2])
        rng_sprites = np.random.default_rng([spec.seed, 3])

        # visible ground region over the flight
        w, h = spec.width, spec.height
        border = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1], [w / 2, 0], [w / 2, h - 1]], float)
        pts = []
        for k in np.unique(np.linspace(0, n - 1, min(n, 25)).astype(int)):
            pts.append(apply_homography(np.linalg.inv(self.world_to_image(int(k))), border))
        pts = np.vstack(pts)
        margin = 25.0
        x0, y0 = pts.min(0) - margin
        x1, y1 = pts.max(0) + margin
        if max(x1 - x0, y1 - y0) > 3000:
            raise SimulationError(
                "the flight covers more than 3 km of ground; shorten it or steepen the pitch"
            )
        self.bounds = (float(x0), float(y0), float(x1), float(y1))
        mid = n // 2
        self.centre = apply_homography(np.linalg.inv(self.world_to_image(mid)), np.array([[w / 2, h / 2]]))[0]

        # texture resolution: finer than the finest ground sampling distance in view
        gsd_min = min(self._gsd_at(k, (w / 2, h - 1)) for k in (0, mid, n - 1))
        gsd_min = min(gsd_min, min(self._gsd_at(k, (w / 2, h / 2)) for k in (0, mid, n - 1)))
        res = max(0.75 * gsd_min, 0.02)
        res = max(res, max(x1 - x0, y1 - y0) / MAX_TEXTURE_PX)
        self.res = res

        heading = (
            spec.road_heading_deg if spec.road_heading_deg is not None else float(rng_world.uniform(0, 180))
        )
        self.roads, crossings = self._layout(heading, rng_world)
        self.ground = _GroundPainter(self.bounds, res, rng_world).paint(self.roads, crossings)
        self._blend_cache: dict[float, np.ndarray | None] = {}

        self._h_all: np.ndarray | None = None
        procedural_pool = {c: [procedural_sprite(c, rng_sprites) for _ in range(6)] for c in VEHICLE_DIMS_M}
        self.vehicles = self._traffic(rng_traffic, procedural_pool, list(sprites or []))
        self._scaled_sprites: dict[int, np.ndarray] = {}

    # ---- camera ----------------------------------------------------------------------------------

    def _h0(self, altitude: float) -> np.ndarray:
        key = round(float(altitude), 6)
        if key not in self._h0_cache:
            self._h0_cache[key] = ground_to_image_homography(self.intrinsics, key, self.spec.pitch_deg)
        return self._h0_cache[key]

    def world_to_image(self, k: int) -> np.ndarray:
        """3x3 homography: world metres -> image pixels of frame ``k`` (0-based)."""
        return self._h0(self.altitude[k]) @ world_to_camera_ground(self.drone_xy[k], float(self.yaw[k]))

    def _gsd_at(self, k: int, uv: tuple[float, float]) -> float:
        inv = np.linalg.inv(self.world_to_image(k))
        p = apply_homography(inv, np.array([uv, (uv[0] + 1, uv[1]), (uv[0], uv[1] - 1)], float))
        return float(math.sqrt(np.linalg.norm(p[1] - p[0]) * np.linalg.norm(p[2] - p[0])))

    def telemetry(self) -> list[Telemetry]:
        spec = self.spec
        lat0, lon0 = math.radians(spec.latitude), spec.longitude
        out = []
        for k, t in enumerate(self.times):
            east, north = self.drone_xy[k]
            lat = spec.latitude + math.degrees(north / 6_378_137.0)
            lon = lon0 + math.degrees(east / (6_378_137.0 * math.cos(lat0)))
            yaw = (float(self.yaw[k]) + 180.0) % 360.0 - 180.0
            out.append(
                Telemetry(
                    timestamp_s=float(t),
                    altitude_m=float(self.altitude[k]),
                    gimbal_pitch_deg=spec.pitch_deg,
                    focal_length_mm=self.focal_mm,
                    focal_length_35mm=equivalent_35mm(self.focal_mm, self.profile),
                    latitude=lat,
                    longitude=lon,
                    abs_altitude_m=float(self.altitude[k]) + spec.ground_elevation_m,
                    gimbal_yaw_deg=yaw,
                    camera=self.profile.name,
                )
            )
        return out

    # ---- layout and traffic ----------------------------------------------------------------------

    def _layout(self, heading: float, rng: np.random.Generator) -> tuple[list[Road], list[np.ndarray]]:
        spec = self.spec
        x0, y0, x1, y1 = self.bounds
        vmax = spec.speeding_speed_kmh[1] / 3.6 * 1.3
        half_len = math.hypot(x1 - x0, y1 - y0) / 2 + vmax * spec.duration_s + 80.0
        s = np.arange(-half_len, half_len + 0.5, 0.5)
        c = self.centre
        d = _compass_dir(heading)
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

    def _traffic(
        self, rng: np.random.Generator, procedural: dict[str, list[Sprite]], real: list[Sprite]
    ) -> list[Vehicle]:
        spec = self.spec
        lanes = [(ri, li, lane) for ri, road in enumerate(self.roads) for li, lane in enumerate(road.lanes())]
        classes = [c for c, _ in spec.class_mix]
        weights = np.array([w for _, w in spec.class_mix], float)
        weights = weights / weights.sum() if weights.sum() > 0 else np.ones(len(classes)) / len(classes)
        real_by_class: dict[str, list[Sprite]] = {}
        for sp in real:
            real_by_class.setdefault(sp.class_name, []).append(sp)
        times = self.times
        accepted: list[Vehicle] = []
        tries = 0
        min_visible = min(len(times), max(3, int(1.2 * spec.fps)))
        while len(accepted) < spec.n_vehicles and tries < 60 * max(1, spec.n_vehicles):
            tries += 1
            cls = str(classes[rng.choice(len(classes), p=weights)])
            speeding = bool(rng.random() < spec.speeding_fraction)
            lo_kmh, hi_kmh = spec.speeding_speed_kmh if speeding else spec.normal_speed_kmh
            if cls in ("truck", "bus"):
                hi_kmh = max(lo_kmh, hi_kmh - 10.0)
            v_lo, v_hi = lo_kmh / 3.6, hi_kmh / 3.6
            v0 = float(rng.uniform(v_lo, v_hi))
            accel = float(np.clip(rng.normal(0.0, spec.accel_sigma_mps2), -2.5, 2.5))
            ri, li, lane = lanes[int(rng.integers(len(lanes)))]
            sprite = None
            if real_by_class.get(cls) and rng.random() < spec.real_sprite_fraction:
                sprite = real_by_class[cls][int(rng.integers(len(real_by_class[cls])))]
            if sprite is None:
                sprite = procedural[cls][int(rng.integers(len(procedural[cls])))]
            length = VEHICLE_DIMS_M[cls][0] * float(rng.uniform(0.92, 1.08))
            width = (
                length * sprite.aspect
                if sprite.real
                else VEHICLE_DIMS_M[cls][1] * float(rng.uniform(0.95, 1.05))
            )
            if sprite.real:
                width = float(np.clip(width, 0.33 * length, 0.6 * length))
            dist, speeds = _kinematics(v0, accel, times, v_lo, v_hi)
            # start so that the vehicle is in the visible area at some random instant
            k_vis = int(rng.integers(len(times)))
            s_centre = float(
                lane.cum[np.argmin(np.linalg.norm(lane.points - self._frame_centre(k_vis), axis=1))]
            )
            s0 = s_centre - dist[k_vis] + float(rng.uniform(-40.0, 40.0))
            s = s0 + dist
            if s.min() < 0 or s.max() > lane.length:
                continue
            pos, tang = lane.at(s)
            vis = self._visible_frames(pos)
            if vis.sum() < min_visible:
                continue
            if not self._no_conflict(ri, li, pos, length, accepted):
                continue
            accepted.append(
                Vehicle(
                    id=len(accepted) + 1,
                    class_name=cls,
                    length_m=length,
                    width_m=width,
                    road=ri,
                    lane=li,
                    s0=s0,
                    v0_mps=v0,
                    accel_mps2=accel,
                    v_lo_mps=v_lo,
                    v_hi_mps=v_hi,
                    speeding=speeding,
                    sprite=sprite,
                    positions=pos,
                    headings=tang,
                    speeds_mps=speeds,
                )
            )
        if len(accepted) < spec.n_vehicles:
            log.warning(
                "placed %d of %d vehicles (no room without collisions)", len(accepted), spec.n_vehicles
            )
        return accepted

    def _frame_centre(self, k: int) -> np.ndarray:
        inv = np.linalg.inv(self.world_to_image(k))
        return apply_homography(inv, np.array([[self.spec.width / 2, self.spec.height / 2]]))[0]

    def _visible_frames(self, pos: np.ndarray) -> np.ndarray:
        """Frames in which a world point (one per frame) projects inside the image."""
        if self._h_all is None:
            self._h_all = np.stack([self.world_to_image(k) for k in range(len(self.times))])
        homog = np.einsum("kij,kj->ki", self._h_all, np.column_stack([pos, np.ones(len(pos))]))
        with np.errstate(divide="ignore", invalid="ignore"):
            uv = homog[:, :2] / homog[:, 2:3]
        return (
            (homog[:, 2] > 0)
            & (uv[:, 0] >= 0)
            & (uv[:, 0] < self.spec.width)
            & (uv[:, 1] >= 0)
            & (uv[:, 1] < self.spec.height)
        )

    @staticmethod
    def _no_conflict(ri: int, li: int, pos: np.ndarray, length: float, others: list[Vehicle]) -> bool:
        """Same lane: keep a following gap; other roads: never overlap (at crossings)."""
        for o in others:
            if o.road == ri and o.lane != li:
                continue
            margin = 2.5 if o.road == ri else 1.0
            d = np.linalg.norm(pos - o.positions, axis=1)
            if (d < (length + o.length_m) / 2 + margin).any():
                return False
        return True

    # ---- rendering -------------------------------------------------------------------------------

    def _far_blend(self, k: int) -> np.ndarray | None:
        """Per-pixel weight of the half-resolution ground for oblique views (anti-aliasing)."""
        key = round(float(self.altitude[k]), 2)
        if key in self._blend_cache:
            return self._blend_cache[key]
        spec = self.spec
        rows = np.linspace(0, spec.height - 1, 25)
        gsd = np.array([self._gsd_at(k, (spec.width / 2, r)) for r in rows])
        level = np.log2(np.maximum(gsd / self.res, 1e-6))
        if level.max() < 0.6:
            self._blend_cache[key] = None
            return None
        weight_rows = np.clip(np.interp(np.arange(spec.height), rows, level) - 0.5, 0.0, 1.0).astype(
            np.float32
        )
        self._blend_cache[key] = weight_rows
        return weight_rows

    def _ground_image(self, k: int, hw: np.ndarray) -> np.ndarray:
        """Warp the ground layer into the image; the far rows of oblique views blend in the
        half-resolution layer (less aliasing). Gimbal roll is zero, so the ground sampling
        distance depends on the row only and each layer is warped over its band of rows."""
        w, h = self.spec.width, self.spec.height
        full = hw @ self.ground.tex_to_world
        weight = self._far_blend(k)
        if weight is None:
            return cv2.warpPerspective(
                self.ground.texture, full, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT
            )
        near_rows = np.nonzero(weight < 1.0)[0]
        far_rows = np.nonzero(weight > 0.0)[0]
        a0 = int(near_rows.min()) if len(near_rows) else h  # near layer: rows [a0, h)
        b1 = int(far_rows.max()) + 1 if len(far_rows) else 0  # far layer: rows [0, b1)
        img = np.empty((h, w, 3), np.uint8)
        if a0 < h:
            shift = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, -a0], [0.0, 0.0, 1.0]])
            img[a0:] = cv2.warpPerspective(
                self.ground.texture,
                shift @ full,
                (w, h - a0),
                flags=cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_REFLECT,
            )
        if b1 > 0:
            half = hw @ self.ground.tex_to_world @ np.diag([2.0, 2.0, 1.0])
            far = cv2.warpPerspective(
                self.ground.texture_half, half, (w, b1), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT
            )
            img[: min(a0, b1)] = far[: min(a0, b1)]
            if a0 < b1:
                wr = np.repeat(weight[a0:b1, None], w, axis=1)
                img[a0:b1] = cv2.blendLinear(img[a0:b1], far[a0:b1], 1.0 - wr, wr)
        return img

    def road_mask(self, k: int) -> np.ndarray:
        """Exact road mask (uint8, 255 = road) of frame ``k``."""
        hmat = self.world_to_image(k) @ self.ground.tex_to_world
        return cv2.warpPerspective(
            self.ground.road_mask,
            hmat,
            (self.spec.width, self.spec.height),
            flags=cv2.INTER_NEAREST,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0,
        )

    def _sprite_image(self, v: Vehicle) -> np.ndarray:
        """Sprite resized once to about the ground-layer resolution (avoids aliasing)."""
        key = v.id
        if key not in self._scaled_sprites:
            img = v.sprite.image
            tw = max(4, int(round(v.length_m / self.res)))
            th = max(3, int(round(v.width_m / self.res)))
            interp = cv2.INTER_AREA if tw < img.shape[1] else cv2.INTER_LINEAR
            self._scaled_sprites[key] = cv2.resize(img, (tw, th), interpolation=interp)
        return self._scaled_sprites[key]

    def render(
        self, k: int, rng: np.random.Generator | None = None
    ) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """BGR image of frame ``k`` and its ground-truth rows (one dict per visible vehicle)."""
        spec = self.spec
        w, h = spec.width, spec.height
        hw = self.world_to_image(k)
        img = self._ground_image(k, hw)

        rows: list[dict[str, Any]] = []
        boxes: list[tuple[Vehicle, np.ndarray, np.ndarray]] = []
        for v in self.vehicles:
            c, f = v.positions[k], v.headings[k]
            r = np.array([f[1], -f[0]])
            hl, hw_ = v.length_m / 2, v.width_m / 2
            corners = np.array(
                [c - f * hl - r * hw_, c + f * hl - r * hw_, c + f * hl + r * hw_, c - f * hl + r * hw_]
            )
            homog = np.column_stack([corners, np.ones(4)]) @ hw.T
            if (homog[:, 2] <= 1e-9).any():
                continue
            uv = homog[:, :2] / homog[:, 2:3]
            bx0, by0 = uv.min(0)
            bx1, by1 = uv.max(0)
            if bx1 < 0 or by1 < 0 or bx0 >= w or by0 >= h:
                continue
            boxes.append((v, uv, np.array([bx0, by0, bx1, by1])))

        sun = np.array([0.45, -0.30])  # shadow offset on the ground (m), same for all vehicles
        for v, uv, _box in boxes:
            self._draw_vehicle(img, v, k, hw, uv, sun)

        # ground truth: boxes clipped to the image; visibility = share inside x not covered by later vehicles
        for i, (v, _uv, box) in enumerate(boxes):
            full = (box[2] - box[0]) * (box[3] - box[1])
            cb = np.array([max(box[0], 0.0), max(box[1], 0.0), min(box[2], w - 1.0), min(box[3], h - 1.0)])
            cw, ch = cb[2] - cb[0], cb[3] - cb[1]
            if cw < 2 or ch < 2 or full <= 0:
                continue
            inside = cw * ch / full
            covered = 0.0
            for _v2, _uv2, b2 in boxes[i + 1 :]:
                ix = max(0.0, min(cb[2], b2[2]) - max(cb[0], b2[0]))
                iy = max(0.0, min(cb[3], b2[3]) - max(cb[1], b2[1]))
                covered = max(covered, ix * iy / (cw * ch))
            rows.append(
                {
                    "id": v.id,
                    "class_name": v.class_name,
                    "xywh": (float(cb[0]), float(cb[1]), float(cw), float(ch)),
                    "visibility": float(np.clip(inside * (1.0 - covered), 0.0, 1.0)),
                    "speed_kmh": float(v.speeds_mps[k] * 3.6),
                    "ground_xy": (float(v.positions[k][0]), float(v.positions[k][1])),
                }
            )
        if spec.noise_sigma > 0:
            rng = rng or np.random.default_rng([spec.seed, 4, k])
            noise = rng.normal(0.0, spec.noise_sigma, (h // 2, w // 2, 1)).astype(np.float32)
            noise = cv2.resize(noise, (w, h), interpolation=cv2.INTER_NEAREST)
            pos = np.clip(noise, 0, 255).astype(np.uint8)
            neg = np.clip(-noise, 0, 255).astype(np.uint8)
            img = cv2.subtract(cv2.add(img, cv2.merge([pos, pos, pos])), cv2.merge([neg, neg, neg]))
        return img, rows

    def _draw_vehicle(
        self, img: np.ndarray, v: Vehicle, k: int, hw: np.ndarray, uv: np.ndarray, sun: np.ndarray
    ) -> None:
        h, w = img.shape[:2]
        c, f = v.positions[k], v.headings[k]
        r = np.array([f[1], -f[0]])
        hl, hwid = v.length_m / 2 * 1.02, v.width_m / 2 * 1.04
        shadow_w = (
            np.array(
                [c - f * hl - r * hwid, c + f * hl - r * hwid, c + f * hl + r * hwid, c - f * hl + r * hwid]
            )
            + sun
        )
        shadow_uv = apply_homography(hw, shadow_w)
        allpts = np.vstack([uv, shadow_uv])
        x0 = int(max(0, math.floor(allpts[:, 0].min()) - 1))
        y0 = int(max(0, math.floor(allpts[:, 1].min()) - 1))
        x1 = int(min(w, math.ceil(allpts[:, 0].max()) + 2))
        y1 = int(min(h, math.ceil(allpts[:, 1].max()) + 2))
        if x1 <= x0 or y1 <= y0:
            return
        roi = img[y0:y1, x0:x1]
        # shadow: darken
        smask = np.zeros(roi.shape[:2], np.uint8)
        cv2.fillConvexPoly(smask, np.round((shadow_uv - [x0, y0]) * 16).astype(np.int32), 255, cv2.LINE_AA, 4)
        sa = smask.astype(np.float32)[..., None] * (0.45 / 255.0)
        roi_f = roi.astype(np.float32) * (1.0 - sa)
        # body: sprite warped through the ground homography
        sprite = self._sprite_image(v)
        sh, sw = sprite.shape[:2]
        a_sprite = np.array(
            [
                [f[0] * v.length_m / sw, r[0] * v.width_m / sh, 0.0],
                [f[1] * v.length_m / sw, r[1] * v.width_m / sh, 0.0],
                [0.0, 0.0, 1.0],
            ]
        )
        origin = c - f * v.length_m / 2 - r * v.width_m / 2
        a_sprite[:2, 2] = origin + 0.5 * (a_sprite[:2, 0] + a_sprite[:2, 1])
        shift = np.array([[1.0, 0.0, -x0], [0.0, 1.0, -y0], [0.0, 0.0, 1.0]])
        warped = cv2.warpPerspective(
            sprite,
            shift @ hw @ a_sprite,
            (x1 - x0, y1 - y0),
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=(0, 0, 0, 0),
        )
        alpha = warped[..., 3:4].astype(np.float32) / 255.0
        roi_f = roi_f * (1.0 - alpha) + warped[..., :3].astype(np.float32) * alpha
        roi[:] = np.clip(roi_f, 0, 255).astype(np.uint8)

    def gt_violations(self, visible: dict[int, np.ndarray]) -> list[dict[str, Any]]:
        """Speeding events: speed above limit + tolerance for at least ``min_violation_s`` while visible."""
        spec = self.spec
        limit = spec.speed_limit_kmh
        out = []
        vis = visible
        for v in self.vehicles:
            over = (v.speeds_mps * 3.6 > limit) & vis[v.id]
            runs = _runs(over)
            best = None
            for a, b in runs:
                dur = self.times[b] - self.times[a]
                if dur + 1e-9 >= spec.min_violation_s and (best is None or dur > best[2]):
                    best = (a, b, dur)
            if best is None:
                continue
            a, b, _ = best
            sp = v.speeds_mps[a : b + 1] * 3.6
            out.append(
                {
                    "id": v.id,
                    "class_name": v.class_name,
                    "speed_limit_kmh": limit,
                    "start_frame": a + 1,
                    "end_frame": b + 1,
                    "start_time_s": round(float(self.times[a]), 4),
                    "end_time_s": round(float(self.times[b]), 4),
                    "duration_s": round(float(self.times[b] - self.times[a]), 4),
                    "peak_speed_kmh": round(float(sp.max()), 3),
                    "mean_speed_kmh": round(float(sp.mean()), 3),
                }
            )
        return out


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """Inclusive (start, end) index pairs of the True runs of a boolean array."""
    out = []
    start = None
    for i, m in enumerate(mask):
        if m and start is None:
            start = i
        elif not m and start is not None:
            out.append((start, i - 1))
            start = None
    if start is not None:
        out.append((start, len(mask) - 1))
    return out


# --------------------------------------------------------------------------------------------------
# Writers
# --------------------------------------------------------------------------------------------------


def _srt_time(t: float) -> str:
    ms = int(round(t * 1000))
    hh, rem = divmod(ms, 3_600_000)
    mm, rem = divmod(rem, 60_000)
    ss, ms = divmod(rem, 1000)
    return f"{hh:02d}:{mm:02d}:{ss:02d},{ms:03d}"


def write_dji_srt(
    samples: Sequence[Telemetry], path: Path, start: dt.datetime, frame_period_s: float
) -> None:
    """Modern DJI <font>-style SRT (fallback while pipelines.telemetry.write_srt is unavailable)."""
    lines = []
    for i, s in enumerate(samples):
        t0 = s.timestamp_s
        t1 = samples[i + 1].timestamp_s if i + 1 < len(samples) else t0 + frame_period_s
        stamp = (start + dt.timedelta(seconds=t0)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        diff = int(round((t1 - t0) * 1000))
        lines += [
            str(i + 1),
            f"{_srt_time(t0)} --> {_srt_time(t1)}",
            f'<font size="28">FrameCnt: {i + 1}, DiffTime: {diff}ms',
            stamp,
            f"[iso: 100] [shutter: 1/1000.0] [fnum: 2.8] [ev: 0] [ct: 5500] [color_md: default] "
            f"[focal_len: {s.focal_length_35mm or 0:.2f}] [dzoom_ratio: {s.digital_zoom:.2f}], "
            f"[latitude: {s.latitude:.6f}] [longitude: {s.longitude:.6f}] "
            f"[rel_alt: {s.altitude_m:.3f} abs_alt: {s.abs_altitude_m:.3f}] "
            f"[gb_yaw: {s.gimbal_yaw_deg:.1f} gb_pitch: {s.gimbal_pitch_deg:.1f} gb_roll: 0.0] </font>",
            "",
        ]
    path.write_text("\n".join(lines), encoding="utf-8")


def _write_srt(samples: Sequence[Telemetry], path: Path, spec: FlightSpec) -> str:
    start = dt.datetime.fromisoformat(spec.start_time)
    try:
        from pipelines.telemetry import write_srt
    except ImportError:  # the telemetry package is optional for the simulator
        write_dji_srt(samples, path, start, 1.0 / spec.fps)
        return "eval.simulate.write_dji_srt (fallback)"
    write_srt(samples, path, start_time=start)
    return "pipelines.telemetry.write_srt"


class _VideoWriter:
    def __init__(self, path: Path, spec: FlightSpec):
        import av

        self._av = av
        self.container = av.open(str(path), mode="w")
        rate = spec.fps_fraction
        self.stream = self.container.add_stream("libx264", rate=rate)
        self.stream.width, self.stream.height = spec.width, spec.height
        self.stream.pix_fmt = "yuv420p"
        self.time_base = Fraction(rate.denominator, rate.numerator)
        self.stream.options = {"crf": str(spec.crf), "preset": spec.preset, "g": str(int(round(spec.fps)))}

    def write(self, k: int, image: np.ndarray) -> None:
        frame = self._av.VideoFrame.from_ndarray(image, format="bgr24")
        frame.pts = k
        frame.time_base = self.time_base
        for packet in self.stream.encode(frame):
            self.container.mux(packet)

    def close(self) -> None:
        for packet in self.stream.encode():
            self.container.mux(packet)
        self.container.close()


def simulate_flight(
    spec: FlightSpec, out_dir: str | Path, *, sprites: Sequence[Sprite] | None = None, progress: bool = False
) -> SimulatedFlight:
    """Generate a flight: video, telemetry, exact ground truth and road masks in ``out_dir``."""
    from tqdm import tqdm

    t_start = time.perf_counter()
    out = Path(out_dir)
    (out / "gt").mkdir(parents=True, exist_ok=True)
    if sprites is None and spec.sprites_dir:
        sprites = load_sprite_crops(spec.sprites_dir)
    scene = Scene(spec, sprites)
    log.info(
        "scene: %s, %d vehicles, ground %.0fx%.0f m at %.3f m/px, %d frames",
        spec.layout,
        len(scene.vehicles),
        scene.bounds[2] - scene.bounds[0],
        scene.bounds[3] - scene.bounds[1],
        scene.res,
        spec.n_frames,
    )
    mask_dir = out / "road_mask" if spec.mask_every > 0 else None
    if mask_dir is not None:
        mask_dir.mkdir(exist_ok=True)
    video_path = out / "video.mp4"
    writer = _VideoWriter(video_path, spec)
    gt_lines: list[str] = []
    speed_rows: list[tuple] = []
    vis = {v.id: np.zeros(spec.n_frames, bool) for v in scene.vehicles}
    try:
        for k in tqdm(range(spec.n_frames), desc="simulate", unit="frame", disable=not progress):
            image, rows = scene.render(k)
            writer.write(k, image)
            t = scene.times[k]
            for row in rows:
                x, y, w, h = row["xywh"]
                gt_lines.append(
                    f"{k + 1},{row['id']},{x:.2f},{y:.2f},{w:.2f},{h:.2f},1,{SIM_CLASS_IDS[row['class_name']]},"
                    f"{row['visibility']:.3f}"
                )
                speed_rows.append(
                    (
                        k + 1,
                        f"{t:.6f}",
                        row["id"],
                        f"{row['speed_kmh']:.4f}",
                        f"{row['ground_xy'][0]:.4f}",
                        f"{row['ground_xy'][1]:.4f}",
                    )
                )
                vis[row["id"]][k] = row["visibility"] >= spec.min_visibility
            if mask_dir is not None and k % spec.mask_every == 0:
                cv2.imwrite(str(mask_dir / f"{k:06d}.png"), scene.road_mask(k))
    finally:
        writer.close()

    (out / "gt" / "gt.txt").write_text("\n".join(gt_lines) + "\n")
    with (out / "gt" / "speeds.csv").open("w", newline="") as fh:
        wr = csv.writer(fh)
        wr.writerow(["frame", "time_s", "id", "speed_kmh", "ground_x_m", "ground_y_m"])
        wr.writerows(speed_rows)
    violations = scene.gt_violations(vis)
    (out / "gt" / "violations.json").write_text(
        json.dumps(
            {
                "speed_limit_kmh": spec.speed_limit_kmh,
                "min_duration_s": spec.min_violation_s,
                "tolerance_kmh": 0.0,
                "frame_base": 1,
                "violations": violations,
            },
            indent=2,
        )
    )
    (out / "gt" / "vehicles.json").write_text(json.dumps([v.to_dict() for v in scene.vehicles], indent=2))
    srt_path = out / "video.SRT"
    srt_writer = _write_srt(scene.telemetry(), srt_path, spec)
    spec_path = out / "flight.yaml"
    spec_path.write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False))
    k_ = scene.intrinsics
    seqinfo = out / "seqinfo.ini"
    seqinfo.write_text(
        "[Sequence]\n"
        f"name={out.name}\nimDir=img1\nvideo=video.mp4\nframeRate={spec.fps:g}\nseqLength={spec.n_frames}\n"
        f"imWidth={spec.width}\nimHeight={spec.height}\nimExt=.jpg\n"
        f"camera={scene.profile.name}\naltitude_m={spec.altitude_m:g}\npitch_deg={spec.pitch_deg:g}\n"
        f"focal_length_mm={scene.focal_mm:g}\nfx={k_.fx:.4f}\nlayout=sim\n"
    )
    elapsed = time.perf_counter() - t_start
    log.info(
        "wrote %s (%d frames, %d vehicles, %d gt violations, telemetry by %s) in %.1f s",
        out,
        spec.n_frames,
        len(scene.vehicles),
        len(violations),
        srt_writer,
        elapsed,
    )
    return SimulatedFlight(
        out_dir=out,
        video=video_path,
        srt=srt_path,
        gt=out / "gt" / "gt.txt",
        speeds=out / "gt" / "speeds.csv",
        violations=out / "gt" / "violations.json",
        vehicles=out / "gt" / "vehicles.json",
        road_mask_dir=mask_dir,
        seqinfo=seqinfo,
        spec_path=spec_path,
        spec=spec,
        n_frames=spec.n_frames,
        fps=spec.fps,
        width=spec.width,
        height=spec.height,
        intrinsics=scene.intrinsics,
        texture_res_m=scene.res,
        n_vehicles=len(scene.vehicles),
        n_violations=len(violations),
        elapsed_s=elapsed,
    )


def iter_frames(
    spec: FlightSpec, sprites: Sequence[Sprite] | None = None
) -> Iterator[tuple[np.ndarray, list[dict]]]:
    """Render a flight in memory (no files): yields (BGR image, ground-truth rows) per frame."""
    scene = Scene(spec, sprites)
    for k in range(spec.n_frames):
        yield scene.render(k)
