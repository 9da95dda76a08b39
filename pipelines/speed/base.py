"""A vehicle's mean speed over a measuring base and its sigma: the speed a ticket carries.

A per-frame speed is a fit over a trailing second; the largest of many such noisy estimates is
biased upward. A ticket instead carries one speed measured over a base chosen by time and distance
(:mod:`pipelines.ticket` chooses it): the least-squares line through the track's ground positions
over the base (trusted ones only: no box jumps), whose slope is the mean velocity over the base (for a vehicle that speeds up or brakes
steadily, the velocity at its middle: what the truth over the same base is scored against).

Its sigma must not be over-confident, and the errors of a track's positions are not independent:
a detector's box offset lasts about a second, on top of frame-to-frame jitter, and over a base of
one to a few seconds such an offset is the error. Fitted residuals cannot show it on their own (a
trend through a short base absorbs a slow error), so the sigma is a profile-likelihood bound:
the position errors are modelled as white jitter plus an Ornstein-Uhlenbeck wander, the share
``f`` of the variance and its correlation time ``tau`` on a grid; for each (tau, f) the residual
variance is fitted by restricted maximum likelihood (REML: a parabola's trend through the base,
which an acceleration leaves) and the least-squares slope's variance follows from it; the sigma is
the largest of those whose likelihood lies within the 95 % region of the best one (chi-square, one
degree of freedom: 1.92 below its maximum). Seeded tracks of 1-4 s with white, correlated and mixed
noise: 1 sigma held 72-100 % of the errors, 1.645 sigma 87-100 % (the ML choice alone: 50-83 % and
70-98 %, too few; the former robust slope sigma of the per-frame speeds: 34-86 %). The scale's
uncertainty (altitude, lens) is added by the caller. Pure numpy; imports only the modules above it
in :mod:`pipelines.speed`.
"""

from __future__ import annotations

import math

import numpy as np

from pipelines.speed.velocity import _speed_and_sigma

CORRELATION_TIMES_S = (0.1, 0.2, 0.4, 0.7, 1.0, 1.5, 2.5)  # the wander's grid of tau
CORRELATED_SHARES = (0.3, 0.6, 0.85, 0.95, 1.0)  # ... and of its share of the error variance
PROFILE_DROP = 1.92  # half the 95 % quantile of chi-square with one degree of freedom
MAX_SAMPLES = 120  # a longer base is thinned to this many evenly spaced positions (its errors
# last about a second: 10 a second carry nearly all it holds)


def _grid() -> list[tuple[float, float]]:
    return [(0.0, 0.0)] + [(tau, f) for tau in CORRELATION_TIMES_S for f in CORRELATED_SHARES]


def _correlation(lags: np.ndarray, tau: float, share: float) -> np.ndarray:
    white = np.eye(len(lags))
    if share <= 0:
        return white
    return (1.0 - share) * white + share * np.exp(-lags / tau)


def base_speed(t: np.ndarray, xy: np.ndarray) -> tuple[float, float]:
    """(speed, sigma) in m/s of the mean velocity over a base: ``t`` (N,) increasing times, ``xy``
    (N, 2) ground positions in metres (one continuous measurement). The speed is the least-squares
    slope's; sigma is inf below 4 samples (a parabola and its scatter need them)."""
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    if len(t) != len(xy):
        raise ValueError(f"t has {len(t)} samples but xy has {len(xy)}")
    if len(t) < 2 or not np.all(np.diff(t) > 0):
        raise ValueError("a base needs at least 2 samples at increasing times")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(xy))):
        raise ValueError("t and xy must be finite")
    if len(t) > MAX_SAMPLES:
        keep = np.unique(np.linspace(0, len(t) - 1, MAX_SAMPLES).round().astype(int))
        t, xy = t[keep], xy[keep]
    n = len(t)
    tc = t - t.mean()
    line = np.column_stack([np.ones(n), tc])
    weights = np.linalg.pinv(line)[1]  # the least-squares slope: weights @ positions
    v = weights @ xy
    speed = float(np.hypot(v[0], v[1]))
    if n < 4:
        return speed, math.inf
    trend = np.column_stack([line, (tc / max(abs(tc).max(), 1e-9)) ** 2])
    lags = np.abs(t[:, None] - t[None, :])
    fits = [_reml(trend, xy, _correlation(lags, tau, f), weights) for tau, f in _grid()]
    best = max(ll for ll, _ in fits)
    var = np.max([axis_var for ll, axis_var in fits if ll >= best - PROFILE_DROP], axis=0)
    _, sigma, _ = _speed_and_sigma(v, math.sqrt(float(var[0])), math.sqrt(float(var[1])))
    return speed, sigma


def _reml(
    trend: np.ndarray, xy: np.ndarray, corr: np.ndarray, weights: np.ndarray
) -> tuple[float, np.ndarray]:
    """Restricted log-likelihood of both axes' positions around ``trend`` (N, p) with errors of
    correlation ``corr`` (N, N) and a variance fitted per axis; and the variance (2,) that gives the
    least-squares slope (``weights``) under it."""
    n, p = trend.shape
    chol = np.linalg.cholesky(corr + 1e-9 * np.eye(n))
    xw = np.linalg.solve(chol, trend)
    yw = np.linalg.solve(chol, xy)
    coef = np.linalg.lstsq(xw, yw, rcond=None)[0]
    resid = yw - xw @ coef
    s2 = np.maximum((resid**2).sum(axis=0) / (n - p), 1e-18)
    logdet = 2.0 * float(np.log(np.diag(chol)).sum())
    logdet_x = float(np.linalg.slogdet(xw.T @ xw)[1])
    ll = float(np.sum(-0.5 * ((n - p) * np.log(s2) + logdet + logdet_x)))
    return ll, s2 * float(weights @ corr @ weights)


__all__ = ["base_speed"]
