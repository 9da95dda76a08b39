"""One live stream's state, :class:`StreamSession`, and what every ingest shares with it: the RTMP
key it was published with (:class:`RtmpKeyRef`) and the operator's flight values
(:data:`OPERATOR_FIELDS`, :func:`operator_fields`, :func:`with_operator_values`)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from edge_server.pull import redact
from edge_server.stream_stats import StreamStats
from edge_server.telemetry import ClockSync, TelemetryBuffer

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    from aiortc import RTCPeerConnection

    from edge_server.engine_link import StreamEngine
    from edge_server.pull import PullReader
    from edge_server.source_ring import SourceRing
    from edge_server.streams.peers import ReturnVideoTrack
    from pipelines.types import Telemetry


@dataclass
class StreamSession:
    """One live stream: WebRTC (``pc``: the peer connection) or pulled (``reader``: RTMP, RTSP).

    It lives on the media loop; its engine (``worker``) reads ``telemetry_at`` and pushes the
    annotated video to ``push_return`` from its own thread."""

    id: str
    kind: str
    pc: RTCPeerConnection | None
    remote: str | None
    stats: StreamStats = field(default_factory=StreamStats)
    clock: ClockSync = field(default_factory=ClockSync)
    telemetry: TelemetryBuffer = field(default_factory=TelemetryBuffer)
    worker: StreamEngine | None = None  # the stream's engine, from its start on (edge_server.engine_link)
    return_track: ReturnVideoTrack | None = None
    video_track: Any = None
    events_channel: Any = None
    reader: PullReader | None = None
    source: SourceRing | None = None  # a pulled stream's received packets, kept for evidence
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

    def source_segment(self, start_s: float, end_s: float, path: Path) -> dict | None:
        """The received video of that span written to ``path`` without re-encoding (None: not kept:
        a WebRTC stream, ``source_video_s`` 0, or the span is gone from the ring)."""
        source = self.source
        return None if source is None else source.write(path, start_s, end_s)

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


__all__ = [
    "OPERATOR_FIELDS",
    "RtmpKeyRef",
    "StreamSession",
    "operator_fields",
    "with_operator_values",
]
