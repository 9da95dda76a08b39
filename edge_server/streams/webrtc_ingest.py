"""WebRTC publishers (the phone API and WHIP alike): :class:`WebRtcIngest` checks an SDP offer,
answers it with a peer connection (the return video when the publisher receives it, RTCP sender
reports hooked for the clock mapping), wires its data channels ("telemetry" in, "events" out) and
feeds its video into the stream's engine; the stream ends when the video stops, the peer goes, or
the stream is idle."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from edge_server.engine_link import IncomingFrame
from edge_server.streams.errors import OfferError
from edge_server.streams.peers import ReturnVideoTrack, check_offer_sdp, new_peer, take_offer
from edge_server.telemetry import install_sender_report_hook

if TYPE_CHECKING:
    from aiortc import RTCPeerConnection

    from edge_server.streams.host import StreamHost
    from edge_server.streams.session import StreamSession
    from edge_server.streams.telemetry_routing import TelemetryRouter

log = logging.getLogger(__name__)


class WebRtcIngest:
    """Runs on the media loop; :meth:`create` is called from the web server's loop."""

    def __init__(self, host: StreamHost, telemetry: TelemetryRouter) -> None:
        self.host = host
        self.settings = host.settings
        self.telemetry = telemetry

    async def create(self, offer_sdp: str, kind: str, remote: str | None = None) -> StreamSession:
        """A new stream for this SDP offer (on the media loop); see :meth:`_create`."""
        return await self.host.on_media(self._create(offer_sdp, kind, remote))

    async def _create(self, offer_sdp: str, kind: str, remote: str | None = None) -> StreamSession:
        check_offer_sdp(offer_sdp)
        admission = self.host.admit()
        pc: RTCPeerConnection | None = None
        sess: StreamSession | None = None
        try:
            pc = new_peer(self.settings)
            sess = self.host.new_session(kind, pc, remote)
            self._wire(sess)
            await self._accept_offer(sess, offer_sdp)
            # Only an offer aiortc accepted pays for a pipeline (detector + road network: seconds of CPU).
            await admission.build_engine()
            await self._answer(sess)
            await admission.start(sess)  # the engine owns the pipeline now and closes it when the stream ends
            sess.tasks.append(asyncio.create_task(self._consume_video(sess), name=f"video-{sess.id[:8]}"))
            pc = None  # owned by the session now
            return sess
        finally:
            await admission.release()
            if pc is not None:  # the offer failed: nothing of the half-made session may stay behind
                for task in sess.tasks if sess is not None else ():
                    task.cancel()
                if sess is not None and sess.return_track is not None:
                    sess.return_track.stop()
                await pc.close()

    @staticmethod
    async def _accept_offer(sess: StreamSession, offer_sdp: str) -> None:
        """aiortc takes the offer; it must carry a video track the server can receive."""
        await take_offer(sess.pc, offer_sdp)
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
                channel.on("message", lambda message: self.telemetry.on_datachannel(sess, message))
            elif channel.label == "events":
                sess.events_channel = channel
            else:
                log.info("session %s: ignoring data channel %r", sess.id, channel.label)

        @pc.on("connectionstatechange")
        async def on_state() -> None:
            state = pc.connectionState
            log.debug("session %s: connection %s", sess.id, state)
            if state in ("failed", "closed") and sess.id in self.host.sessions:
                await self.host.end(sess.id, f"peer connection {state}")

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
                delay = sess.clock.receive_delay(media_time, wall)
                sess.worker.submit(IncomingFrame(frame, media_time, perf, wall, index, delay))
                index += 1
        except asyncio.CancelledError:
            return
        self.host.spawn(self.host.end(sess.id, reason))


async def _drain(track: MediaStreamTrack) -> None:
    with contextlib.suppress(MediaStreamError, asyncio.CancelledError):
        while True:
            await track.recv()


__all__ = ["WebRtcIngest"]
