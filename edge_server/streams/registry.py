"""The registry of live streams, :class:`StreamManager`: it admits a stream (``max_streams``, not
while shutting down), starts it (session row, engine, listing, ``session.started``), finds it, and
ends it - on request, when the peer vanishes, when the stream goes idle, or at shutdown - always
through :meth:`StreamManager.end`, which lets the engine flush before the peer is closed.

It owns one object per way a stream arrives (``webrtc``, ``pull``, ``rtmp``), the ``viewers``,
the ``telemetry`` routing and the ``spare`` pipeline; callers use those directly. It is the part
of the package that reaches the engine: it turns a pipeline into a running
:class:`edge_server.worker.StreamWorker`, which the ingest modules see only as a
:class:`edge_server.engine_link.StreamEngine`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from edge_server.engine_link import PeerLink
from edge_server.events import EventBus
from edge_server.evidence.audit import ENGINE, Auditor
from edge_server.evidence.service import EvidenceService
from edge_server.media_loop import MediaLoop
from edge_server.metrics import Metrics
from edge_server.priority import lower_thread_priority
from edge_server.receive_loss import BoxOverflow
from edge_server.settings import ServerSettings
from edge_server.store import Store
from edge_server.stream_outputs import StreamServices
from edge_server.streams.errors import CapacityError
from edge_server.streams.memory import memory_refusal
from edge_server.streams.pull_ingest import PullIngest
from edge_server.streams.rtmp_ingest import RtmpIngest
from edge_server.streams.session import StreamSession, operator_fields
from edge_server.streams.spare import SparePipeline
from edge_server.streams.telemetry_routing import TelemetryRouter
from edge_server.streams.viewers import Viewers, close_viewer
from edge_server.streams.webrtc_ingest import WebRtcIngest
from edge_server.telemetry import TelemetryBuffer
from edge_server.worker import StreamWorker, close_pipeline

if TYPE_CHECKING:  # the engine (torch, models) loads when the first pipeline is built
    from aiortc import RTCPeerConnection

    from pipelines.pipeline import Pipeline

log = logging.getLogger(__name__)

T = TypeVar("T")


class StreamManager:
    """The live streams (:class:`~edge_server.streams.host.StreamHost` to the ingest modules). The
    streams live on the media loop; the methods that say so are called from the web server's loop."""

    def __init__(
        self,
        settings: ServerSettings,
        store: Store,
        bus: EventBus,
        metrics: Metrics,
        pipeline_factory: Callable[[], Pipeline],
        media: MediaLoop | None = None,
        evidence: EvidenceService | None = None,
        auditor: Auditor | None = None,
    ) -> None:
        self.settings = settings
        self.media = media  # where the peers live (None: the caller's loop)
        self.store = store
        self.bus = bus
        self.metrics = metrics
        self.sessions: dict[str, StreamSession] = {}
        self._pending = 0  # streams being set up (count against max_streams)
        self._clip_executor = ThreadPoolExecutor(
            max_workers=settings.clip_writers,
            thread_name_prefix="clips",
            initializer=lower_thread_priority,
            initargs=(settings.clip_nice,),
        )
        self.services = StreamServices(
            settings, store, bus, metrics, self._clip_executor, evidence, auditor, box_overflow=BoxOverflow()
        )
        self.loop: asyncio.AbstractEventLoop | None = None  # the streams' loop, once one was set up
        self._shutting_down = False
        self._background: set[asyncio.Task] = set()
        self.spare = SparePipeline(settings, pipeline_factory, self.spawn, lambda: self._shutting_down)
        self.telemetry = TelemetryRouter(self)
        self.webrtc = WebRtcIngest(self, self.telemetry)
        self.pull = PullIngest(self)
        self.rtmp = RtmpIngest(self, self.pull)  # rtmp.server: nginx, when RTMP ingest runs (set by the app)
        self.viewers = Viewers(self)

    def spawn(self, coro: Any) -> None:
        """Run ``coro`` in the background on the running loop (kept referenced until it ends)."""
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def active_count(self) -> int:
        return len(self.sessions)

    def get(self, session_id: str) -> StreamSession | None:
        return self.sessions.get(session_id)

    # -- called from the web server's loop ------------------------------------------------------

    async def close(self, session_id: str, reason: str) -> str | None:
        """End a stream (on the media loop); see :meth:`end`."""
        return await self.on_media(self.end(session_id, reason))

    async def close_all(self, reason: str = "server shutdown") -> None:
        await self.on_media(self._close_all(reason))

    async def warm_up(self) -> None:
        """Build the spare pipeline in the background (at startup; again each time one is taken)."""
        await self.on_media(self._warm_up_now())

    async def on_media(self, coro: Coroutine[Any, Any, T]) -> T:
        if self.media is None or asyncio.get_running_loop() is self.media.loop:
            return await coro
        return await self.media.run(coro)

    # -- admission and start (media loop) -------------------------------------------------------

    def admit(self) -> PendingStream:
        """Count a stream being set up against ``max_streams``; CapacityError when there is no room."""
        if self._shutting_down:
            raise CapacityError("server is shutting down")
        if len(self.sessions) + self._pending >= self.settings.max_streams:
            raise CapacityError(
                f"server is at capacity ({self.settings.max_streams} streams); try again later"
            )
        short = memory_refusal(self.settings.stream_memory_mb, self.settings.min_free_memory_mb)
        if short is not None:
            log.warning("a new stream refused: %s", short)
            self.metrics.streams_refused_memory.inc()
            raise CapacityError(short)
        self._pending += 1
        self.loop = asyncio.get_running_loop()
        return PendingStream(self)

    def new_session(self, kind: str, pc: RTCPeerConnection | None, remote: str | None) -> StreamSession:
        sess = StreamSession(id=uuid.uuid4().hex, kind=kind, pc=pc, remote=remote)
        sess.telemetry = TelemetryBuffer(max_age_s=self.settings.telemetry_max_age_s)
        sess.telemetry_offset_s = self.settings.telemetry_time_offset_s
        return sess

    async def _warm_up_now(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.spare.build_next()

    async def _start(self, sess: StreamSession, pipeline: Pipeline) -> None:
        """Store the session, start its worker (which owns ``pipeline`` from here) and list it."""
        info = {"operator_telemetry": operator_fields(sess.operator)} if sess.operator else None
        await asyncio.to_thread(self.store.create_session, sess.id, sess.kind, sess.remote, info=info)
        if self.services.auditor is not None:
            await asyncio.to_thread(
                self.services.auditor.record, ENGINE, "session.started", "session", sess.id, None,
                {"kind": sess.kind, "remote": sess.remote},
            )  # fmt: skip
        sess.worker = worker = self._worker(sess, pipeline)
        worker.start()
        self.sessions[sess.id] = sess
        self.bus.add_listener(sess.id, lambda ev, s=sess: self.telemetry.to_events_channel(s, ev))
        self.metrics.active_streams.set(len(self.sessions))
        self.metrics.streams_total.labels(sess.kind).inc()
        self.bus.publish_threadsafe({"type": "session.started", "session_id": sess.id, "kind": sess.kind})
        log.info("session %s started (%s from %s)", sess.id, sess.kind, sess.remote or "?")

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
                source_segment=sess.source_segment,
            ),
            stats=sess.stats,
        )

    # -- ending ---------------------------------------------------------------------------------

    def _on_worker_finished(self, session_id: str, status: str, reason: str | None) -> None:
        """Worker thread: its stream ended by itself (corrupt frame, engine error)."""
        self.end_soon(session_id, reason or status)

    def end_soon(self, session_id: str, reason: str, failed: bool = False) -> None:
        """From another thread (a reader's, a worker's): end the stream on the streams' loop."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(self.end(session_id, reason, failed), loop)

    async def end(self, session_id: str, reason: str, failed: bool = False) -> str | None:
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
                await self.rtmp.drop_publisher(sess)
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
                await close_viewer(sess, viewer_id)
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

    async def _close_all(self, reason: str) -> None:
        self._shutting_down = True
        await asyncio.gather(*(self.end(sid, reason) for sid in list(self.sessions)), return_exceptions=True)
        await self.spare.close()
        self._clip_executor.shutdown(wait=True)


class PendingStream:
    """A stream being set up (:meth:`StreamManager.admit`; an
    :class:`~edge_server.streams.host.Admission` to the ingest modules): counted against
    ``max_streams`` until :meth:`release`; it holds the stream's pipeline until the worker owns it."""

    def __init__(self, manager: StreamManager) -> None:
        self._manager = manager
        self._pipeline: Pipeline | None = None

    async def build_engine(self) -> None:
        self._pipeline = await self._manager.spare.take()

    async def start(self, sess: StreamSession) -> None:
        assert self._pipeline is not None, "build_engine() first"
        await self._manager._start(sess, self._pipeline)
        self._pipeline = None  # the worker owns it now and closes it when the stream ends

    async def release(self) -> None:
        self._manager._pending -= 1
        pipeline, self._pipeline = self._pipeline, None
        if pipeline is not None:
            await asyncio.to_thread(close_pipeline, pipeline)


__all__ = ["PendingStream", "StreamManager"]
