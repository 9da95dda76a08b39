"""Frame timestamps a speed can be timed by: :class:`TimestampCheck`.

Every speed divides a distance by the difference of two frame timestamps, so a stream whose media
times are wrong gives wrong speeds, or none. An RTMP encoder, tried as a new user would, sent 30 fps
video whose media times advanced 1 ms a frame: every speed came out 33 times too high and was
dropped as implausible, rightly, but nothing said why. The check watches the timestamps as they
come and names the problem: a timestamp that did not advance, or a rate (the median interval of
the last ``window`` frames) outside ``[MIN_FPS, MAX_FPS]`` or above ``RATE_FACTOR`` times the
stream's nominal rate (a clock running slow: every speed too high; a rate below nominal is a source
or a server dropping frames, and a clock running fast only lowers speeds). The pipeline puts the problem on every frame's warnings, logs it when it
starts and ends, and holds a violation whose base overlaps it from being enforceable.

Pure Python; imports only the domain types (pipelines.types), nothing of the engine.
"""

from __future__ import annotations

import logging
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import replace

from pipelines.types import NOT_ENFORCEABLE, Violation

logger = logging.getLogger(__name__)

MIN_FPS = 0.5
MAX_FPS = 240.0
RATE_FACTOR = 3.0  # a 60 fps stream read as the default 30 is fine; 1 ms a frame at 30 fps is not
WINDOW = 30


class TimestampCheck:
    """Follows a stream's frame timestamps (seconds); :attr:`problem` says what is wrong ("" when
    nothing is) and :meth:`problem_between` whether something was wrong over a stretch of time."""

    def __init__(self, nominal_fps: float | None = None, window: int = WINDOW) -> None:
        self.nominal_fps = nominal_fps if nominal_fps and nominal_fps > 0 else None
        self._intervals: deque[float] = deque(maxlen=max(3, int(window)))
        self._last: float | None = None
        self.problem = ""
        self._since: float | None = None
        self._spans: deque[tuple[float, float, str]] = deque(maxlen=64)  # (start, end, problem)

    def observe(self, t: float) -> str:
        """Take the next frame's timestamp; return the problem now ("" when none)."""
        problem = ""
        if self._last is not None:
            dt = t - self._last
            if not dt > 0:
                problem = (
                    f"frame timestamp {t:.4f} s did not advance (previous {self._last:.4f} s): "
                    "no speed is measured across it"
                )
            else:
                self._intervals.append(dt)
                problem = self._rate_problem()
        if self._last is None or t > self._last:
            self._last = t
        self._set(problem, t)
        return problem

    def _rate_problem(self) -> str:
        if len(self._intervals) < min(10, self._intervals.maxlen or 10):
            return ""
        rate = 1.0 / statistics.median(self._intervals)
        low, high = MIN_FPS, MAX_FPS
        if self.nominal_fps is not None:  # fewer frames than nominal is a source or a server dropping
            high = min(high, self.nominal_fps * RATE_FACTOR)  # frames; more, a clock running slow
        if low <= rate <= high:
            return ""
        expected = f" (the stream's rate is {self.nominal_fps:g} fps)" if self.nominal_fps else ""
        return (
            f"frame timestamps advance {1000.0 / rate:.1f} ms a frame ({rate:.0f} fps){expected}: "
            "speeds timed by them are wrong; check the encoder's or the file's timestamps"
        )

    def _set(self, problem: str, t: float) -> None:
        if problem and not self.problem:
            logger.warning("%s", problem)
            self._since = t
        elif not problem and self.problem:
            logger.info("frame timestamps plausible again at %.3f s", t)
            self._spans.append((self._since if self._since is not None else t, t, self.problem))
            self._since = None
        self.problem = problem

    def problem_between(self, start_s: float, end_s: float) -> str:
        """The problem that held at some time in ``[start_s, end_s]`` ("" when none did)."""
        if self.problem and self._since is not None and self._since <= end_s:
            return self.problem
        for a, b, problem in self._spans:
            if a <= end_s and b >= start_s:
                return problem
        return ""

    def hold(self, violations: Sequence[Violation]) -> list[Violation]:
        """Violations whose measuring base (or episode) overlaps implausible frame timestamps are
        not enforceable: their speeds were timed by a wrong clock."""
        out = []
        for v in violations:
            start, end = (
                (v.base.start_time_s, v.base.end_time_s) if v.base else (v.start_time_s, v.end_time_s)
            )
            problem = self.problem_between(start, end)
            out.append(
                replace(v, status=NOT_ENFORCEABLE, status_reason=problem) if problem and v.enforceable else v
            )
        return out


__all__ = ["TimestampCheck"]
