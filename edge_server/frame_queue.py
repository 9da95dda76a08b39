"""The stream worker's frame hand-over: :class:`FrameQueue` (received frames waiting for the worker,
the oldest dropped beyond its capacity), the conversion of a received image to BGR
(:func:`to_bgr`, :class:`CorruptFrameError`) and :class:`ReadyFrame` (a frame the prepare thread
made ready for the pipeline)."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from edge_server.engine_link import IncomingFrame
    from pipelines.pipeline import Prepared
    from pipelines.types import Frame


class CorruptFrameError(Exception):
    """A received frame that cannot be turned into a usable image."""


class FrameQueue:
    """Frames waiting for the worker, at most ``capacity``: ``put`` beyond that drops the oldest
    and returns it. Capacity 1 is a latest-frame slot; 2-3 absorb the longer frames (a keyframe's
    detection) without dropping, while latency stays bounded by the capacity."""

    def __init__(self, capacity: int = 1) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._cond = threading.Condition()
        self._items: deque[Any] = deque()
        self._closed = False

    def put(self, item: Any) -> Any | None:
        """Queue ``item``; beyond the capacity the oldest is dropped and returned (the capacity may
        change while frames wait: one put drops one)."""
        with self._cond:
            if self._closed:
                return None
            self._items.append(item)
            self._cond.notify_all()
            if len(self._items) <= self.capacity:
                return None
            return self._items.popleft()

    def wait_room(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until an item can be queued without dropping one; True when
        there is room and the queue is open. A producer whose work would be wasted on a dropped
        item waits here before it starts on the next one."""
        with self._cond:
            if len(self._items) >= self.capacity and not self._closed:
                self._cond.wait_for(lambda: len(self._items) < self.capacity or self._closed, timeout)
            return len(self._items) < self.capacity and not self._closed

    def take(self, timeout: float) -> Any | None:
        with self._cond:
            if not self._items and not self._closed:
                self._cond.wait(timeout)
            if not self._items:
                return None
            item = self._items.popleft()
            self._cond.notify_all()  # a producer waiting for room (wait_room)
            return item

    @property
    def waiting(self) -> int:
        """Frames queued now (behind the one being processed)."""
        return len(self._items)

    def close(self) -> list[Any]:
        """No more frames: returns (and forgets) the ones still waiting."""
        with self._cond:
            self._closed = True
            items = list(self._items)
            self._items.clear()
            self._cond.notify_all()
            return items

    @property
    def closed(self) -> bool:
        return self._closed


def to_bgr(image: Any) -> np.ndarray:
    if isinstance(image, np.ndarray):
        arr = image
    else:
        try:
            arr = image.to_ndarray(format="bgr24")
        except Exception as exc:  # noqa: BLE001 - whatever the decoder handed us
            raise CorruptFrameError(f"frame could not be converted to BGR: {exc}") from exc
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
        raise CorruptFrameError(f"frame has shape {arr.shape} and dtype {arr.dtype}, expected HxWx3 uint8")
    if arr.shape[0] < 16 or arr.shape[1] < 16:
        raise CorruptFrameError(f"frame is {arr.shape[1]}x{arr.shape[0]} pixels, too small to process")
    return arr


@dataclass(frozen=True)
class ReadyFrame:
    """A received frame made ready for the pipeline on the prepare thread: the pipeline's Frame
    and its grey image and camera motion (or the error that ends the stream)."""

    item: IncomingFrame
    frame: Frame | None = None
    prepared: Prepared | None = None
    error: Exception | None = None


__all__ = ["CorruptFrameError", "FrameQueue", "ReadyFrame", "to_bgr"]
