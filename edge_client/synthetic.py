"""Synthetic drone footage for demos, benchmarks and tests: bright vehicles on a textured road.

A static textured background (so ego-motion finds an identity homography) with two lanes of
bright rectangles moving at known speeds, plus :class:`BrightBlobDetector`, an image detector
(``pipelines.motion.detector.ImageDetector``) that finds them by thresholding. With the default telemetry
(50 m, nadir, DJI Mini 4 Pro) one pixel is about 0.113 m at 640 px width, so the fast lane runs
at ~73 km/h and the slow lane at ~24 km/h: the fast cars break a 50 km/h limit, the slow ones do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import supervision as sv

from pipelines import telemetry
from pipelines.motion.detector import ImageDetector
from pipelines.types import Telemetry

# Telemetry matching the scene (see module docstring).
DEFAULT_ALTITUDE_M = 50.0
DEFAULT_PITCH_DEG = -90.0
DEFAULT_CAMERA = "DJI Mini 4 Pro"
DEFAULT_FOCAL_35MM = 24.0


@dataclass(frozen=True)
class Lane:
    y_frac: float  # lane centre as a fraction of the height
    speed_px_s: float  # at 640 px width; scaled with the width
    period_s: float  # a new vehicle enters every period
    phase_s: float = 0.0
    length_px: int = 40
    width_px: int = 18


DEFAULT_LANES = (Lane(0.33, 180.0, 4.0, 0.0), Lane(0.66, 60.0, 6.0, 1.5))


class SyntheticScene:
    def __init__(
        self, width: int = 640, height: int = 360, lanes: tuple[Lane, ...] = DEFAULT_LANES, seed: int = 7
    ):
        self.width, self.height, self.lanes = width, height, lanes
        self.scale = width / 640.0
        rng = np.random.default_rng(seed)
        noise = rng.integers(0, 255, (height, width), dtype=np.uint8)
        texture = cv2.GaussianBlur(noise, (0, 0), 2.0)
        texture = cv2.normalize(texture, None, 40, 150, cv2.NORM_MINMAX)
        self.background = cv2.cvtColor(texture, cv2.COLOR_GRAY2BGR)
        for lane in lanes:  # darker asphalt band under each lane
            y = int(lane.y_frac * height)
            band = self.background[max(0, y - int(20 * self.scale)) : y + int(20 * self.scale)]
            band[:] = (band.astype(np.int16) * 6 // 10).astype(np.uint8)

    def render(self, t: float) -> np.ndarray:
        img = self.background.copy()
        for lane in self.lanes:
            speed = lane.speed_px_s * self.scale
            length, wid = int(lane.length_px * self.scale), int(lane.width_px * self.scale)
            travel = (self.width + length) / speed  # seconds to cross
            y = int(lane.y_frac * self.height)
            k_last = math.floor((t - lane.phase_s) / lane.period_s)
            for k in range(k_last, k_last - int(travel / lane.period_s) - 2, -1):
                t0 = lane.phase_s + k * lane.period_s
                age = t - t0
                if age < 0 or age > travel:
                    continue
                x = int(-length + age * speed)
                cv2.rectangle(img, (x, y - wid // 2), (x + length, y + wid // 2), (250, 250, 250), -1)
        return img


class BrightBlobDetector(ImageDetector):
    """An image detector of bright blobs, class "car" (``__call__(image_bgr) -> sv.Detections``)."""

    def __init__(self, threshold: int = 200, min_area: int = 60) -> None:
        self.threshold, self.min_area = threshold, min_area
        self._kernel = np.ones((3, 3), np.uint8)

    def __call__(self, image: np.ndarray) -> sv.Detections:
        gray = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
        _, mask = cv2.threshold(gray, self.threshold, 255, cv2.THRESH_BINARY)
        mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, self._kernel)
        n, _, stats, _ = cv2.connectedComponentsWithStats(mask)
        boxes = [(x, y, x + w, y + h) for x, y, w, h, area in stats[1:n] if area >= self.min_area]
        if not boxes:
            return sv.Detections.empty()
        xyxy = np.array(boxes, dtype=np.float32)
        k = len(boxes)
        return sv.Detections(
            xyxy=xyxy,
            confidence=np.full(k, 0.9, dtype=np.float32),
            class_id=np.full(k, 2, dtype=int),
            data={"class_name": np.array(["car"] * k)},
        )


class SceneRoadSegmenter:
    """The scene's road mask (a ``pipelines.road_network.RoadSegmenter``): the whole frame, since the
    textured background is the road the lanes run on - the ground truth a road model would give
    here, for tests that need the road under the laser's point (``pipelines.rangefinder``) without
    running the U-Net on synthetic texture."""

    def __call__(self, image: np.ndarray) -> np.ndarray:
        return np.ones(image.shape[:2], np.float32)

    def segment(self, frame) -> np.ndarray:  # noqa: ANN001 - a pipelines.types.Frame
        return self(frame.image)


def write_video(path: str | Path, seconds: float, fps: int = 30, width: int = 640, height: int = 360) -> Path:
    """Write the scene as H.264 MP4 (the publisher's input in demos and tests)."""
    path = Path(path)
    scene = SyntheticScene(width, height)
    with av.open(str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        # WebRTC-friendly H.264: no B-frames, a keyframe every second (publish --passthrough relays it)
        stream.options = {"preset": "veryfast", "crf": "20", "bf": "0", "g": str(fps), "profile": "baseline"}
        for i in range(int(round(seconds * fps))):
            frame = av.VideoFrame.from_ndarray(scene.render(i / fps), format="bgr24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def write_srt(
    path: str | Path,
    seconds: float,
    fps: int = 30,
    altitude_m: float = DEFAULT_ALTITUDE_M,
    pitch_deg: float = DEFAULT_PITCH_DEG,
    focal_35mm: float = DEFAULT_FOCAL_35MM,
    lat: float = 59.3293,
    lon: float = 18.0686,
) -> Path:
    """A DJI-style SRT sidecar for the scene, one subtitle per frame (``pipelines.telemetry.write_srt``).

    Values are rounded as a DJI drone writes them (position to 6 decimals, altitudes to mm, pitch
    to 0.1 deg, focal length to 0.01 mm); the drone drifts north by 1e-7 deg a frame.
    """
    samples = [
        Telemetry(
            timestamp_s=i / fps,
            altitude_m=round(altitude_m, 3),
            abs_altitude_m=round(altitude_m + 20, 3),
            gimbal_pitch_deg=round(pitch_deg, 1),
            gimbal_yaw_deg=0.0,
            focal_length_35mm=round(focal_35mm, 2),
            latitude=round(lat + i * 1e-7, 6),
            longitude=round(lon, 6),
        )
        for i in range(int(round(seconds * fps)))
    ]
    return telemetry.write_srt(samples, path, start_time=datetime(2025, 6, 1, 12, 0, 0))
