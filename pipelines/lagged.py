"""Work taken off a stream's frame path and taken back a fixed number of frames later.

A stream's engine processes one frame after another on one thread; a slow step that only some frames
need (the scale check's lane frame, 80-125 ms at 1080p every 60 frames; a refit of the pitch from the
cars, 230-310 ms) stalls that frame by its whole time, a latency spike on a live stream. A
:class:`LaggedWork` runs such steps on a thread of its own and hands their results back ``lag``
frames after they were submitted, waiting for a result then if it is late, so what the engine
computes never depends on how fast the thread was: the same frames give the same results offline
and live, on a fast box or a slow one. The road U-Net's runs after the first are such steps too
(:mod:`pipelines.base_layer`). ``lag`` 0 runs every step in line, at once.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class _Job:
    future: Future
    take: Callable[[Any], None]  # what is done with the result, on the stream's thread
    lost: Callable[[], None] | None  # ... where there is none (the step failed or was dropped)
    age: int = 0  # frames since submitted


class LaggedWork:
    """Steps submitted on one frame, their results taken ``lag`` frames later in submission order:
    :meth:`submit` a step, :meth:`tick` once a frame, :meth:`drain` at a stream's end, :meth:`cancel`
    when what is pending no longer applies, :meth:`stop` when the stream is closed. Use from the
    stream's thread only. A step that raises loses its result (logged), never the stream; its
    ``lost`` says so to whoever waits for it, as for a step dropped."""

    def __init__(self, lag: int, name: str) -> None:
        if lag < 0:
            raise ValueError(f"lag must be >= 0 frames, got {lag}")
        self.lag, self.name = lag, name
        self._jobs: deque[_Job] = deque()
        self._thread: ThreadPoolExecutor | None = None

    @property
    def pending(self) -> int:
        """Steps submitted whose results are not taken yet."""
        return len(self._jobs)

    def submit(
        self,
        step: Callable[..., Any],
        *args: Any,
        take: Callable[[Any], None],
        lost: Callable[[], None] | None = None,
        **kwargs: Any,
    ) -> None:
        """Run ``step(*args, **kwargs)`` (they must not change while it runs: pass copies) and give its
        result to ``take`` ``lag`` frames later; at lag 0 at once, here. ``lost`` is called instead
        where it gives none (it raised, or it was dropped by :meth:`cancel`)."""
        if self.lag == 0:
            future: Future = Future()
            try:
                future.set_result(step(*args, **kwargs))
            except Exception as exc:  # noqa: BLE001 - as a thread's step would: logged when taken
                future.set_exception(exc)
            self._take(_Job(future, take, lost))
            return
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix=self.name)
        self._jobs.append(_Job(self._thread.submit(step, *args, **kwargs), take, lost))

    def tick(self) -> None:
        """One frame on: the results due (``lag`` frames old) are taken, in order, waited for if late."""
        for job in self._jobs:
            job.age += 1
        while self._jobs and self._jobs[0].age >= self.lag:
            self._take(self._jobs.popleft())

    def drain(self) -> None:
        """Take every pending result now (a stream's end: nothing submitted is lost), and stop the
        thread (a later step starts it again)."""
        while self._jobs:
            self._take(self._jobs.popleft())
        self._stop()

    def cancel(self) -> None:
        """Drop what is pending (its results would no longer apply); a step already running finishes
        on its thread, unwaited for, and its result is let go."""
        jobs, self._jobs = list(self._jobs), deque()
        for job in jobs:
            job.future.cancel()
            if job.lost is not None:
                job.lost()

    def stop(self) -> None:
        """Drop what is pending and stop the thread (a stream closed)."""
        self.cancel()
        self._stop()

    def _take(self, job: _Job) -> None:
        try:
            result = job.future.result()
        except Exception:
            log.exception("%s: a background step failed; its result is dropped", self.name)
            if job.lost is not None:
                job.lost()
            return
        job.take(result)

    def _stop(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=True)
            self._thread = None


__all__ = ["LaggedWork"]
