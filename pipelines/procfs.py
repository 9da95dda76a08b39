"""A process's CPU time and memory from ``/proc`` (Linux), for the benchmarks and the server's health:
one reader for the engine processes' figures in ``/healthz`` (edge_server.engines.supervisor), the
streams benchmarks (eval.streams_processes) and ``serve-bench`` (edge_client.bench_server), so they
count alike. Every function answers NaN or None for a process that is gone or a file it cannot read,
never raises."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/PID/stat``); NaN when unreadable."""
    try:
        fields = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def memory_mb(pid: int, pss: bool = True) -> dict[str, float] | None:
    """Process ``pid``'s resident memory in MB: ``rss_mb`` and, with ``pss``, ``pss_mb`` (its
    proportional share: pages shared with other processes divided among them), from
    ``smaps_rollup``, which walks every mapping of the process (22-37 ms for an engine process on the
    2-core VM); without ``pss`` the RSS alone from ``statm`` (cheap). None when unreadable."""
    try:
        if not pss:
            pages = int((PROC / str(pid) / "statm").read_text().split()[1])
            return {"rss_mb": round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)}
        out: dict[str, float] = {}
        for line in (PROC / str(pid) / "smaps_rollup").read_text().splitlines()[1:]:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                out[key.lower() + "_mb"] = round(int(rest.split()[0]) / 1024.0, 1)
    except (OSError, IndexError, ValueError):
        return None
    return out or None


__all__ = ["cpu_seconds", "memory_mb"]
