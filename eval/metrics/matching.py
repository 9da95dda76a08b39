"""Matching predictions to ground truth, per frame, as the benchmarks do it.

* ignore regions (UAVDT, VisDrone): ground truth and predictions with at least half of their box
  inside the union of the frame's ignore regions are removed (UAVDT devkit ``dropObjectsInIgr``);
* distractors (zero-marked or non-scored classes, low visibility): predictions matched to one at
  IoU >= 0.5 (Hungarian) are removed, then the distractors themselves (TrackEval's MOTChallenge rule).

:func:`prepare_sequence` then builds, per frame, the ground-truth and tracker id arrays and the IoU
similarity matrix that TrackEval's ``eval_sequence`` expects, and the matched pairs the speed and
violation metrics use.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from scipy.optimize import linear_sum_assignment

from eval.groundtruth import GroundTruth
from eval.metrics.predictions import PredTracks

IOU_THRESHOLD = 0.5
IGNORE_COVERAGE = 0.5


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix of (N, 4) and (M, 4) xyxy boxes."""
    a = np.asarray(a, float).reshape(-1, 4)
    b = np.asarray(b, float).reshape(-1, 4)
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    ix = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = ix * iy
    area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def match_iou(a: np.ndarray, b: np.ndarray, threshold: float = IOU_THRESHOLD) -> list[tuple[int, int, float]]:
    """Hungarian matching on IoU; pairs (i, j, iou) with iou >= threshold."""
    iou = box_iou(a, b)
    if iou.size == 0:
        return []
    rows, cols = linear_sum_assignment(-iou)
    return [
        (int(r), int(c), float(iou[r, c])) for r, c in zip(rows, cols, strict=True) if iou[r, c] >= threshold
    ]


def ignore_coverage(boxes: np.ndarray, regions: np.ndarray, image_size: tuple[int, int] | None) -> np.ndarray:
    """Share of each box's area inside the union of ``regions`` (rasterised like the UAVDT devkit)."""
    boxes = np.asarray(boxes, float).reshape(-1, 4)
    if len(boxes) == 0 or len(regions) == 0:
        return np.zeros(len(boxes))
    if image_size is None:
        w = int(np.ceil(max(boxes[:, 2].max(), regions[:, 2].max()))) + 1
        h = int(np.ceil(max(boxes[:, 3].max(), regions[:, 3].max()))) + 1
    else:
        w, h = image_size
    mask = np.zeros((h, w), np.uint8)
    for x0, y0, x1, y1 in np.round(regions).astype(int):
        mask[max(0, y0) : max(0, min(h, y1 + 1)), max(0, x0) : max(0, min(w, x1 + 1))] = 1
    integral = cv2.integral(mask)
    bx = np.round(boxes).astype(int)
    x0 = np.clip(bx[:, 0], 0, w)
    y0 = np.clip(bx[:, 1], 0, h)
    x1 = np.clip(bx[:, 2], 0, w)
    y1 = np.clip(bx[:, 3], 0, h)
    inside = integral[y1, x1] - integral[y0, x1] - integral[y1, x0] + integral[y0, x0]
    area = np.maximum((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]), 1.0)
    return inside / area


@dataclass(frozen=True, slots=True, eq=False)
class MatchedSequence:
    """A sequence after preprocessing: TrackEval's data dict and the per-frame matches."""

    data: dict
    pairs: list[tuple[int, int, int, int]]  # (frame, gt_id, pred_row, gt_row) matched at IoU >= 0.5
    n_frames: int


def prepare_sequence(
    gt: GroundTruth,
    pred: PredTracks,
    n_frames: int,
    image_size: tuple[int, int] | None = None,
) -> MatchedSequence:
    """Apply ignore regions and distractors, then build TrackEval's per-frame arrays."""
    gt_scored = ~gt.distractor
    gt_rows = {f: np.asarray(v, int) for f, v in _rows_by_frame(gt.frames, gt_scored).items()}
    distractors = gt.distractors_by_frame()
    ignores = gt.ignore_by_frame()
    pred_rows = pred.by_frame()

    gt_id_map: dict[int, int] = {}
    tr_id_map: dict[int, int] = {}
    gt_ids_t, tr_ids_t, sims = [], [], []
    pairs: list[tuple[int, int, int, int]] = []
    n_gt = n_tr = 0
    for f in range(1, n_frames + 1):
        g = gt_rows.get(f, np.zeros(0, int))
        p = pred_rows.get(f, np.zeros(0, int))
        if f in ignores and (len(g) or len(p)):
            reg = ignores[f]
            if len(g):
                g = g[ignore_coverage(gt.xyxy[g], reg, image_size) < IGNORE_COVERAGE]
            if len(p):
                p = p[ignore_coverage(pred.xyxy[p], reg, image_size) < IGNORE_COVERAGE]
        if f in distractors and len(p):
            drop = {j for _, j, _ in match_iou(distractors[f], pred.xyxy[p])}
            if drop:
                p = np.array([r for k, r in enumerate(p) if k not in drop], int)
        gids = np.array([gt_id_map.setdefault(int(i), len(gt_id_map)) for i in gt.ids[g]], int)
        tids = np.array([tr_id_map.setdefault(int(i), len(tr_id_map)) for i in pred.ids[p]], int)
        sim = box_iou(gt.xyxy[g], pred.xyxy[p])
        gt_ids_t.append(gids)
        tr_ids_t.append(tids)
        sims.append(sim)
        n_gt += len(g)
        n_tr += len(p)
        for i, j, _ in match_iou(gt.xyxy[g], pred.xyxy[p]):
            pairs.append((f, int(gt.ids[g[i]]), int(p[j]), int(g[i])))
    data = {
        "num_timesteps": n_frames,
        "num_gt_ids": len(gt_id_map),
        "num_tracker_ids": len(tr_id_map),
        "num_gt_dets": n_gt,
        "num_tracker_dets": n_tr,
        "gt_ids": gt_ids_t,
        "tracker_ids": tr_ids_t,
        "similarity_scores": sims,
    }
    return MatchedSequence(data, pairs, n_frames)


def _rows_by_frame(frames: np.ndarray, sel: np.ndarray) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i in np.nonzero(sel)[0]:
        out.setdefault(int(frames[i]), []).append(int(i))
    return out
