"""The camera's motion in the sensor's ideal image: what a track's last position is carried with.

The ego-motion (:mod:`pipelines.motion.egomotion`) is one homography between two frames' pixels:
what the image-level stages need (the road mask, the keyframe propagation, the LK seeds). It is the
ground's motion only in a pinhole, global-shutter image:

* **through a distorting lens** the ground's flow is a homography of the undistorted points, not of
  the pixels. A homography fitted to the pixels' flow over the whole frame under-carries the
  centre, where a barrel lens magnifies most, and over-carries the edges: with the camera flying
  forward, every track there gets a share of the camera's own speed;
* **with a rolling shutter** each row sees the ground from where the camera was when the row was
  read (a camera flying 10 m/s moves 0.35 m over a 35 ms readout), so the frame is the ground
  stretched along the flight, and a vehicle's step between two rows read at different times
  includes the camera's motion between them.

Measured on issue 39's realistic grid (the 12 cells flying forward along the road at 10 m/s, exact
telemetry, the shipped detector; lens k1 -0.12..-0.03, readout 15-35 ms, both told to the engine):
before this (and the raised point's parallax, :mod:`pipelines.vehicle_height`), the lane going with
the drone read 0.8-2.6 % slow and the one coming 1.1-5.2 % fast, a velocity error of about -0.25 m/s
along the flight whatever the vehicle's direction; after, -0.02 % and +0.24 % pooled (lab note
docs/lab/2026-11-29-issue-39-flying-forward.md).

Here the ego-motion's inlier pairs (``EgoMotion.pairs``) are taken to the ideal image: undistorted
(:func:`pipelines.lens.undistort_points`), and each moved along its own flow to where it was at its
frame's time (its points were read at ``o(v0)`` and ``o(v1)`` after their frames' timestamps,
:func:`pipelines.lens.row_time_offsets`); the homography is fitted to them (least squares: they are
the ego-motion's RANSAC inliers) and smoothed like the ego-motion (:class:`MotionSmoother`). A
track's position goes to the same ideal image (:meth:`IdealView.points`: undistorted, and moved back
along the ground's flow there by its row's offset), so that its step is its step over the ground,
in the frame's pinhole geometry, between the times its rows were read (which the speed fit uses).
With neither a lens nor a readout time nothing changes: the pixels are the ideal image.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import cv2
import numpy as np

from pipelines.geometry import GroundProjector, apply_homography
from pipelines.lens import LensModel, row_time_offsets, undistort_points
from pipelines.motion.egomotion import MotionSmoother, plausible_homography
from pipelines.types import EgoMotion, Intrinsics

log = logging.getLogger(__name__)

MIN_PAIRS = 8  # fewer inlier pairs: the frame's pixel homography stands in


@dataclass(frozen=True, slots=True)
class Sensor:
    """What separates a frame's pixels from its ideal image: the lens and the readout time (equal
    when all three are)."""

    intrinsics: Intrinsics
    lens: LensModel | None = None
    readout_s: float = 0.0

    @classmethod
    def of(cls, proj: GroundProjector) -> Sensor:
        return cls(proj.intrinsics, proj.lens, float(proj.readout_s))

    @property
    def pinhole(self) -> bool:
        """Neither a lens nor a rolling shutter: the pixels are the ideal image."""
        return (self.lens is None or self.lens.identity) and not self.readout_s

    def offsets(self, points: np.ndarray) -> np.ndarray:
        """(N,) when each point's row was read, relative to its frame's timestamp (s)."""
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        return row_time_offsets(pts[:, 1], self.intrinsics.height, self.readout_s)


def ideal_pairs(pairs: np.ndarray, sensor: Sensor, dt_s: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The pairs' points (M, 4: previous x, y, current x, y, pixels) in the ideal image at their
    frames' times: undistorted, then each moved along its pair's flow by its row's offset (a pair
    spans ``dt_s + o(v1) - o(v0)``). No readout or no interval: undistorted only."""
    p = np.asarray(pairs, dtype=np.float64).reshape(-1, 4)
    u0 = undistort_points(p[:, :2], sensor.intrinsics, sensor.lens)
    u1 = undistort_points(p[:, 2:], sensor.intrinsics, sensor.lens)
    if not sensor.readout_s or dt_s is None or dt_s <= 0:
        return u0, u1
    o0, o1 = sensor.offsets(p[:, :2]), sensor.offsets(p[:, 2:])
    flow = (u1 - u0) / (dt_s + o1 - o0)[:, None]  # ideal pixels per second
    x0 = u0 - flow * o0[:, None]
    return x0, x0 + flow * dt_s


def fit_ideal(pairs: np.ndarray | None, sensor: Sensor, dt_s: float | None) -> np.ndarray | None:
    """The ground's homography previous -> current frame in the ideal image, from the ego-motion's
    inlier pairs; None with too few pairs or an implausible fit."""
    if pairs is None or len(pairs) < MIN_PAIRS:
        return None
    x0, x1 = ideal_pairs(pairs, sensor, dt_s)
    ok = np.isfinite(x0).all(axis=1) & np.isfinite(x1).all(axis=1)
    if int(ok.sum()) < MIN_PAIRS:
        return None
    h, _ = cv2.findHomography(x0[ok], x1[ok], 0)
    if h is None or not np.isfinite(h).all() or abs(h[2, 2]) < 1e-12:
        return None
    h = h / h[2, 2]
    return h if plausible_homography(h) else None


@dataclass(frozen=True, slots=True, eq=False)
class IdealView:
    """One frame's map from its pixels to its ideal image: the sensor, and the ground's motion
    into the frame (``step``: ideal previous -> current homography over ``dt_s``)."""

    sensor: Sensor
    step: np.ndarray
    dt_s: float | None
    _back: np.ndarray = field(init=False, repr=False)  # the step's inverse: current -> previous

    def __post_init__(self) -> None:
        object.__setattr__(self, "_back", np.linalg.inv(self.step))

    def points(self, points_px: np.ndarray) -> np.ndarray:
        """(N, 2) pixels -> where the ground under them is in the ideal image at the frame's time:
        undistorted, and moved back along the ground's flow there by the row's offset."""
        px = np.asarray(points_px, dtype=np.float64).reshape(-1, 2)
        u = undistort_points(px, self.sensor.intrinsics, self.sensor.lens)
        if not self.sensor.readout_s or self.dt_s is None or self.dt_s <= 0 or not len(u):
            return u
        before = apply_homography(self._back, u)  # where that ground was a frame ago
        return u - (u - before) / self.dt_s * self.sensor.offsets(px)[:, None]


class IdealMotion:
    """Per stream: the camera's accumulated motion in the ideal image (``cum``: reference ->
    current frame), advanced with each frame's ego-motion once a sensor is known."""

    def __init__(self, smooth_window: int = 0, smooth_gate_px: float = 0.3) -> None:
        self._smoother = MotionSmoother(smooth_window, smooth_gate_px)
        self.reset()

    def reset(self) -> None:
        self.cum = np.eye(3)
        self.sensor: Sensor | None = None
        self.view: IdealView | None = None
        self._last_t: float | None = None
        self._smoother.reset()

    def advance(self, ego: EgoMotion, timestamp_s: float | None) -> None:
        """Accumulate this frame's motion in the last known sensor's ideal image (the pixels' own
        homography until a sensor is known, or where the pairs give no fit)."""
        dt = None if timestamp_s is None or self._last_t is None else float(timestamp_s) - self._last_t
        if timestamp_s is not None:
            self._last_t = float(timestamp_s)
        sensor = self.sensor
        if sensor is None or sensor.pinhole:
            step = ego.homography
            self.view = None
        else:
            fitted = fit_ideal(ego.pairs, sensor, dt) if ego.valid else None
            if fitted is None:
                self._smoother.reset()
                step = ego.homography
            else:
                w, h = sensor.intrinsics.width, sensor.intrinsics.height
                step = self._smoother.smooth(fitted, w, h)
            self.view = IdealView(sensor, step, dt)
        self.cum = step @ self.cum
        self.cum /= self.cum[2, 2]

    def use(self, proj: GroundProjector) -> IdealView | None:
        """This frame's view through ``proj``'s sensor (None: a pinhole, global-shutter sensor, whose
        pixels are the ideal image). A sensor new to the stream applies from the next frame's motion
        on; until then this frame's pixels are taken as ideal but for the lens."""
        sensor = Sensor.of(proj)
        if sensor.pinhole:
            self.sensor, self.view = sensor, None
            return None
        if sensor != self.sensor:
            log.debug("ideal motion: sensor %s from here on", sensor)
            self.sensor, self.view = sensor, None
        if self.view is None:
            self.view = IdealView(sensor, np.eye(3), None)
        return self.view


__all__ = ["IdealMotion", "IdealView", "MIN_PAIRS", "Sensor", "fit_ideal", "ideal_pairs"]
