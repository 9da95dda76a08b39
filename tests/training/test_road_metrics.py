"""Road-mask metrics: vehicle keep rate, IoU, and the keep-rate / coverage sweep."""

from __future__ import annotations

import numpy as np
import pytest

from training.road_metrics import mask_iou, mask_keep_sweep, vehicle_keep_rate


def test_keep_rate_and_iou():
    mask = np.zeros((100, 100), np.uint8)
    mask[40:60] = 1
    boxes = np.array([[10, 35, 30, 55], [50, 0, 60, 10]], float)
    assert vehicle_keep_rate(mask, boxes) == (1, 2)
    assert mask_iou(mask, mask) == 1.0


def _band_segmenter(image):
    """Road probability 0.9 on rows 40-59, 0.25 on rows 60-69, 0 elsewhere."""
    prob = np.zeros(image.shape[:2], np.float32)
    prob[40:60] = 0.9
    prob[60:70] = 0.25
    return prob


@pytest.mark.parametrize(
    ("threshold", "dilate_px", "kept", "coverage"),
    [
        (0.5, 0, 1, 0.20),  # only the 0.9 band: the box below it (rows 62-70) is dropped
        (0.2, 0, 2, 0.30),  # the 0.25 band joins: both kept, 30 % of the frame
        (0.5, 8, 2, 0.36),  # dilated 8 rows each way: half of the second box's lower half is on it
        (0.95, 0, 0, 0.0),  # nothing passes
    ],
)
def test_mask_keep_sweep_operating_points(threshold, dilate_px, kept, coverage):
    frames = [(np.zeros((100, 100, 3), np.uint8), np.array([[10, 35, 30, 55], [50, 62, 60, 70]], float))] * 2
    points, ms = mask_keep_sweep(_band_segmenter, frames, [threshold], [dilate_px])
    (p,) = points
    assert (p.threshold, p.dilate_px, p.kept, p.vehicles) == (threshold, dilate_px, 2 * kept, 4)
    assert p.coverage == pytest.approx(coverage)  # full-width bands: dilation adds exact rows
    assert p.keep_rate == kept / 2 and len(ms) == 2
