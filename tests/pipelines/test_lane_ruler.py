"""The lanes as a ruler (pipelines.lane_ruler): lane widths measured on simulated frames (eval.simulate
paints lane lines at a flight's ``lane_width_m``) through exact and scaled telemetry, and the pure
pair-distance and density functions on hand-made segments."""

from __future__ import annotations

import functools

import cv2
import numpy as np
import pytest
import supervision as sv

from eval.lane_bench import sim_frame
from pipelines.config import ScaleCheckConfig
from pipelines.geometry import GroundProjector
from pipelines.lane_ruler import lane_search, lane_width, measure_frame, pair_distances
from pipelines.scale_session import ScaleCheck
from pipelines.types import Frame


@functools.cache
def _frame(altitude: float, pitch: float, lane: float) -> tuple:
    """A rendered 640 x 360 frame: grey image, exact road mask, the vehicles' true boxes, intrinsics."""
    return sim_frame(altitude, pitch, lane, (640, 360))


@pytest.mark.parametrize(
    ("altitude", "pitch", "lane"),
    [(30.0, -90.0, 3.5), (30.0, -50.0, 3.0), (40.0, -60.0, 3.75), (50.0, -45.0, 3.25)],
)
@pytest.mark.parametrize("k", [1.0, 1.1, 0.92])
def test_the_lanes_measure_their_width_times_the_telemetrys_error(
    altitude: float, pitch: float, lane: float, k: float
) -> None:
    gray, mask, boxes, intr = _frame(altitude, pitch, lane)
    proj = GroundProjector.create(intr, altitude * k, pitch)  # the telemetry's height k times the truth
    cfg = ScaleCheckConfig(lane_width_m=lane)
    lo, hi = lane_search(cfg)
    got = measure_frame(gray, mask, boxes, proj, lo * k, hi * k)
    assert got.found and got.pairs >= 10
    assert got.width_m / (lane * k) == pytest.approx(1.0, abs=0.015)


def test_no_lines_no_width() -> None:
    gray, mask, boxes, intr = _frame(30.0, -90.0, 3.5)
    proj = GroundProjector.create(intr, 30.0, -90.0)
    assert not measure_frame(np.full_like(gray, 90), mask, boxes, proj, 2.45, 4.9).found  # plain asphalt
    assert not measure_frame(gray, np.zeros_like(mask), boxes, proj, 2.45, 4.9).found  # no road
    # the lines inside vehicles' boxes are left out: boxes over the whole frame leave nothing
    assert not measure_frame(gray, mask, np.array([[0, 0, 640, 360]]), proj, 2.45, 4.9).found


def _segments(
    offsets: list[float], length: float = 3.0, step: float = 9.0, angle_deg: float = 20.0
) -> np.ndarray:
    """Dashed lines at ``offsets`` (m) across a straight road heading ``angle_deg``: (N, 2, 2)."""
    a = np.radians(angle_deg)
    u, n = np.array([np.cos(a), np.sin(a)]), np.array([-np.sin(a), np.cos(a)])
    segs = [[o * n + s * u, o * n + (s + length) * u] for o in offsets for s in np.arange(0.0, 40.0, step)]
    return np.array(segs)


@pytest.mark.parametrize(
    ("offsets", "width"),
    [
        ([-7.0, -3.5, 0.0, 0.3, 3.8, 7.3], 3.5),  # two lanes a side and a double centre line
        ([0.0, 3.25, 6.5], 3.25),
        ([-3.6, 0.0, 3.6, 7.2, 10.8], 3.6),
    ],
)
def test_the_densest_distance_is_the_lane_width(offsets: list[float], width: float) -> None:
    dist, weight = pair_distances(_segments(offsets))
    got = lane_width(dist, weight, 0.7 * width, 1.4 * width)
    assert got.width_m == pytest.approx(width, abs=0.02)


def test_crossing_and_distant_segments_are_not_pairs() -> None:
    road = _segments([0.0, 3.5])
    crossing = _segments([3.5], angle_deg=110.0)  # another road's line: at right angles
    far = road + np.array([200.0, 0.0])  # the same lines 200 m along: not side by side
    dist, _ = pair_distances(np.concatenate([road[:1], crossing]))
    assert not np.any((dist > 2.0) & (dist < 5.0))
    dist, _ = pair_distances(np.concatenate([road[:1], far[-1:]]))
    assert len(dist) == 0
    assert not lane_width(np.array([3.5]), np.array([1.0]), 2.45, 4.9).found  # one pair is no density


@pytest.mark.parametrize(("lag", "before_the_end"), [(0, 3), (2, 2)])
def test_a_session_measures_its_lanes_every_lane_every_frames_processed(
    lag: int, before_the_end: int
) -> None:
    # off the frame's path (lag 2) the 7th frame's lanes are still measuring when the frames end;
    # the stream's end (drain) counts them
    gray, mask, boxes, intr = _frame(30.0, -90.0, 3.5)
    proj = GroundProjector.create(intr, 30.0 * 1.1, -90.0)
    check = ScaleCheck(
        ScaleCheckConfig(lane_every=3, lane_width_sigma_m=0.05, min_lane_frames=3, lag_frames=lag)
    )
    half = cv2.resize(mask.astype(np.uint8), (320, 180), interpolation=cv2.INTER_NEAREST)  # a coarser mask
    dets = sv.Detections(xyxy=boxes.astype(float), tracker_id=np.arange(len(boxes)))
    for index in (0, 1, 2, 5, 9, 10, 11):  # frame indices with gaps: counted as processed
        check.update(
            Frame(index, index / 30.0, np.zeros((360, 640, 3), np.uint8)),
            proj,
            None,
            dets,
            dets.tracker_id,
            lambda tid: None,
            gray,
            half if index % 2 else mask,
        )
    assert check.summary()["lanes"]["frames_measured"] == before_the_end
    check.drain()
    lanes = check.summary()["lanes"]
    assert (lanes["frames_measured"], lanes["frames_without_lines"]) == (3, 0)  # the 1st, 4th and 7th
    assert lanes["measured_width_m"] == pytest.approx(3.5 * 1.1, rel=0.015)
    assert check.result.rulers[-1].ruler == "lanes"


def test_a_lane_frame_measured_before_the_check_starts_again_is_let_go() -> None:
    """Off the frame's path a lane frame is still measuring when the scale's source changes (the
    check starts again): measured through the old scale, it is not counted in the new session."""
    from pipelines.types import ScaleInfo

    gray, mask, boxes, intr = _frame(30.0, -90.0, 3.5)
    proj = GroundProjector.create(intr, 30.0 * 1.1, -90.0)
    check = ScaleCheck(ScaleCheckConfig(lane_every=100, lag_frames=5))
    dets = sv.Detections(xyxy=boxes.astype(float), tracker_id=np.arange(len(boxes)))
    image = np.zeros((360, 640, 3), np.uint8)
    for index, source in enumerate(("flight", "flight", "base", "base")):
        scale = ScaleInfo(source, 33.0, 33.0, -90.0, 1.4)
        check.update(
            Frame(index, index / 30.0, image), proj, scale, dets, dets.tracker_id, lambda t: None, gray, mask
        )
    check.drain()
    # the new session's own lane frame (measured at once after the restart) counts, the old one not
    assert check.resets == 1 and check.summary()["lanes"]["frames_measured"] == 1
    # the same frames without the change: one lane frame (lane_every 100), counted
    check = ScaleCheck(ScaleCheckConfig(lane_every=100, lag_frames=5))
    for index in range(4):
        scale = ScaleInfo("flight", 33.0, 33.0, -90.0, 1.4)
        check.update(
            Frame(index, index / 30.0, image), proj, scale, dets, dets.tracker_id, lambda t: None, gray, mask
        )
    check.drain()
    assert check.summary()["lanes"]["frames_measured"] == 1


def test_two_lanes_in_the_range_are_found_out_by_the_lines_between() -> None:
    # a telemetry scale 0.6 times the truth: 3.5 m lanes read 2.1 m, below the range, and the
    # distance across two lanes (4.2 m) falls inside it: the lines at half of it give the width
    dist, weight = pair_distances(_segments([-4.2, -2.1, 0.0, 2.1, 4.2]))
    got = lane_width(dist, weight, 2.45, 4.9)
    assert got.width_m == pytest.approx(2.1, abs=0.02)
    # a road of two lanes a side seen without its dashed lines (worn): one pair at 2 w, none at w
    dist, weight = pair_distances(_segments([-4.2, 0.0, 4.2]))
    assert lane_width(dist, weight, 2.45, 4.9).width_m == pytest.approx(4.2, abs=0.02)


@pytest.mark.parametrize(("altitude", "pitch"), [(30.0, -90.0), (30.0, -50.0)])
def test_a_scale_too_small_for_the_search_reads_true_not_two_lanes(altitude: float, pitch: float) -> None:
    gray, mask, boxes, intr = _frame(altitude, pitch, 3.5)
    proj = GroundProjector.create(intr, altitude * 0.62, pitch)  # 38 % low: 3.5 m lanes read 2.17 m
    got = measure_frame(gray, mask, boxes, proj, *lane_search(ScaleCheckConfig()))  # 2.45-4.9 m
    assert got.width_m == pytest.approx(3.5 * 0.62, rel=0.015)
