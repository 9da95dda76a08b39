"""A simulated DJI Pilot 2 / DJI Fly: pushes a recorded flight over RTMP in real time.

The video is encoded as the DJI apps send it: H.264 in FLV, a keyframe every second, no B-frames
(libx264 ``zerolatency``), each frame's FLV timestamp its time in the flight. The telemetry of
the flight (its SRT) goes out separately, as DJI Cloud API OSD messages over MQTT
(:mod:`edge_client.osd_publish`), since RTMP carries none.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from edge_client.tracks import PublishError, check_video, iter_frames

log = logging.getLogger(__name__)

FLV_TIME_BASE = Fraction(1, 1000)
# FFmpeg's RTMP output does not wait for the server's answer to "publish": a refused publisher
# learns it when its first writes fail, within a second.
REFUSED_WITHIN_S = 1.5


@dataclass
class RtmpPublishResult:
    frames_sent: int = 0
    duration_s: float = 0.0
    first_frame_wall: float | None = None  # time.time() when the first frame was handed over
    error: str | None = None

    def summary(self) -> dict[str, object]:
        return {
            "frames_sent": self.frames_sent,
            "duration_s": round(self.duration_s, 2),
            "first_frame_wall": self.first_frame_wall,
            "error": self.error,
        }


def publish_rtmp(
    video: str | Path,
    url: str,
    *,
    max_seconds: float | None = None,
    speed: float = 1.0,
    bitrate_kbps: int = 4000,
    max_width: int | None = None,
    passthrough: bool = False,
    on_frame: Callable[[float, float], None] | None = None,
    stop: threading.Event | None = None,
) -> RtmpPublishResult:
    """Push ``video`` (file, frame folder or ``synthetic``) to ``url`` in real time (``speed`` x).

    ``passthrough``: relay the file's H.264 packets as they are (no encoding: what an app does with
    the drone's own stream; the file must be H.264 without B-frames). ``on_frame(video_time_s,
    wall_time)`` is called as each frame is sent (an OSD publisher stamps its messages from it).
    Errors the publisher cannot get past (server refused the key, network) are returned in
    ``error``; a video that cannot be read raises :class:`PublishError`.
    """
    check_video(video)
    source = _packets(video) if passthrough else _encoded(video, bitrate_kbps, max_width)
    result = RtmpPublishResult()
    try:
        container = av.open(url, mode="w", format="flv", timeout=(10.0, 10.0))
    except av.error.FFmpegError as exc:
        result.error = f"cannot publish to {_redact(url)}: {exc.strerror or exc} (no RTMP server there?)"
        return result
    t_start = time.time()
    try:
        for t, packets in source(container):
            if (stop is not None and stop.is_set()) or (max_seconds is not None and t > max_seconds):
                break
            if result.first_frame_wall is None:
                t_start = time.time()  # the server admitted the key: real time starts now
            delay = t_start + t / speed - time.time()
            if delay > 0:
                time.sleep(delay)
            wall = time.time()
            for packet in packets():
                container.mux(packet)
            if result.first_frame_wall is None:
                result.first_frame_wall = wall
            result.frames_sent += 1
            if on_frame is not None:
                on_frame(t, wall)
    except av.error.FFmpegError as exc:
        if result.first_frame_wall is None or time.time() - result.first_frame_wall < REFUSED_WITHIN_S:
            result.error = (
                "the RTMP server refused the stream (a wrong or revoked key, a key in use, or the server "
                f"is full: see its log): {exc.strerror or exc}"
            )
        else:
            result.error = (
                f"the RTMP server closed the stream after {result.frames_sent} frames: {exc.strerror or exc}"
            )
    finally:
        try:
            container.close()
        except av.error.FFmpegError:
            log.debug("closing the RTMP output failed", exc_info=True)
    result.duration_s = time.time() - t_start
    return result


# A source yields (video time from 0, a callable giving that frame's packets, encoded when called)
Source = Callable[[av.container.OutputContainer], Iterator[tuple[float, Callable[[], list[av.Packet]]]]]


def _encoded(video: str | Path, bitrate_kbps: int, max_width: int | None) -> Source:
    def frames(
        container: av.container.OutputContainer,
    ) -> Iterator[tuple[float, Callable[[], list[av.Packet]]]]:
        stream, t0 = None, 0.0
        for t, image in iter_frames(video):
            if max_width and image.shape[1] > max_width:
                h = round(image.shape[0] * max_width / image.shape[1])
                image = cv2.resize(image, (max_width, h), interpolation=cv2.INTER_AREA)
            if stream is None:
                stream, t0 = _video_stream(container, image, bitrate_kbps), t
            frame = av.VideoFrame.from_ndarray(
                np.ascontiguousarray(image[: stream.height, : stream.width]), format="bgr24"
            )
            frame.pts, frame.time_base = round((t - t0) * 1000), FLV_TIME_BASE
            yield t - t0, lambda s=stream, f=frame: list(s.encode(f))
        if stream is not None:  # zerolatency, no B-frames: nothing is held back, but flush anyway
            for packet in stream.encode():
                container.mux(packet)

    return frames


def _packets(video: str | Path) -> Source:
    def packets(
        container: av.container.OutputContainer,
    ) -> Iterator[tuple[float, Callable[[], list[av.Packet]]]]:
        with av.open(str(video)) as src:
            vs = src.streams.video[0]
            if vs.codec_context.name != "h264" or vs.codec_context.has_b_frames:
                raise PublishError(f"{video}: passthrough relays H.264 without B-frames (encode with -bf 0)")
            out = container.add_stream_from_template(vs)
            t0 = None
            for packet in src.demux(vs):
                if packet.dts is None or packet.pts is None:
                    continue
                t = float(packet.pts * packet.time_base)
                t0 = t if t0 is None else t0
                packet.stream = out
                yield t - t0, lambda p=packet: [p]

    return packets


def _video_stream(
    container: av.container.OutputContainer, image: np.ndarray, bitrate_kbps: int
) -> av.VideoStream:
    h, w = image.shape[:2]
    stream = container.add_stream("libx264", rate=30)
    stream.width, stream.height = w - w % 2, h - h % 2
    stream.pix_fmt = "yuv420p"
    stream.time_base = FLV_TIME_BASE
    stream.codec_context.time_base = FLV_TIME_BASE
    stream.bit_rate = bitrate_kbps * 1000
    # DJI apps: a keyframe a second, no B-frames; zerolatency keeps x264 from holding frames back
    stream.options = {"preset": "veryfast", "tune": "zerolatency", "g": "30", "bf": "0"}
    return stream


def _redact(url: str) -> str:
    """The URL without its stream key (the last part of the path), for messages."""
    return url.rsplit("/", 1)[0] + "/***" if url.count("/") >= 4 else url


def check_rtmp_url(url: str) -> None:
    if not url.startswith(("rtmp://", "rtmps://")) or url.count("/") < 4:
        raise PublishError(f"an RTMP URL looks like rtmp://host:1935/live/<key>, got {_redact(url)!r}")


__all__ = ["RtmpPublishResult", "check_rtmp_url", "publish_rtmp"]
