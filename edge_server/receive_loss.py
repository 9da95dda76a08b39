"""Frames a live stream lost before the server's code saw them, and whether this box lost them.

A sender's frames carry media times a frame interval apart; a received frame whose media time is
k intervals after the last one had k - 1 frames lost before it (:class:`ReceiveGaps`): packets lost
on the network or in a full socket buffer here (the jitter buffer then drops the frame whole, or
the decoder cannot use it), or frames the sender never sent. Only the second cause is the server's
own: when the box's UDP receive buffers overflow (:class:`BoxOverflow`, Linux's ``RcvbufErrors``),
the server does not read its sockets in time, and the stream's adapter counts such losses as drops
(it gives up work until they stop; a lossy network alone changes nothing).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np


def udp_receive_buffer_errors(snmp: Path = Path("/proc/net/snmp")) -> int | None:
    """The box's UDP datagrams dropped so far because a socket's receive buffer was full (Linux
    ``RcvbufErrors``; None elsewhere): a server that does not read its WebRTC sockets in time loses
    packets there, and with them whole frames, before any of its code sees them."""
    try:
        header, values = [line.split() for line in snmp.read_text().splitlines() if line.startswith("Udp:")][
            :2
        ]
        return int(values[header.index("RcvbufErrors")])
    except (OSError, ValueError, IndexError):
        return None


class ReceiveGaps:
    """Frames missing between one stream's received frames, from their media times. The frame
    interval is a low quantile (10 %) of the last ``history`` gaps, so that losing up to about
    nine frames in ten still leaves it one interval; nothing is counted before ``min_history`` gaps
    were seen, nor for a media time that does not move forward (a restarted sender). A sender that
    lowers its frame rate has the frames it no longer sends counted as missing until nine in ten
    of the gaps held are at its new rate (about two seconds)."""

    def __init__(self, history: int = 61, min_history: int = 8, every: int = 8) -> None:
        self._gaps: deque[float] = deque(maxlen=history)
        self._min_history = min_history
        self._every = every  # the interval is worked out again every this many gaps (called per frame)
        self._last: float | None = None
        self._interval: float | None = None
        self._since = 0

    def add(self, media_time_s: float) -> int:
        """The frames missing before the frame of ``media_time_s`` (0 when none, or not known yet)."""
        last, self._last = self._last, media_time_s
        if last is None or media_time_s <= last:
            return 0
        gap = media_time_s - last
        self._gaps.append(gap)
        self._since += 1
        if len(self._gaps) < self._min_history:
            return 0
        if self._interval is None or self._since >= self._every:
            self._interval = float(np.quantile(np.fromiter(self._gaps, float, len(self._gaps)), 0.1))
            self._since = 0
        if self._interval <= 0 or gap < 1.5 * self._interval:
            return 0
        return max(0, round(gap / self._interval) - 1)


class BoxOverflow:
    """Whether this box dropped UDP datagrams at full receive buffers within the last ``hold_s``
    seconds. The counter is read at most every ``min_interval_s`` (shared by every stream of the
    server, from any thread); where it cannot be read (not Linux) the box never overflows."""

    def __init__(
        self,
        read: Callable[[], int | None] = udp_receive_buffer_errors,
        hold_s: float = 4.0,
        min_interval_s: float = 1.0,
    ) -> None:
        self._read = read
        self.hold_s = hold_s
        self.min_interval_s = min_interval_s
        self._lock = threading.Lock()
        self._count: int | None = None
        self._read_at: float | None = None
        self._grew_at: float | None = None

    def overflowing(self, now: float | None = None, fresh: bool = False) -> bool:
        """``fresh``: read the counter now, however recently it was read (``/healthz``)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            if fresh or self._read_at is None or now - self._read_at >= self.min_interval_s:
                count = self._read()
                if count is not None and self._count is not None and count > self._count:
                    self._grew_at = now
                self._count, self._read_at = count, now
            return self._grew_at is not None and now - self._grew_at <= self.hold_s

    @property
    def total(self) -> int | None:
        """The box's count as last read (None: not read yet, or not Linux)."""
        return self._count


__all__ = ["BoxOverflow", "ReceiveGaps", "udp_receive_buffer_errors"]
