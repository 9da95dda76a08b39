"""Violation media: JPEG snapshots and short MP4 clips cut from a ring buffer of annotated frames.

The ring keeps the last few seconds of annotated frames, downscaled and JPEG-compressed so a
stream costs a few MB whatever its resolution. A clip spans ``pre`` seconds before the violation
start to ``post`` seconds after its end (as far as the ring reaches) and is written as H.264 MP4
(yuv420p, plays in browsers) by a background thread.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

log = logging.getLogger(__name__)


def fit_width(image: np.ndarray, max_width: int) -> np.ndarray:
    """Downscale to at most ``max_width`` pixels wide (even dimensions, for yuv420p encoders)."""
    h, w = image.shape[:2]
    if w > max_width:
        scale = max_width / w
        w, h = max_width, max(2, round(h * scale))
    w -= w % 2
    h -= h % 2
    if (w, h) != (image.shape[1], image.shape[0]):
        # INTER_AREA is only fast (and only needed against aliasing) at a 2x or larger reduction.
        interp = cv2.INTER_AREA if w * 2 <= image.shape[1] else cv2.INTER_LINEAR
        image = cv2.resize(image, (w, h), interpolation=interp)
    return image


def write_jpeg(path: Path, image: np.ndarray, quality: int = 90) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise ValueError("JPEG encoding failed")
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(buf.tobytes())
    tmp.replace(path)


@dataclass
class _RingFrame:
    timestamp_s: float
    jpeg: bytes


class FrameRing:
    """Last ``seconds`` of frames at most ``fps`` per second, stored as JPEG (thread-safe)."""

    def __init__(self, seconds: float, fps: float, max_width: int, quality: int = 80) -> None:
        self.seconds = seconds
        self.min_interval = 1.0 / fps
        self.max_width = max_width
        self.quality = quality
        self._frames: deque[_RingFrame] = deque()
        self._lock = threading.Lock()

    def due(self, timestamp_s: float) -> bool:
        """Whether a frame at this time would be kept (lets callers skip preparing it)."""
        with self._lock:
            return not self._frames or timestamp_s - self._frames[-1].timestamp_s >= self.min_interval * 0.95

    def add(self, timestamp_s: float, image: np.ndarray) -> bool:
        if not self.due(timestamp_s):
            return False
        small = fit_width(image, self.max_width)
        ok, buf = cv2.imencode(".jpg", small, [cv2.IMWRITE_JPEG_QUALITY, self.quality])
        if not ok:
            return False
        with self._lock:
            self._frames.append(_RingFrame(timestamp_s, buf.tobytes()))
            while self._frames and timestamp_s - self._frames[0].timestamp_s > self.seconds:
                self._frames.popleft()
        return True

    def window(self, start_s: float, end_s: float) -> list[_RingFrame]:
        with self._lock:
            return [f for f in self._frames if start_s <= f.timestamp_s <= end_s]

    @property
    def latest_time(self) -> float | None:
        with self._lock:
            return self._frames[-1].timestamp_s if self._frames else None

    def nbytes(self) -> int:
        with self._lock:
            return sum(len(f.jpeg) for f in self._frames)


def write_clip(
    path: Path, frames: list[_RingFrame], fps: float, preset: str = "superfast", crf: int = 27
) -> int:
    """Encode ring frames to an H.264 MP4 with their own timing (libx264 ``preset``, ``crf``);
    returns the frame count."""
    if not frames:
        raise ValueError("no frames for the clip")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".part.mp4")
    images = [cv2.imdecode(np.frombuffer(f.jpeg, np.uint8), cv2.IMREAD_COLOR) for f in frames]
    h, w = images[0].shape[:2]
    time_base = Fraction(1, 1000)
    t0 = frames[0].timestamp_s
    with av.open(str(tmp), mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=Fraction(round(fps * 1000), 1000))
        stream.width, stream.height = w, h
        stream.pix_fmt = "yuv420p"
        stream.time_base = time_base
        stream.codec_context.time_base = time_base
        # one encoder thread: clips are background work beside the live streams
        stream.options = {"preset": preset, "crf": str(crf), "movflags": "+faststart", "threads": "1"}
        last_pts = -1
        for f, img in zip(frames, images, strict=True):
            if img.shape[:2] != (h, w):
                img = cv2.resize(img, (w, h))
            vf = av.VideoFrame.from_ndarray(img, format="bgr24")
            pts = max(last_pts + 1, round((f.timestamp_s - t0) * 1000))
            vf.pts, vf.time_base, last_pts = pts, time_base, pts
            for packet in stream.encode(vf):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    tmp.replace(path)
    return len(frames)


@dataclass
class PendingClip:
    """A clip waiting for its post-roll frames."""

    violation_id: int
    path: Path
    start_s: float
    end_s: float  # violation end + post-roll
    done: threading.Event = field(default_factory=threading.Event)
    record: Future | None = None  # the engine's record being written (evidence packs; None: off)


def remove_partial_files(media_dir: Path) -> int:
    """Delete what a killed server left half written under the media dir: every media file is
    written as ``<name>.part.<ext>`` and renamed once complete (clips and source segments
    ``*.part.mp4``, evidence packs ``*.part.zip``); one walk finds them all. Returns how many."""
    removed = 0
    for path in media_dir.rglob("*.part.*"):
        try:
            path.unlink()
            removed += 1
        except OSError:
            log.warning("could not remove the partial file %s", path, exc_info=True)
    return removed
