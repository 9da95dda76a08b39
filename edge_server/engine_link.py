"""The one interface between a stream's ingest and its engine.

Ingest (:mod:`edge_server.streams`: WebRTC, RTMP, RTSP) hands each received frame to the stream's
engine as an :class:`IncomingFrame` through :class:`StreamEngine`; the engine reaches back to its
stream only through the :class:`PeerLink` it was given (the telemetry at a frame's time, the
annotated return video, the stream's end); its events go out on the event bus. Today the engine is
:class:`edge_server.worker.StreamWorker`, a thread; nothing here knows that, so an engine can move
to another process without touching the ingest modules.

This module imports neither the engine (:mod:`pipelines`) nor the worker, and ingest modules import
nothing else of the engine side.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from edge_server.height_reference import SessionHeight
    from pipelines.config import RulesConfig
    from pipelines.types import Telemetry


@dataclass
class IncomingFrame:
    image: Any  # av.VideoFrame (converted in the worker) or a BGR ndarray
    media_time_s: float  # zero-based media time from the RTP timestamps
    received_perf: float  # time.perf_counter() when the decoded frame reached the server code
    received_wall: float  # time.time() at the same moment
    index: int  # received-frame index (gaps in processed indices = dropped frames)
    # seconds from the frame's capture on the sender's clock to received_wall (None: unknown;
    # edge_server.telemetry.ClockSync.receive_delay): what the frame spent before the server saw it
    receive_delay_s: float | None = None


def _no_telemetry(_media_time_s: float) -> Telemetry | None:
    return None


@dataclass(frozen=True)
class PeerLink:
    """How a worker reaches its stream's transport; every part is optional.

    ``telemetry_at(media_time_s)``: the drone's telemetry at a frame's media time. ``return_sink``
    takes annotated frames back to the publisher while ``return_wanted()`` says someone watches.
    ``on_finished(session_id, status, reason)`` is called once the stream is closed and stored;
    ``session_info()`` adds transport details to the stored session; ``source_segment(start_s,
    end_s, path)`` writes the received video of that span (evidence; RTMP and RTSP keep it).
    """

    telemetry_at: Callable[[float], Telemetry | None] = _no_telemetry
    return_sink: Callable[[np.ndarray], None] | None = None
    return_wanted: Callable[[], bool] = lambda: True
    on_finished: Callable[[str, str, str | None], None] | None = None
    session_info: Callable[[], dict[str, Any]] | None = None
    # write the received video between two media times to a path, as it arrived (no re-encoding),
    # returning what was written; None here or from it: the transport keeps no source video
    source_segment: Callable[[float, float, Path], dict | None] | None = None


class EngineLost(RuntimeError):
    """A stream's engine is gone: its process died (killed, out of memory, a native crash) or hung
    and was stopped. The stream ends as failed with this message as its reason; what it stored
    stays. ``cause``: ``"died"`` or ``"hung"``."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause


class StreamEngine(Protocol):
    """A running stream's engine, as its ingest, the registry and the API see it."""

    def submit(self, item: IncomingFrame) -> None:
        """Hand a received frame to the engine (never blocks; an engine behind drops the oldest)."""

    def stop(self, reason: str, failed: bool = False) -> None:
        """Ask the engine to finish: it flushes and stores everything (idempotent)."""

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the engine to finish; True once it has."""

    @property
    def rules(self) -> RulesConfig:
        """The limits and zones the stream is (or, from its next frame, will be) measured against."""

    def set_rules(self, rules: RulesConfig) -> None:
        """New limits and zones from the next frame on."""

    @property
    def height(self) -> SessionHeight:
        """The stream's height reference (set from the API, applied from the next frame) and its
        latest processed frame, which a measured base is solved on."""


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, for a lost engine's reason: ``was killed by SIGKILL``, ``exited with code 1``."""
    if exitcode is None:
        return "is not answering"
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


__all__ = ["EngineLost", "IncomingFrame", "PeerLink", "StreamEngine", "describe_exit"]
