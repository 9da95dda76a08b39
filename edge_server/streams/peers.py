"""WebRTC plumbing shared by publishers (:mod:`edge_server.streams.webrtc_ingest`) and viewers
(:mod:`edge_server.streams.viewers`): the SDP offer check (:func:`check_offer_sdp`), peer
connections with the configured ICE servers (:func:`new_peer`, :func:`take_offer`) and
:class:`ReturnVideoTrack`, the annotated video sent back to a publisher or to a viewer."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from fractions import Fraction

import av
import numpy as np
from aiortc import RTCConfiguration, RTCIceServer, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from edge_server.media import fit_width
from edge_server.settings import ServerSettings
from edge_server.streams.errors import OfferError

VIDEO_CLOCK_RATE = 90000

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


def new_peer(settings: ServerSettings) -> RTCPeerConnection:
    """A peer connection with the configured ICE servers (a publisher's or a viewer's)."""
    servers = [RTCIceServer(urls=u) for u in settings.ice_servers]
    return RTCPeerConnection(RTCConfiguration(iceServers=servers))


async def take_offer(pc: RTCPeerConnection, offer_sdp: str) -> None:
    """aiortc takes the offer, or OfferError says why not."""
    try:
        await pc.setRemoteDescription(RTCSessionDescription(sdp=offer_sdp, type="offer"))
    except Exception as exc:  # noqa: BLE001 - aiortc raises assorted errors on bad SDP
        hint = ""
        if "parameters" in str(exc):
            hint = " (no video codec in common? the server takes VP8 and H.264)"
        raise OfferError(f"SDP offer rejected: {type(exc).__name__}: {exc}{hint}") from exc


__all__ = ["VIDEO_CLOCK_RATE", "ReturnVideoTrack", "check_offer_sdp", "new_peer", "take_offer"]
