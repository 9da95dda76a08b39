"""The box size checks of a speed's trust flag: a track's box that changes size along its window (a
partial or merged box slides its anchor along the vehicle), and two boxes too different in size to
be one vehicle (:mod:`pipelines.speed.estimator`, :mod:`pipelines.motion.relink`). Sizes are ground
sizes (m: sqrt of the box's area times the local GSD), so that perspective is no change.

Pure numpy.
"""

from __future__ import annotations

import itertools
import math
from collections import deque

import numpy as np

SIZE_SMOOTHING = 5  # box sizes: running median over this many samples before the trust check


def size_mismatch(a: np.ndarray | float, b: np.ndarray | float, max_change: float) -> np.ndarray:
    """(N, M) True where box size ``a[i]`` and ``b[j]`` (ground sizes, (N,) and (M,); NaN or <= 0:
    unknown) are both known and the larger exceeds the smaller by more than ``max_change`` (a
    share): another part of the vehicle, or another vehicle."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 1)
    b = np.asarray(b, dtype=np.float64).reshape(1, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.maximum(a, b) / np.minimum(a, b)
        return (a > 0) & (b > 0) & (ratio - 1.0 > max_change)


def size_changes(sizes: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """How much each track's box size (rows of ``sizes``, (G, N), all valid) varied over its
    window: max / min - 1 of the running median of SIZE_SMOOTHING samples (a change that lasts,
    not one frame's jitter; of the widest odd number of samples below that many: 3 of a young
    track's 3-4, none of 2), 0 with fewer than 2 samples.
    ``valid`` (G, N): rows of different lengths padded at the front, each with at least
    SIZE_SMOOTHING samples (None: no padding)."""
    n = sizes.shape[1]
    if valid is None:
        if n < 2:
            return np.zeros(len(sizes))
        valid = np.ones(sizes.shape, dtype=bool)
    width = min(SIZE_SMOOTHING, n if n % 2 else n - 1)  # the widest odd running median there is
    windows = np.lib.stride_tricks.sliding_window_view
    runs = np.median(windows(np.where(valid, sizes, 1.0), width, axis=1), axis=2)
    whole = windows(valid, width, axis=1).all(axis=2)  # running medians of samples only
    return np.where(whole, runs, -np.inf).max(axis=1) / np.where(whole, runs, np.inf).min(axis=1) - 1.0


def _window_size_changes(sizes: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`size_changes` of padded windows (:func:`_padded_windows`), each over its own
    measured sizes (a box cut by the frame's border has none: it is measured by its uncut edge),
    and whether a window holds such a box: vectorised where a window's sizes are all measured and
    at least SIZE_SMOOTHING, else one window at a time."""
    measured = np.isfinite(sizes) & (sizes > 0)
    cut = (valid & ~measured).any(axis=1)
    whole = ~cut & (valid.sum(axis=1) >= SIZE_SMOOTHING)
    changes = np.empty(len(sizes))
    if whole.any():
        changes[whole] = size_changes(sizes[whole], valid[whole])
    for g in np.flatnonzero(~whole):
        changes[g] = size_changes(sizes[g][measured[g]][None])[0]
    return changes, cut


def _recent_size(sizes: deque[float]) -> float:
    """The median of a track's last SIZE_SMOOTHING known box sizes (NaN when none is known)."""
    recent = [x for x in itertools.islice(reversed(sizes), SIZE_SMOOTHING) if x > 0]
    return float(np.median(recent)) if recent else math.nan
