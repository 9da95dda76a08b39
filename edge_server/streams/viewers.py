"""Viewers of a stream's annotated video (the console's Watch): :class:`Viewers` answers a
viewer's receive-only offer with a peer that sends the stream's return video (a
:class:`~edge_server.streams.peers.ReturnVideoTrack`), and
:func:`close_viewer` ends one (the registry ends them all with their stream)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from edge_server.streams.errors import CapacityError, OfferError
from edge_server.streams.peers import ReturnVideoTrack, check_offer_sdp, new_peer, take_offer

if TYPE_CHECKING:
    from edge_server.streams.host import StreamHost
    from edge_server.streams.session import StreamSession

log = logging.getLogger(__name__)


class Viewers:
    """Runs on the media loop; :meth:`add` and :meth:`remove` are called from the web server's loop."""

    def __init__(self, host: StreamHost) -> None:
        self.host = host
        self.settings = host.settings

    async def add(self, session_id: str, offer_sdp: str) -> tuple[str, str]:
        """A peer that receives the stream's annotated video (on the media loop): (viewer id, answer SDP)."""
        return await self.host.on_media(self._add(session_id, offer_sdp))

    async def remove(self, session_id: str, viewer_id: str) -> bool:
        return await self.host.on_media(self._remove(session_id, viewer_id))

    async def _add(self, session_id: str, offer_sdp: str) -> tuple[str, str]:
        sess = self.host.sessions.get(session_id)
        if sess is None or sess.closing:
            raise KeyError(session_id)
        if len(sess.viewers) >= self.settings.max_viewers:
            raise CapacityError(
                f"stream {session_id} has {len(sess.viewers)} viewers already (max_viewers); close one first"
            )
        check_offer_sdp(offer_sdp)
        pc = new_peer(self.settings)
        track = ReturnVideoTrack(asyncio.get_running_loop(), self.settings.return_video_max_width)
        viewer_id = uuid.uuid4().hex[:12]
        try:
            await take_offer(pc, offer_sdp)
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
                await close_viewer(sess, viewer_id)

        log.info("session %s: viewer %s joined (%d watching)", session_id, viewer_id, len(sess.viewers))
        return viewer_id, pc.localDescription.sdp

    async def _remove(self, session_id: str, viewer_id: str) -> bool:
        sess = self.host.sessions.get(session_id)
        if sess is None or viewer_id not in sess.viewers:
            return False
        await close_viewer(sess, viewer_id)
        return True


async def close_viewer(sess: StreamSession, viewer_id: str) -> None:
    viewer = sess.viewers.pop(viewer_id, None)
    if viewer is None:
        return
    pc, track = viewer
    track.stop()
    await pc.close()
    log.info("session %s: viewer %s left (%d watching)", sess.id, viewer_id, len(sess.viewers))


__all__ = ["Viewers", "close_viewer"]
