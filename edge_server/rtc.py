"""WebRTC ingest (aiortc): one :class:`StreamSession` per publishing drone.

A session owns the peer connection, the worker thread running its pipeline, the telemetry buffer
and clock mapping, the "events" data channel and the annotated return-video track. The
:class:`StreamManager` creates sessions from SDP offers (phone API and WHIP alike) and ends them
- on request, when the peer vanishes, when the stream goes idle, or at shutdown - always through
:meth:`StreamManager.close`, which lets the worker flush before the peer is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeVar

import av
import numpy as np
from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from edge_server.dji_cloud import parse_osd
from edge_server.events import EventBus, dumps
from edge_server.media import fit_width, lower_thread_priority
from edge_server.media_loop import MediaLoop
from edge_server.metrics import Metrics
from edge_server.pull import PullOptions, PullReader, open_stream, redact
from edge_server.rtmp import RtmpServer
from edge_server.settings import ServerSettings
from edge_server.store import Store
from edge_server.stream_stats import StreamStats
from edge_server.telemetry import (
    ClockSync,
    ImplausibleTelemetry,
    TelemetryBuffer,
    install_sender_report_hook,
    parse_message,
)
from edge_server.worker import IncomingFrame, PeerLink, StreamServices, StreamWorker, close_pipeline
from pipelines.errors import AirPatrolError, TelemetryError
from pipelines.types import Telemetry

if TYPE_CHECKING:  # the engine (torch, models) loads when the first pipeline is built
    from pipelines.pipeline import Pipeline

log = logging.getLogger(__name__)

T = TypeVar("T")

VIDEO_CLOCK_RATE = 90000


class OfferError(ValueError):
    """An SDP offer the server cannot use (HTTP 400); the message says why."""


class CapacityError(RuntimeError):
    """No room for another stream (HTTP 503)."""


class KeyBusy(RuntimeError):
    """An RTMP stream key that is streaming already (HTTP 409)."""


class PipelineUnavailable(RuntimeError):
    """The pipeline for a new stream could not be built (HTTP 503); the message says why."""


_SDP_LINE = re.compile(r"^[a-z]=.*$")


def check_offer_sdp(sdp: str) -> None:
    """Reject SDP that is not a WebRTC offer with video, with a message a client developer can act on."""
    if not sdp or not sdp.strip():
        raise OfferError("empty SDP offer")
    lines = [ln for ln in sdp.replace("\r\n", "\n").split("\n") if ln.strip()]
    if lines[0].strip() != "v=0":
        raise OfferError("malformed SDP offer: the first line must be 'v=0'")
    bad = [ln for ln in lines if not _SDP_LINE.match(ln)]
    if bad:
        raise OfferError(f"malformed SDP offer: line {bad[0][:60]!r} is not '<letter>=<value>'")
    media = [ln for ln in lines if ln.startswith("m=")]
    if not media:
        raise OfferError("SDP offer has no media section (m=)")
    if not any(ln.startswith("m=video ") for ln in media):
        raise OfferError("SDP offer has no video section (m=video): publish a video track")
    for attr, what in (
        ("a=ice-ufrag:", "ICE username"),
        ("a=ice-pwd:", "ICE password"),
        ("a=fingerprint:", "DTLS fingerprint"),
    ):
        if not any(ln.startswith(attr) for ln in lines):
            raise OfferError(f"SDP offer lacks {attr.rstrip(':')} ({what}); WebRTC offers need ICE and DTLS")


class ReturnVideoTrack(MediaStreamTrack):
    """Annotated frames back to the publisher; always the newest one (no queue)."""

    kind = "video"

    def __init__(self, loop: asyncio.AbstractEventLoop, max_width: int) -> None:
        super().__init__()
        self._loop = loop
        self._max_width = max_width
        self._frame: av.VideoFrame | None = None
        self._event = asyncio.Event()
        self._start: float | None = None
        self._last_pts = -1
        self.enabled = False  # set once negotiation shows the peer receives it
        self.sent = 0

    def push(self, bgr: np.ndarray) -> None:
        """Called from the worker thread."""
        if not self.enabled or self.readyState != "live":
            return
        frame = av.VideoFrame.from_ndarray(
            np.ascontiguousarray(fit_width(bgr, self._max_width)), format="bgr24"
        )
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._set, frame)

    def _set(self, frame: av.VideoFrame) -> None:
        self._frame = frame
        self._event.set()

    async def recv(self) -> av.VideoFrame:
        while True:
            if self.readyState != "live":
                raise MediaStreamError
            await self._event.wait()
            self._event.clear()
            frame, self._frame = self._frame, None
            if frame is not None:
                break
        now = time.monotonic()
        if self._start is None:
            self._start = now
        pts = max(self._last_pts + 1, int((now - self._start) * VIDEO_CLOCK_RATE))
        self._last_pts = pts
        frame.pts, frame.time_base = pts, Fraction(1, VIDEO_CLOCK_RATE)
        self.sent += 1
        return frame

    def stop(self) -> None:
        super().stop()
        self._event.set()


@dataclass
class StreamSession:
    """One live stream: WebRTC (``pc``: the peer connection) or pulled (``reader``: RTMP, RTSP)."""

    id: str
    kind: str
    pc: RTCPeerConnection | None
    remote: str | None
    stats: StreamStats = field(default_factory=StreamStats)
    clock: ClockSync = field(default_factory=ClockSync)
    telemetry: TelemetryBuffer = field(default_factory=TelemetryBuffer)
    worker: StreamWorker | None = None
    return_track: ReturnVideoTrack | None = None
    video_track: Any = None
    events_channel: Any = None
    reader: PullReader | None = None
    rtmp_key: RtmpKeyRef | None = None  # the RTMP stream key this stream was published with
    device_sn: str | None = None  # the aircraft whose DJI Cloud API OSD is this stream's telemetry
    # altitude, gimbal pitch, camera the operator set (a stream without telemetry: DJI Fly's RTMP)
    operator: Telemetry | None = None
    tasks: list[asyncio.Task] = field(default_factory=list)
    closing: bool = False
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    created_perf: float = field(default_factory=time.perf_counter)
    sr_hook: bool = False
    telemetry_offset_s: float = 0.0
    last_reject_notice: float = 0.0
    answer_sdp: str = ""
    outcome: str = "ended"  # of closing: "ended" (flushed and stored) or "closing" (still flushing)
    # operators watching the annotated video (the console's Live page): viewer id -> (peer, track)
    viewers: dict[str, tuple[RTCPeerConnection, ReturnVideoTrack]] = field(default_factory=dict)

    def _return_tracks(self) -> list[ReturnVideoTrack]:
        tracks = [track for _, track in list(self.viewers.values())]
        return [self.return_track, *tracks] if self.return_track is not None else tracks

    def return_wanted(self) -> bool:
        """Someone receives the annotated video: the publisher's return track or a viewer."""
        return any(t.enabled and t.readyState == "live" for t in self._return_tracks())

    def push_return(self, bgr: np.ndarray) -> None:
        """An annotated frame to everyone who receives it (called from the worker thread)."""
        for track in self._return_tracks():
            track.push(bgr)

    def telemetry_at(self, media_time_s: float) -> Telemetry | None:
        flight = self._flight_telemetry_at(media_time_s)
        return with_operator_values(flight, self.operator, media_time_s)

    def _flight_telemetry_at(self, media_time_s: float) -> Telemetry | None:
        if not len(self.telemetry):
            return None
        sender_t = self.clock.to_sender_time(media_time_s)
        if sender_t is None:
            return None
        t = self.telemetry.at(sender_t - self.telemetry_offset_s)
        if t is None:
            return None
        return dataclasses.replace(t, timestamp_s=media_time_s)

    def live_stats(self) -> dict[str, Any]:
        out = self.stats.as_session_fields()
        out["processed_fps"] = self.stats.fps()
        return out

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {"clock_sync": self.clock.describe()}
        if self.pc is not None:
            out["rtcp_sender_reports"] = self.sr_hook
            out["return_video_frames"] = self.return_track.sent if self.return_track else 0
        if self.reader is not None:
            out["source"] = redact(self.reader.url)
            out["codec"] = self.reader.codec
            out["decode_errors"] = self.reader.decode_errors
            out["opened_after_s"] = self.reader.opened_after_s
        if self.rtmp_key is not None:
            out["rtmp_key"] = {"id": self.rtmp_key.id, "name": self.rtmp_key.name}
        if self.device_sn is not None:
            out["device_sn"] = self.device_sn
            out["telemetry_offset_s"] = self.telemetry_offset_s
        if self.operator is not None:
            out["operator_telemetry"] = operator_fields(self.operator)
        return out


@dataclass(frozen=True)
class RtmpKeyRef:
    """The RTMP key a stream was published with: its public id and name, the secret itself (to
    drop the stream at nginx) and nginx's client id of the publisher."""

    id: str
    name: str | None
    secret: str
    client_id: str | None = None
    device_sn: str | None = None


OPERATOR_FIELDS = ("altitude_m", "gimbal_pitch_deg", "focal_length_mm", "focal_length_35mm", "camera")


def operator_fields(t: Telemetry) -> dict[str, Any]:
    return {name: getattr(t, name) for name in OPERATOR_FIELDS if getattr(t, name) is not None}


def with_operator_values(
    flight: Telemetry | None, operator: Telemetry | None, media_time_s: float
) -> Telemetry | None:
    """A frame's telemetry: the flight's, its missing fields (a camera model, a focal length the
    DJI OSD does not carry) filled from the operator's values; the operator's alone where the flight
    sends none. ``source`` says "operator" when the scale (altitude or gimbal pitch) is the
    operator's."""
    if operator is None:
        return flight
    if flight is None:
        return dataclasses.replace(operator, timestamp_s=media_time_s, source="operator")
    filled = {
        name: getattr(operator, name)
        for name in OPERATOR_FIELDS
        if getattr(flight, name) is None and getattr(operator, name) is not None
    }
    if not filled:
        return flight
    scale = "altitude_m" in filled or "gimbal_pitch_deg" in filled
    return dataclasses.replace(flight, **filled, source="operator" if scale else flight.source)


class StreamManager:
    def __init__(
        self,
        settings: ServerSettings,
        store: Store,
        bus: EventBus,
        metrics: Metrics,
        pipeline_factory: Callable[[], Pipeline],
        media: MediaLoop | None = None,
    ) -> None:
        self.settings = settings
        self.media = media  # where the peers live (None: the caller's loop)
        self.store = store
        self.bus = bus
        self.metrics = metrics
        self.pipeline_factory = pipeline_factory
        self.sessions: dict[str, StreamSession] = {}
        self._pending = 0  # offers being set up (count against max_streams)
        self._clip_executor = ThreadPoolExecutor(
            max_workers=settings.clip_writers,
            thread_name_prefix="clips",
            initializer=lower_thread_priority,
            initargs=(settings.clip_nice,),
        )
        self.services = StreamServices(settings, store, bus, metrics, self._clip_executor)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shutting_down = False
        self._background: set[asyncio.Task] = set()
        self.rtmp: RtmpServer | None = None  # nginx, when RTMP ingest runs (set by the app)
        self._rtmp_starting: set[str] = set()  # keys admitted whose stream is being set up
        self._unknown_devices: dict[str, float] = {}  # OSD senders no stream names: last logged
        self._spare: Pipeline | None = None  # built ahead for the next stream (settings.warm_pipeline)
        self._spare_building = False

    def spawn(self, coro: Any) -> None:
        """Run ``coro`` in the background on the running loop (kept referenced until it ends)."""
        self._spawn(coro)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def active_count(self) -> int:
        return len(self.sessions)

    def get(self, session_id: str) -> StreamSession | None:
        return self.sessions.get(session_id)

    # -- called from the web server's loop ------------------------------------------------------

    async def create(self, offer_sdp: str, kind: str, remote: str | None = None) -> StreamSession:
        """A new stream for this SDP offer (on the media loop); see :meth:`_create`."""
        return await self._on_media(self._create(offer_sdp, kind, remote))

    async def create_pull(
        self,
        url: str,
        kind: str,
        remote: str | None = None,
        *,
        operator: Telemetry | None = None,
        device_sn: str | None = None,
    ) -> StreamSession:
        """A new stream read from ``url`` (an RTSP camera): opened first, so that an unreachable
        camera or one without video is a StreamUnavailable to the caller, not a failed session."""
        return await self._on_media(
            self._create_pull(url, kind, remote, operator, None, probe=True, device_sn=device_sn)
        )

    async def admit_rtmp(self, key: RtmpKeyRef, remote: str | None, operator: Telemetry | None) -> None:
        """nginx asks whether a publisher with a valid key may start: CapacityError when the server
        is full, KeyBusy when this key streams already, PipelineUnavailable; else its stream runs."""
        await self._on_media(self._admit_rtmp(key, remote, operator))

    async def rtmp_publish_done(self, secret: str, client_id: str | None) -> str | None:
        """The publisher of ``secret`` left (nginx's on_publish_done): end its stream."""
        return await self._on_media(self._rtmp_publish_done(secret, client_id))

    def find_rtmp(self, secret: str) -> StreamSession | None:
        """The live stream published with this RTMP key."""
        return next((s for s in self.sessions.values() if s.rtmp_key and s.rtmp_key.secret == secret), None)

    def find_rtmp_id(self, key_id: str) -> StreamSession | None:
        """The live stream published with the RTMP key of this id."""
        return next((s for s in self.sessions.values() if s.rtmp_key and s.rtmp_key.id == key_id), None)

    async def close(self, session_id: str, reason: str) -> str | None:
        """End a stream (on the media loop); see :meth:`_close`."""
        return await self._on_media(self._close(session_id, reason))

    async def close_all(self, reason: str = "server shutdown") -> None:
        await self._on_media(self._close_all(reason))

    async def add_viewer(self, session_id: str, offer_sdp: str) -> tuple[str, str]:
        """A peer that receives the stream's annotated video (on the media loop): (viewer id, answer SDP)."""
        return await self._on_media(self._add_viewer(session_id, offer_sdp))

    async def remove_viewer(self, session_id: str, viewer_id: str) -> bool:
        return await self._on_media(self._remove_viewer(session_id, viewer_id))

    async def _on_media(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.media is None or asyncio.get_running_loop() is self.media.loop:
            return await coro
        return await self.media.run(coro)

    # -- session creation (media loop) ----------------------------------------------------------

    def _reserve(self) -> None:
        """Count a stream being set up against ``max_streams``; CapacityError when there is no room."""
        if self._shutting_down:
            raise CapacityError("server is shutting down")
        if len(self.sessions) + self._pending >= self.settings.max_streams:
            raise CapacityError(
                f"server is at capacity ({self.settings.max_streams} streams); try again later"
            )
        self._pending += 1

    def _new_session(self, kind: str, pc: RTCPeerConnection | None, remote: str | None) -> StreamSession:
        sess = StreamSession(id=uuid.uuid4().hex, kind=kind, pc=pc, remote=remote)
        sess.telemetry = TelemetryBuffer(max_age_s=self.settings.telemetry_max_age_s)
        sess.telemetry_offset_s = self.settings.telemetry_time_offset_s
        return sess

    async def _build_pipeline(self) -> Pipeline:
        """The spare pipeline when one is ready (``settings.warm_pipeline``), else a new one."""
        pipeline, self._spare = self._spare, None
        if pipeline is None:
            try:
                pipeline = await asyncio.to_thread(self.pipeline_factory)
            except AirPatrolError as exc:
                raise PipelineUnavailable(f"pipeline unavailable: {exc}") from exc
            if self._shutting_down:  # close_all() ran while the pipeline was being built
                await asyncio.to_thread(close_pipeline, pipeline)
                raise CapacityError("server is shutting down")
        self._warm_up()
        return pipeline

    @property
    def spare_ready(self) -> bool:
        """Whether a pipeline is built for the next stream (settings.warm_pipeline)."""
        return self._spare is not None

    async def warm_up(self) -> None:
        """Build the spare pipeline in the background (at startup; again each time one is taken)."""
        await self._on_media(self._warm_up_now())

    async def _warm_up_now(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._warm_up()

    def _warm_up(self) -> None:
        """A new stream takes a pipeline built before it came (no seconds of model loading while an
        RTMP publisher already sends); the next spare is built while the stream starts."""
        if (
            not self.settings.warm_pipeline
            or self._shutting_down
            or self._spare is not None
            or self._spare_building
        ):
            return
        self._spare_building = True

        async def build() -> None:
            try:
                pipeline = await asyncio.to_thread(self.pipeline_factory)
            except Exception as exc:  # noqa: BLE001 - a stream then builds its own, and says why it cannot
                log.warning("spare pipeline not built: %s", exc)
                return
            finally:
                self._spare_building = False
            if self._shutting_down or self._spare is not None:
                await asyncio.to_thread(close_pipeline, pipeline)
                return
            self._spare = pipeline

        self._spawn(build())

    async def _start(self, sess: StreamSession, pipeline: Pipeline) -> None:
        """Store the session, start its worker (which owns ``pipeline`` from here) and list it."""
        info = {"operator_telemetry": operator_fields(sess.operator)} if sess.operator else None
        await asyncio.to_thread(self.store.create_session, sess.id, sess.kind, sess.remote, info=info)
        sess.worker = self._worker(sess, pipeline)
        sess.worker.start()
        self.sessions[sess.id] = sess
        self.bus.add_listener(sess.id, lambda ev, s=sess: self._to_events_channel(s, ev))
        self.metrics.active_streams.set(len(self.sessions))
        self.metrics.streams_total.labels(sess.kind).inc()
        self.bus.publish_threadsafe({"type": "session.started", "session_id": sess.id, "kind": sess.kind})
        log.info("session %s started (%s from %s)", sess.id, sess.kind, sess.remote or "?")

    async def _create(self, offer_sdp: str, kind: str, remote: str | None = None) -> StreamSession:
        check_offer_sdp(offer_sdp)
        self._reserve()
        self._loop = asyncio.get_running_loop()
        pc: RTCPeerConnection | None = None
        sess: StreamSession | None = None
        pipeline: Pipeline | None = None
        try:
            pc = self._peer()
            sess = self._new_session(kind, pc, remote)
            self._wire(sess)
            await self._accept_offer(sess, offer_sdp)
            # Only an offer aiortc accepted pays for a pipeline (detector + road network: seconds of CPU).
            pipeline = await self._build_pipeline()
            await self._answer(sess)
            await self._start(sess, pipeline)
            pipeline = None  # the worker owns it now and closes it when the stream ends
            sess.tasks.append(asyncio.create_task(self._consume_video(sess), name=f"video-{sess.id[:8]}"))
            pc = None  # owned by the session now
            return sess
        finally:
            self._pending -= 1
            if pipeline is not None:
                await asyncio.to_thread(close_pipeline, pipeline)
            if pc is not None:  # the offer failed: nothing of the half-made session may stay behind
                for task in sess.tasks if sess is not None else ():
                    task.cancel()
                if sess is not None and sess.return_track is not None:
                    sess.return_track.stop()
                await pc.close()

    async def _create_pull(
        self,
        url: str,
        kind: str,
        remote: str | None,
        operator: Telemetry | None,
        rtmp_key: RtmpKeyRef | None,
        probe: bool = False,
        device_sn: str | None = None,
    ) -> StreamSession:
        """A pulled stream (see :mod:`edge_server.pull`); ``probe``: open it before the session starts."""
        self._reserve()
        self._loop = asyncio.get_running_loop()
        pipeline: Pipeline | None = None
        container = None
        try:
            if probe:
                container = await asyncio.to_thread(open_stream, url, self._pull_options())
            pipeline = await self._build_pipeline()
            sess = self._new_session(kind, None, remote)
            sess.operator, sess.rtmp_key = operator, rtmp_key
            sess.device_sn = device_sn or (rtmp_key.device_sn if rtmp_key else None)
            if sess.device_sn:  # OSD over MQTT: its own latency against the video (docs/dji-apps.md)
                sess.telemetry_offset_s = self.settings.osd_time_offset_s
            await self._start(sess, pipeline)
            pipeline = None
            sess.reader = self._reader(sess, url, container)
            container = None  # the reader owns it now
            sess.reader.start()
            return sess
        finally:
            self._pending -= 1
            if pipeline is not None:
                await asyncio.to_thread(close_pipeline, pipeline)
            if container is not None:
                container.close()

    def _pull_options(self) -> PullOptions:
        idle = self.settings.stream_idle_timeout_s
        return PullOptions(
            open_timeout_s=max(15.0, idle), read_timeout_s=idle, rtsp_transport=self.settings.rtsp_transport
        )

    def _reader(self, sess: StreamSession, url: str, container: Any = None) -> PullReader:
        worker, index = sess.worker, 0
        assert worker is not None

        def on_frame(frame: Any, media_time: float, perf: float, wall: float) -> None:
            nonlocal index
            sess.clock.on_frame(media_time, wall)
            worker.submit(IncomingFrame(frame, media_time, perf, wall, index))
            index += 1

        def on_end(reason: str, failure: str | None) -> None:
            if failure is not None:
                self.metrics.ingest_rejected.labels(sess.kind, failure).inc()
            loop = self._loop
            if loop is not None and not loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    asyncio.run_coroutine_threadsafe(self._close(sess.id, reason, failure is not None), loop)

        return PullReader(
            url, on_frame, on_end, self._pull_options(), name=f"pull-{sess.id[:8]}", container=container
        )

    async def _admit_rtmp(self, key: RtmpKeyRef, remote: str | None, operator: Telemetry | None) -> None:
        """The stream is set up (pipeline, worker, reader) before nginx gets its answer: the reader
        is then waiting at nginx when the publisher starts, and no frame of the start is lost (the
        publisher waits for the answer, as a WebRTC peer waits for the SDP answer)."""
        if self.rtmp is None:
            raise CapacityError("RTMP ingest is not running")
        if self.find_rtmp(key.secret) is not None or key.secret in self._rtmp_starting:
            raise KeyBusy(f"stream key {key.id} is streaming already: one publisher per key")
        self._rtmp_starting.add(key.secret)
        try:
            await self._create_pull(f"{self.rtmp.play_base}/{key.secret}", "rtmp", remote, operator, key)
            if not await asyncio.to_thread(self.rtmp.wait_player, key.secret, 5.0):
                log.warning(
                    "RTMP key %s: the server's player is not at nginx yet; the stream's start may be lost",
                    key.id,
                )
        finally:
            self._rtmp_starting.discard(key.secret)

    async def _rtmp_publish_done(self, secret: str, client_id: str | None) -> str | None:
        sess = self.find_rtmp(secret)
        if sess is None or sess.rtmp_key is None:
            return None
        if client_id and sess.rtmp_key.client_id and client_id != sess.rtmp_key.client_id:
            return None  # another (refused) publisher of the same key left
        reader = sess.reader
        if reader is not None and reader.opened_after_s is None and self.rtmp is not None:
            # the publisher left before the stream could be opened (no video?): nginx keeps an idle
            # player waiting, so end the player's wait now; the reader then says what it found
            await asyncio.to_thread(self.rtmp.drop, secret)
        await self._drain(sess)
        if reader is not None and reader.failed and reader.end_reason:  # e.g. it found no video
            return await self._close(sess.id, reader.end_reason, failed=True)
        return await self._close(sess.id, "publisher disconnected")

    @staticmethod
    async def _drain(sess: StreamSession, quiet_s: float = 0.5, max_s: float = 5.0) -> None:
        """The publisher left: its last frames are still on their way (nginx, the socket, the
        decoder). Wait until the reader has had none for ``quiet_s`` (at most ``max_s``); a reader
        still opening the stream is waited for (it may find no video: the session then fails)."""
        reader = sess.reader
        if reader is None:
            return
        deadline = time.monotonic() + max_s
        last, since = reader.frames, time.monotonic()
        while time.monotonic() < deadline and reader.alive:
            await asyncio.sleep(0.05)
            if reader.frames != last or reader.opened_after_s is None:  # still opening: its verdict first
                last, since = reader.frames, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return

    def _peer(self) -> RTCPeerConnection:
        """A peer connection with the configured ICE servers (a publisher's or a viewer's)."""
        servers = [RTCIceServer(urls=u) for u in self.settings.ice_servers]
        return RTCPeerConnection(RTCConfiguration(iceServers=servers))

    @staticmethod
    async def _take_offer(pc: RTCPeerConnection, offer_sdp: str) -> None:
        """aiortc takes the offer, or OfferError says why not."""
        try:
            await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
        except Exception as exc:  # noqa: BLE001 - aiortc raises assorted errors on bad SDP
            hint = ""
            if "parameters" in str(exc):
                hint = " (no video codec in common? the server takes VP8 and H.264)"
            raise OfferError(f"SDP offer rejected: {type(exc).__name__}: {exc}{hint}") from exc

    @classmethod
    async def _accept_offer(cls, sess: StreamSession, offer_sdp: str) -> None:
        """aiortc takes the offer; it must carry a video track the server can receive."""
        await cls._take_offer(sess.pc, offer_sdp)
        if sess.video_track is None:
            raise OfferError(
                "SDP offer has no video track the server can receive (direction must be sendonly or sendrecv)"
            )

    @staticmethod
    async def _answer(sess: StreamSession) -> None:
        """Create the answer; enable the return video if the peer receives it; hook RTCP sender reports."""
        pc = sess.pc
        await pc.setLocalDescription(await pc.createAnswer())
        sess.answer_sdp = pc.localDescription.sdp
        if sess.return_track is not None:
            sess.return_track.enabled = any(
                t.sender.track is sess.return_track and t.currentDirection in ("sendrecv", "sendonly")
                for t in pc.getTransceivers()
            )
        for t in pc.getTransceivers():
            if t.kind == "video" and t.receiver.track is sess.video_track:
                sess.sr_hook = install_sender_report_hook(t.receiver, sess.clock)

    def _worker(self, sess: StreamSession, pipeline: Pipeline) -> StreamWorker:
        return StreamWorker(
            sess.id,
            pipeline,
            self.services,
            PeerLink(
                telemetry_at=sess.telemetry_at,
                return_sink=sess.push_return,
                return_wanted=sess.return_wanted,
                on_finished=self._on_worker_finished,
                session_info=sess.info,
            ),
            stats=sess.stats,
        )

    def _wire(self, sess: StreamSession) -> None:
        pc = sess.pc

        @pc.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            if track.kind == "video" and sess.video_track is None:
                sess.video_track = track
                if self.settings.return_video:
                    sess.return_track = ReturnVideoTrack(
                        asyncio.get_running_loop(), self.settings.return_video_max_width
                    )
                    pc.addTrack(sess.return_track)
            else:  # audio or a second video: drain it so aiortc's queue does not grow
                sess.tasks.append(asyncio.create_task(_drain(track)))

        @pc.on("datachannel")
        def on_datachannel(channel: Any) -> None:
            if channel.label == "telemetry":
                channel.on("message", lambda message: self._on_telemetry(sess, message))
            elif channel.label == "events":
                sess.events_channel = channel
            else:
                log.info("session %s: ignoring data channel %r", sess.id, channel.label)

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            state = pc.connectionState
            log.debug("session %s: connection %s", sess.id, state)
            if state in ("failed", "closed") and sess.id in self.sessions:
                await self._close(sess.id, f"peer connection {state}")

    # -- media and telemetry --------------------------------------------------------------------

    async def _consume_video(self, sess: StreamSession) -> None:
        track = sess.video_track
        idle = self.settings.stream_idle_timeout_s
        reason = "video ended"
        index = 0
        try:
            while True:
                try:
                    frame = await asyncio.wait_for(track.recv(), timeout=idle)
                except asyncio.TimeoutError:
                    reason = f"no video for {idle:g} s (peer gone?)"
                    break
                except MediaStreamError:
                    reason = "peer stopped sending video"
                    break
                perf, wall = time.perf_counter(), time.time()
                if frame.pts is None:
                    media_time = time.perf_counter() - sess.created_perf
                else:
                    media_time = float(frame.pts * frame.time_base)
                sess.clock.on_frame(media_time, wall)
                sess.worker.submit(IncomingFrame(frame, media_time, perf, wall, index))
                index += 1
        except asyncio.CancelledError:
            return
        self._spawn(self._close(sess.id, reason))

    def _on_telemetry(self, sess: StreamSession, message: str | bytes) -> None:
        """A "telemetry" data-channel message (docs/telemetry-datachannel.md)."""
        arrival = time.time()
        skew = self.settings.telemetry_max_clock_skew_s
        limit = self.settings.max_telemetry_message_bytes
        self._take_telemetry(
            sess, arrival, lambda: parse_message(message, limit, arrival_s=arrival, max_clock_skew_s=skew)
        )

    def on_osd(self, device_sn: str, payload: bytes, arrival_s: float) -> None:
        """A DJI Cloud API OSD message (MQTT client's thread): handled on the media loop."""
        loop = self.media.loop if self.media is not None else self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._on_osd, device_sn, payload, arrival_s)

    def _on_osd(self, device_sn: str, payload: bytes, arrival: float) -> None:
        targets = [s for s in self.sessions.values() if s.device_sn == device_sn and not s.closing]
        if not targets:
            self.metrics.ingest_rejected.labels("mqtt", "unknown device").inc()
            now = time.monotonic()
            if now - self._unknown_devices.get(device_sn, -1e9) >= 60.0:  # once a minute per device
                if len(self._unknown_devices) > 1000:
                    self._unknown_devices.clear()
                self._unknown_devices[device_sn] = now
                log.info("OSD from aircraft %s, which no live stream's key names: ignored", device_sn[:64])
            return
        skew = self.settings.telemetry_max_clock_skew_s
        for sess in targets:
            self._take_telemetry(
                sess, arrival, lambda: parse_osd(payload, arrival_s=arrival, max_clock_skew_s=skew)
            )

    def _take_telemetry(self, sess: StreamSession, arrival: float, parse: Callable[[], Telemetry]) -> None:
        """One telemetry message for ``sess``, whichever way it came: into the session's buffer and
        clock mapping, or counted as rejected (with a hole where its values were absurd)."""
        try:
            t = parse()
        except (TelemetryError, ValueError) as exc:
            if isinstance(exc, ImplausibleTelemetry):
                sess.telemetry.add_hole(exc.timestamp_s)  # frames around it get no telemetry
            self._reject_telemetry(sess, str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - a message must never end the stream
            log.warning("session %s: telemetry message could not be read", sess.id, exc_info=True)
            self._reject_telemetry(sess, f"unreadable message ({type(exc).__name__})")
            return
        sess.telemetry.add(t)
        sess.clock.on_telemetry(t.timestamp_s, arrival)
        sess.stats.telemetry_received += 1
        sess.stats.last_telemetry_perf = time.perf_counter()
        self.metrics.telemetry_messages.labels("accepted").inc()

    def _reject_telemetry(self, sess: StreamSession, reason: str) -> None:
        """Count a rejected message by reason and tell the sender (at most once a second)."""
        sess.stats.telemetry_rejected += 1
        sess.stats.telemetry_reject_reasons[reason[:120]] += 1
        self.metrics.telemetry_messages.labels("rejected").inc()
        log.debug("session %s: telemetry rejected: %s", sess.id, reason)
        now = time.monotonic()
        if now - sess.last_reject_notice >= 1.0:
            sess.last_reject_notice = now
            self._send_event(
                sess,
                {
                    "type": "telemetry.rejected",
                    "session_id": sess.id,
                    "reason": reason[:500],
                    "rejected_total": sess.stats.telemetry_rejected,
                },
            )

    def _to_events_channel(self, sess: StreamSession, event: dict[str, Any]) -> None:
        """Bus listener (on the web server's loop): the event goes out on the media loop."""
        loop = self._loop
        if event.get("session_id") == sess.id and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the media loop stopped (shutdown)
                loop.call_soon_threadsafe(self._send_event, sess, event)

    @staticmethod
    def _send_event(sess: StreamSession, event: dict[str, Any]) -> None:
        ch = sess.events_channel
        if ch is not None and ch.readyState == "open":
            try:
                ch.send(dumps(event))
            except Exception:  # noqa: BLE001 - channel closing under us
                log.debug("event not sent on data channel", exc_info=True)

    # -- ending ---------------------------------------------------------------------------------

    def _on_worker_finished(self, session_id: str, status: str, reason: str | None) -> None:
        """Worker thread: its stream ended by itself (corrupt frame, engine error)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(self._close(session_id, reason or status), loop)

    async def _close(self, session_id: str, reason: str, failed: bool = False) -> str | None:
        """End a stream: stop its reader (a pulled stream: RTMP's publisher is dropped at nginx), stop
        the worker (it flushes everything; ``failed``: stored as failed), then close the peer.

        Returns ``"ended"`` once the session is flushed and stored, ``"closing"`` when the worker
        is still flushing after ``shutdown_timeout_s`` (it goes on and announces ``session.ended``
        when done), None for an unknown session.
        """
        sess = self.sessions.get(session_id)
        if sess is None:
            return None
        if sess.closing:
            await sess.closed.wait()
            return sess.outcome
        sess.closing = True
        try:
            current = asyncio.current_task()
            for task in sess.tasks:
                if task is not current:
                    task.cancel()
            if sess.reader is not None:
                sess.reader.stop()
                if sess.rtmp_key is not None and self.rtmp is not None:
                    await asyncio.to_thread(self.rtmp.drop, sess.rtmp_key.secret)
            if sess.worker is not None:
                sess.worker.stop(reason, failed)
                done = await asyncio.to_thread(sess.worker.join, self.settings.shutdown_timeout_s)
                if not done:
                    sess.outcome = "closing"
                    log.warning(
                        "session %s: still flushing after %.0f s; it ends on its own",
                        session_id,
                        self.settings.shutdown_timeout_s,
                    )
            await asyncio.sleep(0)  # let the worker's last events reach the data channel
            if sess.events_channel is not None and sess.events_channel.readyState == "open":
                await asyncio.sleep(0.2)
            if sess.return_track is not None:
                sess.return_track.stop()
            for viewer_id in list(sess.viewers):
                await self._close_viewer(sess, viewer_id)
            if sess.pc is not None:
                await sess.pc.close()
        except Exception:  # noqa: BLE001
            log.exception("session %s: error while closing", session_id)
        finally:
            self.bus.remove_listener(session_id)
            self.sessions.pop(session_id, None)
            self.metrics.active_streams.set(len(self.sessions))
            sess.worker = None  # a worker still flushing holds itself; the session keeps nothing alive
            sess.closed.set()
        return sess.outcome

    # -- viewers of the annotated video (media loop) ---------------------------------------------

    async def _add_viewer(self, session_id: str, offer_sdp: str) -> tuple[str, str]:
        sess = self.sessions.get(session_id)
        if sess is None or sess.closing:
            raise KeyError(session_id)
        if len(sess.viewers) >= self.settings.max_viewers:
            raise CapacityError(
                f"stream {session_id} has {len(sess.viewers)} viewers already (max_viewers); close one first"
            )
        check_offer_sdp(offer_sdp)
        pc = self._peer()
        track = ReturnVideoTrack(asyncio.get_running_loop(), self.settings.return_video_max_width)
        viewer_id = uuid.uuid4().hex[:12]
        try:
            await self._take_offer(pc, offer_sdp)
            if not any(t.kind == "video" for t in pc.getTransceivers()):
                raise OfferError("a viewer's offer must receive a video track (m=video, direction recvonly)")
            pc.addTrack(track)
            await pc.setLocalDescription(await pc.createAnswer())
            if not any(
                t.sender.track is track and t.currentDirection in ("sendonly", "sendrecv")
                for t in pc.getTransceivers()
            ):
                raise OfferError("a viewer's offer must receive the video (direction recvonly or sendrecv)")
        except BaseException:
            track.stop()
            await pc.close()
            raise
        track.enabled = True
        sess.viewers[viewer_id] = (pc, track)

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            if pc.connectionState in ("failed", "closed"):
                await self._close_viewer(sess, viewer_id)

        log.info("session %s: viewer %s joined (%d watching)", session_id, viewer_id, len(sess.viewers))
        return viewer_id, pc.localDescription.sdp

    async def _remove_viewer(self, session_id: str, viewer_id: str) -> bool:
        sess = self.sessions.get(session_id)
        if sess is None or viewer_id not in sess.viewers:
            return False
        await self._close_viewer(sess, viewer_id)
        return True

    @staticmethod
    async def _close_viewer(sess: StreamSession, viewer_id: str) -> None:
        viewer = sess.viewers.pop(viewer_id, None)
        if viewer is None:
            return
        pc, track = viewer
        track.stop()
        await pc.close()
        log.info("session %s: viewer %s left (%d watching)", sess.id, viewer_id, len(sess.viewers))

    async def _close_all(self, reason: str) -> None:
        self._shutting_down = True
        await asyncio.gather(
            *(self._close(sid, reason) for sid in list(self.sessions)), return_exceptions=True
        )
        spare, self._spare = self._spare, None
        if spare is not None:
            await asyncio.to_thread(close_pipeline, spare)
        self._clip_executor.shutdown(wait=True)


async def _drain(track: MediaStreamTrack) -> None:
    with contextlib.suppress(MediaStreamError, asyncio.CancelledError):
        while True:
            await track.recv()
