"""Per-box LK displacement on analytically rendered (exactly shifted) textured boxes."""

from __future__ import annotations

import numpy as np
import pytest
from render_helpers import BoxScene

from pipelines.motion.flow import BoxFlowRefiner, FlowParams

W, H = 360, 240
_SCENE = BoxScene(W, H, seed=0)
_render = _SCENE.render
_vehicle_texture = _SCENE.texture
_XX, _YY, _PH, _K = _SCENE.xx, _SCENE.yy, _SCENE.phase, len(_SCENE.phase)


BOXES = np.array([[60.3, 50.6, 104.3, 72.6], [170.8, 120.2, 220.8, 146.2], [240.1, 60.9, 280.1, 80.9]])


@pytest.mark.parametrize(
    ("shift", "pan", "seed"),
    [
        ((2.4, 0.0), (0.0, 0.0), False),
        ((2.4, -1.3), (0.0, 0.0), False),
        ((-0.6, 1.7), (0.0, 0.0), False),
        ((0.0, 0.0), (0.0, 0.0), False),
        ((2.4, 0.0), (-25.0, 3.0), True),  # camera pan, seeded with the ego homography
        ((2.4, 0.0), (-25.0, 3.0), False),  # same pan without a seed: within the search range
    ],
)
def test_subpixel_shift_recovered(shift, pan, seed) -> None:
    total = np.array(shift) + np.array(pan)
    prev = _render(BOXES)
    cur = _render(BOXES + np.r_[total, total], pan=pan)
    hom = np.array([[1, 0, pan[0]], [0, 1, pan[1]], [0, 0, 1.0]]) if seed else None
    d = BoxFlowRefiner().displacements(prev, cur, BOXES, homography=hom)
    assert d.shape == (3, 2) and not np.isnan(d).any()
    assert np.abs(d - total).max() < 0.1, d - total


_GX, _GY = _SCENE.rng.uniform(-0.18, 0.18, _K), _SCENE.rng.uniform(-0.18, 0.18, _K)


def _render_diagonal_car(centre: np.ndarray, pan: np.ndarray) -> np.ndarray:
    """A 56 x 20 px textured car at 40 degrees on a textured road; its axis-aligned box is half road."""
    x, y = _XX - pan[0], _YY - pan[1]
    road = 110.0 + 9.0 * sum(np.cos(2 * np.pi * (_GX[k] * x + _GY[k] * y) + _PH[k]) for k in range(_K))
    c, s = np.cos(np.radians(40.0)), np.sin(np.radians(40.0))
    u = c * (_XX - centre[0]) + s * (_YY - centre[1])
    v = -s * (_XX - centre[0]) + c * (_YY - centre[1])
    m = np.clip(np.minimum(28.0 - np.abs(u), 10.0 - np.abs(v)) + 0.5, 0, 1)
    img = road * (1 - m) + m * (150.0 + 14.0 * _vehicle_texture(u, v))
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


DIAG_CENTRE = np.array([170.0, 120.0])
DIAG_BOX = np.array(
    [[DIAG_CENTRE[0] - 28.0, DIAG_CENTRE[1] - 26.0, DIAG_CENTRE[0] + 28.0, DIAG_CENTRE[1] + 26.0]]
)


@pytest.mark.parametrize("vehicle", [(2.4, 2.0), (-1.5, -1.3), (0.8, 0.7)])
def test_background_in_a_diagonal_box_is_removed_with_the_homography(vehicle) -> None:
    pan = np.array([-6.0, 1.5])
    total = np.array(vehicle) + pan
    prev = _render_diagonal_car(DIAG_CENTRE, np.zeros(2))
    cur = _render_diagonal_car(DIAG_CENTRE + total, pan)
    hom = np.array([[1, 0, pan[0]], [0, 1, pan[1]], [0, 0, 1.0]])
    d = BoxFlowRefiner().displacements(prev, cur, DIAG_BOX, homography=hom)
    assert np.abs(d[0] - total).max() < 0.1, d[0] - total
    # Without the camera motion the road cannot be told apart: the box's centre keeps the estimate
    # near the vehicle (or it is NaN), but a little road leaks in.
    d = BoxFlowRefiner().displacements(prev, cur, DIAG_BOX)
    assert np.isnan(d[0]).all() or np.abs(d[0] - total).max() < 0.3


def test_vehicle_moving_with_the_ground_gives_nan_with_homography() -> None:
    """Stationary on the road (moves only with the camera): not separable from the ground."""
    pan = np.array([-6.0, 1.5])
    prev = _render_diagonal_car(DIAG_CENTRE, np.zeros(2))
    cur = _render_diagonal_car(DIAG_CENTRE + pan, pan)
    hom = np.array([[1, 0, pan[0]], [0, 1, pan[1]], [0, 0, 1.0]])
    assert np.isnan(BoxFlowRefiner().displacements(prev, cur, DIAG_BOX, homography=hom)).all()
    assert np.allclose(BoxFlowRefiner().displacements(prev, cur, DIAG_BOX)[0], pan, atol=0.1)


def test_textureless_box_gives_nan() -> None:
    prev = _render(BOXES[:1], textured=False)
    cur = _render(BOXES[:1] + [2.4, 0, 2.4, 0], textured=False)
    d = BoxFlowRefiner().displacements(prev, cur, BOXES[:1])
    assert np.isnan(d).all()


@pytest.mark.parametrize(
    "box",
    [
        [-80.0, -60.0, -20.0, -30.0],  # outside the image
        [50.0, 50.0, 53.0, 52.0],  # too small
        [np.nan, 0.0, 10.0, 10.0],
    ],
)
def test_unusable_boxes_give_nan(box) -> None:
    prev = _render(BOXES)
    d = BoxFlowRefiner().displacements(prev, prev, np.array([box, BOXES[0]]))
    assert np.isnan(d[0]).all() and np.allclose(d[1], 0.0, atol=0.05)


def test_empty_and_bgr_inputs() -> None:
    prev = _render(BOXES)
    assert BoxFlowRefiner().displacements(prev, prev, np.empty((0, 4))).shape == (0, 2)
    bgr = np.repeat(prev[:, :, None], 3, axis=2)
    d = BoxFlowRefiner(FlowParams(max_corners=8)).displacements(bgr, bgr, BOXES)
    assert np.allclose(d, 0.0, atol=0.05)
