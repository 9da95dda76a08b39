"""``airpatrol serve-bench --fault kill|hang --fault-at S``: during the first run of two or more
streams, the first stream's engine process (a server with ``engine_processes``) is killed
(SIGKILL) or stopped (SIGSTOP: a hang for the watchdog) S seconds after the stream's first
``stats`` event. The report: how long the
server took to end that stream and with what reason, the violations it kept, and every other
stream's processed fps in the seconds before the fault against the seconds after it (from the
``stats`` events each stream gets over WebRTC, so the measure does not go through the server's
HTTP side)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import signal
import time
from typing import Any

SIGNALS = {"kill": signal.SIGKILL, "hang": signal.SIGSTOP}
WINDOW_S = 8.0  # fps measured over this long before the fault, and after it (from 2 s after)


class Fault:
    """Injects one fault into stream 0's engine process and measures around it."""

    def __init__(self, kind: str, at_s: float, streams: int) -> None:
        self.kind, self.at_s = kind, at_s
        self.samples: list[list[tuple[float, int]]] = [[] for _ in range(streams)]
        self.ended_at: float | None = None  # the faulted stream's session.ended, as it arrived
        self.pid: int | None = None
        self.fired_at: float | None = None
        self.fired_wall: float | None = None

    def on_event(self, k: int) -> Any:
        def record(event: dict[str, Any]) -> None:
            now = time.monotonic()
            if event.get("type") == "stats":
                self.samples[k].append((now, int(event["frames_processed"])))
                if k == 0 and event.get("engine_pid"):
                    self.pid = int(event["engine_pid"])
            elif event.get("type") == "session.ended" and k == 0:
                self.ended_at = now

        return record

    async def fire(self) -> None:
        deadline = time.monotonic() + 60.0  # S seconds from its first stats (its engine may be starting)
        while self.pid is None and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        if self.pid is None:
            raise RuntimeError("--fault: the first stream names no engine process (engine_processes off?)")
        await asyncio.sleep(self.at_s)
        os.kill(self.pid, SIGNALS[self.kind])
        self.fired_at, self.fired_wall = time.monotonic(), time.time()

    def _fps(self, k: int, a: float, b: float) -> float | None:
        inside = [(t, n) for t, n in self.samples[k] if a <= t <= b]
        if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
            return None
        return round((inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]), 2)

    def report(self, session: dict[str, Any]) -> dict[str, Any]:
        """What happened; ``session``: the faulted stream's record from the server."""
        t = self.fired_at or 0.0
        others = []
        for k in range(1, len(self.samples)):
            before, after = self._fps(k, t - WINDOW_S, t), self._fps(k, t + 2.0, t + 2.0 + WINDOW_S)
            ratio = round(after / before, 3) if before and after is not None else None
            others.append({"stream": k + 1, "fps_before": before, "fps_after": after, "ratio": ratio})
        ended_after = round(self.ended_at - t, 2) if self.ended_at and self.fired_at else None
        if ended_after is None and session.get("ended_at") and self.fired_wall:  # the event did not arrive
            ended = dt.datetime.fromisoformat(session["ended_at"].replace("Z", "+00:00")).timestamp()
            ended_after = round(ended - self.fired_wall, 2)
        return {
            "fault": self.kind,
            "at_s": self.at_s,
            "engine_pid": self.pid,
            "ended_after_s": ended_after,
            "status": session.get("status"),
            "end_reason": session.get("end_reason"),
            "violations_kept": session.get("violations_count"),
            "others": others,
        }


def add_fault_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fault",
        choices=["kill", "hang"],
        default=None,
        help="in the first run of 2+ streams, kill (SIGKILL) or stop (SIGSTOP) the first stream's engine process "
        "(a server with AIRPATROL_ENGINE_PROCESSES=true) and report the others' fps before and after",
    )
    p.add_argument(
        "--fault-at",
        type=float,
        default=10.0,
        help="--fault: seconds after the first stream's first stats (default 10)",
    )


def fault_line(f: dict[str, Any]) -> str:
    others = ", ".join(
        f"stream {o['stream']} {o['fps_before']} -> {o['fps_after']} fps ({o['ratio']}x)" for o in f["others"]
    )
    return (
        f"  fault: {f['fault']} of stream 1's engine {f['engine_pid']} at {f['at_s']:g} s: the stream ended "
        f"{f['ended_after_s']} s later, {f['status']} ({f['end_reason']}), {f['violations_kept']} violations kept; "
        f"the others' processed fps {WINDOW_S:g} s before -> {WINDOW_S:g} s after: {others}\n"
    )


__all__ = ["Fault", "add_fault_arguments", "fault_line"]
