"""Reference publisher: streams a recorded flight to the edge server in real time, as the phone app would.

Video goes out as a WebRTC track; telemetry (from the flight's SRT via ``load_telemetry``, or
constant values) goes on the "telemetry" data channel, stamped with the sender's wall clock at
the moment each frame is "captured" (handed to the encoder) - exactly what a DJI Mobile SDK app
does with live telemetry. Live violations come back on the "events" data channel and the
annotated video on the return track. Negotiation uses either the phone API
(``POST /api/v1/webrtc/offer``) or WHIP (``POST /whip``). See docs/telemetry-datachannel.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import httpx
import numpy as np
from aiortc import RTCConfiguration, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from edge_server.telemetry import TelemetryMessage
from pipelines.errors import AirPatrolError
from pipelines.sources import open_source
from pipelines.telemetry import validate_telemetry
from pipelines.types import Telemetry

log = logging.getLogger(__name__)

VIDEO_CLOCK_RATE = 90000
SYNTHETIC = "synthetic"


class PublishError(AirPatrolError):
    """The server refused the stream or could not be reached; the message says why."""


@dataclass
class PublishResult:
    session_id: str | None = None
    frames_sent: int = 0
    frames_skipped: int = 0
    telemetry_sent: int = 0
    return_frames: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    duration_s: float = 0.0
    error: str | None = None  # why the stream did not run to its end (None: it did)

    @property
    def violations(self) -> list[dict[str, Any]]:
        return [e["violation"] for e in self.events if e.get("type") == "violation"]

    def summary(self) -> dict[str, Any]:
        ended = next((e for e in reversed(self.events) if e.get("type") == "session.ended"), None)
        return {
            "session_id": self.session_id,
            "frames_sent": self.frames_sent,
            "frames_skipped": self.frames_skipped,
            "telemetry_sent": self.telemetry_sent,
            "return_frames": self.return_frames,
            "violations": len(self.violations),
            "duration_s": round(self.duration_s, 2),
            "error": self.error,
            "server": None if ended is None else {k: v for k, v in ended.items() if k not in ("type",)},
        }


# ------------------------------------------------------------------------------------------------
# sources


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
            self.error = f"the video could not be read after {self.sent} frames: {exc}"
            log.warning("%s", self.error)
            return None
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
            self.error = f"the video could not be read after {self.sent} frames: {exc}"
            log.warning("%s", self.error)
            return None
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


# ------------------------------------------------------------------------------------------------
# telemetry


def telemetry_source(
    video: str | Path,
    srt: str | Path | None,
    *,
    altitude_m: float | None = None,
    pitch_deg: float | None = None,
    focal_35mm: float | None = None,
    camera: str | None = None,
) -> Callable[[float], Telemetry | None] | None:
    """``f(video_time_s) -> Telemetry`` from the SRT (or a sidecar next to the video), else constants."""
    if srt is None and synthetic_size(video) is None:
        for suffix in (".SRT", ".srt"):
            candidate = Path(video).with_suffix(suffix)
            if candidate.is_file():
                srt = candidate
                log.info("using telemetry sidecar %s", candidate)
                break
    overrides = {
        "altitude_m": altitude_m,
        "gimbal_pitch_deg": pitch_deg,
        "focal_length_35mm": focal_35mm,
        "camera": camera,
    }
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if srt is not None:
        from pipelines.telemetry import load_telemetry

        track = load_telemetry(srt)

        def from_track(t: float) -> Telemetry | None:
            try:
                sample = track.at(t)
            except Exception:  # noqa: BLE001 - outside the log: send nothing for this frame
                return None
            if sample is None:
                return None
            import dataclasses

            return dataclasses.replace(sample, **overrides) if overrides else sample

        return from_track
    if synthetic_size(video) is not None and not overrides:
        from edge_client import synthetic

        overrides = {
            "altitude_m": synthetic.DEFAULT_ALTITUDE_M,
            "gimbal_pitch_deg": synthetic.DEFAULT_PITCH_DEG,
            "focal_length_35mm": synthetic.DEFAULT_FOCAL_35MM,
            "camera": synthetic.DEFAULT_CAMERA,
        }
    if not overrides:
        return None
    validate_telemetry(Telemetry(timestamp_s=0.0, **overrides))  # --altitude nan, --pitch 45 ...
    return lambda t: Telemetry(timestamp_s=t, **overrides)


# ------------------------------------------------------------------------------------------------
# session


async def _negotiate(client: httpx.AsyncClient, server: str, sdp: str, whip: bool) -> tuple[str, str, str]:
    """-> (answer sdp, session id, resource URL to DELETE at the end)."""
    try:
        if whip:
            resp = await client.post(
                f"{server}/whip", content=sdp, headers={"Content-Type": "application/sdp"}
            )
        else:
            resp = await client.post(f"{server}/api/v1/webrtc/offer", json={"sdp": sdp, "type": "offer"})
    except httpx.HTTPError as exc:
        raise PublishError(f"cannot reach {server}: {exc}") from exc
    if resp.status_code >= 400:
        try:
            detail = resp.json().get("detail")
        except ValueError:
            detail = resp.text[:300]
        raise PublishError(f"server refused the stream: HTTP {resp.status_code}: {detail}")
    if whip:
        location = resp.headers.get("location")
        if resp.status_code != 201 or not location:
            raise PublishError(f"WHIP endpoint answered {resp.status_code} without a Location header")
        resource = str(httpx.URL(server + "/").join(location))
        return (
            resp.text,
            resp.headers.get("x-session-id") or location.rstrip("/").rsplit("/", 1)[-1],
            resource,
        )
    body = resp.json()
    return body["sdp"], body["session_id"], f"{server}/api/v1/webrtc/{body['session_id']}"


async def publish(
    video: str | Path,
    server: str,
    token: str,
    *,
    srt: str | Path | None = None,
    whip: bool = False,
    telemetry_hz: float = 10.0,
    loop_playback: bool = False,
    max_seconds: float | None = None,
    return_video: bool = True,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    linger_s: float = 1.0,
    telemetry: Callable[[float], Telemetry | None] | None = None,
    extra_telemetry: Callable[[], str | None] | None = None,
    stop: asyncio.Event | None = None,
    connect_timeout_s: float = 20.0,
    passthrough: bool = False,
) -> PublishResult:
    """Stream ``video`` to ``server`` until it ends (or ``stop`` is set); returns what happened.

    ``telemetry`` overrides the SRT lookup (``f(video_time_s) -> Telemetry``);
    ``extra_telemetry`` may return raw strings to send on the channel (tests use it for bad input).
    """
    server = server.rstrip("/")
    check_video(video)
    if not telemetry_hz > 0:
        raise PublishError(f"telemetry rate must be above 0 Hz, got {telemetry_hz!r}")
    if max_seconds is not None and not max_seconds > 0:
        raise PublishError(f"max seconds must be above 0, got {max_seconds!r}")
    if passthrough and synthetic_size(video) is not None:
        raise PublishError("--passthrough relays a file's H.264; it cannot be used with the synthetic source")
    peer = _PublishingPeer(
        telemetry if telemetry is not None else telemetry_source(video, srt),
        telemetry_hz=telemetry_hz,
        extra_telemetry=extra_telemetry,
        on_event=on_event,
    )
    peer.add_video(video, passthrough, loop_playback, max_seconds, return_video)
    headers = {"Authorization": f"Bearer {token}", "User-Agent": "airpatrol-publish"}
    started = time.monotonic()
    async with httpx.AsyncClient(headers=headers, timeout=30.0) as client:
        resource = None
        try:
            await peer.pc.setLocalDescription(await peer.pc.createOffer())
            answer, peer.result.session_id, resource = await _negotiate(
                client, server, peer.pc.localDescription.sdp, whip
            )
            await peer.pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
            log.info(
                "session %s: streaming %s to %s%s",
                peer.result.session_id,
                video,
                server,
                " (WHIP)" if whip else "",
            )
            await peer.wait_connected(server, connect_timeout_s)
            watchdog = asyncio.create_task(peer.watch_server(client, server))
            peer.tasks.append(watchdog)
            await peer.stream_until_done(stop, linger_s)
        finally:
            if resource is not None and not peer.ended.is_set() and not peer.server_gone:
                with contextlib.suppress(httpx.HTTPError):
                    await client.delete(resource, timeout=60.0)  # the server flushes, then answers
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(peer.ended.wait(), 2.0)
            await peer.close()
    peer.result.duration_s = time.monotonic() - started
    return peer.result


class _PublishingPeer:
    """The publisher's side of one stream: the peer connection, its video track, the telemetry and
    events data channels, and what happened (:class:`PublishResult`)."""

    def __init__(
        self,
        tel_at: Callable[[float], Telemetry | None] | None,
        *,
        telemetry_hz: float,
        extra_telemetry: Callable[[], str | None] | None,
        on_event: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        self.result = PublishResult()
        self.tel_at = tel_at
        self.telemetry_period_s = 1.0 / telemetry_hz
        self.extra_telemetry = extra_telemetry
        self.on_event = on_event
        self.pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
        self.tel_channel = self.pc.createDataChannel("telemetry")
        self.events_channel = self.pc.createDataChannel("events")
        self.ended = asyncio.Event()
        self.connected = asyncio.Event()
        self.lost = asyncio.Event()  # the stream cannot go on (``result.error`` says why)
        self.server_gone = False  # ... because the server or the connection is gone
        self.track: PlaybackTrack | PassthroughTrack | None = None
        self.tasks: list[asyncio.Task] = []
        self._last_tel = -1e9
        self.events_channel.on("message", self._on_event_message)
        self.pc.on("track", self._on_track)
        self.pc.on("connectionstatechange", self._on_state)

    def add_video(
        self,
        video: str | Path,
        passthrough: bool,
        loop_playback: bool,
        max_seconds: float | None,
        return_video: bool,
    ) -> None:
        if passthrough:
            self.track = PassthroughTrack(
                video, loop_playback=loop_playback, max_seconds=max_seconds, on_frame=self._on_frame
            )
        else:
            self.track = PlaybackTrack(
                lambda: iter_frames(video),
                loop_playback=loop_playback,
                max_seconds=max_seconds,
                on_frame=self._on_frame,
            )
        transceiver = self.pc.addTransceiver(self.track, direction="sendrecv" if return_video else "sendonly")
        if passthrough:  # the packets are H.264: negotiate nothing else
            caps = RTCRtpSender.getCapabilities("video").codecs
            transceiver.setCodecPreferences([c for c in caps if c.mimeType in ("video/H264", "video/rtx")])

    def _on_frame(self, video_t: float, wall: float) -> None:
        """A frame went out: send the telemetry of its moment (at most ``telemetry_hz``)."""
        self.result.frames_sent += 1
        if self.tel_channel.readyState != "open":
            return
        if self.extra_telemetry is not None:
            raw = self.extra_telemetry()
            if raw is not None:
                self.tel_channel.send(raw)
        if self.tel_at is None or wall - self._last_tel < self.telemetry_period_s:
            return
        sample = self.tel_at(video_t)
        if sample is None:
            return
        msg = TelemetryMessage.from_telemetry(sample, timestamp=wall)
        self.tel_channel.send(msg.model_dump_json(exclude_none=True))
        self.result.telemetry_sent += 1
        self._last_tel = wall

    def _on_event_message(self, message: str | bytes) -> None:
        try:
            event = json.loads(message)
        except ValueError:
            log.warning("non-JSON event: %r", message[:100])
            return
        self.result.events.append(event)
        if event.get("type") == "session.ended":
            self.ended.set()
        if self.on_event is not None:
            self.on_event(event)

    def _on_track(self, remote: MediaStreamTrack) -> None:
        async def count() -> None:
            with contextlib.suppress(MediaStreamError, asyncio.CancelledError):
                while True:
                    await remote.recv()
                    self.result.return_frames += 1

        self.tasks.append(asyncio.create_task(count()))

    def _on_state(self) -> None:
        log.debug("connection %s", self.pc.connectionState)
        if self.pc.connectionState == "connected":
            self.connected.set()
        elif self.pc.connectionState in ("failed", "closed"):
            if self.connected.is_set() and not self.ended.is_set():
                self.server_gone = True
                self._lose(f"the WebRTC connection {self.pc.connectionState}")
            self.ended.set()
            self.connected.set()

    def _lose(self, why: str) -> None:
        if self.result.error is None:
            self.result.error = why
        self.lost.set()

    async def watch_server(
        self, client: httpx.AsyncClient, server: str, interval_s: float = 1.0, misses: int = 3
    ) -> None:
        """Ask the server's /healthz every ``interval_s``; ``misses`` failures in a row = it is gone
        (a killed server is noticed in seconds, not after ICE consent runs out)."""
        missed = 0
        while not self.ended.is_set():
            await asyncio.sleep(interval_s)
            try:
                ok = (await client.get(f"{server}/healthz", timeout=interval_s * 2)).status_code == 200
            except httpx.HTTPError:
                ok = False
            missed = 0 if ok else missed + 1
            if missed >= misses:
                self.server_gone = True
                self._lose(f"the server at {server} stopped answering")
                return

    async def wait_connected(self, server: str, timeout_s: float) -> None:
        try:
            await asyncio.wait_for(self.connected.wait(), timeout_s)
        except asyncio.TimeoutError as exc:
            raise PublishError(f"no WebRTC connection to {server} within {timeout_s:g} s") from exc
        if self.pc.connectionState != "connected":
            raise PublishError(f"WebRTC connection {self.pc.connectionState}")

    async def stream_until_done(self, stop: asyncio.Event | None, linger_s: float) -> None:
        """Until the video ends, the server ends the session, or ``stop`` is set."""
        assert self.track is not None
        waiters = [
            asyncio.create_task(self.track.finished.wait()),
            asyncio.create_task(self.ended.wait()),
            asyncio.create_task(self.lost.wait()),
        ]
        if stop is not None:
            waiters.append(asyncio.create_task(stop.wait()))
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for w in waiters:
            w.cancel()
        if self.track.error is not None:
            self._lose(self.track.error)
        if not self.ended.is_set() and not self.lost.is_set():
            await asyncio.sleep(linger_s)  # violations closing on the last frames

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        if self.track is not None:
            self.result.frames_skipped = self.track.skipped
            self.track.stop()
        await self.pc.close()
