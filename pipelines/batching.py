"""One model serving many streams, their requests run together: a batch per step.

A server's streams each ask the one loaded detector for a frame's boxes, from threads of their own.
On a GPU one frame leaves most of the device idle, and a batch of streams' frames costs little more
than one. On a CPU the cores are the limit (OpenVINO int8 at 640 px on the 2-core dev VM: 24.4 ms an
image alone, 23.1-25.2 in batches of 2-8), but a frame then waits for one run instead of every run
queued before it (docs/scale-out.md, "Many streams, one detector"). A
:class:`Batcher` runs requests on a thread of its own: each run takes the oldest request waiting and
every other one waiting with the same key (the same input size and image shape, so that each is
letterboxed as it would be alone and its result is the same), up to ``max_batch``. With ``wait_s`` 0
it never waits for a batch to fill: requests that arrive while a batch runs form the next one, so a
lone stream pays nothing and busy ones batch by themselves; a wait gathers more per batch at that
much latency. Each caller blocks for its own result, or the exception its batch raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np

log = logging.getLogger(__name__)

I = TypeVar("I")  # noqa: E741 - an item of a request
R = TypeVar("R")  # its result

RECENT = 2048  # requests whose queueing delay the percentiles are taken over


@dataclass(eq=False)  # compared by identity: items may be arrays
class _Request(Generic[I]):
    key: Hashable
    item: I
    since: float  # perf_counter when submitted
    future: Future = field(default_factory=Future)


class BatcherClosed(RuntimeError):
    """A request to a :class:`Batcher` while it closes."""


class Batcher(Generic[I, R]):
    """Requests from many threads, run in batches of one key by ``run(key, items) -> results`` (one
    result per item, in order) on a thread of its own: see the module's docstring."""

    def __init__(
        self,
        run: Callable[[Hashable, list[I]], Sequence[R]],
        *,
        max_batch: int = 1,
        wait_s: float = 0.0,
        name: str = "batcher",
        on_batch: Callable[[int, Sequence[float]], None] | None = None,
    ) -> None:
        """``on_batch(size, waits_s)`` is told of each batch run (its size, each request's queueing
        delay), on the serving thread (a metrics sink)."""
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if wait_s < 0:
            raise ValueError(f"wait_s must be >= 0, got {wait_s}")
        self._run, self.max_batch, self.wait_s, self.name = run, int(max_batch), float(wait_s), name
        self._on_batch = on_batch
        self._queue: deque[_Request[I]] = deque()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False
        # statistics (under the condition's lock)
        self.calls = 0
        self.batches = 0
        self.sizes: Counter[int] = Counter()  # batch size -> batches of that size
        self.wait_total_s = 0.0  # time requests waited before their batch started
        self.run_total_s = 0.0  # time spent in ``run``
        self._recent_waits: deque[float] = deque(maxlen=RECENT)

    @property
    def pending(self) -> int:
        """Requests waiting for a batch (not the one running)."""
        with self._cond:
            return len(self._queue)

    def __call__(self, key: Hashable, item: I) -> R:
        """``item``'s result, run in a batch with other requests of ``key``; blocks until it is there.
        Raises what the batch's run raised, or :class:`BatcherClosed`."""
        request: _Request[I] = _Request(key, item, time.perf_counter())
        with self._cond:
            if self._closed:
                raise BatcherClosed(f"{self.name} is closed")
            self._queue.append(request)
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return request.future.result()

    def close(self) -> None:
        """Stop the thread once the requests already queued have run (those arriving meanwhile are
        refused); a request after that starts it again."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        with self._cond:
            self._closed, self._thread = False, None

    def stats(self) -> dict[str, Any]:
        """Requests, batches, the batch sizes' histogram, the queueing delay (mean, p50, p95 of the
        last requests) and the mean run time, in ms; the totals in s (a later call's minus an
        earlier's: what happened in between)."""
        with self._cond:
            waits = np.asarray(self._recent_waits, dtype=float) * 1000.0
            return {
                "max_batch": self.max_batch,
                "wait_ms": round(self.wait_s * 1000.0, 3),
                "calls": self.calls,
                "batches": self.batches,
                "mean_batch": round(self.calls / self.batches, 3) if self.batches else None,
                "batch_sizes": {str(k): v for k, v in sorted(self.sizes.items())},
                "queue_ms_mean": round(self.wait_total_s * 1000.0 / self.calls, 3) if self.calls else None,
                "queue_ms_p50": round(float(np.percentile(waits, 50)), 3) if waits.size else None,
                "queue_ms_p95": round(float(np.percentile(waits, 95)), 3) if waits.size else None,
                "run_ms_mean": round(self.run_total_s * 1000.0 / self.batches, 3) if self.batches else None,
                "queue_s_total": round(self.wait_total_s, 6),
                "run_s_total": round(self.run_total_s, 6),
            }

    # ---------------------------------------------------------------- the serving thread

    def _take(self) -> list[_Request[I]] | None:
        """The next batch: the oldest request and the others of its key, after waiting ``wait_s``
        from the oldest's arrival for the batch to fill; None once closed and empty."""
        with self._cond:
            while not self._queue:
                if self._closed:
                    return None
                self._cond.wait()
            key = self._queue[0].key
            if self.wait_s > 0:
                deadline = self._queue[0].since + self.wait_s
                while (
                    not self._closed
                    and sum(r.key == key for r in self._queue) < self.max_batch
                    and (left := deadline - time.perf_counter()) > 0
                ):
                    self._cond.wait(left)
            batch = [r for r in self._queue if r.key == key][: self.max_batch]
            for r in batch:
                self._queue.remove(r)
            return batch

    def _serve(self) -> None:
        while (batch := self._take()) is not None:
            started = time.perf_counter()
            try:
                results = list(self._run(batch[0].key, [r.item for r in batch]))
                if len(results) != len(batch):
                    raise RuntimeError(f"{self.name}: {len(results)} results for a batch of {len(batch)}")
            except BaseException as exc:  # noqa: BLE001 - each caller raises it on its own thread
                for r in batch:
                    r.future.set_exception(exc)
                results = None
            ran = time.perf_counter() - started
            waits = [started - r.since for r in batch]
            with self._cond:
                self.calls += len(batch)
                self.batches += 1
                self.sizes[len(batch)] += 1
                self.run_total_s += ran
                self.wait_total_s += sum(waits)
                self._recent_waits.extend(waits)
            if self._on_batch is not None:
                try:
                    self._on_batch(len(batch), waits)
                except Exception:  # noqa: BLE001 - a sink's failure never fails a frame
                    log.exception("%s: on_batch failed", self.name)
            if results is not None:
                for r, result in zip(batch, results, strict=True):
                    r.future.set_result(result)


TOTALS = ("calls", "batches", "queue_s_total", "run_s_total")


def stats_between(before: dict[str, Any] | None, after: dict[str, Any]) -> dict[str, Any]:
    """What a batcher did between two :meth:`Batcher.stats` readings (``before`` None: since it
    started): the totals' differences and the batch sizes' histogram of the batches in between."""
    before = before or {"batch_sizes": {}}
    out: dict[str, Any] = {k: after[k] - before.get(k, 0) for k in TOTALS}
    out["batch_sizes"] = {
        size: n - before["batch_sizes"].get(size, 0)
        for size, n in after["batch_sizes"].items()
        if n - before["batch_sizes"].get(size, 0)
    }
    return out
