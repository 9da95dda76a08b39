"""Ground displacement: camera motion removed, metres through the frame's projector, the flow filter,
boxes clipped by the border measured by their uncut edges, and track expiry."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.displacement import (
    FLOW_GATE,
    FLOW_WEIGHT,
    GroundDisplacement,
    blend_flow,
    border_margin,
    box_anchors,
    clipped_edges,
    edge_point,
    measurable_clipped,
    touches_border,
)
from pipelines.geometry import GroundProjector
from pipelines.types import EgoMotion, Intrinsics

W, H = 640, 480
# Nadir camera, fx = 1000 px at 100 m: 0.1 m per pixel everywhere.
PROJ = GroundProjector.create(Intrinsics(1000.0, 1000.0, W / 2, H / 2, W, H), 100.0, -90.0)
GRAY = np.zeros((H, W), np.uint8)


def shift(dx: float, dy: float = 0.0) -> EgoMotion:
    """Camera motion under which static ground moves (dx, dy) pixels in the image."""
    return EgoMotion(np.array([[1.0, 0, dx], [0, 1.0, dy], [0, 0, 1.0]]), 1.0, 100, float(np.hypot(dx, dy)))


def box_at(x: float, y: float, size: float = 20.0) -> np.ndarray:
    return np.array([[x - size / 2, y - size / 2, x + size / 2, y + size / 2]])


def run(meter: GroundDisplacement, frames: list[tuple[EgoMotion, np.ndarray]], proj=PROJ):
    """Feed (ego, box) per frame for track 7; returns the displacements of every frame."""
    out = []
    for index, (ego, xyxy) in enumerate(frames):
        meter.advance(ego)
        positions, disp = meter.measure(GRAY, np.array([7]), xyxy, ego, proj)
        meter.remember(index, np.array([7]), positions, xyxy)
        meter.end_frame(index, GRAY)
        out.append(disp[0])
    return out


@pytest.mark.parametrize(
    "camera_px, vehicle_px, expected_m",
    [
        (0.0, 0.0, (0.0, 0.0)),  # parked car, still camera
        (5.0, 0.0, (0.0, 0.0)),  # parked car, panning camera: the camera's motion is not speed
        (0.0, 10.0, (1.0, 0.0)),  # 10 px at 0.1 m/px
        (-4.0, 10.0, (1.0, 0.0)),  # the same car, camera panning the other way
        (3.0, -6.0, (-0.6, 0.0)),
    ],
)
def test_camera_motion_is_removed_and_pixels_become_metres(camera_px, vehicle_px, expected_m) -> None:
    frames = [
        (shift(camera_px if k else 0.0), box_at(200 + k * (camera_px + vehicle_px), 240)) for k in range(4)
    ]
    disp = run(GroundDisplacement(), frames)
    assert np.all(np.isnan(disp[0]))  # a new track has no displacement yet
    for d in disp[1:]:
        np.testing.assert_allclose(d, expected_m, atol=1e-9)


def test_a_track_gone_for_frames_is_measured_from_where_it_was_last_seen() -> None:
    meter = GroundDisplacement()
    run(meter, [(EgoMotion.identity(), box_at(100, 240))])
    for _ in range(3):  # three frames without track 7, the camera moving 2 px each
        meter.advance(shift(2.0))
    _, disp = meter.measure(GRAY, np.array([7]), box_at(100 + 6 + 20, 240), shift(2.0), PROJ)
    np.testing.assert_allclose(disp[0], (2.0, 0.0), atol=1e-9)


def test_without_a_ground_scale_positions_are_kept_and_displacements_unknown() -> None:
    disp = run(
        GroundDisplacement(), [(EgoMotion.identity(), box_at(100 + 5 * k, 240)) for k in range(3)], proj=None
    )
    assert all(np.all(np.isnan(d)) for d in disp)


def test_expire_forgets_only_tracks_older_than_the_horizon() -> None:
    meter = GroundDisplacement()
    meter.remember(
        0, np.array([1, 2]), np.array([[10.0, 10.0], [20.0, 20.0]]), np.vstack([box_at(10, 10)] * 2)
    )
    meter.remember(5, np.array([2]), np.array([[25.0, 20.0]]), box_at(25, 20))
    assert meter.expire(frame_index=6, horizon_frames=5) == [1]
    assert len(meter) == 1


class FixedFlow:
    """A refiner that reports the same displacement for every box."""

    def __init__(self, d: tuple[float, float]) -> None:
        self.d = np.array(d, dtype=float)

    def displacements(self, prev_gray, gray, prev_xyxy, homography=None) -> np.ndarray:
        return np.tile(self.d, (len(prev_xyxy), 1))


@pytest.mark.parametrize(
    "flow_px, box_move_px, expected_x",
    [
        # flow agrees with the box within the gate: the complementary filter blends them
        (10.0, 11.0, 100 + FLOW_WEIGHT * 10.0 + (1 - FLOW_WEIGHT) * 11.0),
        # flow far from the box (more than the gate share of a 20 px box): flow failed, box alone
        (10.0 + FLOW_GATE * 20 + 1.0, 10.0, 110.0),
        (float("nan"), 10.0, 110.0),
    ],
)
def test_flow_filter(flow_px, box_move_px, expected_x) -> None:
    meter = GroundDisplacement(refiner=FixedFlow((flow_px, 0.0)))
    run(meter, [(EgoMotion.identity(), box_at(100, 240))])
    positions, _ = meter.measure(
        GRAY, np.array([7]), box_at(100 + box_move_px, 240), EgoMotion.identity(), PROJ
    )
    assert positions[0, 0] == pytest.approx(expected_x)


@pytest.mark.parametrize(
    "predicted, anchor, size, expected",
    [
        ((10.0, 0.0), (10.0, 0.0), 20.0, (10.0, 0.0)),
        ((10.0, 0.0), (15.0, 0.0), 20.0, None),  # 5 px apart is the gate of a 20 px box
        ((np.inf, 0.0), (10.0, 0.0), 20.0, None),
    ],
)
def test_blend_flow(predicted, anchor, size, expected) -> None:
    got = blend_flow(np.array(predicted), np.array(anchor), size)
    assert (got is None) == (expected is None)
    if expected is not None:
        np.testing.assert_allclose(got, expected)


@pytest.mark.parametrize(
    "box, expected",
    [
        ((10, 10, 50, 50), False),
        ((0, 10, 50, 50), True),
        ((10, 2, 50, 50), True),  # within the 2 px margin
        ((10, 10, W - 2, 50), True),
        ((10, 10, 50, H - 3), False),
    ],
)
def test_touches_border(box, expected) -> None:
    assert bool(touches_border(np.array([box]), W, H)[0]) is expected


@pytest.mark.parametrize(
    "size, box, expected",
    [
        ((640, 360), (10, 2, 50, 50), True),  # small frames: the 2 px floor
        ((640, 360), (10, 3, 50, 50), False),
        # 1080p: a detector's box for a vehicle half out of view ends 4-6 px inside the border
        ((1920, 1080), (900, 5.6, 1000, 160), True),
        ((1920, 1080), (900, 7, 1000, 160), False),
        ((1920, 1080), (900, 500, 1000, 1075), True),
        ((3840, 2160), (3828, 500, 3830, 600), True),  # 4K: 13 px
    ],
)
def test_the_border_margin_grows_with_the_image(size, box, expected) -> None:
    assert border_margin(*size) == pytest.approx(max(2.0, 0.006 * min(size)))
    assert bool(touches_border(np.array([box], dtype=float), *size)[0]) is expected


@pytest.mark.parametrize("anchor, expected", [("center", (20.0, 30.0)), ("bottom", (20.0, 40.0))])
def test_box_anchors(anchor, expected) -> None:
    np.testing.assert_allclose(box_anchors(np.array([[10, 20, 30, 40]]), anchor)[0], expected)


def vehicle_box(front_y: float, x: float = 300.0, length: float = 45.0, width: float = 18.0) -> np.ndarray:
    """A vehicle driving down the image (+y), its box clipped to the frame."""
    box = np.array([[x - width / 2, front_y - length, x + width / 2, front_y]])
    return np.clip(box, [0, 0, 0, 0], [W, H, W, H])


@pytest.mark.parametrize(
    "anchor, camera_px",
    [("center", 0.0), ("bottom", 0.0), ("center", 3.0), ("bottom", -2.0)],
)
def test_clipped_boxes_measured_by_their_uncut_edge(anchor, camera_px) -> None:
    """A vehicle entering at the top and leaving at the bottom at 6 px per frame (0.6 m at
    0.1 m/px), the camera panning sideways: every step of a box cut by the border - entering,
    becoming whole, being cut again, leaving - measures the vehicle's true step, except slivers."""
    meter = GroundDisplacement(anchor=anchor)
    frames, whole_from = [], None
    for k in range(95):
        front = 12.0 + 6.0 * k  # the box's front edge enters at the top
        xyxy = vehicle_box(front, x=200.0 + camera_px * k)
        frames.append((shift(camera_px if k else 0.0), xyxy))
    steps = run(meter, frames)
    true_step = PROJ.to_ground(np.array([[300.0, 206.0]]))[0] - PROJ.to_ground(np.array([[300.0, 200.0]]))[0]
    assert np.hypot(*true_step) == pytest.approx(0.6)
    for k, (step, (_, xyxy)) in enumerate(zip(steps, frames, strict=True)):
        box = xyxy[0]
        visible = box[3] - box[1]
        prev_visible = frames[k - 1][1][0][3] - frames[k - 1][1][0][1] if k else 0.0
        if k == 0 or min(visible, prev_visible) < 9.0:  # new track, or a sliver (< half its width)
            assert np.isnan(step).all(), (k, step)
        else:
            np.testing.assert_allclose(step, true_step, atol=1e-6, err_msg=f"frame {k}")
            whole_from = whole_from or (k if visible == 45.0 else None)
    assert whole_from is not None  # the vehicle was wholly in view in between


@pytest.mark.parametrize(
    "box, cut, expected",
    [
        ((10, 0, 30, 50), (False, True, False, False), True),  # cut on top, 50 px long, 20 wide
        ((10, 0, 30, 9), (False, True, False, False), False),  # a sliver: 9 px < half of 20
        ((10, 0, 30, H), (False, True, False, True), False),  # cut on both sides of the axis
        ((0, 10, 40, 30), (True, False, False, False), True),
        ((10, 10, 30, 30), (False, False, False, False), True),
    ],
)
def test_measurable_clipped(box, cut, expected) -> None:
    box = np.array([box], dtype=float)
    np.testing.assert_array_equal(clipped_edges(box, W, H)[0], cut)
    assert bool(measurable_clipped(box, clipped_edges(box, W, H))[0]) is expected


@pytest.mark.parametrize(
    "cut, anchor, expected",
    [
        ((False, False, False, False), "center", (20.0, 30.0)),  # nothing cut: the anchor
        ((False, True, False, False), "center", (20.0, 40.0)),  # top cut: y from the bottom edge
        ((False, False, False, True), "center", (20.0, 20.0)),  # bottom cut: y from the top edge
        ((False, True, False, False), "bottom", (20.0, 40.0)),  # the bottom anchor needs no top
        ((False, False, False, True), "bottom", (20.0, 20.0)),
        ((True, False, False, False), "center", (30.0, 30.0)),  # left cut: x from the right edge
        ((False, True, False, True), "center", None),  # no uncut edge on y
    ],
)
def test_edge_point(cut, anchor, expected) -> None:
    box = np.array([10.0, 20.0, 30.0, 40.0])
    got = edge_point(box, box_anchors(box[None], anchor)[0], np.array(cut), anchor)
    if expected is None:
        assert got is None
    else:
        np.testing.assert_allclose(got, expected)
