"""The received video itself, kept for evidence: the last seconds of a pulled stream's packets (RTMP,
RTSP) exactly as they arrived, and the segment around a violation written from them without
re-encoding (remuxed into MP4).

A pulled stream's reader (:class:`edge_server.pull.PullReader`) demuxes packets before decoding
them; :meth:`SourceRing.add` keeps a copy of each (about 1 MB a second at 8 Mbit/s). The codec's
parameters (SPS/PPS) are copied once (:meth:`SourceRing.attach`) into a template that outlives the
input, so a segment can be written after the stream ended. :meth:`SourceRing.write` starts at the
keyframe at or before the segment's start (a decoder needs it) and writes atomically.

A WebRTC stream cannot be kept this way: aiortc depacketises and decodes the RTP stream inside its
receiver and hands over decoded frames only, so a WebRTC violation has its annotated clip and no
source segment (its pack says so).

Ingest-side (it imports no engine); the engine reaches it through ``PeerLink.source_segment``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import threading
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Packet:
    time_s: float  # pts x time_base: the frame's media time (what the engine's timestamps are)
    data: bytes
    pts: int
    dts: int | None
    keyframe: bool


class SourceRing:
    """The last ``seconds`` of one stream's video packets (thread-safe: the reader adds, a clip
    thread writes)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        self._packets: deque[_Packet] = deque()
        self._lock = threading.Lock()
        self._holder: Any = None  # an output container never written: it keeps the template alive
        self._template: Any = None
        self._time_base: Fraction | None = None
        self._last_pts: int | None = None
        self.codec: str | None = None
        self.bytes = 0

    def attach(self, stream: Any) -> None:
        """Copy the input video stream's codec parameters (the reader, once its stream is open)."""
        holder = av.open(io.BytesIO(), "w", format="mp4")
        template = holder.add_stream_from_template(stream)
        with self._lock:
            self._holder, self._template = holder, template
            self._time_base = stream.time_base
            self.codec = stream.codec_context.name

    def add(self, packet: Any) -> None:
        """Keep a copy of one demuxed packet (an empty or untimed one is skipped)."""
        if self._time_base is None or packet.size == 0:
            return
        pts = packet.pts if packet.pts is not None else packet.dts
        if pts is None:
            return
        item = _Packet(
            float(pts * self._time_base), bytes(packet), int(pts), packet.dts, bool(packet.is_keyframe)
        )
        with self._lock:
            self._packets.append(item)
            self.bytes += len(item.data)
            self._evict(item.time_s - self.seconds)

    def _evict(self, oldest_s: float) -> None:
        """Drop packets older than ``oldest_s``, but never the keyframe the oldest kept one needs."""
        p = self._packets
        while len(p) > 1 and p[0].time_s < oldest_s:
            # the next keyframe after the first is also before oldest_s: everything up to it can go
            nxt = next((i for i in range(1, len(p)) if p[i].keyframe), None)
            if nxt is None or p[nxt].time_s > oldest_s:
                break
            for _ in range(nxt):
                self.bytes -= len(p.popleft().data)

    @property
    def span_s(self) -> tuple[float, float] | None:
        with self._lock:
            return (self._packets[0].time_s, self._packets[-1].time_s) if self._packets else None

    def write(self, path: Path, start_s: float, end_s: float) -> dict | None:
        """The packets from the keyframe at or before ``start_s`` to ``end_s`` remuxed into an MP4
        at ``path`` (atomically); what was written (its span, packets, bytes, whether it covers
        ``start_s``), or None when the ring holds nothing of that span."""
        with self._lock:
            packets = [p for p in self._packets if p.time_s <= end_s]
            template, time_base = self._template, self._time_base
        if template is None or not packets:
            return None
        first = max((i for i, p in enumerate(packets) if p.keyframe and p.time_s <= start_s), default=None)
        if first is None:  # the ring begins after start_s: from its first keyframe
            first = next((i for i, p in enumerate(packets) if p.keyframe), None)
        if first is None:
            return None
        segment = packets[first:]
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.part.mp4")
        try:
            with av.open(str(tmp), "w", format="mp4") as out:
                stream = out.add_stream_from_template(template)
                for p in segment:
                    pkt = av.Packet(p.data)
                    pkt.pts, pkt.dts, pkt.time_base = p.pts, p.dts, time_base
                    pkt.is_keyframe, pkt.stream = p.keyframe, stream
                    out.mux(pkt)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return {
            "start_s": round(segment[0].time_s, 4),
            "end_s": round(segment[-1].time_s, 4),
            "covers_start": segment[0].time_s <= start_s + 1e-6,
            "packets": len(segment),
            "bytes": sum(len(p.data) for p in segment),
            "codec": self.codec,
        }


__all__ = ["SourceRing"]
