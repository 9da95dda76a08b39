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
