"""The publisher's video: sources (a file, a frame folder, the synthetic scene), checked before a
stream starts, and the WebRTC tracks that play them in real time (decoded and re-encoded, or the
file's own H.264 relayed as a drone app does)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from pipelines.errors import AirPatrolError
from pipelines.sources import open_source

log = logging.getLogger(__name__)

VIDEO_CLOCK_RATE = 90000
SYNTHETIC = "synthetic"


class PublishError(AirPatrolError):
    """The server refused the stream, could not be reached, or the input cannot be streamed; the
    message says why."""


# The synthetic scene's size range: an encoder and a WebRTC peer handle it, and memory stays small.
SYNTHETIC_MIN_SIDE, SYNTHETIC_MAX_SIZE = 64, (3840, 2160)


def synthetic_size(video: str | Path) -> tuple[int, int] | None:
    """``synthetic`` -> (640, 360); ``synthetic:1280x720`` -> (1280, 720); a path -> None.

    Raises :class:`PublishError` for a size that cannot be streamed (odd, tiny or beyond 4K)."""
    text = str(video)
    if text == SYNTHETIC:
        return 640, 360
    if not text.startswith(SYNTHETIC + ":"):
        return None
    try:
        w, h = (int(v) for v in text.split(":", 1)[1].lower().split("x"))
    except ValueError as exc:
        raise PublishError(f"synthetic size must look like synthetic:1280x720, got {text!r}") from exc
    max_w, max_h = SYNTHETIC_MAX_SIZE
    if not (SYNTHETIC_MIN_SIDE <= w <= max_w and SYNTHETIC_MIN_SIDE <= h <= max_h) or w % 2 or h % 2:
        raise PublishError(
            f"synthetic size {w}x{h} cannot be streamed: even sides from {SYNTHETIC_MIN_SIDE} "
            f"up to {max_w}x{max_h}"
        )
    return w, h


def check_video(video: str | Path) -> None:
    """Fail now, with one clear line, for a video that cannot be streamed: missing, empty, not a
    video, or with no decodable first frame (rather than a traceback once the peer is connected)."""
    if synthetic_size(video) is not None:
        return
    path = Path(video)
    if not path.exists():
        raise PublishError(f"video not found: {video}")
    if path.is_file() and path.stat().st_size == 0:
        raise PublishError(f"video {video} is empty (0 bytes)")
    try:
        first = next(iter_frames(path, max_frames=1), None)
    except AirPatrolError as exc:
        raise PublishError(f"cannot stream {video}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - the decoder's own errors, whatever they are
        raise PublishError(
            f"cannot stream {video}: not a readable video ({type(exc).__name__}: {exc})"
        ) from exc
    if first is None:
        raise PublishError(f"cannot stream {video}: it has no video frames")


def iter_frames(path: str | Path, max_frames: int | None = None) -> Iterator[tuple[float, np.ndarray]]:
    """(timestamp_s, BGR image) of a video file or frame folder (via ``pipelines.sources``) or synthetic."""
    size = synthetic_size(path)
    if size is not None:
        from edge_client.synthetic import SyntheticScene

        scene = SyntheticScene(*size)
        i = 0
        while max_frames is None or i < max_frames:
            yield i / 30.0, scene.render(i / 30.0)
            i += 1
        return
    for frame in open_source(str(path), max_frames=max_frames):
        yield frame.timestamp_s, frame.image


class _RealTimeTrack(MediaStreamTrack):
    """What both publisher tracks share: a wall clock that sends video time ``t`` at
    ``start + t / speed``, the end (``max_seconds``, end of file), counters and ``on_frame``."""

    kind = "video"

    def __init__(
        self,
        *,
        loop_playback: bool,
        max_seconds: float | None,
        on_frame: Callable[[float, float], None] | None,
        speed: float = 1.0,
    ) -> None:
        super().__init__()
        self._loop_playback = loop_playback
        self._max_seconds = max_seconds
        self._on_frame = on_frame
        self._speed = speed
        self._start: float | None = None
        self._offset = 0.0  # video time added per completed loop
        self._last_t = 0.0
        self.sent = 0
        self.skipped = 0  # frames left out to stay in real time
        self.finished = asyncio.Event()
        self.error: str | None = None  # the source failed (a damaged file read up to a point)

    def _ensure_live(self) -> None:
        if self.readyState != "live":
            raise MediaStreamError

    def _stop_if(self, over: bool) -> None:
        """End the track (MediaStreamError) when the source or the allowed time is over."""
        if over:
            self._end()
            raise MediaStreamError

    def _past_max(self, t: float) -> bool:
        return self._max_seconds is not None and t > self._max_seconds

    def _delay(self, t: float) -> float:
        """Seconds until video time ``t`` is due (negative: late)."""
        now = time.monotonic()
        if self._start is None:
            self._start = now - t / self._speed
        return self._start + t / self._speed - now

    def _loop_offset(self) -> float:
        return self._last_t + 1.0 / 30.0

    def _sent(self, source_ts: float, t: float) -> None:
        self._last_t = t
        self.sent += 1
        if self._on_frame is not None:
            self._on_frame(source_ts, time.time())

    def _source_failed(self, exc: Exception) -> None:
        """The source broke off: remember why (the publisher reports it); the track ends."""
        self.error = f"the video could not be read after {self.sent} frames: {exc}"
        log.warning("%s", self.error)

    def _end(self) -> None:
        self.finished.set()
        self.stop()


class PlaybackTrack(_RealTimeTrack):
    """Plays frames in real time; ``on_frame(video_time_s, capture_wall_s)`` fires as each is sent."""

    def __init__(
        self,
        frames: Callable[[], Iterator[tuple[float, np.ndarray]]],
        *,
        loop_playback: bool = False,
        max_seconds: float | None = None,
        speed: float = 1.0,
        on_frame: Callable[[float, float], None] | None = None,
    ) -> None:
        super().__init__(loop_playback=loop_playback, max_seconds=max_seconds, on_frame=on_frame, speed=speed)
        self._make = frames
        self._it = frames()
        self._t0: float | None = None

    async def _next(self) -> tuple[float, np.ndarray] | None:
        try:
            item = await asyncio.to_thread(next, self._it, None)
            if item is None and self._loop_playback and self.sent:
                self._offset = self._loop_offset()
                self._it = self._make()
                self._t0 = None
                item = await asyncio.to_thread(next, self._it, None)
        except Exception as exc:  # noqa: BLE001 - a damaged file: end the stream and say why
            return self._source_failed(exc)
        return item

    async def recv(self) -> av.VideoFrame:
        self._ensure_live()
        while True:
            item = await self._next()
            self._stop_if(item is None)
            ts, image = item
            if self._t0 is None:
                self._t0 = ts
            t = self._offset + (ts - self._t0)
            self._stop_if(self._past_max(t))
            delay = self._delay(t)
            # Like a live camera: when the encoder falls behind, skip frames instead of sending late ones.
            if delay > -0.1 or self.sent == 0:
                break
            self.skipped += 1
        if delay > 0:
            await asyncio.sleep(delay)
        frame = av.VideoFrame.from_ndarray(image, format="bgr24")
        frame.pts = int(round(t * VIDEO_CLOCK_RATE))
        frame.time_base = Fraction(1, VIDEO_CLOCK_RATE)
        self._sent(ts, t)
        return frame


class PassthroughTrack(_RealTimeTrack):
    """Relays a file's H.264 packets as they are - no decoding, no re-encoding - in real time.

    This is what a drone app does with the camera's own H.264 stream, and it keeps the publisher's
    CPU out of server benchmarks. The stream must have no B-frames (WebRTC sends frames in order):
    encode with ``-profile:v baseline`` or ``-bf 0``. MP4/MOV/MKV (length-prefixed) and MPEG-TS /
    raw Annex B inputs both work (``h264_mp4toannexb``).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        loop_playback: bool = False,
        max_seconds: float | None = None,
        on_frame: Callable[[float, float], None] | None = None,
    ) -> None:
        super().__init__(loop_playback=loop_playback, max_seconds=max_seconds, on_frame=on_frame)
        from av.bitstream import BitStreamFilterContext

        try:
            self._container = av.open(str(path))
        except (av.error.FFmpegError, FileNotFoundError) as exc:
            raise PublishError(f"cannot open video {path}: {exc}") from exc
        if not self._container.streams.video:
            raise PublishError(f"{path} has no video stream")
        self._stream = self._container.streams.video[0]
        codec = self._stream.codec_context
        if codec.name != "h264":
            raise PublishError(f"--passthrough needs H.264 video, {path} holds {codec.name}")
        if codec.has_b_frames:
            raise PublishError(f"{path} has B-frames; WebRTC needs H.264 without them (encode with -bf 0)")
        self._bsf = BitStreamFilterContext("h264_mp4toannexb", self._stream)
        self._packets = self._demux()

    def _demux(self) -> Iterator[av.Packet]:
        for packet in self._container.demux(self._stream):
            if packet.size == 0 or packet.pts is None:
                continue
            yield from self._bsf.filter(packet)

    def _next(self) -> av.Packet | None:
        try:
            packet = next(self._packets, None)
            if packet is None and self._loop_playback and self.sent:
                self._offset = self._loop_offset()
                self._container.seek(0)
                self._packets = self._demux()
                packet = next(self._packets, None)
        except Exception as exc:  # noqa: BLE001 - a damaged file: end the stream and say why
            return self._source_failed(exc)
        return packet

    async def recv(self) -> av.Packet:
        self._ensure_live()
        packet = self._next()
        self._stop_if(packet is None)
        ts = float(packet.pts * packet.time_base)
        t = self._offset + ts
        self._stop_if(self._past_max(t))
        delay = self._delay(t)
        if delay > 0:
            await asyncio.sleep(delay)
        packet.pts = int(round(t / packet.time_base))
        packet.dts = packet.pts
        self._sent(ts, t)
        return packet

    def stop(self) -> None:
        super().stop()
        with contextlib.suppress(Exception):
            self._container.close()
