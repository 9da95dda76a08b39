"""The media loop: one thread with its own asyncio event loop for all WebRTC media (aiortc).

Receiving RTP, decoding, the telemetry and events data channels, ICE and DTLS run there, apart from
the web server's loop, which handles HTTP and WebSocket clients. A burst of API requests, a slow
handler or a large response then never delays a frame's receipt; the two meet only through
:meth:`MediaLoop.run` (an API call that starts or ends a stream) and thread-safe hand-offs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class MediaLoop:
    def __init__(self, name: str = "media-loop") -> None:
        self.loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)

    def start(self) -> MediaLoop:
        self._thread.start()
        self._started.wait(10)
        return self

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._started.set)
        try:
            self.loop.run_forever()
        finally:
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in pending:
                task.cancel()
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the media loop and wait for it from another loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("the media loop did not stop within %.0f s", timeout_s)


__all__ = ["MediaLoop"]
