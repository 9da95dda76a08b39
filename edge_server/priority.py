"""Thread priorities: :func:`lower_thread_priority` (background work yields the cores to live
streams). Its own module so that an engine process uses it without the media stack (PyAV)."""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger(__name__)


def lower_thread_priority(nice: int) -> None:
    """Give the calling thread a lower CPU priority (Linux: a thread's own nice value), so that
    background work (clip encoding) yields the cores to live streams. Elsewhere, or without the
    right to do so, it is a no-op."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError:
        log.debug("thread priority unchanged", exc_info=True)


__all__ = ["lower_thread_priority"]
