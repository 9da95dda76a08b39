"""How well a road mask serves the engine: IoU, and above all the share of vehicles it keeps.

The metric that matters for the engine is not IoU but how many vehicles the mask keeps:
:func:`vehicle_keep_rate` gives the share of ground-truth boxes that survive
``pipelines.base_layer.filter_by_mask`` (after the same threshold and dilation), and
:func:`mask_keep_sweep` sets it against the share of the frame the mask covers.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


def mask_iou(pred: np.ndarray, gt: np.ndarray) -> float:
    pred, gt = pred.astype(bool), gt.astype(bool)
    union = (pred | gt).sum()
    return float((pred & gt).sum() / union) if union else 1.0


def vehicle_keep_rate(mask: np.ndarray, boxes: np.ndarray, min_overlap: float = 0.3) -> tuple[int, int]:
    """(kept, total): ground-truth boxes whose lower half lies on ``mask`` for >= ``min_overlap``
    (the engine's ``filter_by_mask`` rule)."""
    from pipelines.base_layer import lower_half_overlap

    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    if len(boxes) == 0:
        return 0, 0
    frac = lower_half_overlap(boxes, mask.astype(bool))
    return int((frac >= min_overlap).sum()), len(boxes)


@dataclass(frozen=True)
class KeepRate:
    """One operating point of a road mask on annotated frames."""

    threshold: float
    dilate_px: int
    kept: int  # ground-truth vehicles the engine keeps (``filter_by_mask`` rule)
    vehicles: int
    coverage: float  # mean share of the frame the mask covers

    @property
    def keep_rate(self) -> float | None:
        return self.kept / self.vehicles if self.vehicles else None

    def as_dict(self) -> dict:
        return {
            "threshold": self.threshold,
            "dilate_px": self.dilate_px,
            "kept": self.kept,
            "vehicles": self.vehicles,
            "keep_rate": self.keep_rate,
            "coverage": self.coverage,
        }


def mask_keep_sweep(
    segmenter,
    images: Iterable[tuple[np.ndarray, np.ndarray]],
    thresholds: Sequence[float],
    dilates: Sequence[int],
    min_overlap: float = 0.3,
) -> tuple[list[KeepRate], list[float]]:
    """The metric that matters for the pipeline: for each (threshold, dilation), the share of
    ground-truth vehicles the mask keeps against the share of the frame it covers.

    ``images`` yields (BGR frame, (N, 4) x1 y1 x2 y2 vehicle boxes); ``segmenter`` is the engine's
    (``pipelines.builder.build_road_segmenter``), so this measures what the pipeline does. The
    network runs once per frame; returns the operating points and the per-frame network ms."""
    from pipelines.base_layer import threshold_and_dilate

    grid = [(float(t), int(d)) for t in thresholds for d in dilates]
    kept = dict.fromkeys(grid, 0)
    cover: dict[tuple[float, int], list[float]] = {g: [] for g in grid}
    total, ms = 0, []
    for image, boxes in images:
        t0 = time.perf_counter()
        prob = segmenter(image)
        ms.append((time.perf_counter() - t0) * 1e3)
        total += len(boxes)
        for g in grid:
            mask = threshold_and_dilate(prob, *g)
            cover[g].append(float(mask.mean()))
            kept[g] += vehicle_keep_rate(mask, boxes, min_overlap)[0]
    points = [
        KeepRate(t, d, kept[(t, d)], total, float(np.mean(cover[(t, d)])) if cover[(t, d)] else 0.0)
        for t, d in grid
    ]
    return points, ms
