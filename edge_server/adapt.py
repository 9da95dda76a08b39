"""A live stream's choice of what to give up when the box cannot keep up: the governor of
:mod:`pipelines.effort` wired to the stream's counters and its pipeline (``settings.adapt``).

:class:`StreamAdapter` lives in the stream's worker thread: after each processed frame it hands the
governor the stream's counters; when the rung changes it applies the new detector and U-Net rates
to the pipeline (through an engine process's pipe too), sets the stride the receiving side skips
frames by, logs the choice with its reason and keeps it for the live ``stats`` event and the
session record (every change, with the time and why)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from pipelines.effort import Effort, LoadGovernor, LoadSample, effort_ladder

if TYPE_CHECKING:
    from edge_server.settings import ServerSettings
    from edge_server.stream_stats import StreamStats
    from pipelines.pipeline import Pipeline

log = logging.getLogger(__name__)

MAX_CHANGES_KEPT = 200  # changes a session record keeps (the first ones and the last ones)


class StreamAdapter:
    """One stream's governor (see the module doc); ``stride`` is read by the receiving side."""

    def __init__(
        self,
        session_id: str,
        pipeline: Pipeline,
        stats: StreamStats,
        settings: ServerSettings,
        memory: dict[str, int] | None = None,
    ) -> None:
        """``memory``: the server's (``StreamServices.effort_memory``): the stream starts one rung
        below where the last one ended (a box that needed skipping needs it again; one rung lower
        finds out whether it can do more), and leaves its own last rung there when it ends."""
        self.session_id = session_id
        self.pipeline = pipeline
        self.stats = stats
        self.memory = memory if memory is not None else {}
        config = pipeline.config
        self.governor = LoadGovernor(
            effort_ladder(
                config.keyframes,
                config.road,
                config.egomotion,
                max_stride=settings.adapt_max_stride,
                max_keyframe_interval=settings.adapt_max_keyframe_interval,
                max_road_every_n_frames=settings.adapt_max_road_every_n_frames,
                min_ego_width=settings.adapt_min_ego_width,
            ),
            target_latency_ms=settings.adapt_latency_ms,
            start_level=self.memory.get("level", 0) - 1,
        )
        self.stride = self.effort.stride
        self.reason: str | None = None  # why the current rung was chosen
        self.changes: list[dict[str, Any]] = []
        self._t0 = time.perf_counter()
        if self.effort.level:
            self.reason = "where the last stream on this server ended, one rung lower"
            pipeline.set_effort(self.effort)
            self._record(self._t0, self.reason)

    @property
    def effort(self) -> Effort:
        return self.governor.effort

    def after_frame(self, now: float, latency_ms: float) -> Effort | None:
        """The stream's counters after a processed frame; the new rung when it changed."""
        stages = self.stats.stage_ms_sum
        busy_ms = max(stages["worker"], stages["prepare"] + stages["convert"])
        sample = LoadSample(
            now,
            self.stats.received,
            self.stats.dropped,
            self.stats.skipped,
            busy_ms / 1000.0,
            (latency_ms,),
            lost=self.stats.lost_locally,
        )
        decision = self.governor.observe(sample)
        if decision is None:
            return None
        effort = self.governor.effort
        self.pipeline.set_effort(effort)
        self.stride = effort.stride
        self.reason = decision.reason
        self._record(now, decision.reason)
        return effort

    def _record(self, now: float, reason: str) -> None:
        change = {"t_s": round(now - self._t0, 2), **self.effort.to_dict(), "reason": reason}
        if len(self.changes) >= MAX_CHANGES_KEPT:
            del self.changes[MAX_CHANGES_KEPT // 2]
        self.changes.append(change)
        log.info("session %s adapts: %s (%s)", self.session_id, self.effort.describe(), reason)

    def ended(self) -> None:
        """The stream is over: one that ran long enough to judge its rung leaves it for the next."""
        if time.perf_counter() - self._t0 >= 2 * self.governor.window_s:
            self.memory["level"] = self.governor.level

    def live(self) -> dict[str, Any]:
        """The ``stats`` event's ``effort``: the rung, what it means and why it was chosen."""
        effort = self.effort
        return {
            **effort.to_dict(),
            "text": effort.describe(),
            "reason": self.reason,
            "changes": len(self.changes),
        }

    def info(self) -> dict[str, Any]:
        """What the session record keeps: the last rung, the highest, every change and the frames
        skipped on purpose."""
        return {
            "effort": {
                **self.effort.to_dict(),
                "highest_level": max((c["level"] for c in self.changes), default=0),
                "frames_skipped": self.stats.skipped,
                "ladder": [e.to_dict() for e in self.governor.ladder],
                "changes": self.changes,
            }
        }


__all__ = ["StreamAdapter"]
