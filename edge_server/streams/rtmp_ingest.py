"""RTMP publishers (the DJI apps): :class:`RtmpIngest` admits a publisher with a valid stream key
(one publisher per key), reads its stream back from nginx (:attr:`RtmpIngest.server`, an
:class:`edge_server.rtmp.RtmpServer`) as a pulled stream (:mod:`edge_server.streams.pull_ingest`),
and ends it, once its last frames are in, when the publisher leaves."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from edge_server.streams.errors import CapacityError, KeyBusy

if TYPE_CHECKING:
    from edge_server.rtmp import RtmpServer
    from edge_server.streams.host import StreamHost
    from edge_server.streams.pull_ingest import PullIngest
    from edge_server.streams.session import RtmpKeyRef, StreamSession
    from pipelines.types import Telemetry

log = logging.getLogger(__name__)


class RtmpIngest:
    """Runs on the media loop; :meth:`admit` and :meth:`publish_done` (nginx's callbacks) are called
    from the web server's loop."""

    def __init__(self, host: StreamHost, pull: PullIngest) -> None:
        self.host = host
        self.pull = pull
        self.server: RtmpServer | None = None  # nginx, when RTMP ingest runs (set by the app)
        self._starting: set[str] = set()  # keys admitted whose stream is being set up

    async def admit(self, key: RtmpKeyRef, remote: str | None, operator: Telemetry | None) -> None:
        """nginx asks whether a publisher with a valid key may start: CapacityError when the server
        is full, KeyBusy when this key streams already, PipelineUnavailable; else its stream runs."""
        await self.host.on_media(self._admit(key, remote, operator))

    async def publish_done(self, secret: str, client_id: str | None) -> str | None:
        """The publisher of ``secret`` left (nginx's on_publish_done): end its stream."""
        return await self.host.on_media(self._publish_done(secret, client_id))

    def find(self, secret: str) -> StreamSession | None:
        """The live stream published with this RTMP key."""
        return next(
            (s for s in self.host.sessions.values() if s.rtmp_key and s.rtmp_key.secret == secret), None
        )

    def find_id(self, key_id: str) -> StreamSession | None:
        """The live stream published with the RTMP key of this id."""
        return next((s for s in self.host.sessions.values() if s.rtmp_key and s.rtmp_key.id == key_id), None)

    async def drop_publisher(self, sess: StreamSession) -> None:
        """A stream of this ingest ends: its publisher is dropped at nginx (the registry calls this
        once the stream's reader is stopped)."""
        if sess.rtmp_key is not None and self.server is not None:
            await asyncio.to_thread(self.server.drop, sess.rtmp_key.secret)

    async def _admit(self, key: RtmpKeyRef, remote: str | None, operator: Telemetry | None) -> None:
        """The stream is set up (pipeline, worker, reader) before nginx gets its answer: the reader
        is then waiting at nginx when the publisher starts, and no frame of the start is lost (the
        publisher waits for the answer, as a WebRTC peer waits for the SDP answer)."""
        if self.server is None:
            raise CapacityError("RTMP ingest is not running")
        if self.find(key.secret) is not None or key.secret in self._starting:
            raise KeyBusy(f"stream key {key.id} is streaming already: one publisher per key")
        self._starting.add(key.secret)
        try:
            await self.pull.start(f"{self.server.play_base}/{key.secret}", "rtmp", remote, operator, key)
            if not await asyncio.to_thread(self.server.wait_player, key.secret, 5.0):
                log.warning(
                    "RTMP key %s: the server's player is not at nginx yet; the stream's start may be lost",
                    key.id,
                )
        finally:
            self._starting.discard(key.secret)

    async def _publish_done(self, secret: str, client_id: str | None) -> str | None:
        sess = self.find(secret)
        if sess is None or sess.rtmp_key is None:
            return None
        if client_id and sess.rtmp_key.client_id and client_id != sess.rtmp_key.client_id:
            return None  # another (refused) publisher of the same key left
        reader = sess.reader
        if reader is not None and reader.opened_after_s is None and self.server is not None:
            # the publisher left before the stream could be opened (no video?): nginx keeps an idle
            # player waiting, so end the player's wait now; the reader then says what it found
            await asyncio.to_thread(self.server.drop, secret)
        await self._drain(sess)
        if reader is not None and reader.failed and reader.end_reason:  # e.g. it found no video
            return await self.host.end(sess.id, reader.end_reason, failed=True)
        return await self.host.end(sess.id, "publisher disconnected")

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


__all__ = ["RtmpIngest"]
