"""Rules: zone geometry, the speeding test and the violation detector's episodes."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import supervision as sv

from pipelines.config import RulesConfig, ZoneConfig
from pipelines.rules import (
    GLOBAL_ZONE,
    ViolationDetector,
    crop_with_margin,
    is_speeding,
    limit_for_point,
    point_in_zone,
    zone_for_point,
)
from pipelines.types import PROPAGATED_KEY, Frame, SpeedEstimate, Telemetry

IMG_W, IMG_H = 320, 240
SQUARE = [(100.0, 100.0), (200.0, 100.0), (200.0, 200.0), (100.0, 200.0)]
LEFT_HALF = [(0.0, 0.0), (159.0, 0.0), (159.0, 239.0), (0.0, 239.0)]
SCHOOL = ZoneConfig(name="school", polygon=LEFT_HALF, speed_limit_kmh=30.0)


# ------------------------------------------------------------------------------------------
# pure helpers
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "polygon, xy, inside",
    [
        (SQUARE, (150, 150), True),
        (SQUARE, (50, 150), False),
        (SQUARE, (100, 150), True),  # on the edge counts
        (SQUARE, (200, 200), True),  # on a vertex
        (SQUARE, (200.5, 150), False),
        ([(0, 0), (10, 0), (0, 10)], (6, 6), False),  # triangle hypotenuse
        ([(0, 0), (10, 0), (0, 10)], (4, 4), True),
        ([(0, 0), (10, 0)], (5, 0), False),  # degenerate polygon
        (SQUARE, (float("nan"), 150), False),
    ],
)
def test_point_in_zone(polygon, xy, inside: bool) -> None:
    assert point_in_zone(polygon, xy) is inside


def test_zone_for_point_first_match_wins_and_limit_fallback() -> None:
    inner = ZoneConfig(name="inner", polygon=SQUARE, speed_limit_kmh=20.0)
    outer = ZoneConfig(name="outer", polygon=[(0, 0), (300, 0), (300, 230), (0, 230)], speed_limit_kmh=40.0)
    assert zone_for_point([inner, outer], (150, 150)).name == "inner"
    assert zone_for_point([outer, inner], (150, 150)).name == "outer"
    assert zone_for_point([inner, outer], (310, 235)) is None
    cfg = RulesConfig(speed_limit_kmh=60.0, zones=[inner, outer])
    assert limit_for_point(cfg, (150, 150)) == ("inner", 20.0)
    assert limit_for_point(cfg, (310, 235)) == (GLOBAL_ZONE, 60.0)
    assert limit_for_point(RulesConfig(speed_limit_kmh=None, zones=[inner]), (310, 235)) is None


@pytest.mark.parametrize(
    "speed, limit, expected",
    [
        (55.0, 50.0, True),
        (50.0, 50.0, False),  # at the limit is not above it
        (49.0, 50.0, False),
        (50.01, 50.0, True),  # a candidate: the ticket rule decides later, over a base
        (float("nan"), 50.0, False),
        (math.inf, 50.0, False),
    ],
)
def test_is_speeding(speed, limit, expected) -> None:
    assert is_speeding(speed, limit) is expected


@pytest.mark.parametrize(
    "box, margin, shape",
    [
        ((100, 100, 140, 120), 24, (68, 88, 3)),
        ((100, 100, 140, 120), 0, (20, 40, 3)),
        ((100.4, 99.6, 139.2, 120.1), 0, (22, 40, 3)),  # grown to whole pixels
        ((0, 0, 10, 10), 24, (34, 34, 3)),  # clipped at the top-left corner
        ((310, 230, 330, 250), 5, (15, 15, 3)),  # clipped at the bottom-right corner
        ((400, 300, 420, 320), 10, None),  # outside the image
    ],
)
def test_crop_with_margin(box, margin: int, shape) -> None:
    img = np.random.default_rng(0).integers(0, 255, (IMG_H, IMG_W, 3), dtype=np.uint8)
    crop = crop_with_margin(img, box, margin)
    if shape is None:
        assert crop is None
    else:
        assert crop.shape == shape and crop.base is None  # a copy, not a view


# ------------------------------------------------------------------------------------------
# ViolationDetector
# ------------------------------------------------------------------------------------------


def frame_at(i: int, fps: float = 30.0, telemetry: Telemetry | None = None) -> Frame:
    img = np.full((IMG_H, IMG_W, 3), i % 256, np.uint8)
    return Frame(index=i, timestamp_s=5.0 + i / fps, image=img, telemetry=telemetry)


def dets(tracks: list[tuple[int, tuple[float, float, float, float], str]]) -> sv.Detections:
    if not tracks:
        return sv.Detections.empty()
    return sv.Detections(
        xyxy=np.array([b for _, b, _ in tracks], float),
        tracker_id=np.array([t for t, _, _ in tracks]),
        data={"class_name": np.array([c for _, _, c in tracks])},
    )


def est(tid: int, v: float, sigma: float = 1.0) -> SpeedEstimate:
    return SpeedEstimate(track_id=tid, speed_kmh=v, sigma_kmh=sigma, n_samples=30, window_s=1.0)


BOX_RIGHT = (220.0, 100.0, 260.0, 130.0)  # bottom centre (240, 130): outside the school zone
BOX_LEFT = (40.0, 100.0, 80.0, 130.0)  # bottom centre (60, 130): inside it


def run(
    detector: ViolationDetector,
    speeds: list[float | None],
    box=BOX_RIGHT,
    fps: float = 30.0,
    tid: int = 1,
    cls: str = "car",
    start: int = 0,
) -> list[tuple[int, list]]:
    """One track; None = not seen in that frame. Returns (frame index, violations) where any."""
    out = []
    for k, v in enumerate(speeds):
        i = start + k
        seen = v is not None
        d = dets([(tid, box, cls)] if seen else [])
        got = detector.update(frame_at(i, fps), d, {tid: est(tid, v)} if seen else {})
        if got:
            out.append((i, got))
    return out


@pytest.mark.parametrize(
    "cfg, box, speed, zone, limit",
    [
        (RulesConfig(speed_limit_kmh=50.0), BOX_RIGHT, 60.0, GLOBAL_ZONE, 50.0),
        (RulesConfig(speed_limit_kmh=50.0, zones=[SCHOOL]), BOX_LEFT, 40.0, "school", 30.0),
        (RulesConfig(speed_limit_kmh=50.0, zones=[SCHOOL]), BOX_RIGHT, 40.0, None, None),  # below global
        (RulesConfig(speed_limit_kmh=None, zones=[SCHOOL]), BOX_RIGHT, 90.0, None, None),  # zones only
        (RulesConfig(speed_limit_kmh=None, zones=[SCHOOL]), BOX_LEFT, 35.0, "school", 30.0),
    ],
)
def test_global_and_zone_limits(
    cfg: RulesConfig, box, speed: float, zone: str | None, limit: float | None
) -> None:
    det = ViolationDetector(cfg)
    emitted = run(det, [speed] * 30 + [10.0], box=box)
    if zone is None:
        assert emitted == [] and det.finish() == []
        return
    assert [i for i, _ in emitted] == [30]  # emitted when the speed drops back
    (v,) = emitted[0][1]
    assert (v.zone, v.speed_limit_kmh, v.track_id, v.class_name) == (zone, limit, 1, "car")
    assert (v.start_frame, v.end_frame) == (1, 30)  # 1-based frame numbers (frames 0..29)
    assert v.start_time_s == pytest.approx(5.0) and v.end_time_s == pytest.approx(5.0 + 29 / 30)


@pytest.mark.parametrize(
    "n_above, fps, min_duration, violation",
    [
        (16, 30.0, 0.5, True),  # 15 intervals of 1/30 s = 0.5 s
        (15, 30.0, 0.5, False),
        (6, 10.0, 0.5, True),
        (3, 10.0, 0.5, False),
        (1, 30.0, 0.0, True),
        (60, 30.0, 2.5, False),
    ],
)
def test_min_duration(n_above: int, fps: float, min_duration: float, violation: bool) -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=min_duration))
    emitted = run(det, [40.0] * 5 + [70.0] * n_above + [45.0] * 5, fps=fps)
    assert len(emitted) == int(violation)
    assert det.finish() == []


def test_peak_mean_sigma_bbox_snapshot_at_peak() -> None:
    cfg = RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.0, snapshot_margin_px=10)
    det = ViolationDetector(cfg)
    speeds = [55.0, 60.0, 72.0, 65.0, 58.0]
    out = []
    for i, v in enumerate(speeds):
        box = (20.0 + 10 * i, 50.0, 60.0 + 10 * i, 70.0)  # moving right
        ground = np.array([[1.5 * i, -2.0]])
        out += det.update(frame_at(i), dets([(4, box, "truck")]), {4: est(4, v, sigma=0.5 + i)}, ground)
    out += det.update(frame_at(5), dets([(4, (80.0, 50.0, 120.0, 70.0), "truck")]), {4: est(4, 30.0)})
    (v,) = out
    assert v.peak_speed_kmh == 72.0 and v.sigma_kmh == 2.5
    # time-weighted (trapezoidal) mean over regular timestamps
    assert v.mean_speed_kmh == pytest.approx((sum(speeds) - (speeds[0] + speeds[-1]) / 2) / (len(speeds) - 1))
    assert v.bbox_xyxy == (40.0, 50.0, 80.0, 70.0) and v.ground_xy_m == (3.0, -2.0)
    assert v.class_name == "truck" and (v.start_frame, v.end_frame) == (1, 5)
    assert v.snapshot.shape == (40, 60, 3) and np.all(v.snapshot == 2)  # taken from frame 2
    assert v.to_dict()["peak_speed_kmh"] == 72.0


def test_one_violation_per_track_and_zone() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.2))
    emitted = run(det, [70.0] * 10 + [40.0] * 5 + [80.0] * 10 + [40.0] * 5 + [90.0] * 10)
    assert [i for i, _ in emitted] == [10]
    assert emitted[0][1][0].peak_speed_kmh == 70.0
    assert det.finish() == []


def test_zone_change_gives_one_violation_per_zone() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, zones=[SCHOOL], min_duration_s=0.2))
    out = []
    for i in range(20):
        box = BOX_LEFT if i < 10 else BOX_RIGHT
        out += det.update(frame_at(i), dets([(3, box, "car")]), {3: est(3, 60.0)})
    out += det.finish()
    assert [(v.zone, v.start_frame, v.end_frame) for v in out] == [("school", 1, 10), (GLOBAL_ZONE, 11, 20)]


@pytest.mark.parametrize(
    "lost_after_s, gap_frames, emitted_at",
    [
        (1.0, 60, 30 + 30),  # last seen at frame 29; 31 frames later > 1 s
        (0.5, 60, 30 + 15),
        (1.0, 20, None),  # gone for less than lost_after_s: still open, emitted by finish()
    ],
)
def test_emitted_when_lost_or_at_finish(lost_after_s: float, gap_frames: int, emitted_at: int | None) -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0), lost_after_s=lost_after_s)
    speeds = [75.0] * 30 + [None] * gap_frames
    emitted = run(det, speeds)
    if emitted_at is None:
        assert emitted == []
        (v,) = det.finish()
    else:
        assert [i for i, _ in emitted] == [emitted_at]
        (v,) = emitted[0][1]
        assert det.finish() == []
    assert (v.start_frame, v.end_frame, v.peak_speed_kmh) == (1, 30, 75.0)


def test_seen_without_speed_keeps_episode_open_until_lost() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.5), lost_after_s=1.0)
    out = []
    for i in range(70):
        speeds = {9: est(9, 66.0)} if i < 10 or 20 <= i < 30 else {}  # estimator silent in between
        out += det.update(frame_at(i), dets([(9, BOX_RIGHT, "car")]), speeds)
    (v,) = out  # frames 0..29 are one episode; lost 1 s after frame 29
    assert (v.start_frame, v.end_frame) == (1, 30)  # 1-based frame numbers (frames 0..29)


def test_short_episode_at_finish_is_dropped() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.5))
    assert run(det, [70.0] * 5) == []
    assert det.finish() == []


@pytest.mark.parametrize(
    ("yaw", "ground", "expected"),
    [
        (90.0, True, (42.36, -71.06 + math.degrees(100.0 / (6_371_008.8 * math.cos(math.radians(42.36)))))),
        (None, True, (None, None)),  # heading unknown: the vehicle cannot be placed
        (90.0, False, (None, None)),  # ground offset unknown (no altitude)
    ],
)
def test_violation_position_is_the_vehicle_not_the_drone(yaw, ground, expected) -> None:
    """The drone is at (42.36, -71.06) looking east; the vehicle is 100 m ahead of it."""
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.0))
    tel = Telemetry(timestamp_s=0.0, latitude=42.36, longitude=-71.06, gimbal_yaw_deg=yaw)
    gxy = np.array([[0.0, 100.0]]) if ground else None
    det.update(frame_at(0, telemetry=tel), dets([(7, BOX_RIGHT, "car")]), {7: est(7, 80.0)}, gxy)
    (v,) = det.finish()
    if expected[0] is None:
        assert (v.latitude, v.longitude) == (None, None)
    else:
        assert (v.latitude, v.longitude) == pytest.approx(expected, abs=1e-9)


def test_several_tracks_sorted() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.0))
    boxes = {7: (10.0, 10.0, 30.0, 30.0), 2: (200.0, 10.0, 230.0, 40.0), 5: (100.0, 150.0, 120.0, 170.0)}
    speeds = {7: est(7, 80.0), 2: est(2, 55.0), 5: est(5, 45.0)}
    det.update(frame_at(0), dets([(t, b, "car") for t, b in boxes.items()]), speeds)
    got = det.finish()
    assert [v.track_id for v in got] == [2, 7]
    assert det.finish() == []


def test_detections_without_tracker_ids_are_ignored() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.0))
    d = sv.Detections(xyxy=np.array([[0.0, 0.0, 10.0, 10.0]]))
    assert det.update(frame_at(0), d, {0: est(0, 90.0)}) == []
    assert det.finish() == []


@pytest.mark.parametrize(
    ("require_trusted", "untrusted_frames", "violation"),
    [
        (True, range(0, 30), None),  # the speed stage doubts every figure: no ticket
        (False, range(0, 30), (1, 30)),  # the operator opted out of the trust check
        (True, range(10, 20), (1, 30)),  # a doubted stretch neither ends nor extends the episode
        (True, (), (1, 30)),
    ],
)
def test_only_trusted_speeds_make_a_violation(require_trusted, untrusted_frames, violation) -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, require_trusted=require_trusted))
    out = []
    for i in range(31):
        e = est(1, 70.0 if i < 30 else 10.0)
        if i in untrusted_frames:
            e = dataclasses.replace(e, trusted=False, doubt="box jumped")
        out += det.update(frame_at(i), dets([(1, BOX_RIGHT, "car")]), {1: e})
    out += det.finish()
    assert [(v.start_frame, v.end_frame) for v in out] == ([] if violation is None else [violation])


@pytest.mark.parametrize(
    "propagated, opened_at",
    [
        ([False] * 30, 1),  # detected throughout: the episode opens on the first frame above
        ([True] * 30, None),  # carried by optical flow only: never opens a violation
        ([True] * 5 + [False] * 25, 6),  # opens on the first detected frame
        ([False] + [True] * 20 + [False] * 9, 1),  # once open, propagated frames extend it
    ],
)
def test_a_propagated_box_never_opens_a_violation(propagated: list[bool], opened_at: int | None) -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.0))
    got = []
    for k, prop in enumerate([*propagated, False]):
        d = dets([(1, BOX_RIGHT, "car")])
        d.data[PROPAGATED_KEY] = np.array([prop])
        got += det.update(frame_at(k, 30.0), d, {1: est(1, 70.0 if k < len(propagated) else 10.0)})
    got += det.finish()
    assert [v.start_frame for v in got] == ([] if opened_at is None else [opened_at])
    if opened_at is not None:
        assert got[0].end_frame == len(propagated)


@pytest.mark.parametrize(
    "before, new, after, closed_limit, later",
    [
        # 60 km/h for 1 s under 50, then the limit goes to 30: the episode ends under the old
        # rules (its violation, limit 50); the track already has one in "global": no second there
        ([60.0] * 30, RulesConfig(speed_limit_kmh=30.0), [60.0] * 30 + [10.0], 50.0, []),
        # too short under the old rules when the change comes: nothing; under the new, lower
        # limit the track opens a new episode and gets its violation (limit 30)
        ([60.0] * 5, RulesConfig(speed_limit_kmh=30.0), [40.0] * 30 + [10.0], None, [30.0]),
        # the limit raised above the speed: the open episode is closed, nothing follows
        ([60.0] * 30, RulesConfig(speed_limit_kmh=80.0), [60.0] * 30 + [10.0], 50.0, []),
        # a zone added where the track is: its limit from the next frame on
        ([40.0] * 5, RulesConfig(speed_limit_kmh=50.0, zones=[SCHOOL]), [40.0] * 30 + [10.0], None, [30.0]),
    ],
)
def test_rules_changed_during_a_stream(before, new, after, closed_limit, later) -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0))
    box = BOX_LEFT
    assert run(det, before, box=box) == []
    closed = det.set_rules(new)
    assert [v.speed_limit_kmh for v in closed] == ([closed_limit] if closed_limit else [])
    assert det.cfg is new and det.open_track_ids == []
    emitted = run(det, after, box=box, start=len(before))
    assert [v.speed_limit_kmh for _, vs in emitted for v in vs] == later


# One vehicle, one violation: track A (id 1) drives at 20 m/s along +y on the ground; track B (id 2)
# appears on the ground at A's position now (by its velocity) + (across, along) metres.
VEHICLE_MPS = 20.0


def run_tracks(
    det: ViolationDetector, tracks: dict[int, tuple[range, tuple[float, float]]], ground=True
) -> list:
    """Tracks {id: (frames seen, ground offset (across, along) from the vehicle)} of one vehicle."""
    fps = 30.0
    out = []
    for i in range(max(frames.stop for frames, _ in tracks.values())):
        seen, speeds, gxy = [], {}, []
        y = VEHICLE_MPS * i / fps
        for tid, (frames, (across, along)) in tracks.items():
            if i in frames:
                seen.append((tid, BOX_RIGHT, "car"))
                speeds[tid] = est(tid, 72.0)
                gxy.append((across, y + along))
        out += det.update(frame_at(i, fps), dets(seen), speeds, np.array(gxy) if ground and gxy else None)
    return out + det.finish()


def run_two_tracks(
    det: ViolationDetector, a_frames: range, b_frames: range, offset: tuple[float, float], ground: bool = True
) -> list:
    return run_tracks(det, {1: (a_frames, (0.0, 0.0)), 2: (b_frames, offset)}, ground)


@pytest.mark.parametrize(
    ("a_frames", "b_frames", "offset", "ground", "along_m", "track_ids"),
    [
        (range(0, 30), range(36, 60), (0.0, 0.0), True, 5.0, [1]),  # lost 0.2 s, found again as 2
        (range(0, 30), range(36, 60), (0.8, -3.0), True, 5.0, [1]),  # its box's anchor elsewhere on it
        (range(0, 30), range(36, 60), (3.5, 0.0), True, 5.0, [1, 2]),  # the next lane
        (range(0, 30), range(36, 60), (0.0, 9.0), True, 5.0, [1, 2]),  # the car ahead in its lane
        (range(0, 30), range(66, 90), (0.0, 0.0), True, 5.0, [1]),  # lost 1.2 s: its episode had ended
        (range(0, 30), range(96, 120), (0.0, 0.0), True, 5.0, [1, 2]),  # lost longer than same_vehicle_gap_s
        (range(0, 60), range(20, 60), (0.0, 4.0), True, 5.0, [1]),  # a second box on it (the front of a bus)
        (range(0, 30), range(36, 60), (0.0, 0.0), False, 5.0, [1, 2]),  # no ground positions: can't tell
        (range(0, 30), range(36, 60), (0.0, 0.0), True, 0.0, [1, 2]),  # switched off
    ],
)
def test_one_vehicle_one_violation_across_its_broken_tracks(
    a_frames, b_frames, offset, ground, along_m, track_ids
) -> None:
    cfg = RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.5, same_vehicle_along_m=along_m)
    got = run_two_tracks(ViolationDetector(cfg), a_frames, b_frames, offset, ground)
    assert sorted(v.track_id for v in got) == track_ids


def test_a_broken_track_carries_its_vehicles_open_episode() -> None:
    """A is lost after 0.3 s above the limit (too short for a violation); B, the same vehicle,
    carries the episode on: one violation, from A's first frame to B's last."""
    cfg = RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.5)
    (v,) = run_two_tracks(ViolationDetector(cfg), range(0, 10), range(12, 40), (0.0, 0.0))
    assert v.track_id == 1 and (v.start_frame, v.end_frame) == (1, 40)


def test_a_vehicle_broken_into_three_tracks_has_one_violation() -> None:
    """C starts 2.4 s after A was last seen (too long to match it) but 1.4 s after B, which is A's
    vehicle: C is too."""
    cfg = RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.5)
    tracks = {1: (range(0, 30), (0.0, 0.0)), 2: (range(36, 60), (0.0, 0.0)), 3: (range(100, 130), (0.0, 0.0))}
    assert [v.track_id for v in run_tracks(ViolationDetector(cfg), tracks)] == [1]
    del tracks[2]
    assert [v.track_id for v in run_tracks(ViolationDetector(cfg), tracks)] == [1, 3]


def test_a_broken_track_still_reports_its_vehicle_in_a_new_zone() -> None:
    """B takes over from A in the global zone (no second violation there), then drives into the
    school zone: a violation there, as A would have had."""
    cfg = RulesConfig(speed_limit_kmh=50.0, zones=[SCHOOL], min_duration_s=0.5)
    det = ViolationDetector(cfg)
    got = []
    for i in range(90):
        y = VEHICLE_MPS * i / 30.0
        tid, box = (1, BOX_RIGHT) if i < 30 else (2, BOX_RIGHT if i < 60 else BOX_LEFT)
        if 30 <= i < 36:
            got += det.update(frame_at(i), dets([]), {})
            continue
        got += det.update(frame_at(i), dets([(tid, box, "car")]), {tid: est(tid, 72.0)}, np.array([[0.0, y]]))
    got += det.finish()
    assert sorted((v.track_id, v.zone) for v in got) == [(1, GLOBAL_ZONE), (2, "school")]


def test_a_slow_or_young_track_has_no_direction_to_match() -> None:
    from pipelines.rules import trail_velocity

    assert trail_velocity([(0.0, 0.0, 0.0), (0.05, 0.0, 1.0)]) is None  # too few samples
    assert trail_velocity([(0.0, 0.0, 0.0), (0.03, 0.0, 0.6), (0.06, 0.0, 1.2)]) is None  # too short
    trail = [(t / 30, 1.0, 2.0 + 20.0 * t / 30) for t in range(30)]
    assert trail_velocity(trail) == pytest.approx([0.0, 20.0])
