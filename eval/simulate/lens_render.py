"""Rendering through a real sensor: a lens that distorts (``FlightSpec.lens_distortion``) and a rolling
shutter that reads the rows one after another (``FlightSpec.readout_ms``).

Each output pixel ``(u, v)`` is the sensor's: it sees the pinhole pixel the lens moved there
(:func:`pipelines.lens.undistort_points`, one map per flight) at its row's time ``t_k + (v / height -
1/2) * readout`` (:func:`pipelines.lens.row_time_offsets`: the frame's timestamp is its middle row's),
so the ground under it is where that pinhole ray meets the ground from the drone's pose at that time.
The ground (and the road mask) is sampled with one ``cv2.remap`` per layer; the rays are cached per
flight in the frame of a camera one metre up, so a frame costs a few multiply-adds per pixel.

A vehicle is drawn, whole, where it is at the time its footprint centre's row is read (found in two
fixed-point steps; the rows of one vehicle span well under a millisecond), its position and heading
interpolated linearly between the frames' (chords of a few decimetres: sub-millimetre). Its footprint
and shadow corners are distorted exactly; the sprite is warped with the pinhole homography composed
with the one mapping the pinhole corners onto the distorted ones (exact at the corners, a small
fraction of a pixel inside a vehicle). Its ground-truth box bounds those distorted, row-timed corners,
so it sits on the drawn vehicle; speeds and ground positions stay the exact ones at ``t_k``. A solid
(``FlightSpec.vehicle_height``) is seen likewise: every corner, at any height, through the camera at
that time and the lens, its roof's sprite warped as a flat one's (``_plane_warp``).

What stays the pinhole camera's at the frame's time (the middle row's), before the lens:
``gt/camera.csv``, the telemetry, :meth:`CameraPath.visible_frames` (which frames count a vehicle as in
view when the traffic is placed) and the per-row weight of the half-resolution ground of oblique views.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from eval.simulate.camera import CameraPath
from eval.simulate.ground import GroundLayer
from eval.simulate.render import FrameRenderer, Projected, blend_layers, footprint
from eval.simulate.spec import FlightSpec
from eval.simulate.traffic import Vehicle
from pipelines.geometry import apply_homography, ground_to_image_homography
from pipelines.lens import distort_points, undistort_points

TIME_STEPS = 2  # fixed-point steps for the time a vehicle is seen (each shrinks the error ~100-fold)


def frame_renderer(
    spec: FlightSpec, camera: CameraPath, ground: GroundLayer, vehicles: Sequence[Vehicle], res: float
) -> FrameRenderer:
    """The renderer a flight needs: :class:`SensorRenderer` with a lens or a rolling shutter, else the
    pinhole :class:`FrameRenderer` (whose frames are exactly those of a flight without either)."""
    if camera.distorts or camera.readout_s > 0:
        return SensorRenderer(spec, camera, ground, vehicles, res)
    return FrameRenderer(spec, camera, ground, vehicles, res)


class SensorRenderer(FrameRenderer):
    """Frames seen through the flight's lens and rolling shutter (see the module docstring)."""

    def __init__(
        self,
        spec: FlightSpec,
        camera: CameraPath,
        ground: GroundLayer,
        vehicles: Sequence[Vehicle],
        res: float,
    ):
        super().__init__(spec, camera, ground, vehicles, res)
        self.lens = camera.lens if camera.distorts else None
        self._rays: tuple[np.ndarray, np.ndarray] | None = None
        self._maps: tuple[int, np.ndarray, np.ndarray] | None = None

    # ---- ground ----------------------------------------------------------------------------------

    def ground_rays(self) -> tuple[np.ndarray, np.ndarray]:
        """Per output pixel (two float32 H x W arrays): where the ray of the pinhole pixel it sees
        meets the ground, right (x) and forward (y) of a camera one metre up (the camera-ground frame
        of :func:`pipelines.geometry.ground_to_image_homography`, divided by the altitude). Depends
        on the intrinsics, lens and pitch only: computed once per flight."""
        if self._rays is None:
            h, w = self.spec.height, self.spec.width
            u, v = np.meshgrid(np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64))
            pinhole = undistort_points(
                np.column_stack([u.ravel(), v.ravel()]), self.camera.intrinsics, self.lens
            )
            h1 = ground_to_image_homography(self.camera.intrinsics, 1.0, self.spec.pitch_deg)
            g = apply_homography(np.linalg.inv(h1), pinhole).astype(np.float32)
            self._rays = (g[:, 0].reshape(h, w), g[:, 1].reshape(h, w))
        return self._rays

    def texture_maps(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Ground-texture coordinates (x, y: float32 H x W) each output pixel of frame ``k`` sees: its
        ray from the drone's pose at its row's time. A camera at altitude ``a``, position ``p`` and
        compass yaw ``psi`` sees the ground point ``p + a * (gx * right + gy * forward)``."""
        if self._maps is not None and self._maps[0] == k:
            return self._maps[1], self._maps[2]
        gx, gy = self.ground_rays()
        h = self.spec.height
        xy, yaw, altitude = self.camera.pose_at(self.camera.row_times(k, np.arange(h)))
        psi = np.radians(yaw)
        right = np.column_stack([np.cos(psi), -np.sin(psi)]) * altitude[:, None]
        forward = np.column_stack([np.sin(psi), np.cos(psi)]) * altitude[:, None]
        to_tex = self.ground.world_to_tex  # affine: texture = A @ world + b
        a, b = to_tex[:2, :2], to_tex[:2, 2]
        along_x = (right @ a.T).astype(np.float32)  # texture px per unit gx, one row each
        along_y = (forward @ a.T).astype(np.float32)
        origin = (xy @ a.T + b).astype(np.float32)
        tx, ty = (np.multiply(along_x[:, i : i + 1], gx) for i in (0, 1))  # in place from here on
        scratch = np.empty_like(gx)
        for i, out in enumerate((tx, ty)):
            out += np.multiply(along_y[:, i : i + 1], gy, out=scratch)
            out += origin[:, i : i + 1]
        self._maps = (k, tx, ty)
        return tx, ty

    def _ground_image(self, k: int, hw: np.ndarray) -> np.ndarray:
        """The ground layers remapped per pixel; the far rows of oblique views blend in the
        half-resolution layer as in the pinhole renderer (its weight per output row)."""
        tx, ty = self.texture_maps(k)
        weight = self._far_blend(k)

        def remap(layer: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
            return cv2.remap(layer, x, y, interpolation=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT)

        if weight is None:
            return remap(self.ground.texture, tx, ty)
        return blend_layers(
            weight,
            self.spec.width,
            lambda a0: remap(self.ground.texture, tx[a0:], ty[a0:]),
            lambda b1: remap(self.ground.texture_half, tx[:b1] * 0.5, ty[:b1] * 0.5),
        )

    def road_mask(self, k: int) -> np.ndarray:
        """Exact road mask (uint8, 255 = road) of frame ``k``, through the lens and shutter."""
        tx, ty = self.texture_maps(k)
        return cv2.remap(
            self.ground.road_mask,
            tx,
            ty,
            interpolation=cv2.INTER_NEAREST,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0,
        )

    # ---- vehicles --------------------------------------------------------------------------------

    def _project(self, k: int, hw: np.ndarray) -> list[Projected]:
        """The vehicles in view, each where it is when its footprint centre's row is read."""
        out = []
        for v in self.vehicles:
            t = self.seen_at(v, k, hw)
            if t == self.camera.times[k]:
                p = self._place(v, v.positions[k], v.headings[k], hw, t)
            else:
                c, f = state_at(v, self.camera.times, t)
                p = self._place(v, c, f, self.camera.world_to_image_at(t), t)
            if p is not None:
                out.append(p)
        return out

    def seen_at(self, v: Vehicle, k: int, hw: np.ndarray) -> float:
        """When the sensor reads the row of vehicle ``v``'s centre in frame ``k`` (s): that row is
        where the vehicle is at that time, a fixed point found from the frame's time. A centre off
        the image takes its nearest row's time; one behind the camera the frame's time."""
        t = float(self.camera.times[k])
        if not self.camera.readout_s:
            return t
        c, hw_t = v.positions[k], hw
        for step in range(TIME_STEPS):
            uv = apply_homography(hw_t, c)
            if not np.isfinite(uv).all() or (hw_t[2] @ [c[0], c[1], 1.0]) <= 0:
                return float(self.camera.times[k])
            row = float(np.clip(self._to_sensor(uv)[0, 1], 0.0, self.spec.height - 1.0))
            t = float(self.camera.row_times(k, row))
            if step + 1 < TIME_STEPS:
                c, _f = state_at(v, self.camera.times, t)
                hw_t = self.camera.world_to_image_at(t)
        return t

    def _to_sensor(self, uv: np.ndarray) -> np.ndarray:
        """Where the lens images pinhole pixels ``uv`` (N, 2)."""
        return distort_points(uv, self.camera.intrinsics, self.lens)

    def _sprite_warp(self, p: Projected) -> np.ndarray:
        """The pinhole homography, then the one taking its footprint corners to the distorted ones."""
        if self.lens is None:
            return p.hw
        v = p.vehicle
        pinhole = apply_homography(p.hw, footprint(p.centre, p.heading, v.length_m / 2, v.width_m / 2))
        return four_point_homography(pinhole, p.uv) @ p.hw

    def _plane_warp(self, h: np.ndarray, corners: np.ndarray) -> np.ndarray:
        """The plane's pinhole homography ``h``, then the one taking the face's pinhole corners to
        the distorted ones (a solid's roof, as a flat sprite)."""
        if self.lens is None:
            return h
        pinhole = apply_homography(h, corners)
        return four_point_homography(pinhole, self._to_sensor(pinhole)) @ h


def state_at(v: Vehicle, times: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
    """Vehicle ``v``'s position and unit heading at time ``t``: linear between the frames' (``times``),
    extended along the first or last step beyond them."""
    n = len(times)
    if n < 2:
        return v.positions[0], v.headings[0]
    j = int(np.clip(np.searchsorted(times, t, side="right") - 1, 0, n - 2))
    a = (t - times[j]) / (times[j + 1] - times[j])
    c = v.positions[j] + a * (v.positions[j + 1] - v.positions[j])
    f = v.headings[j] + a * (v.headings[j + 1] - v.headings[j])
    return c, f / np.linalg.norm(f)


def four_point_homography(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The 3x3 homography taking 4 points ``src`` (4, 2) exactly onto ``dst`` (4, 2), solved in float64
    about the points' centroid and spread (``cv2.getPerspectiveTransform`` takes float32 points)."""
    src, dst = np.asarray(src, dtype=np.float64), np.asarray(dst, dtype=np.float64)

    def normaliser(pts: np.ndarray) -> np.ndarray:
        centre, scale = pts.mean(0), max(float(np.abs(pts - pts.mean(0)).max()), 1e-9)
        return np.array(
            [[1 / scale, 0.0, -centre[0] / scale], [0.0, 1 / scale, -centre[1] / scale], [0, 0, 1]]
        )

    ts, td = normaliser(src), normaliser(dst)
    xs, xd = apply_homography(ts, src), apply_homography(td, dst)
    a = np.zeros((8, 8))
    for i, ((x, y), (u, v)) in enumerate(zip(xs, xd, strict=True)):
        a[2 * i] = [x, y, 1.0, 0.0, 0.0, 0.0, -u * x, -u * y]
        a[2 * i + 1] = [0.0, 0.0, 0.0, x, y, 1.0, -v * x, -v * y]
    hn = np.append(np.linalg.solve(a, xd.reshape(8)), 1.0).reshape(3, 3)
    return np.linalg.inv(td) @ hn @ ts
