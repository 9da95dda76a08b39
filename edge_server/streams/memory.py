"""Memory admission (issue 42): a new stream is refused, with the figures, when starting it would
leave less than ``min_free_memory_mb`` of the box's memory available (``MemAvailable`` in
/proc/meminfo: what the kernel can hand out without swapping) after the ``stream_memory_mb`` a
stream takes: refusing a stream beats swapping every stream into missed frames. Off where the
kernel does not say (not Linux), or with either setting null."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

MEMINFO = Path("/proc/meminfo")


def available_mb(meminfo: Path = MEMINFO) -> float | None:
    """The kernel's MemAvailable in MB, or None where it cannot be read."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_refusal(
    stream_memory_mb: float | None, min_free_memory_mb: float | None, meminfo: Path = MEMINFO
) -> str | None:
    """Why a new stream must be refused for memory, or None when it fits (or the check is off)."""
    if stream_memory_mb is None or min_free_memory_mb is None:
        return None
    free = available_mb(meminfo)
    if free is None:
        return None
    if free - stream_memory_mb < min_free_memory_mb:
        return (
            f"not enough memory for another stream: {free:.0f} MB available, a stream takes about "
            f"{stream_memory_mb:.0f} MB and {min_free_memory_mb:.0f} MB must stay free "
            "(settings stream_memory_mb, min_free_memory_mb); try again when a stream has ended"
        )
    return None


__all__ = ["available_mb", "memory_refusal"]
