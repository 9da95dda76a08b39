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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from aiortc import RTCConfiguration, RTCPeerConnection, RTCRtpSender, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from edge_client.tracks import (
    PassthroughTrack,
    PlaybackTrack,
    PublishError,
    check_video,
    iter_frames,
    synthetic_size,
)
from edge_server.telemetry import TelemetryMessage
from pipelines.telemetry import validate_telemetry
from pipelines.types import Telemetry

log = logging.getLogger(__name__)


@dataclass
class PublishResult:
    session_id: str | None = None
    frames_sent: int = 0
    frames_skipped: int = 0
    telemetry_sent: int = 0
    return_frames: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    event_times: list[float] = field(default_factory=list)  # time.monotonic() at each event's arrival
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
        self.result.event_times.append(time.monotonic())
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
