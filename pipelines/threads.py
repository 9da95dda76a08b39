"""One cap on a process's CPU threads, for every library that keeps a pool of them.

An engine process (a live server's ``engine_threads``) or a batch worker shares the box's cores with
others like it. OpenCV, torch (its OpenMP pool: intra-op work, also the CPU side of a CUDA model) and
the BLAS under numpy (OpenBLAS, MKL) each start as many threads as the box has cores, and an idle
OpenMP thread spins before it sleeps: sixteen single-stream engines on a 16-core GPU box gave 1.32x
the frames once ``OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=MKL_NUM_THREADS=1`` were set beside one
OpenCV thread an engine (docs/lab/2026-11-30-issue-42-gpu-streams.md); capping OpenCV alone gave
nothing at 16 streams (1.17x at 4). Environment variables only act before a library is loaded, and an engine process is forked
from a server that has loaded them all: :func:`limit_threads` sets each pool at run time instead.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def limit_threads(threads: int) -> dict[str, Any]:
    """Cap OpenCV's, torch's and the BLAS libraries' threads in this process at ``threads``; what
    each now uses (a library that is not installed is left out: nothing of it can start threads)."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, not {threads}")
    out: dict[str, Any] = {}
    import cv2

    cv2.setNumThreads(threads)
    out["opencv"] = cv2.getNumThreads()
    try:
        import torch
    except ImportError:
        pass
    else:
        torch.set_num_threads(threads)
        out["torch"] = torch.get_num_threads()
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        log.debug("threadpoolctl not installed: the BLAS libraries keep their own thread counts")
    else:
        threadpool_limits(limits=threads)  # kept: never restored for the life of the process
        for pool in threadpool_info():
            out[f"{pool.get('user_api')}:{pool.get('internal_api')}"] = pool.get("num_threads")
    log.debug("threads capped at %d: %s", threads, out)
    return out


__all__ = ["limit_threads"]
