"""Keyframe scheduling, box propagation by in-box flow and the border watch, on rendered images."""

from __future__ import annotations

import numpy as np
import pytest
import supervision as sv
from render_helpers import BoxScene

from pipelines.config import KeyframeConfig
from pipelines.motion.keyframes import (
    BorderWatch,
    BoxPropagator,
    KeyframeScheduler,
    ScheduleSignals,
    detect_reason,
)
from pipelines.types import PROPAGATED_KEY, EgoMotion

ON = KeyframeConfig(enabled=True, interval=3, max_interval=6, lost_share=0.25, ego_shift_px=40.0, min_gap=2)
ON1 = ON.model_copy(update={"min_gap": 1})


@pytest.mark.parametrize(
    ("signals", "cfg", "expected"),
    [
        (ScheduleSignals(frames_since_detect=1, tracks=5), KeyframeConfig(), "every frame"),
        (ScheduleSignals(frames_since_detect=1, tracks=5), ON, None),
        (ScheduleSignals(frames_since_detect=2, tracks=5), ON, None),
        (ScheduleSignals(frames_since_detect=3, tracks=5), ON, "interval"),
        (ScheduleSignals(frames_since_detect=2, tracks=0), ON, "no tracks"),
        (ScheduleSignals(frames_since_detect=2, tracks=5, ego_valid=False), ON, "ego-motion unknown"),
        (ScheduleSignals(frames_since_detect=2, tracks=5, ego_shift_px=41.0), ON, "fast camera"),
        (ScheduleSignals(frames_since_detect=2, tracks=5, ego_shift_px=39.0), ON, None),
        (ScheduleSignals(frames_since_detect=2, tracks=5, lost_share=0.5), ON, "flow lost"),
        (ScheduleSignals(frames_since_detect=2, tracks=5, lost_share=0.2), ON, None),
        (ScheduleSignals(frames_since_detect=2, tracks=5, entering=True), ON, "entering"),
        # a trigger right after a detection waits a frame (min_gap 2) ...
        (ScheduleSignals(frames_since_detect=1, tracks=5, entering=True), ON, None),
        (ScheduleSignals(frames_since_detect=1, tracks=0), ON, None),
        # ... unless min_gap is 1
        (ScheduleSignals(frames_since_detect=1, tracks=5, entering=True), ON1, "entering"),
        (ScheduleSignals(frames_since_detect=1, tracks=0), ON1, "no tracks"),
        # behind (frames waiting): the interval stretches, triggers wait for a second frame
        (ScheduleSignals(frames_since_detect=3, tracks=5, backlog=2), ON, None),
        (ScheduleSignals(frames_since_detect=6, tracks=5, backlog=2), ON, "interval"),
        (ScheduleSignals(frames_since_detect=1, tracks=5, entering=True, backlog=1), ON1, None),
        (ScheduleSignals(frames_since_detect=2, tracks=5, entering=True, backlog=1), ON1, "entering"),
    ],
)
def test_detect_reason(signals, cfg, expected):
    assert detect_reason(cfg, signals) == expected


def test_max_interval_below_interval_is_refused():
    with pytest.raises(ValueError, match="max_interval"):
        KeyframeConfig(enabled=True, interval=4, max_interval=3)


# -- rendered scenes ---------------------------------------------------------------------------

W, H = 480, 320
_render = BoxScene(W, H, seed=4, ground=(100.0, 20.0, 61.0, 47.0), fill=150.0, plain_fill=150.0).render


BOXES = np.array([[80.0, 100.0, 140.0, 128.0], [250.0, 180.0, 310.0, 210.0], [300.0, 60.0, 352.0, 86.0]])


def _dets(boxes: np.ndarray, ids: list[int]) -> sv.Detections:
    d = sv.Detections(
        xyxy=boxes.astype(np.float32),
        confidence=np.full(len(boxes), 0.8, np.float32),
        class_id=np.zeros(len(boxes), int),
        tracker_id=np.asarray(ids, dtype=int),
    )
    d.data["class_name"] = np.full(len(boxes), "car", dtype=object)
    return d


def _pan(dx: float, dy: float) -> EgoMotion:
    return EgoMotion(
        np.array([[1.0, 0, dx], [0, 1.0, dy], [0, 0, 1.0]]), 1.0, 100, float(np.hypot(dx, dy)), True
    )


@pytest.mark.parametrize(
    ("motion", "pan"),
    [
        ((3.4, -1.2), (0.0, 0.0)),
        ((-2.6, 0.8), (0.0, 0.0)),
        ((3.4, -1.2), (-12.0, 5.0)),  # the camera pans as well
    ],
)
def test_propagated_boxes_follow_the_vehicles(motion, pan):
    total = np.array(motion) + np.array(pan)
    moved = BOXES + np.r_[total, total]
    prop = BoxPropagator()
    prop.remember(_dets(BOXES, [1, 2, -1]), None)  # the third is pending: a track not confirmed yet
    step = prop.propagate(_render(BOXES), _render(moved, pan=pan), _pan(*pan))
    out = step.detections
    assert out.data[PROPAGATED_KEY].all() and len(out) == 3
    assert list(out.tracker_id) == [1, 2, -1]  # ids kept, the pending box carried too
    assert np.abs(out.xyxy - moved).max() < 0.15, out.xyxy - moved
    flow = out.data["flow_px"]  # handed to the speed stage, which need not measure it again
    assert np.abs(flow - total).max() < 0.15
    assert step.lost_share == 0.0 and not out.data["extrapolated"].any()
    assert list(out.data["class_name"]) == ["car"] * 3 and np.allclose(out.confidence, 0.8)


def test_where_flow_fails_a_box_moves_with_its_last_own_motion_and_counts_as_lost():
    prop = BoxPropagator()
    prop.remember(_dets(BOXES, [1, 2, 3]), None)
    step1 = BOXES + np.array([4.0, 0, 4.0, 0])
    prop.remember(_dets(step1, [1, 2, 3]), np.eye(3))  # each vehicle moved 4 px: its own motion
    plain = _render(step1, textured=False)  # untextured vehicles: no corners, flow fails
    step = prop.propagate(plain, plain, _pan(2.0, 0.0))
    assert step.lost_share == 1.0
    assert np.isnan(step.detections.data["flow_px"]).all() and step.detections.data["extrapolated"].all()
    # moved with the ground (2 px pan) plus its own 4 px
    assert np.allclose(step.detections.xyxy, step1 + np.array([6.0, 0, 6.0, 0]), atol=1e-4)
    # extrapolated stays extrapolated until a detection: the flow of the next step does not undo it
    prop.remember(step.detections, np.eye(3))
    textured = _render(step.detections.xyxy)
    assert prop.propagate(textured, textured, _pan(0.0, 0.0)).detections.data["extrapolated"].all()


def test_a_new_vehicle_whose_flow_fails_is_stranded_until_its_motion_is_known():
    """A pending box (a track just started) or one of a track without a motion yet cannot be
    carried when its flow fails: ``stranded`` counts them (the pipeline then detects). A track
    confirmed from a pending box (``Tracker.confirmed``) has its motion at once."""
    plain = _render(BOXES, textured=False)
    prop = BoxPropagator()
    prop.remember(_dets(BOXES, [1, 2, -1]), None)
    assert prop.propagate(plain, plain, _pan(0.0, 0.0)).stranded == 3  # no motion known for any
    moved = BOXES + np.array([5.0, 0, 5.0, 0])
    prop.remember(_dets(moved, [1, 2, 7]), np.eye(3), confirmed={7: BOXES[2]})
    step = prop.propagate(_render(moved, textured=False), _render(moved, textured=False), _pan(0.0, 0.0))
    assert step.stranded == 0 and step.lost_share == 1.0  # all three moving, flow failed
    assert np.allclose(step.detections.xyxy, moved + np.array([5.0, 0, 5.0, 0]), atol=1e-4)
    textured = BoxPropagator()
    textured.remember(_dets(BOXES, [-1, -1, -1]), None)
    assert (
        textured.propagate(_render(BOXES), _render(BOXES + 2.0), _pan(0.0, 0.0)).stranded == 0
    )  # flow worked


def test_nothing_to_propagate_gives_an_empty_step():
    step = BoxPropagator().propagate(_render(BOXES), _render(BOXES), _pan(0, 0))
    assert len(step.detections) == 0 and step.lost_share == 0.0


def _gray_scene(pan: tuple[float, float], blob_at: tuple[int, int] | None) -> np.ndarray:
    img = _render(np.zeros((0, 4)), pan=pan)
    if blob_at is not None:
        x, y = blob_at
        img[y : y + 14, x : x + 30] = 250
    return img


@pytest.mark.parametrize(
    ("blob_before", "blob_after", "pan", "known_box", "entering"),
    [
        (None, None, (0.0, 0.0), None, False),  # nothing changes
        (None, None, (9.0, -4.0), None, False),  # the camera pans: warped away
        (None, (0, 150), (0.0, 0.0), None, True),  # a vehicle appears at the left edge
        (None, (200, 300), (0.0, 0.0), None, True),  # ... at the bottom edge
        (None, (200, 150), (0.0, 0.0), None, False),  # appears in the middle: not the border's business
        (None, (0, 150), (0.0, 0.0), (0, 145, 32, 166), False),  # a known vehicle moved there
        ((0, 150), (0, 150), (0.0, 0.0), None, False),  # was already there, did not move
    ],
)
def test_border_watch(blob_before, blob_after, pan, known_box, entering):
    watch = BorderWatch(border_frac=0.1, area_frac=0.002)
    assert watch.update(_gray_scene((0.0, 0.0), blob_before), None, None) is False  # first frame
    h = np.array([[1.0, 0, pan[0]], [0, 1.0, pan[1]], [0, 0, 1.0]])
    boxes = None if known_box is None else np.array([known_box], dtype=float)
    assert watch.update(_gray_scene(pan, blob_after), h, boxes) is entering


def test_border_watch_on_a_keyframe_only_keeps_the_reference():
    watch = BorderWatch(border_frac=0.1, area_frac=0.002)
    watch.update(_gray_scene((0, 0), None), None, None)
    assert watch.update(_gray_scene((0, 0), (0, 150)), np.eye(3), None, compare=False) is False
    assert watch.update(_gray_scene((0, 0), (0, 150)), np.eye(3), None) is False  # nothing new since


def test_scheduler_detects_on_the_interval_and_after_an_entry():
    sched = KeyframeScheduler(ON.model_copy(update={"border_frac": 0.1}))
    boxes = BOXES.copy()
    ego = _pan(0.0, 0.0)
    decisions = []
    for k in range(7):
        reason = sched.decide()
        decisions.append(reason)
        blob = (0, 150) if k >= 4 else None  # something enters during frame 4
        sched.observe(detected=reason is not None, gray=_gray_scene((0, 0), blob), ego=ego, boxes_xyxy=boxes)
    assert decisions[:4] == ["interval", None, None, "interval"]
    assert decisions[4] is None and decisions[5] == "entering" and decisions[6] is None


def test_a_box_clipped_by_the_border_is_carried_but_not_measured():
    """Its vehicle comes into view while the box keeps its clipped size: no speed from it until a
    detection sees the whole vehicle."""
    clipped = np.array([[0.0, 100.0, 40.0, 128.0], *BOXES[1:]])
    prop = BoxPropagator()
    prop.remember(_dets(clipped, [1, 2, 3]), None)
    moved = clipped + np.array([3.0, 0, 3.0, 0])
    out = prop.propagate(_render(clipped), _render(moved), _pan(0.0, 0.0)).detections
    assert list(out.data["extrapolated"]) == [True, False, False]
