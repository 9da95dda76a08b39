"""eval.live_tickets: a live stream's violations (as the API returns them) scored against the truth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from eval.groundtruth import GroundTruth, GtSpeeds
from eval.live_tickets import Flight, score_violation, summarize

FPS = 10.0


def flight() -> Flight:
    """Vehicle 1 drives 48 km/h (never over the limit 50), vehicle 2 60 km/h; 30 frames."""
    frames = np.repeat(np.arange(1, 31), 2)
    ids = np.tile([1, 2], 30)
    xyxy = np.array(
        [
            [10.0 + 2 * f, 10, 40 + 2 * f, 30] if i == 1 else [10.0 + 3 * f, 100, 40 + 3 * f, 120]
            for f, i in zip(frames, ids, strict=True)
        ]
    )
    n = len(frames)
    gt = GroundTruth(frames, ids, xyxy, np.full(n, "car", object), np.ones(n), np.zeros(n, bool))
    speeds = GtSpeeds(frames, ids, np.where(ids == 1, 48.0, 60.0), (frames - 1) / FPS)
    return Flight(Path("f"), "mavic3", FPS, 50.0, gt, speeds)


def violation(box, t, ticket, status="enforceable", peak=None) -> dict:
    base = {"start_time_s": 0.5, "end_time_s": 2.5, "snapshot_time_s": t}
    return {
        "status": status,
        "ticket_speed_kmh": ticket,
        "ticket_sigma_kmh": 0.5,
        "tolerance_kmh": 3.0,
        "peak_speed_kmh": peak if peak is not None else ticket + 2,
        "start_time_s": 0.5,
        "end_time_s": 2.5,
        "bbox_xyxy": box,
        "base": base,
    }


@pytest.mark.parametrize(
    "v, gt_id, error, wrong",
    [
        (violation([70.0, 100, 100, 120], 1.9, 61.0), 2, 1.0, False),  # frame 20: vehicle 2's box
        (violation([48.0, 10, 78, 30], 1.9, 54.0), 1, 6.0, True),  # vehicle 1 never sped: a wrong ticket
        (violation([48.0, 10, 78, 30], 1.9, 52.0, status="not_enforceable"), 1, 4.0, False),
        (violation([500.0, 500, 520, 520], 1.9, 61.0), None, None, None),  # no vehicle under it
    ],
)
def test_score_violation(v, gt_id, error, wrong) -> None:
    row = score_violation(flight(), v)
    assert row["gt_id"] == gt_id
    if gt_id is not None:
        assert row["error_kmh"] == pytest.approx(error) and row["wrong_ticket"] is wrong
        assert row["within_tolerance"] is (abs(error) <= 3.0)


def test_summarize_counts_what_an_officer_sees() -> None:
    f = flight()
    rows = [
        score_violation(f, violation([70.0, 100, 100, 120], 1.9, 61.0)),
        score_violation(f, violation([48.0, 10, 78, 30], 1.9, 54.0)),
        score_violation(f, violation([500.0, 500, 520, 520], 1.9, 61.0)),
    ]
    s = summarize(rows)
    assert (s["violations"], s["enforceable"], s["enforceable_unmatched"], s["scored"]) == (3, 3, 1, 2)
    assert (s["wrong_tickets"], s["outside_tolerance"], s["within_tolerance"]) == (1, 1, 0.5)


def test_a_recorded_live_run_is_scored_per_frame_on_the_flights_frames(tmp_path) -> None:
    """The server's track record (record_tracks: the offline speeds.csv columns) read back onto the
    flight's frames by media time: every third frame processed, vehicle 2 measured 1 km/h fast and
    its box off by a pixel; per-frame speeds matched as airpatrol eval matches them."""
    import csv

    from eval.live_tickets import read_track_record, score_speeds
    from eval.metrics.speed import summarize_speed
    from pipelines.sinks import SPEED_COLUMNS

    f = flight()
    path = tmp_path / "r.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(SPEED_COLUMNS)
        for frame in range(1, 31, 3):
            for gid, (x0, y0, dx), speed in ((1, (10, 10, 2), 48.0), (2, (11, 101, 3), 61.0)):
                x1 = x0 + dx * frame
                row = {
                    "frame": frame // 3 + 1,  # the server's own (received) frame count
                    "time_s": f"{(frame - 1) / FPS:.4f}",
                    "track_id": 10 + gid,
                    "class": "car",
                    "x1": x1,
                    "y1": y0,
                    "x2": x1 + 30,
                    "y2": y0 + 20,
                    "speed_kmh": speed if frame > 1 else "",
                    "sigma_kmh": 1.0,
                    "ground_x_m": "",
                    "ground_y_m": "",
                    "trusted": 1,
                    "scale_sigma_pct": 0.5,
                }
                w.writerow([row[c] for c in SPEED_COLUMNS])
    tracks = read_track_record(path, FPS)
    assert sorted(set(tracks.frames.tolist())) == list(range(1, 31, 3))
    summary = summarize_speed(score_speeds(f, tracks))
    assert summary["matched"] == 20 and summary["n"] == 18  # the first frame's speeds unknown
    assert summary["mae_kmh"] == pytest.approx(0.5) and summary["bias_kmh"] == pytest.approx(0.5)
