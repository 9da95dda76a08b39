"""Pulled video: a thread that reads a stream URL with PyAV (FFmpeg) and hands each decoded frame
to the stream's worker, as the WebRTC receiver does.

Two kinds use it: RTMP (the server plays back, on 127.0.0.1, what a DJI app publishes to its
nginx: :mod:`edge_server.rtmp`) and RTSP (a DJI Dock, a fixed camera: the server is the client).
A frame's media time is its presentation time in the stream (FLV/RTP timestamps), so speeds are
timed by the publisher's clock, not by when frames happen to arrive.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import av

from edge_server.source_ring import SourceRing

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PullOptions:
    open_timeout_s: float = 15.0  # connecting, and the first frames (probing)
    read_timeout_s: float = 10.0  # no data for this long: the stream ends
    rtsp_transport: str = "tcp"  # tcp: no lost packets through NAT and over Wi-Fi


class StreamUnavailable(Exception):
    """A stream URL that cannot be opened (unreachable, refused, not a video stream); says why."""


class NoVideoError(StreamUnavailable):
    """The stream opened but carries no video."""


def open_stream(url: str, opts: PullOptions) -> Any:
    """Open ``url`` and check that it carries video: the PyAV container, or StreamUnavailable."""
    try:
        container = av.open(
            url, options=open_options(url, opts), timeout=(opts.open_timeout_s, opts.read_timeout_s)
        )
    except av.error.ExitError as exc:
        raise StreamUnavailable(f"{redact(url)}: no answer within {opts.open_timeout_s:g} s") from exc
    except av.error.FFmpegError as exc:
        raise StreamUnavailable(
            f"{redact(url)} cannot be opened: {exc.strerror or type(exc).__name__}"
        ) from exc
    if not container.streams.video:
        kinds = ", ".join(sorted({s.type for s in container.streams})) or "nothing"
        container.close()
        raise NoVideoError(f"the stream carries no video (only {kinds}): publish H.264 video")
    return container


def open_options(url: str, opts: PullOptions) -> dict[str, str]:
    """FFmpeg options: probe 0.1 s of stream, not FFmpeg's 5 s (frames read while probing are kept,
    but arrive at the worker in one burst, and most of a burst is dropped as late)."""
    options = {"analyzeduration": "100000", "probesize": "65536"}
    if url.startswith("rtmp"):
        options["rtmp_live"] = "live"
    elif url.startswith("rtsp"):
        options["rtsp_transport"] = opts.rtsp_transport
    return options


def redact(url: str) -> str:
    """The URL without credentials or the RTMP stream key, for logs and the session row."""
    if "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    if "@" in rest.split("/", 1)[0]:
        rest = "***@" + rest.split("@", 1)[1]
    if scheme.startswith("rtmp") and rest.count("/") >= 2:
        rest = rest.rsplit("/", 1)[0] + "/***"
    return f"{scheme}://{rest.split('?', 1)[0]}"


class PullReader:
    """Reads ``url`` in a thread of its own: ``on_frame(frame, media_time_s, perf, wall)`` for each
    decoded video frame; ``on_end(reason, failure)`` once, when the stream ends for any reason
    (``failure``: None for a stream that ended, else what failed: "no video" or "stream error").

    :meth:`stop` asks the thread to end; a read blocked on the network returns within
    ``read_timeout_s`` (RTMP: the server also drops the player at nginx, which ends it at once).
    """

    def __init__(
        self,
        url: str,
        on_frame: Callable[[Any, float, float, float], None],
        on_end: Callable[[str, str | None], None],
        options: PullOptions | None = None,
        name: str = "pull",
        container: Any = None,
        source: SourceRing | None = None,
    ) -> None:
        """``container``: the stream opened already (:func:`open_stream`), else the thread opens it;
        ``source``: where the received packets are kept for evidence (None: not kept)."""
        self.url = url
        self.source = source
        self._container = container
        self.options = options or PullOptions()
        self._on_frame = on_frame
        self._on_end = on_end
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.frames = 0
        self.decode_errors = 0
        self.codec: str | None = None
        self.opened_after_s: float | None = None
        self._last_time: float | None = None
        self.end_reason: str | None = None  # set when the thread ends
        self.failure: str | None = None  # ... and what failed, if anything (see on_end)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _media_time(self, t: float | None, stream: Any) -> float:
        """The frame's presentation time; a frame without one (RTSP's first, before the RTP clock is
        known) follows the one before by a frame interval; times never go backwards."""
        last = self._last_time
        if t is None:
            rate = float(stream.average_rate or stream.guessed_rate or 30)
            t = 0.0 if last is None else last + 1.0 / rate
        elif last is not None and t <= last:
            t = last + 1e-3
        self._last_time = t
        return float(t)

    def _attach_source(self, stream: Any) -> None:
        if self.source is None:
            return
        try:
            self.source.attach(stream)
        except (av.error.FFmpegError, ValueError) as exc:  # the stream runs on without its source kept
            log.warning("%s: the received video cannot be kept (%s)", redact(self.url), exc)
            self.source = None

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def _run(self) -> None:
        reason, failure = "stream ended", None
        try:
            reason = self._read()
        except NoVideoError as exc:
            reason, failure = str(exc), "no video"
        except StreamUnavailable as exc:
            reason, failure = str(exc), "stream error"
        except av.error.ExitError:  # PyAV's timeout interrupted a read
            reason = f"no video for {self.options.read_timeout_s:g} s (publisher gone?)"
        except av.error.FFmpegError as exc:
            if self._stop.is_set():
                reason = "stopped"
            else:
                reason = f"stream error: {exc.strerror or type(exc).__name__}"
                failure = "stream error" if self.frames == 0 else None
        except Exception as exc:  # noqa: BLE001 - the stream ends, the server goes on
            log.exception("reading %s failed", redact(self.url))
            reason, failure = f"stream error: {type(exc).__name__}: {exc}", "stream error"
        if self._stop.is_set() and failure is None:
            reason = "stopped"
        log.info("pulled stream %s ended after %d frames: %s", redact(self.url), self.frames, reason)
        self.end_reason, self.failure = reason, failure
        self._on_end(reason, failure)

    def _read(self) -> str:
        t0 = time.perf_counter()
        container, self._container = self._container, None
        if container is None:
            container = open_stream(self.url, self.options)
        try:
            stream = container.streams.video[0]
            stream.thread_type = "SLICE"  # frame threads would hold frames back (latency)
            self.codec = stream.codec_context.name
            self.opened_after_s = time.perf_counter() - t0
            self._attach_source(stream)
            for packet in container.demux(stream):
                if self._stop.is_set():
                    return "stopped"
                if self.source is not None:
                    self.source.add(packet)
                try:
                    frames = packet.decode()
                except av.error.InvalidDataError:
                    self.decode_errors += 1  # a damaged packet: skip it, the next keyframe heals
                    continue
                for frame in frames:
                    perf, wall = time.perf_counter(), time.time()
                    media_time = self._media_time(frame.time, stream)
                    if self.frames == 0:
                        log.info(
                            "%s: first frame (t=%.3f s) %.2f s after connecting",
                            redact(self.url),
                            media_time,
                            perf - t0,
                        )
                    self.frames += 1
                    self._on_frame(frame, media_time, perf, wall)
            return "publisher ended the stream"
        finally:
            container.close()


__all__ = ["NoVideoError", "PullOptions", "PullReader", "open_options", "redact"]
