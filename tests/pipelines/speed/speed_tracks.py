"""Synthetic tracks for the speed tests: straight drives at a known speed, fed to an estimator."""

from __future__ import annotations

import math

import numpy as np

from pipelines.speed import SpeedEstimator, m_per_s


def run_track(
    est: SpeedEstimator,
    times: np.ndarray,
    positions: np.ndarray,
    track_id: int = 1,
    nan_first: bool = True,
) -> list[tuple[float, object]]:
    """Feed one track's positions as per-update displacements; return (t, estimate or None) per update."""
    out = []
    prev = None
    for t, p in zip(times, positions, strict=True):
        d = np.full(2, np.nan) if prev is None and nan_first else p - (prev if prev is not None else p)
        res = est.update(float(t), np.array([track_id]), d[None])
        out.append((float(t), res.get(track_id)))
        prev = p
    return out


def run_sized(
    est: SpeedEstimator, times: np.ndarray, positions: np.ndarray, sizes: np.ndarray
) -> list[tuple[float, object]]:
    """Track 1's positions and box sizes fed frame by frame (its first frame starts it); return
    (t, estimate or None) per frame."""
    out = []
    for k, t in enumerate(times):
        d = np.full(2, np.nan) if k == 0 else positions[k] - positions[k - 1]
        res = est.update(float(t), np.array([1]), d[None], np.array([sizes[k]]))
        out.append((float(t), res.get(1)))
    return out


def straight(speed_kmh: float, heading_deg: float, times: np.ndarray, start=(3.0, -7.0)) -> np.ndarray:
    v = m_per_s(speed_kmh)
    h = math.radians(heading_deg)
    return np.asarray(start) + np.outer(times, [v * math.cos(h), v * math.sin(h)])
