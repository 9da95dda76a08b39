"""Thread priorities: :func:`lower_thread_priority` (background work yields the cores to live
streams), and :func:`setup_worker_process`, what an engine process and the detector service do
first. Its own module so that an engine process uses it without the media stack (PyAV)."""

from __future__ import annotations

import logging
import os
import signal
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


def setup_worker_process(name: str, log_level: int | str, nice: int, threads: int | None) -> None:
    """The first steps of a process the server starts for its streams (an engine, the detector
    service), before any other thread: it ignores SIGINT and SIGTERM (the server ends it through its
    pipe, flushing each stream: a Ctrl-C or a SIGTERM sent to the whole process group must not kill
    it first), logs as ``name[PID]``, lowers its priority by ``nice`` (this thread's, so the whole
    process's) and caps OpenCV's, torch's and the BLAS libraries' pools at ``threads``
    (:func:`pipelines.threads.limit_threads`; None or 0: the libraries' own)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(
        level=log_level, format=f"%(asctime)s %(levelname)s {name}[%(process)d] %(name)s: %(message)s"
    )
    lower_thread_priority(nice)
    if threads:
        from pipelines.threads import limit_threads

        limit_threads(threads)


__all__ = ["lower_thread_priority", "setup_worker_process"]
