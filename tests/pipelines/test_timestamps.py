"""Frame timestamps a speed can be timed by: the check names a stalled or implausible clock."""

from __future__ import annotations

import logging

import pytest

from pipelines.timestamps import TimestampCheck


def feed(check: TimestampCheck, times: list[float]) -> list[str]:
    return [check.observe(t) for t in times]


@pytest.mark.parametrize(
    "nominal, dt, problem",
    [
        (30.0, 1 / 30, ""),
        (30.0, 1 / 60, ""),  # 60 fps read with the default nominal 30: fine
        (30.0, 1 / 8, ""),  # a server dropping frames sees fewer: fine
        (30.0, 0.001, "advance 1.0 ms a frame (1000 fps) (the stream's rate is 30 fps)"),  # RTMP encoder seen
        (None, 0.001, "advance 1.0 ms a frame (1000 fps)"),
        (None, 3.0, "advance 3000.0 ms a frame (0 fps)"),
    ],
)
def test_the_rate_of_the_timestamps(nominal, dt, problem) -> None:
    check = TimestampCheck(nominal)
    got = feed(check, [10.0 + k * dt for k in range(40)])
    assert got[:10] == [""] * 10  # too few intervals to judge yet
    if problem:
        assert problem in got[-1] and "speeds timed by them are wrong" in check.problem
    else:
        assert check.problem == ""


def test_a_stalled_timestamp_is_named_and_logged_once(caplog) -> None:
    check = TimestampCheck(30.0)
    times = [k / 30 for k in range(20)] + [19 / 30] * 3 + [(20 + k) / 30 for k in range(10)]
    with caplog.at_level(logging.INFO, logger="pipelines.timestamps"):
        got = feed(check, times)
    assert [bool(p) for p in got[19:24]] == [False, True, True, True, False]
    assert "did not advance" in got[20]
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]  # when it starts and ends


def test_problem_between_covers_past_and_current_problems() -> None:
    check = TimestampCheck(30.0)
    feed(check, [k / 30 for k in range(20)] + [19 / 30] + [(20 + k) / 30 for k in range(20)])
    assert "did not advance" in check.problem_between(0.5, 0.7)  # at 0.633 s
    assert check.problem_between(0.8, 1.2) == ""
    feed(check, [40 / 30 + k * 0.001 for k in range(1, 40)])
    assert "ms a frame" in check.problem_between(1.3, 2.0)  # still going on
