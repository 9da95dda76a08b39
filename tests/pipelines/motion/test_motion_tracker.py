"""Tracker: ids survive a panning / rotating / zooming camera when boxes are ego-compensated."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import supervision as sv

from pipelines.config import TrackerConfig
from pipelines.geometry import apply_homography
from pipelines.motion.tracker import (
    Tracker,
    _warp_xyah_kalman,
    _warp_xyxy_kalman,
    gap_buffer,
    jacobians,
    map_boxes,
    needs_reanchor,
)
from pipelines.types import PROPAGATED_KEY, EgoMotion

BACKENDS = ["trackers", "supervision"]
W, H = 1024, 540
# Three small vehicles (24 x 12 px) in stabilised ground coordinates, moving 1 px/frame.
WORLD0 = np.array([[300, 200, 324, 212], [500, 260, 524, 272], [700, 300, 724, 312]], dtype=np.float64)


def _translation(dx: float, dy: float) -> np.ndarray:
    return np.array([[1.0, 0, dx], [0, 1.0, dy], [0, 0, 1]])


def _about_centre(deg: float, scale: float, tx: float = 0.0) -> np.ndarray:
    a = np.vstack([cv2.getRotationMatrix2D((W / 2, H / 2), deg, scale), [0, 0, 1]])
    a[0, 2] += tx
    return a


def _image_boxes(world_to_image: np.ndarray, world_boxes: np.ndarray) -> np.ndarray:
    """What a detector sees: the axis-aligned hull of each (rotated, scaled) vehicle."""
    out = []
    for x1, y1, x2, y2 in world_boxes:
        c = apply_homography(world_to_image, np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]]))
        out.append([*c.min(axis=0), *c.max(axis=0)])
    return np.array(out)


def _detections(xyxy: np.ndarray) -> sv.Detections:
    n = len(xyxy)
    det = sv.Detections(
        xyxy=xyxy.astype(np.float32), confidence=np.full(n, 0.9, np.float32), class_id=np.zeros(n, dtype=int)
    )
    det.data = {"class_name": np.array(["car"] * n), "row": np.arange(n)}
    return det


def _run(
    backend: str, step: np.ndarray, frames: int, compensate: bool
) -> tuple[list[tuple[int, ...]], Tracker]:
    """Camera moves by ``step`` (previous -> current homography) every frame."""
    trk = Tracker(TrackerConfig(), backend=backend)
    world_to_image = np.eye(3)
    history = []
    for k in range(frames):
        world = WORLD0 + np.array([k, 0, k, 0], dtype=np.float64)
        det = _detections(_image_boxes(world_to_image, world))
        ego = EgoMotion(step) if compensate and k > 0 else EgoMotion.identity()
        out = trk.update(det, ego)
        # boxes come back in current image coordinates, data preserved, in input order
        assert np.array_equal(out.xyxy, det.xyxy[out.data["row"]])
        assert list(out.data["row"]) == sorted(out.data["row"])
        history.append(tuple(int(i) for i in out.tracker_id))
        world_to_image = step @ world_to_image
    return history, trk


def _stable_frames(history: list[tuple[int, ...]]) -> int:
    """Frames whose three ids equal the previous frame's three ids."""
    return sum(1 for a, b in zip(history, history[1:], strict=False) if len(a) == 3 and a == b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pan_25px_per_frame_keeps_ids_only_when_compensated(backend: str) -> None:
    pan = _translation(-25.0, 0.0)
    frames = 20
    comp, _ = _run(backend, pan, frames, compensate=True)
    assert len(set(comp[2:])) == 1 and len(comp[-1]) == 3  # one id set from frame 2 on
    assert len(set(comp[-1])) == 3 and min(comp[-1]) >= 1
    assert _stable_frames(comp) >= frames - 3

    plain, _ = _run(backend, pan, frames, compensate=False)  # an uncompensated IoU tracker
    assert _stable_frames(plain) == 0  # boxes jump 24 px (their own width) per frame: no association


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("step", "min_reanchors"),
    [
        (_about_centre(2.0, 1.0), 0),  # 2 deg/frame: 120 deg in total, no drift in scale
        (_about_centre(0.0, 1.02), 1),  # 1.02 zoom/frame: scale 3.2 after 60 frames -> re-anchored
        (_about_centre(1.0, 0.985, tx=-6.0), 1),
    ],
)
def test_rotation_and_zoom_with_reanchoring(backend: str, step: np.ndarray, min_reanchors: int) -> None:
    history, trk = _run(backend, step, 60, compensate=True)
    assert trk.reanchor_count >= min_reanchors
    assert len(set(history[2:])) == 1 and len(history[-1]) == 3


@pytest.mark.parametrize(
    "g",
    [
        _translation(40.0, -7.0),
        _about_centre(30.0, 1.0),
        _about_centre(-10.0, 1.7, tx=25.0),
        np.array([[1.0, 0.02, 5.0], [0.0, 1.0, 3.0], [2e-4, 1e-4, 1.0]]),
    ],
)
def test_kalman_state_warps_like_the_boxes(g: np.ndarray) -> None:
    box = np.array([400.0, 200.0, 440.0, 220.0])
    vel = np.array([2.0, 1.0, 2.0, 1.0])  # centre moving (2, 1) px/frame, constant size
    state = np.concatenate([box, vel])[None]
    cov = np.eye(8)[None]
    new, new_cov = _warp_xyxy_kalman(state, cov, g)
    assert np.allclose(new[0, :4], map_boxes(g, box[None])[0], atol=1e-9)
    jac = jacobians(g, np.array([[420.0, 210.0]]))[0]
    assert np.allclose(0.5 * (new[0, 4:6] + new[0, 6:8]), jac @ [2.0, 1.0], atol=1e-9)
    assert np.all(np.linalg.eigvalsh(new_cov[0]) > 0)

    xyah = np.array([420.0, 210.0, 2.0, 20.0, 2.0, 1.0, 0.0, 0.0])
    mean, cov2 = _warp_xyah_kalman(xyah, np.eye(8), g)
    ref = map_boxes(g, box[None])[0]
    assert np.allclose(mean[:2], 0.5 * (ref[:2] + ref[2:]), atol=1e-9)
    assert np.isclose(mean[3], ref[3] - ref[1]) and mean[2] == 2.0
    assert np.allclose(mean[4:6], jac @ [2.0, 1.0], atol=1e-9)


@pytest.mark.parametrize(
    ("h", "reason"),
    [
        (np.eye(3), None),
        (_translation(1e5, -3e4), None),  # long pans alone are fine
        (_about_centre(170.0, 1.0), None),  # so is rotation
        (_about_centre(0.0, 2.2), "zoom"),
        (np.array([[1.4, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), "shear"),
        (np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [4e-4, 0.0, 1.0]]), "perspective"),
        (np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-1.5e-3, 0.0, 1.0]]), "horizon"),
        (np.diag([-1.0, 1.0, 1.0]), "flip"),
        (np.full((3, 3), np.nan), "degenerate"),
    ],
)
def test_needs_reanchor(h: np.ndarray, reason: str | None) -> None:
    got = needs_reanchor(h, (W, H))
    assert (got is None) if reason is None else (got is not None and reason in got)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_frames_and_missing_confidence(backend: str) -> None:
    trk = Tracker(TrackerConfig(), backend=backend)
    empty = trk.update(sv.Detections.empty(), EgoMotion.identity())
    assert len(empty) == 0 and empty.tracker_id is not None
    det = sv.Detections(xyxy=WORLD0.astype(np.float32), class_id=np.zeros(3, dtype=int))
    for _ in range(3):
        out = trk.update(det, EgoMotion.identity())
    assert sorted(out.tracker_id) == [1, 2, 3]
    assert len(trk.update(sv.Detections.empty(), EgoMotion.identity())) == 0
    assert len(trk.update(det, None)) == 3  # the lost tracks come back with their ids


def _marked(xyxy: np.ndarray, propagated: bool, conf: float = 0.9) -> sv.Detections:
    det = _detections(xyxy)
    det.confidence = np.full(len(xyxy), conf, np.float32)
    det.data[PROPAGATED_KEY] = np.full(len(xyxy), propagated)
    return det


@pytest.mark.parametrize("backend", BACKENDS)
def test_propagated_boxes_keep_tracks_but_never_start_one(backend: str) -> None:
    trk = Tracker(TrackerConfig(), backend=backend)
    assert len(trk.update(_marked(WORLD0, propagated=True), EgoMotion.identity())) == 0
    assert len(trk.update(_marked(WORLD0, propagated=True), EgoMotion.identity())) == 0  # nothing started
    for k in range(3):  # detected: tracks start
        out = trk.update(_marked(WORLD0 + k, propagated=False), EgoMotion.identity())
    assert sorted(out.tracker_id) == [1, 2, 3]
    for k in range(3, 8):  # carried by flow: same ids, marks kept, original confidence kept
        out = trk.update(_marked(WORLD0 + k, propagated=True), EgoMotion.identity())
        assert sorted(out.tracker_id) == [1, 2, 3] and out.data[PROPAGATED_KEY].all()
        assert np.allclose(out.confidence, 0.9)


def test_a_detection_that_started_a_track_is_pending_until_confirmed() -> None:
    """trackers' ByteTrack gives a new track its id on its second frame: until then the detection is
    ``pending``, so a frame without detection can carry it there."""
    trk = Tracker(TrackerConfig(), backend="trackers")
    out = trk.update(_marked(WORLD0, propagated=False), EgoMotion.identity())
    assert len(out) == 0 and len(trk.pending) == 3 and list(trk.pending.tracker_id) == [-1] * 3
    out = trk.update(_marked(WORLD0 + 1, propagated=True), EgoMotion.identity())
    assert sorted(out.tracker_id) == [1, 2, 3] and len(trk.pending) == 0
    # a low-confidence detection starts nothing, so it is not pending either
    trk2 = Tracker(TrackerConfig(), backend="trackers")
    trk2.update(_marked(WORLD0, propagated=False, conf=0.3), EgoMotion.identity())
    assert len(trk2.pending) == 0


@pytest.mark.parametrize(
    ("gap_frames", "expected"),
    [
        (1.0, 0.0),  # every frame: plain IoU, as before
        (1.4, 0.0),  # jitter, not a missing frame
        (2.0, 0.15),
        (3.0, 0.30),
        (5.0, 0.60),
        (12.0, 0.60),  # at most gap_buffer_max
        (float("nan"), 0.0),
    ],
)
def test_gap_buffer(gap_frames: float, expected: float) -> None:
    cfg = TrackerConfig()
    assert gap_buffer(gap_frames, cfg.gap_buffer_per_frame, cfg.gap_buffer_max) == pytest.approx(expected)


def _fast_vehicle(trk: Tracker, stride: int, steps: int, fps: float = 30.0) -> list[int]:
    """One 40 x 18 px vehicle at 6 px a frame (the synthetic scene's fast lane), every stride-th
    frame given to the tracker with its time: the ids it got, -1 while pending."""
    ids = []
    for k in range(steps):
        frame = k * stride
        x = 100.0 + 6.0 * frame
        out = trk.update(
            _marked(np.array([[x, 200.0, x + 40.0, 218.0]]), False), EgoMotion.identity(), frame / fps
        )
        ids.append(int(out.tracker_id[0]) if len(out) else -1)
    return ids


@pytest.mark.parametrize(
    ("stride", "buffer", "one_track"),
    [
        (1, 0.15, True),
        (4, 0.15, True),  # 24 px a step, 0.6 of its length: IoU 0.25 > 0.2 even plain
        (6, 0.15, True),  # 36 px, 0.9 of its length: only the buffer matches a new track's second box
        (6, 0.0, False),  # plain IoU (0.05): a new track every step, never a speed
    ],
)
def test_a_fast_vehicle_on_skipped_frames_keeps_one_track(
    stride: int, buffer: float, one_track: bool
) -> None:
    trk = Tracker(TrackerConfig(gap_buffer_per_frame=buffer), backend="trackers")
    ids = _fast_vehicle(trk, stride, 10)
    assert (len(set(ids[1:])) == 1 and ids[1] >= 1) is one_track, ids
    assert trk.last_buffer == pytest.approx(min(0.6, buffer * (stride - 1)))


def test_a_track_confirmed_from_a_pending_box_says_which() -> None:
    """``confirmed``: the tracks the last update confirmed -> the pending box they started from
    (the previous frame's), so the propagation knows a new vehicle's motion at once."""
    trk = Tracker(TrackerConfig(), backend="trackers")
    trk.update(_marked(WORLD0, propagated=False), EgoMotion.identity(), 0.0)
    assert trk.confirmed == {} and len(trk.pending) == 3
    out = trk.update(_marked(WORLD0 + np.array([5, 0, 5, 0]), propagated=False), EgoMotion.identity(), 1 / 30)
    assert sorted(trk.confirmed) == sorted(int(i) for i in out.tracker_id)
    for tid, box in zip(out.tracker_id, out.xyxy, strict=True):
        assert np.allclose(trk.confirmed[int(tid)], box - np.array([5, 0, 5, 0]))
    trk.update(_marked(WORLD0 + np.array([10, 0, 10, 0]), propagated=False), EgoMotion.identity(), 2 / 30)
    assert trk.confirmed == {}  # confirmed once


def test_a_clock_that_does_not_advance_costs_no_update() -> None:
    """A repeated or backward frame time (a clock problem the pipeline flags) is one nominal frame
    for the tracker: trackers would skip the update (no ids), and every later one until the clock
    passed its last time again."""
    import warnings as _warnings

    trk = Tracker(TrackerConfig(), backend="trackers")
    times = [10.0, 10.0 + 1 / 30, 10.0 + 2 / 30, 0.5, 0.5, 0.5 + 1 / 30, 0.5 + 2 / 30]
    with _warnings.catch_warnings():
        _warnings.simplefilter("error")  # and no warning from the backend
        for k, t in enumerate(times):
            out = trk.update(_marked(WORLD0 + np.array([k, 0, k, 0]), False), EgoMotion.identity(), t)
            if k >= 1:
                assert sorted(out.tracker_id) == [1, 2, 3], (k, t, out.tracker_id)
