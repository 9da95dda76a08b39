"""The drone's camera over a flight: intrinsics, lens, time, position, yaw and altitude of every
frame (and at any instant between frames, for the rows of a rolling shutter), the world -> image
homographies and the telemetry a DJI drone would record.

The homographies are the ideal pinhole camera's (before the lens, :attr:`CameraPath.lens`) at the
frame's timestamp, which is its middle row's time (:func:`pipelines.lens.row_time_offsets`); so are
:meth:`CameraPath.image_to_world`, :meth:`CameraPath.gsd_at` and :meth:`CameraPath.visible_frames`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from eval.simulate.geometry import GroundSurface, plane_homography, world_to_camera_ground
from eval.simulate.spec import FlightSpec, SimulationError
from pipelines.camera import equivalent_35mm, get_profile, intrinsics_for
from pipelines.geometry import apply_homography, ground_to_image_homography
from pipelines.lens import LensModel, row_time_offsets, undistort_points
from pipelines.types import Telemetry

EARTH_RADIUS_M = 6_378_137.0


class CameraPath:
    """Where the camera is and what it sees in each frame ``k`` (0-based).

    Raises :class:`SimulationError` for a path that cannot be rendered (the drone below 1 m, or the
    image top, through the lens, too close to the horizon). ``surface``: the ground, a graded plane
    (:class:`GroundSurface`); None: flat at the take-off level. The altitude is above the take-off level.
    """

    def __init__(self, spec: FlightSpec, surface: GroundSurface | None = None):
        self.spec = spec
        self.surface = surface
        profile = get_profile(spec.camera)
        self.profile = profile
        self.intrinsics = intrinsics_for(profile, spec.width, spec.height, spec.focal_length_mm)
        self.focal_mm = profile.focal_length_mm if spec.focal_length_mm is None else spec.focal_length_mm
        coeffs = spec.lens_distortion
        self._lens = None if coeffs is None else LensModel(*coeffs, source="flight spec")
        n = spec.n_frames
        self.times = np.array([float(Fraction(k) / spec.fps_fraction) for k in range(n)])
        drift = np.asarray(spec.drift_mps, dtype=np.float64)
        self.drone_xy = self.times[:, None] * drift[None, :]
        self.yaw = spec.yaw_deg + spec.yaw_rate_dps * self.times
        self.altitude = spec.altitude_m + spec.climb_rate_mps * self.times
        if self.altitude.min() <= 1.0:
            raise SimulationError("the drone would descend below 1 m; lower climb_rate_mps")
        tilt = 90.0 + spec.pitch_deg
        top_ray = tilt + math.degrees(math.atan((self.intrinsics.cy - self._top_row()) / self.intrinsics.fy))
        if top_ray > 80.0:
            raise SimulationError(
                f"the image top is {top_ray:.0f} deg from nadir{' through the lens' if self.distorts else ''}, "
                "too close to the horizon (limit 80): steepen the pitch or lower the focal length"
                + (" or the lens distortion" if self.distorts else "")
            )
        self._h0_cache: dict[float, np.ndarray] = {}
        self._h_all: np.ndarray | None = None

    # ---- lens and shutter --------------------------------------------------------------------------

    @property
    def lens(self) -> LensModel | None:
        """The lens the frames are seen through (``spec.lens_distortion``); None: an ideal pinhole."""
        return self._lens

    @property
    def distorts(self) -> bool:
        """Whether the lens moves any pixel (a lens of zeros is the pinhole)."""
        return self._lens is not None and not self._lens.identity

    @property
    def readout_s(self) -> float:
        """Rolling-shutter readout time (s): the top row is read ``readout_s / 2`` before the frame's
        timestamp, the bottom row as much after it; 0 for a global shutter."""
        return self.spec.readout_ms / 1000.0

    def row_times(self, k: int, rows: np.ndarray) -> np.ndarray:
        """When image rows ``rows`` (pixel ``v``, any shape) of frame ``k`` were read (s)."""
        return self.times[k] + row_time_offsets(rows, self.spec.height, self.readout_s)

    def sensor_border(self, per_side: int = 16) -> np.ndarray:
        """Pinhole pixels (N, 2) the border of the sensor sees (through the lens, when there is one)."""
        w, h = self.spec.width, self.spec.height
        s = np.linspace(0.0, 1.0, per_side, endpoint=False)
        zero, one = np.zeros_like(s), np.ones_like(s)
        top, right = np.column_stack([s * w, zero]), np.column_stack([one * w, s * h])
        bottom, left = np.column_stack([(1 - s) * w, one * h]), np.column_stack([zero, (1 - s) * h])
        edge = np.vstack([top, right, bottom, left])
        return undistort_points(edge, self.intrinsics, self._lens)

    def _top_row(self) -> float:
        """The pinhole row the top of the sensor sees (0 without a lens; above it for a barrel lens)."""
        if not self.distorts:
            return 0.0
        top = np.column_stack([np.linspace(0.0, self.spec.width, 33), np.zeros(33)])
        return float(undistort_points(top, self.intrinsics, self._lens)[:, 1].min())

    # ---- the pose at any instant -------------------------------------------------------------------

    def pose_at(self, t: np.ndarray | float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The drone at times ``t`` (s, any shape S): position (S + (2,)) in world metres, camera yaw
        (S, compass degrees) and altitude (S, m); the formulas of the frames' (``times``) own."""
        t = np.asarray(t, dtype=np.float64)
        drift = np.asarray(self.spec.drift_mps, dtype=np.float64)
        yaw = self.spec.yaw_deg + self.spec.yaw_rate_dps * t
        altitude = self.spec.altitude_m + self.spec.climb_rate_mps * t
        return t[..., None] * drift, yaw, altitude

    def world_to_image_at(self, t: float) -> np.ndarray:
        """3x3 homography: world metres -> pinhole image pixels of the camera at time ``t`` (s); at a
        frame's time it is :meth:`world_to_image` of that frame."""
        xy, yaw, altitude = self.pose_at(float(t))
        if altitude <= 0.0:
            raise SimulationError(f"the drone is below the ground at t={t:g} s")
        key = round(float(altitude), 6)  # as _h0 rounds it; not cached: every instant has its own
        if self.surface is not None:
            return self._plane(key, world_to_camera_ground(xy, float(yaw)))
        h0 = self._h0_cache.get(key)
        if h0 is None:
            h0 = ground_to_image_homography(self.intrinsics, key, self.spec.pitch_deg)
        return h0 @ world_to_camera_ground(xy, float(yaw))

    def _h0(self, altitude: float) -> np.ndarray:
        key = round(float(altitude), 6)
        if key not in self._h0_cache:
            self._h0_cache[key] = ground_to_image_homography(self.intrinsics, key, self.spec.pitch_deg)
        return self._h0_cache[key]

    def _plane(self, altitude: float, world_to_ground: np.ndarray, z_m: float = 0.0) -> np.ndarray:
        return plane_homography(
            self.intrinsics, altitude, self.spec.pitch_deg, world_to_ground, self.surface, z_m
        )

    def world_to_image(self, k: int) -> np.ndarray:
        """3x3 homography: world metres -> image pixels of frame ``k`` (on the ground's surface)."""
        to_ground = world_to_camera_ground(self.drone_xy[k], float(self.yaw[k]))
        if self.surface is not None:
            return self._plane(round(float(self.altitude[k]), 6), to_ground)
        return self._h0(self.altitude[k]) @ to_ground

    def image_to_world(self, k: int, uv: np.ndarray) -> np.ndarray:
        """Ground points (N, 2) seen at image pixels ``uv`` (N, 2) of frame ``k``."""
        return apply_homography(np.linalg.inv(self.world_to_image(k)), uv)

    def gsd_at(self, k: int, uv: tuple[float, float]) -> float:
        """Ground sampling distance (metres per pixel) at pixel ``uv`` of frame ``k``."""
        p = self.image_to_world(k, np.array([uv, (uv[0] + 1, uv[1]), (uv[0], uv[1] - 1)], float))
        return float(math.sqrt(np.linalg.norm(p[1] - p[0]) * np.linalg.norm(p[2] - p[0])))

    def frame_centre(self, k: int) -> np.ndarray:
        """Ground point at the image centre of frame ``k``."""
        return self.image_to_world(k, np.array([[self.spec.width / 2, self.spec.height / 2]]))[0]

    def visible_frames(self, pos: np.ndarray) -> np.ndarray:
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

    def telemetry(self) -> list[Telemetry]:
        """One sample per frame: altitude, gimbal pitch and yaw, focal length, GPS position."""
        spec = self.spec
        lat0, lon0 = math.radians(spec.latitude), spec.longitude
        out = []
        for k, t in enumerate(self.times):
            east, north = self.drone_xy[k]
            lat = spec.latitude + math.degrees(north / EARTH_RADIUS_M)
            lon = lon0 + math.degrees(east / (EARTH_RADIUS_M * math.cos(lat0)))
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
