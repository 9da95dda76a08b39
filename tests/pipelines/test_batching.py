"""pipelines.batching.Batcher: many threads' requests run in batches of one key, on one thread."""

from __future__ import annotations

import threading
import time

import pytest

from pipelines.batching import Batcher, BatcherClosed


def _wait_until(cond, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


class _Held:
    """A run that holds its first batch until released, so that the test decides what queues meanwhile."""

    def __init__(self) -> None:
        self.runs: list[tuple[object, list]] = []
        self.release = threading.Event()
        self.active = 0
        self.most_at_once = 0

    def __call__(self, key, items):
        self.active += 1
        self.most_at_once = max(self.most_at_once, self.active)
        self.runs.append((key, list(items)))
        if len(self.runs) == 1:
            self.release.wait(10)
        self.active -= 1
        return [(key, i * 10) for i in items]


def _queue_behind_a_held_batch(batcher: Batcher, held: _Held, first: tuple, rest: list[tuple]) -> dict:
    """``first`` (key, item) starts a batch that is held; ``rest`` queue behind it; then all run.
    Returns item -> the result its caller got."""
    results: dict = {}

    def call(key, item) -> None:
        results[item] = batcher(key, item)

    threads = [threading.Thread(target=call, args=first)]
    threads[0].start()
    _wait_until(lambda: len(held.runs) == 1)
    for key, item in rest:  # one after another: the queue's order is theirs
        threads.append(threading.Thread(target=call, args=(key, item)))
        threads[-1].start()
        _wait_until(lambda n=len(threads) - 1: batcher.pending == n)
    held.release.set()
    for t in threads:
        t.join(10)
    return results


@pytest.mark.parametrize(
    ("max_batch", "sizes"),
    [(1, [1, 1, 1, 1, 1, 1]), (2, [1, 2, 2, 1]), (4, [1, 4, 1]), (8, [1, 5])],
)
def test_requests_that_wait_while_a_batch_runs_form_the_next(max_batch: int, sizes: list[int]) -> None:
    held = _Held()
    batcher = Batcher(held, max_batch=max_batch)
    results = _queue_behind_a_held_batch(batcher, held, ("k", 0), [("k", i) for i in range(1, 6)])
    assert [len(items) for _, items in held.runs] == sizes
    assert [i for _, items in held.runs for i in items] == list(range(6))  # first come, first served
    assert results == {i: ("k", i * 10) for i in range(6)}  # each caller its own result
    assert held.most_at_once == 1
    stats = batcher.stats()
    assert stats["calls"] == 6 and stats["batches"] == len(sizes) and stats["max_batch"] == max_batch
    assert sum(int(k) * v for k, v in stats["batch_sizes"].items()) == 6
    assert stats["queue_ms_p95"] > 0 and stats["run_ms_mean"] > 0


def test_only_requests_of_one_key_share_a_batch_the_oldest_first() -> None:
    held = _Held()
    batcher = Batcher(held, max_batch=8)
    rest = [("a", 1), ("b", 2), ("a", 3), ("b", 4), ("c", 5), ("a", 6)]
    results = _queue_behind_a_held_batch(batcher, held, ("b", 0), rest)
    assert held.runs == [("b", [0]), ("a", [1, 3, 6]), ("b", [2, 4]), ("c", [5])]
    assert results == {i: (k, i * 10) for k, i in [("b", 0), *rest]}


@pytest.mark.parametrize(
    ("run", "error"),
    [
        (lambda key, items: 1 / 0, ZeroDivisionError),
        (lambda key, items: items[:-1], RuntimeError),  # a result missing
    ],
)
def test_a_failed_batch_raises_in_each_of_its_callers_and_the_next_one_runs(run, error) -> None:
    fail = threading.Event()
    fail.set()

    def maybe_failing(key, items):
        if fail.is_set():
            fail.clear()
            return run(key, items)
        return [i + 1 for i in items]

    batcher = Batcher(maybe_failing, max_batch=4)
    with pytest.raises(error):
        batcher("k", 1)
    assert batcher("k", 1) == 2


def test_a_wait_gathers_a_batch_and_ends_as_soon_as_it_is_full() -> None:
    runs: list[list[int]] = []
    batcher = Batcher(lambda key, items: runs.append(list(items)) or list(items), max_batch=3, wait_s=30.0)
    threads = [threading.Thread(target=batcher, args=("k", i)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)  # a batch of 3 runs at once: nobody waits the 30 s
    assert not any(t.is_alive() for t in threads)
    assert [sorted(r) for r in runs] == [[0, 1, 2]]

    lone = Batcher(lambda key, items: list(items), max_batch=3, wait_s=0.05)
    assert lone("k", 7) == 7
    assert lone.stats()["queue_ms_mean"] >= 45  # alone: it waited for company that never came


def test_on_batch_is_told_each_batch_and_cannot_fail_a_request() -> None:
    told: list[tuple[int, int]] = []

    def on_batch(size, waits):
        told.append((size, len(waits)))
        raise ValueError("a broken sink")

    batcher = Batcher(lambda key, items: list(items), on_batch=on_batch)
    assert [batcher("k", i) for i in range(3)] == [0, 1, 2]
    assert told == [(1, 1)] * 3


def test_close_runs_what_was_queued_and_a_later_request_starts_it_again() -> None:
    held = _Held()
    batcher = Batcher(held, max_batch=1)
    results = {}
    t = threading.Thread(target=lambda: results.setdefault(0, batcher("k", 0)))
    t.start()
    _wait_until(lambda: len(held.runs) == 1)
    closer = threading.Thread(target=batcher.close)
    closer.start()
    _wait_until(lambda: batcher._closed)
    with pytest.raises(BatcherClosed):
        batcher("k", 1)  # while it closes
    held.release.set()
    closer.join(10)
    t.join(10)
    assert results == {0: ("k", 0)}
    assert batcher("k", 2) == ("k", 20)
    batcher.close()


@pytest.mark.parametrize(("kwargs", "message"), [({"max_batch": 0}, "max_batch"), ({"wait_s": -1}, "wait_s")])
def test_bad_settings_are_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        Batcher(lambda key, items: items, **kwargs)


@pytest.mark.parametrize(
    ("before", "expected"),
    [
        (None, {"calls": 7, "batches": 4, "queue_s_total": 0.5, "run_s_total": 2.0, "batch_sizes": {"1": 2, "2": 1, "3": 1}}),
        (
            {"calls": 3, "batches": 2, "queue_s_total": 0.25, "run_s_total": 1.0, "batch_sizes": {"1": 1, "2": 1}},
            {"calls": 4, "batches": 2, "queue_s_total": 0.25, "run_s_total": 1.0, "batch_sizes": {"1": 1, "3": 1}},
        ),
    ],
)  # fmt: skip
def test_stats_between_two_readings_are_the_batches_in_between(before, expected) -> None:
    from pipelines.batching import stats_between

    after = {"calls": 7, "batches": 4, "queue_s_total": 0.5, "run_s_total": 2.0,
             "batch_sizes": {"1": 2, "2": 1, "3": 1}, "device": "cpu"}  # fmt: skip
    assert stats_between(before, after) == expected
