"""Per-track summaries of a live stream: finished tracks leave memory for the store."""

from __future__ import annotations

import numpy as np
import pytest
import supervision as sv

from edge_server.stream_stats import TrackSummaries
from pipelines.types import EgoMotion, Frame, FrameResult, SpeedEstimate


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
