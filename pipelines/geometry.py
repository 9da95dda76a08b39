"""Ground-plane geometry: ground sampling distance and the image <-> ground homography.

Conventions
-----------
World frame (metres): origin on the ground directly below the camera, Z up, Y the horizontal
direction the camera looks towards (image "up" at nadir), X to the image's right.
Gimbal pitch follows DJI: -90 deg is nadir, 0 deg is the horizon. Image pixels: u right, v down.
All functions are pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.lens import LensModel, row_time_offsets, undistort_points
from pipelines.types import Intrinsics
from pipelines.vehicle_height import step_factor


def gsd_m_per_px(
    altitude_m: float, focal_length_mm: float, sensor_width_mm: float, image_width_px: int
) -> float:
    """Ground sampling distance (metres per pixel) of a nadir camera at the image centre."""
    if altitude_m <= 0 or focal_length_mm <= 0 or sensor_width_mm <= 0 or image_width_px <= 0:
        raise ValueError("altitude, focal length, sensor width and image width must be positive")
    return altitude_m * sensor_width_mm / (focal_length_mm * image_width_px)


def camera_rotation(pitch_deg: float) -> np.ndarray:
    """World-from-camera rotation (columns: camera x, y, z axes in world coordinates)."""
    if not -90.0 - 1e-9 <= pitch_deg < 0.0:
        raise ValueError(f"gimbal pitch must be in [-90, 0) degrees (camera looking down), got {pitch_deg}")
    tilt = math.radians(90.0 + pitch_deg)  # 0 at nadir
    s, c = math.sin(tilt), math.cos(tilt)
    x_c = (1.0, 0.0, 0.0)
    y_c = (0.0, -c, -s)
    z_c = (0.0, s, -c)
    return np.array([x_c, y_c, z_c], dtype=np.float64).T


def ground_to_image_homography(intrinsics: Intrinsics, altitude_m: float, pitch_deg: float) -> np.ndarray:
    """3x3 homography mapping ground (X, Y, 1) in metres to image pixels (u, v, 1)."""
    if altitude_m <= 0:
        raise ValueError(f"altitude must be positive, got {altitude_m}")
    r = camera_rotation(pitch_deg).T  # camera-from-world
    centre = np.array([0.0, 0.0, altitude_m])
    t = -r @ centre
    h = intrinsics.matrix @ np.column_stack([r[:, 0], r[:, 1], t])
    return h / h[2, 2] if abs(h[2, 2]) > 1e-12 else h


def image_to_ground_homography(intrinsics: Intrinsics, altitude_m: float, pitch_deg: float) -> np.ndarray:
    """3x3 homography mapping image pixels to ground metres (inverse of the above)."""
    h = np.linalg.inv(ground_to_image_homography(intrinsics, altitude_m, pitch_deg))
    return h / h[2, 2] if abs(h[2, 2]) > 1e-12 else h


def apply_homography(h: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Apply a 3x3 homography to an (N, 2) array; points mapped to infinity become NaN."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    homog = np.column_stack([pts, np.ones(len(pts))]) @ h.T
    w = homog[:, 2:3]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = homog[:, :2] / w
    out[np.abs(w[:, 0]) < 1e-12] = np.nan
    return out


EARTH_RADIUS_M = 6_371_008.8  # mean radius (IUGG); ample for offsets of a few hundred metres


def offsets_to_latlon(
    lat_deg: float, lon_deg: float, heading_deg: float, xy_m: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Latitudes and longitudes of ground offsets ``xy_m`` (N, 2) from the point below the drone, in
    this module's world frame (X to the image's right, Y along the camera's horizontal viewing
    direction); ``heading_deg`` is that viewing direction as a compass bearing (DJI gimbal yaw: 0
    north, 90 east). Local flat-earth (equirectangular) offsets: centimetre-exact over the few
    hundred metres a drone camera sees."""
    xy = np.asarray(xy_m, dtype=np.float64).reshape(-1, 2)
    psi = math.radians(heading_deg)
    east = xy[:, 0] * math.cos(psi) + xy[:, 1] * math.sin(psi)
    north = -xy[:, 0] * math.sin(psi) + xy[:, 1] * math.cos(psi)
    lat = lat_deg + np.degrees(north / EARTH_RADIUS_M)
    lon = lon_deg + np.degrees(east / (EARTH_RADIUS_M * math.cos(math.radians(lat_deg))))
    return lat, lon


def geolocate(
    drone_lat_deg: float, drone_lon_deg: float, heading_deg: float, ground_xy_m: tuple[float, float]
) -> tuple[float, float]:
    """Latitude/longitude of one ground point seen by the camera (:func:`offsets_to_latlon`)."""
    lat, lon = offsets_to_latlon(drone_lat_deg, drone_lon_deg, heading_deg, np.array([ground_xy_m]))
    return float(lat[0]), float(lon[0])


@dataclass(frozen=True, slots=True, eq=False)
class GroundProjector:
    """Image -> ground mapping of one frame (flat-ground model). ``lens``: the video's distortion
    (:mod:`pipelines.lens`), undone on every point before it is projected; ``readout_s``: the
    sensor's rolling-shutter readout, for :meth:`row_times`."""

    intrinsics: Intrinsics
    altitude_m: float
    pitch_deg: float
    image_to_ground: np.ndarray
    lens: LensModel | None = None
    readout_s: float = 0.0
    # the frame's terrain (pipelines.terrain.TerrainView): every ground point moved to where its ray
    # meets the terrain model; None: flat ground at the altitude
    terrain: Any = None

    @classmethod
    def create(
        cls,
        intrinsics: Intrinsics,
        altitude_m: float,
        pitch_deg: float,
        lens: LensModel | None = None,
        readout_s: float = 0.0,
    ) -> GroundProjector:
        h = image_to_ground_homography(intrinsics, altitude_m, pitch_deg)
        return cls(
            intrinsics, altitude_m, pitch_deg, h, None if lens is None or lens.identity else lens, readout_s
        )

    def to_ground(self, points: np.ndarray, ideal: bool = False) -> np.ndarray:
        """(N, 2) image pixels -> (N, 2) ground metres; pixels at or above the horizon become NaN.
        ``ideal``: the points are already the pinhole's (undistorted: pipelines.motion.sensor_motion)."""
        if ideal:
            pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        else:
            pts = undistort_points(points, self.intrinsics, self.lens)
        out = apply_homography(self.image_to_ground, pts)
        out[~self._ideal_below_horizon(pts)] = np.nan
        return out if self.terrain is None else self.terrain.lift(out, self.altitude_m)

    def ground_step(
        self,
        now_px: np.ndarray,
        then_px: np.ndarray,
        point_height_m: np.ndarray | None = None,
        ideal: bool = False,
        camera_step_m: np.ndarray | None = None,
    ) -> np.ndarray:
        """(N, 2) ground displacements (m) from pixels ``then_px`` to ``now_px`` (N, 2 each): over a
        terrain model, the way along the ground (the horizontal step times
        :meth:`pipelines.terrain.TerrainView.slope_factor`: a speed up or down a grade is the speed
        along it, sqrt(1 + g^2) of its horizontal run); over flat ground the horizontal step.
        ``point_height_m`` (N,): how far above the road the measured points are (a vehicle's box and
        flow, :mod:`pipelines.vehicle_height`): each step times ``1 - h / H``, H the camera's height
        above the ground there (NaN where the camera is too low over the point); and, a raised point
        seeing the camera's own motion as a parallax of ``h / H`` of it, plus ``h / H`` of
        ``camera_step_m`` (N, 2: how far the camera moved over the ground meanwhile, in this frame's
        ground coordinates: :meth:`nadir_px` carried; None: it hovered). ``ideal``: both points are
        already the pinhole's (:meth:`to_ground`)."""
        then, now = self.to_ground(then_px, ideal), self.to_ground(now_px, ideal)
        step = now - then
        if self.terrain is not None:
            step = step * self.terrain.slope_factor(then, now, self.altitude_m)[:, None]
        if point_height_m is None:
            return step
        factor = step_factor(point_height_m, self.height_above_ground((then + now) / 2.0))
        out = step * factor[:, None]
        if camera_step_m is not None:
            camera = np.asarray(camera_step_m, dtype=np.float64).reshape(-1, 2)
            out = out + np.where(np.isfinite(camera), camera, 0.0) * (1.0 - factor)[:, None]
        return out

    def nadir_px(self) -> np.ndarray:
        """(2,) the pinhole pixel of the ground point below the camera (off the image unless it
        looks straight down; NaN where the camera looks near the horizon)."""
        h = np.linalg.inv(self.image_to_ground)
        out = apply_homography(h, np.zeros((1, 2)))[0]
        return out if np.all(np.abs(out) < 1e6) else np.full(2, np.nan)

    def height_above_ground(self, ground_xy: np.ndarray) -> np.ndarray:
        """(N,) the camera's height (m) above the ground at ground points (:meth:`to_ground`'s): the
        altitude over flat ground, over a terrain model the height above the model there (NaN off it)."""
        xy = np.asarray(ground_xy, dtype=np.float64).reshape(-1, 2)
        if self.terrain is None:
            return np.full(len(xy), float(self.altitude_m))
        return self.terrain.height_above(xy, self.altitude_m)

    def row_times(self, points: np.ndarray) -> np.ndarray:
        """When each point's image row was read, relative to the frame's timestamp (s; zeros without
        a readout time): the time its position belongs to (pipelines.lens)."""
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        return row_time_offsets(pts[:, 1], self.intrinsics.height, self.readout_s)

    def below_horizon(self, points: np.ndarray) -> np.ndarray:
        """True where the pixel's viewing ray hits the ground in front of the camera."""
        return self._ideal_below_horizon(undistort_points(points, self.intrinsics, self.lens))

    def _ideal_below_horizon(self, points: np.ndarray) -> np.ndarray:
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        k = self.intrinsics
        rays_c = np.column_stack([(pts[:, 0] - k.cx) / k.fx, (pts[:, 1] - k.cy) / k.fy, np.ones(len(pts))])
        z_world = rays_c @ camera_rotation(self.pitch_deg)[2, :]
        return z_world < -1e-6

    @property
    def nadir_gsd_m_per_px(self) -> float:
        """Metres per pixel at the image centre for a camera pointing straight down."""
        return self.altitude_m / self.intrinsics.fx

    def gsd_at(self, points: np.ndarray) -> np.ndarray:
        """Local ground size of one pixel (metres, geometric mean of the two axes) at each point."""
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        g0, gx, gy = np.split(self.to_ground(np.vstack([pts, pts + [1.0, 0.0], pts + [0.0, 1.0]])), 3)
        return np.sqrt(np.linalg.norm(gx - g0, axis=1) * np.linalg.norm(gy - g0, axis=1))
