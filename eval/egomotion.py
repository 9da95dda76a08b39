"""Ego-motion error: the estimated frame-to-frame camera homography against the exact one.

The simulator writes each frame's exact world -> image homography ``W(k)`` (``gt/camera.csv``,
:class:`eval.groundtruth.CameraTruth`); the true camera motion from frame ``k - 1`` to ``k`` in
pixels is ``H_true = W(k) @ inv(W(k - 1))`` (ground plane). For each consecutive pair, the error is
the RMS distance, in full-resolution pixels, between a regular grid of previous-frame pixels mapped
by the estimated prev -> current homography and by ``H_true``, over the grid points that the true
motion keeps inside the image (ground seen in both frames). The camera's own motion (the median
displacement of the same points under ``H_true``) is reported beside it for scale.

Pure numpy; frames are 0-based indices here (``FrameResult.frame.index``), 1-based in the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from eval.groundtruth import CameraTruth

GRID = (32, 18)  # points across x down: one per 60 px at 1920x1080


def image_grid(width: int, height: int, nx: int = GRID[0], ny: int = GRID[1]) -> np.ndarray:
    """(nx * ny, 2) pixel coordinates: the centres of an ``nx`` x ``ny`` tiling of the image."""
    xs = (np.arange(nx) + 0.5) * width / nx - 0.5
    ys = (np.arange(ny) + 0.5) * height / ny - 0.5
    gx, gy = np.meshgrid(xs, ys)
    return np.column_stack([gx.ravel(), gy.ravel()])


def map_points(h: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """(N, 2) points through a 3x3 homography (NaN where they map to infinity)."""
    hom = np.column_stack([pts, np.ones(len(pts))]) @ np.asarray(h, dtype=np.float64).T
    with np.errstate(divide="ignore", invalid="ignore"):
        out = hom[:, :2] / hom[:, 2:3]
    out[~(hom[:, 2] > 0) & ~(hom[:, 2] < 0)] = np.nan
    return out


def true_interframe(w2i_prev: np.ndarray, w2i_cur: np.ndarray) -> np.ndarray:
    """The exact prev -> current pixel homography of the ground plane (``h33 = 1``)."""
    h = np.asarray(w2i_cur, np.float64) @ np.linalg.inv(np.asarray(w2i_prev, np.float64))
    return h / h[2, 2]


def pair_error(
    h_est: np.ndarray, h_true: np.ndarray, width: int, height: int, grid: np.ndarray | None = None
) -> tuple[float, float]:
    """(RMS error px, median true motion px) of one frame pair over the grid points seen in both
    frames; (nan, nan) when no grid point stays in view."""
    pts = image_grid(width, height) if grid is None else grid
    true = map_points(h_true, pts)
    seen = (
        np.isfinite(true).all(axis=1)
        & (true[:, 0] >= -0.5)
        & (true[:, 0] <= width - 0.5)
        & (true[:, 1] >= -0.5)
        & (true[:, 1] <= height - 0.5)
    )
    if not seen.any():
        return float("nan"), float("nan")
    est = map_points(h_est, pts[seen])
    d = np.linalg.norm(est - true[seen], axis=1)
    d = np.where(np.isfinite(d), d, np.hypot(width, height))  # a degenerate estimate: the worst
    rms = float(np.sqrt(np.mean(d**2)))
    return rms, float(np.median(np.linalg.norm(true[seen] - pts[seen], axis=1)))


@dataclass(frozen=True, slots=True)
class EgoErrors:
    """Per consecutive frame pair: the current frame (0-based), RMS error and true motion, px."""

    frames: np.ndarray
    rms_px: np.ndarray
    true_px: np.ndarray
    invalid: np.ndarray  # the estimator flagged its estimate unreliable (fallback)


def ego_errors(
    estimates: Mapping[int, np.ndarray],
    truth: CameraTruth,
    width: int,
    height: int,
    valid: Mapping[int, bool] | None = None,
) -> EgoErrors:
    """Score ``estimates`` (0-based frame index -> estimated prev -> current homography) on every
    pair of consecutive frames that both have an estimate and a true homography."""
    grid = image_grid(width, height)
    frames, rms, true, bad = [], [], [], []
    for k in sorted(estimates):
        if k - 1 not in estimates:
            continue
        w_prev, w_cur = truth.at(k), truth.at(k + 1)  # 1-based in the file
        if w_prev is None or w_cur is None:
            continue
        e, t = pair_error(estimates[k], true_interframe(w_prev, w_cur), width, height, grid)
        if not np.isfinite(e):
            continue
        frames.append(k)
        rms.append(e)
        true.append(t)
        bad.append(valid is not None and not valid.get(k, True))
    return EgoErrors(np.array(frames, int), np.array(rms, float), np.array(true, float), np.array(bad, bool))


def summarize_ego(errors: EgoErrors) -> dict[str, float | int | None]:
    """``pairs``, ``mean_px`` / ``p95_px`` / ``max_px`` (RMS error per frame pair), ``true_median_px``
    (median camera motion per frame) and ``invalid`` (pairs the estimator flagged)."""
    n = len(errors.rms_px)
    if n == 0:
        return {
            "pairs": 0,
            "mean_px": None,
            "p95_px": None,
            "max_px": None,
            "true_median_px": None,
            "invalid": 0,
        }
    return {
        "pairs": n,
        "mean_px": float(np.mean(errors.rms_px)),
        "p95_px": float(np.percentile(errors.rms_px, 95)),
        "max_px": float(np.max(errors.rms_px)),
        "true_median_px": float(np.median(errors.true_px)),
        "invalid": int(errors.invalid.sum()),
    }


__all__ = [
    "GRID",
    "EgoErrors",
    "ego_errors",
    "image_grid",
    "map_points",
    "pair_error",
    "summarize_ego",
    "true_interframe",
]
