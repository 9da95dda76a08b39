"""Pulled streams: :class:`PullIngest` opens a stream URL (an RTSP camera, or, for
:mod:`edge_server.streams.rtmp_ingest`, a publisher's stream played back from nginx) and feeds
its decoded frames (:class:`edge_server.pull.PullReader`, a thread of its own) to the stream's
engine; a reader that ends ends its stream."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from edge_server.engine_link import IncomingFrame
from edge_server.pull import PullOptions, PullReader, open_stream
from edge_server.source_ring import SourceRing

if TYPE_CHECKING:
    from edge_server.streams.host import StreamHost
    from edge_server.streams.session import RtmpKeyRef, StreamSession
    from pipelines.types import Telemetry


class PullIngest:
    """Runs on the media loop; :meth:`create` is called from the web server's loop, the readers'
    callbacks from their threads."""

    def __init__(self, host: StreamHost) -> None:
        self.host = host
        self.settings = host.settings

    async def create(
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
        return await self.host.on_media(
            self.start(url, kind, remote, operator, None, probe=True, device_sn=device_sn)
        )

    async def start(
        self,
        url: str,
        kind: str,
        remote: str | None,
        operator: Telemetry | None,
        rtmp_key: RtmpKeyRef | None,
        probe: bool = False,
        device_sn: str | None = None,
    ) -> StreamSession:
        """A pulled stream (on the media loop); ``probe``: open it before the session starts."""
        admission = self.host.admit()
        container = None
        try:
            if probe:
                container = await asyncio.to_thread(open_stream, url, self.options())
            await admission.build_engine()
            sess = self.host.new_session(kind, None, remote)
            sess.operator, sess.rtmp_key = operator, rtmp_key
            sess.device_sn = device_sn or (rtmp_key.device_sn if rtmp_key else None)
            if sess.device_sn:  # OSD over MQTT: its own latency against the video (docs/dji-apps.md)
                sess.telemetry_offset_s = self.settings.osd_time_offset_s
            await admission.start(sess)
            if self.settings.source_video_s > 0:  # the received video, kept for evidence packs
                sess.source = SourceRing(self.settings.source_video_s + self.settings.clip_pre_s)
            sess.reader = self._reader(sess, url, container)
            container = None  # the reader owns it now
            sess.reader.start()
            return sess
        finally:
            await admission.release()
            if container is not None:
                container.close()

    def options(self) -> PullOptions:
        idle = self.settings.stream_idle_timeout_s
        return PullOptions(
            open_timeout_s=max(15.0, idle), read_timeout_s=idle, rtsp_transport=self.settings.rtsp_transport
        )

    def _reader(self, sess: StreamSession, url: str, container: Any = None) -> PullReader:
        engine, index = sess.worker, 0
        assert engine is not None

        def on_frame(frame: Any, media_time: float, perf: float, wall: float) -> None:
            nonlocal index
            sess.clock.on_frame(media_time, wall)
            engine.submit(IncomingFrame(frame, media_time, perf, wall, index))
            index += 1

        def on_end(reason: str, failure: str | None) -> None:
            if failure is not None:
                self.host.metrics.ingest_rejected.labels(sess.kind, failure).inc()
            self.host.end_soon(sess.id, reason, failure is not None)

        return PullReader(
            url, on_frame, on_end, self.options(), name=f"pull-{sess.id[:8]}", container=container,
            source=sess.source,
        )  # fmt: skip


__all__ = ["PullIngest"]
