"""Live event fan-out: worker threads publish, WebSocket clients and data channels subscribe."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edge_server.schemas import ViolationOut

log = logging.getLogger(__name__)


def violation_event(kind: str, out: ViolationOut) -> dict[str, Any]:
    """A ``violation`` or ``violation.updated`` event: the violation as the API shows it."""
    return {"type": kind, "session_id": out.session_id, "violation": out.model_dump(mode="json")}


def evidence_ready_event(out: ViolationOut) -> dict[str, Any]:
    """The ``violation.evidence_ready`` event of a violation whose evidence pack was made."""
    return {
        "type": "violation.evidence_ready",
        "session_id": out.session_id,
        "violation_id": out.id,
        "evidence": None if out.evidence is None else out.evidence.model_dump(mode="json"),
    }


class Subscription:
    def __init__(self, bus: EventBus, session_id: str | None, maxsize: int) -> None:
        self.bus = bus
        self.session_id = session_id
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=maxsize)
        self.overflowed = 0

    def close(self) -> None:
        self.bus._subs.discard(self)

    async def get(self) -> dict[str, Any]:
        return await self.queue.get()


class EventBus:
    """Events are dicts with at least ``type`` and ``session_id``; delivered in order per subscriber.

    A subscriber that does not keep up loses its oldest events (counted), never blocks producers.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None, queue_size: int = 256) -> None:
        self.loop = loop
        self.queue_size = queue_size
        self._subs: set[Subscription] = set()
        self._listeners: dict[str, Callable[[dict[str, Any]], None]] = {}

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def subscribe(self, session_id: str | None = None) -> Subscription:
        sub = Subscription(self, session_id, self.queue_size)
        self._subs.add(sub)
        return sub

    def add_listener(self, key: str, fn: Callable[[dict[str, Any]], None]) -> None:
        """Synchronous callback on the loop thread (used for the per-peer "events" data channel)."""
        self._listeners[key] = fn

    def remove_listener(self, key: str) -> None:
        self._listeners.pop(key, None)

    @property
    def subscriber_count(self) -> int:
        return len(self._subs)

    def publish(self, event: dict[str, Any]) -> None:
        """Deliver now; call on the event loop thread."""
        for sub in list(self._subs):
            if sub.session_id and event.get("session_id") != sub.session_id:
                continue
            while sub.queue.full():
                sub.queue.get_nowait()
                sub.overflowed += 1
            sub.queue.put_nowait(event)
        for key, fn in list(self._listeners.items()):
            try:
                fn(event)
            except Exception:  # noqa: BLE001 - one bad listener must not stop the others
                log.exception("event listener %s failed", key)

    def publish_threadsafe(self, event: dict[str, Any]) -> None:
        """Deliver from any thread (worker threads)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            log.debug("event dropped, no loop: %s", event.get("type"))
            return
        try:
            loop.call_soon_threadsafe(self.publish, event)
        except RuntimeError:  # loop closed meanwhile (shutdown)
            log.debug("event dropped at shutdown: %s", event.get("type"))


def dumps(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":"), default=str)
