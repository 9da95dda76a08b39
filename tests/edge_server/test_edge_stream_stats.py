"""Per-track summaries of a live stream: finished tracks leave memory for the store."""

from __future__ import annotations

import time

import numpy as np
import pytest
import supervision as sv

from edge_server.stream_stats import StreamStats, TrackSummaries
from pipelines.types import EgoMotion, Frame, FrameResult, SpeedEstimate

pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)


def _result(t: float, ids: list[int], speed_kmh: float = 40.0) -> FrameResult:
    det = sv.Detections(xyxy=np.tile([10.0, 10.0, 30.0, 20.0], (len(ids), 1)), tracker_id=np.array(ids, int))
    det.data["class_name"] = np.array(["car"] * len(ids), dtype=object)
    frame = Frame(int(t * 30), t, np.zeros((4, 4, 3), np.uint8))
    speeds = {i: SpeedEstimate(i, speed_kmh, 1.0, 10, 1.0) for i in ids}
    return FrameResult(frame, det, None, EgoMotion.identity(), 0.1, speeds)


@pytest.mark.parametrize(
    ("now_s", "idle_s", "finished"),
    [
        (5.0, 10.0, []),  # nothing idle yet
        (12.5, 10.0, [1]),  # track 1 last seen at 2 s
        (30.0, 10.0, [1, 2]),
        (4.5, 1.0, [1, 2]),  # track 2 last seen at 3 s
    ],
)
def test_finished_tracks(now_s: float, idle_s: float, finished: list[int]) -> None:
    tracks = TrackSummaries()
    for k in range(61):  # track 1 from 0 to 2 s, track 2 from 0 to 3 s
        t = k / 30.0
        tracks.update(_result(t, [1, 2] if t <= 2.0 else [2]))
    tracks.update(_result(3.0, [2], speed_kmh=60.0))
    tracks.violated.add(1)
    rows = tracks.finished(now_s, idle_s)
    assert [r["track_id"] for r in rows] == finished
    if 1 in finished:
        one = rows[0]
        assert (one["frames"], one["violated"], one["first_time_s"], one["last_time_s"]) == (
            61,
            True,
            0.0,
            2.0,
        )
        assert one["peak_speed_kmh"] == one["mean_speed_kmh"] == 40.0
    tracks.forget([r["track_id"] for r in rows])
    assert len(tracks) == 2 - len(finished)
    assert [r["track_id"] for r in tracks.rows()] == [i for i in (1, 2) if i not in finished]
    assert tracks.violated == ({1} - set(finished))


def test_the_recent_latency_covers_the_last_seconds_only() -> None:
    """The live card's latency now: the frames processed in the last 5 s, not the stream's start."""
    stats = StreamStats()
    assert stats.recent_latency_ms(95) is None
    now = time.perf_counter()
    for k in range(100):  # 50 slow frames 20-10 s ago, then 50 fast ones in the last 4 s
        old = k < 50
        stats.processed_at.append(now - (20 - 0.2 * k if old else 4 - 0.08 * (k - 50)))
        stats.latencies_ms.append(500.0 if old else 80.0)
    assert stats.recent_latency_ms(95) == 80.0
    assert stats.percentile_ms(95) == 500.0


def test_delays_before_the_server_are_summed_up_per_stream() -> None:
    """The receive delay of every received frame and the capture-to-result latency of every
    processed one, as the session's info keeps them; None while no frame's capture time is known."""
    stats = StreamStats()
    assert stats.delays_ms() is None and stats.receive_delay_ms(95) is None
    stats.receive_delays_ms.extend([40.0, 50.0, 60.0, 70.0, 400.0])
    stats.capture_to_result_ms.extend([90.0, 500.0])
    d = stats.delays_ms()
    assert d == {
        "frames": 5,
        "receive_p50": 60.0,
        "receive_p95": pytest.approx(334.0),
        "receive_max": 400.0,
        "capture_to_result_p50": 295.0,
        "capture_to_result_p95": pytest.approx(479.5),
        "capture_to_result_max": 500.0,
    }
    assert stats.receive_delay_ms(95) == d["receive_p95"]
