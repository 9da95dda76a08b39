"""The registry as an ingest module sees it: :class:`StreamHost` (the live streams, admitting a new
one, ending one, the media loop) and :class:`Admission` (a stream being set up). The registry
(:class:`edge_server.streams.registry.StreamManager`) implements both; ingest modules type against
these, so that they import neither the registry nor, through it, the engine."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from aiortc import RTCPeerConnection

    from edge_server.media_loop import MediaLoop
    from edge_server.metrics import Metrics
    from edge_server.settings import ServerSettings
    from edge_server.streams.session import StreamSession

T = TypeVar("T")


class Admission(Protocol):
    """A stream being set up: it counts against ``max_streams`` until :meth:`release`, which every
    setup calls at its end, started or not."""

    async def build_engine(self) -> None:
        """Get the stream's pipeline ready (seconds of CPU unless a spare is ready):
        PipelineUnavailable, or CapacityError when the server shuts down meanwhile."""

    async def start(self, sess: StreamSession) -> None:
        """Store the session, start its engine (``sess.worker``) and list it among the live streams."""

    async def release(self) -> None:
        """No longer counted as being set up; a pipeline that no engine took is closed."""


class StreamHost(Protocol):
    """What an ingest module may use of the registry."""

    settings: ServerSettings
    metrics: Metrics
    media: MediaLoop | None  # where the peers live (None: the caller's loop)
    loop: asyncio.AbstractEventLoop | None  # the loop the streams run on, once one was set up
    sessions: dict[str, StreamSession]  # the live streams by id

    def admit(self) -> Admission:
        """Count a new stream against ``max_streams`` (on the media loop): CapacityError when full."""

    def new_session(self, kind: str, pc: RTCPeerConnection | None, remote: str | None) -> StreamSession:
        """A session with the server's telemetry settings, not yet started."""

    async def on_media(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the media loop (from the web server's loop) and wait for it."""

    async def end(self, session_id: str, reason: str, failed: bool = False) -> str | None:
        """End a stream (on the media loop): "ended", "closing" (still flushing) or None (unknown)."""

    def end_soon(self, session_id: str, reason: str, failed: bool = False) -> None:
        """End a stream from another thread (a reader's, a worker's), without waiting."""

    def spawn(self, coro: Any) -> None:
        """Run ``coro`` in the background on the running loop."""


__all__ = ["Admission", "StreamHost"]
