"""A batch's progress as its items finish and its tasks report frames: :class:`BatchProgress`,
and :class:`Outcome`, what an executor tells it of a finished item."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    name: str
    record: dict[str, Any] | None = None
    error: str | None = None


class BatchProgress:
    """Progress across the whole batch: items finished, and frames done (finished items' and the
    running attempts' as their tasks report them; a retried item counts from its new attempt) out
    of the batch's total when the inputs' headers give it. A progress bar, and a log line at most
    every ``log_every_s`` seconds and for every finished item."""

    def __init__(
        self, items: int, total_frames: int | None, show: bool = True, log_every_s: float = 10.0
    ) -> None:
        self.items = items
        self.total_frames = total_frames
        self.outcomes: dict[str, dict[str, Any]] = {}
        self._running: dict[str, tuple[str, int]] = {}
        self._finished_frames = 0
        self._t0 = time.perf_counter()
        self._logged = self._t0
        self._log_every_s = log_every_s
        self._bar = None
        if show:
            from tqdm import tqdm

            self._bar = tqdm(total=total_frames, unit="frame", desc="batch", dynamic_ncols=True)

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self._t0

    @property
    def frames(self) -> int:
        return self._finished_frames + sum(f for _, f in self._running.values())

    @property
    def failed(self) -> int:
        return sum(1 for r in self.outcomes.values() if r["status"] == "failed")

    def running(self, name: str, attempt: str, frames: int) -> None:
        if name in self.outcomes:
            return  # a late report of a finished item
        self._running[name] = (attempt, frames)
        self._refresh(force=False)

    def done(self, o: Outcome) -> None:
        self._running.pop(o.name, None)
        if o.record is not None:
            self.outcomes[o.name] = dict(o.record)
            self._finished_frames += int((o.record.get("summary") or {}).get("frames") or 0)
        else:
            self.outcomes[o.name] = {"name": o.name, "status": "failed", "error": o.error}
        self._refresh(force=True)

    def line(self) -> str:
        frames = self.frames
        of = f"/{self.total_frames}" if self.total_frames else ""
        text = f"{len(self.outcomes)}/{self.items} items ({self.failed} failed), {frames}{of} frames, {self.elapsed_s:.0f} s"
        if self.total_frames and 0 < frames < self.total_frames and len(self.outcomes) < self.items:
            left = max(0, self.total_frames - frames) * self.elapsed_s / frames
            text += f", about {left:.0f} s left"
        return text

    def _refresh(self, force: bool) -> None:
        now = time.perf_counter()
        if force or now - self._logged >= self._log_every_s:
            self._logged = now
            log.info("batch: %s", self.line())
        if self._bar is not None:
            self._bar.n = self.frames
            self._bar.set_postfix_str(
                f"{len(self.outcomes)}/{self.items} items, {self.failed} failed", refresh=False
            )
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
