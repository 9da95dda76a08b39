"""Work off the frame's path, taken back a fixed number of frames later (pipelines.lagged)."""

from __future__ import annotations

import functools
import logging
import threading
import time

import pytest

from pipelines.lagged import LaggedWork


def _step(value: int, delay: float = 0.0) -> tuple[int, str]:
    time.sleep(delay)
    return value, threading.current_thread().name


@pytest.mark.parametrize(
    ("lag", "delays", "taken_on"),
    [
        (0, (0.0, 0.0, 0.0), {0: 0, 1: 1, 2: 2}),  # in line: taken on the frame submitted
        (3, (0.0, 0.0, 0.0), {0: 3, 1: 4, 2: 5}),
        (3, (0.3, 0.0, 0.3), {0: 3, 1: 4, 2: 5}),  # a late step is waited for: the same frames
        (1, (0.2, 0.0, 0.0), {0: 1, 1: 2, 2: 3}),
    ],
    ids=["in-line", "lag-3", "lag-3-slow-steps", "lag-1"],
)
def test_results_come_lag_frames_later_however_long_the_steps_take(
    lag: int, delays: tuple[float, ...], taken_on: dict[int, int]
) -> None:
    work = LaggedWork(lag, "test-lagged")
    got: dict[int, int] = {}
    threads: set[str] = set()
    frame = 0

    def take(result: tuple[int, str]) -> None:
        got[result[0]] = frame
        threads.add(result[1])

    for frame in range(8):
        work.tick()
        if frame < 3:
            work.submit(_step, frame, delays[frame], take=take)
    assert got == taken_on
    assert work.pending == 0
    main = threading.current_thread().name
    if lag == 0:
        assert threads == {main}
    else:  # off the frame's path: on the work's own thread
        assert threads and all(t.startswith("test-lagged") for t in threads)
    work.stop()


def test_the_stream_end_takes_what_is_pending_and_a_cancel_drops_it() -> None:
    work = LaggedWork(5, "test-lagged")
    taken: list[int] = []
    work.submit(_step, 1, 0.1, take=lambda r: taken.append(r[0]))
    work.submit(_step, 2, take=lambda r: taken.append(r[0]))
    work.tick()
    assert (taken, work.pending) == ([], 2)
    work.drain()  # a stream's end: nothing submitted is lost
    assert (taken, work.pending) == ([1, 2], 0)
    work.submit(_step, 3, 0.1, take=lambda r: taken.append(r[0]))  # the thread starts again
    work.cancel()  # what was pending no longer applies (the session restarted)
    for _ in range(6):
        work.tick()
    work.drain()
    assert taken == [1, 2]
    work.stop()


def test_a_failing_step_loses_its_result_and_says_so_never_the_stream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> None:
        raise ValueError("a lane frame that cannot be measured")

    for lag in (0, 2):
        work = LaggedWork(lag, "test-lagged")
        taken: list[object] = []
        lost: list[str] = []
        work.submit(broken, take=taken.append, lost=functools.partial(lost.append, "broken"))
        work.submit(_step, 7, take=taken.append, lost=functools.partial(lost.append, "7"))
        with caplog.at_level(logging.ERROR, logger="pipelines.lagged"):
            work.drain()
        assert ([r[0] for r in taken], lost) == ([7], ["broken"])  # type: ignore[index]
        assert "a background step failed" in caplog.text
        caplog.clear()
    # dropped: whoever waits for a result hears it will not come
    work = LaggedWork(3, "test-lagged")
    work.submit(_step, 1, 0.05, take=taken.append, lost=functools.partial(lost.append, "dropped"))
    work.stop()
    assert lost[-1] == "dropped" and work.pending == 0


def test_stop_ends_the_thread() -> None:
    work = LaggedWork(2, "test-lagged-stop")
    work.submit(_step, 1, 0.05, take=lambda r: None)
    assert any(t.name.startswith("test-lagged-stop") for t in threading.enumerate())
    work.stop()
    assert not any(t.name.startswith("test-lagged-stop") for t in threading.enumerate())
    with pytest.raises(ValueError, match="lag must be >= 0"):
        LaggedWork(-1, "x")
