"""Vehicle speed from ground displacements: a robust windowed fit with an uncertainty.

Pure math first (:func:`kmh`, :func:`theil_sen`, :func:`robust_speed_fit`), then
:class:`SpeedEstimator`, which integrates each track's per-step ground displacement (metres, in the
ego-motion-stabilised ground frame) into a position track and re-fits its velocity over a trailing
time window at every update.

Why Theil–Sen (median of pairwise slopes) rather than Huber-IRLS: the design (time) has no
leverage outliers, the positions have occasional gross errors (box jumps, ID swaps, a bad flow
vector) and the windows are short (10-60 samples). Theil–Sen tolerates ~29 % of corrupted samples,
has no tuning constant and no iterations that may fail to converge, is deterministic, and loses
only ~5 % efficiency against least squares on Gaussian noise (asymptotic relative efficiency
3/pi). Its O(N^2) pairs are computed in one vectorised numpy pass for both axes (N=30 -> 435
pairs, ~30 us), cheaper than ``scipy.stats.theilslopes`` called per axis.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from pipelines.config import SpeedConfig
from pipelines.types import SpeedEstimate

logger = logging.getLogger(__name__)

MAD_TO_SIGMA = 1.4826  # MAD of a Gaussian -> its standard deviation
THEIL_SEN_VARIANCE_FACTOR = math.pi / 3.0  # 1 / asymptotic relative efficiency on Gaussian noise
OUTLIER_FACTOR = 2.0  # a step faster than this multiple of max_plausible_kmh is a measurement error
SIZE_SMOOTHING = 5  # box sizes: running median over this many samples before the trust check
HALF_SAMPLES = 15  # samples of each half of the history the acceleration is estimated from, at most
# how long a detector's box errors last (s): a shorter history sees them as motion (velocity_now_many)
ERROR_CORRELATION_S = 1.0
# how much the noise of the acceleration carry exceeds what its residual scatter says (velocity_now_many)
CARRY_NOISE_FACTOR = 16.0
# RMS acceleration of traffic (m/s^2): the prior of a young track's lag, in its sigma (velocity_now_many)
ACCEL_SIGMA_MPS2 = 0.5
MAX_AUTOCORRELATION = 0.9  # cap of the residuals' lag-1 autocorrelation (variance x 19 at most)
# A carried track's lag left unmeasured has the prior of this share of traffic's RMS acceleration
# (velocity_now_many). Speed grid, 36 cells, shipped detector, errors within 1 sigma pooled / cells
# in 60-75 % (under, over): 0 -> 64 % / 25 (9, 2); 0.2 -> 69 % / 24 (3, 9); 0.4 -> 73 % / 20 (0, 16);
# 0.7 -> 75 % / 19; 1 -> 78 % / 12. 0.2: by track age, 60-78 % in every bin (0: 50-75 %). Since the
# carry counts only along the velocity (_along): 0.2 -> 68.7 % / 27 (3, 6), every age bin 63-74 %.
CARRIED_LAG_FRACTION = 0.2


def kmh(m_per_s: float | np.ndarray) -> float | np.ndarray:
    """Metres per second -> kilometres per hour."""
    return m_per_s * 3.6


def m_per_s(km_per_h: float | np.ndarray) -> float | np.ndarray:
    """Kilometres per hour -> metres per second."""
    return km_per_h / 3.6


@lru_cache(maxsize=256)
def _pair_indices(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(n, 1)


def _median(x: np.ndarray, axis: int, valid: np.ndarray | None = None) -> np.ndarray:
    """``np.median`` along ``axis`` of the entries where ``valid`` (broadcast to ``x``; None: all).
    Masked: the middle of the sorted valid entries (invalid ones sorted last), NaN where none."""
    if valid is None:
        return np.median(x, axis=axis)
    valid = np.broadcast_to(valid, x.shape)
    ordered = np.sort(np.where(valid, x, np.inf), axis=axis)
    m = valid.sum(axis=axis, keepdims=True)
    lo = np.take_along_axis(ordered, np.maximum(m - 1, 0) // 2, axis=axis)
    hi = np.take_along_axis(ordered, m // 2 - (m == 0), axis=axis)
    with np.errstate(invalid="ignore"):
        med = np.where(m > 0, (lo + hi) / 2, np.nan)
    return np.squeeze(med, axis=axis)


def _mean(x: np.ndarray, axis: int, valid: np.ndarray | None = None, keepdims: bool = False) -> np.ndarray:
    """Mean along ``axis`` of the entries where ``valid`` (None: all)."""
    if valid is None:
        return x.mean(axis=axis, keepdims=keepdims)
    valid = np.broadcast_to(valid, x.shape)
    return (x * valid).sum(axis=axis, keepdims=keepdims) / valid.sum(axis=axis, keepdims=keepdims)


def theil_sen(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Theil–Sen fit of each column of ``y`` (N, K) against ``t`` (N,): (slopes (K,), intercepts (K,)).

    Pairs with equal times are ignored; ``t`` needs at least two distinct values.
    """
    t = np.asarray(t, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(len(t), -1)
    i, j = _pair_indices(len(t))
    dt = t[j] - t[i]
    ok = dt != 0
    if not ok.any():
        raise ValueError("need at least two distinct timestamps")
    if ok.all():
        slopes, intercepts = theil_sen_many(t[None], y[None])
        return slopes[0], intercepts[0]
    i, j, dt = i[ok], j[ok], dt[ok]
    slopes = np.median((y[j] - y[i]) / dt[:, None], axis=0)
    intercepts = np.median(y - t[:, None] * slopes, axis=0)
    return slopes, intercepts


def _slopes(t: np.ndarray, xy: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Theil-Sen slopes (G, K) of G series (G, N) x (G, N, K): the median of pairwise slopes
    (of the pairs of ``valid`` samples, (G, N); None: all)."""
    i, j = _pair_indices(t.shape[1])
    pairs = (xy[:, j] - xy[:, i]) / (t[:, j] - t[:, i])[:, :, None]
    return _median(pairs, 1, None if valid is None else (valid[:, i] & valid[:, j])[:, :, None])


def theil_sen_many(
    t: np.ndarray, y: np.ndarray, valid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`theil_sen` of G series at once: ``t`` (G, N), ``y`` (G, N, K) -> slopes and
    intercepts, each (G, K). Every series' times must be distinct (no pair is left out).
    ``valid`` (G, N): the samples of each series (None: all; the others need only be finite,
    with times distinct from the valid ones')."""
    slopes = _slopes(t, y, valid)
    mask = None if valid is None else valid[:, :, None]
    intercepts = _median(y - t[:, :, None] * slopes[:, None, :], 1, mask)
    return slopes, intercepts


def _t_variance_factor(dof: np.ndarray) -> np.ndarray:
    """Variance of a Student-t with ``dof`` degrees of freedom (scale estimated from few samples).

    Capped at 3 (the value for 3 dof) so 3-4 samples give a large but finite sigma.
    """
    dof = np.asarray(dof, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(dof > 3, dof / (dof - 2.0), 3.0)


def slope_sigma(t: np.ndarray, resid: np.ndarray) -> np.ndarray:
    """Standard error of fitted slopes from residual scatter, per column of ``resid`` (N, K).

    Residuals further than 3 robust sigmas (1.4826 * MAD) from the fit are left out; the rest give
    the residual variance (n - 2 degrees of freedom), divided by the spread of their times,
    inflated by the Theil-Sen efficiency loss (pi/3) and by the Student-t variance factor
    dof/(dof-2) so that the sigma stays honest with few samples. Inf when fewer than 3 remain.
    """
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    resid = np.asarray(resid, dtype=np.float64).reshape(len(t), -1)
    return slope_sigma_many(t[None], resid[None])[0]


def slope_sigma_many(t: np.ndarray, resid: np.ndarray, inflation: np.ndarray | None = None) -> np.ndarray:
    """:func:`slope_sigma` of G series at once: ``t`` (G, N), ``resid`` (G, N, K) -> (G, K).
    ``inflation`` (G, K): variance factors for correlated residuals (:func:`ar1_inflation`)."""
    t = t[:, :, None]
    s2, n, inlier = _residual_variance(resid)
    tbar = (t * inlier).sum(axis=1) / np.maximum(n, 1)
    sxx = (((t - tbar[:, None, :]) ** 2) * inlier).sum(axis=1)
    return _slope_sigma(s2, n, sxx, inflation)


def _robust_scale(resid: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """(G, K): 1.4826 x the median absolute deviation of each series of residuals (G, N, K)
    (of its ``valid`` samples, (G, N, 1); None: all)."""
    centre = _median(resid, 1, valid)[:, None, :]
    return MAD_TO_SIGMA * _median(np.abs(resid - centre), 1, valid)


def _residual_variance(
    resid: np.ndarray, scale: np.ndarray | None = None, valid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Residual variance of G line fits (G, N, K) over the residuals within 3 robust sigmas
    (:func:`_robust_scale`, or ``scale``) of the fit, with n - 2 degrees of freedom: (variance
    (G, K), inliers (G, K), inlier mask (G, N, K)). ``valid`` (G, N, 1): the samples (None: all)."""
    scale = _robust_scale(resid, valid) if scale is None else scale
    inlier = np.abs(resid) <= np.where(scale > 0, 3.0 * scale, 1e-12)[:, None, :]
    if valid is not None:
        inlier &= valid
    n = inlier.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s2 = ((resid**2) * inlier).sum(axis=1) / (n - 2.0)
    return s2, n, inlier


def noise_stats(
    resid: np.ndarray, valid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_residual_variance` (without the mask) and :func:`ar1_inflation` of residuals
    (G, N, K) together, one robust scale for both: (variance, inliers, inflation), (G, K) each.
    ``valid`` (G, N, 1): the samples of each series, the last ones (None: all)."""
    scale = _robust_scale(resid, valid)
    s2, n, _ = _residual_variance(resid, scale, valid)
    return s2, n, ar1_inflation(resid, scale, valid)


def _slope_sigma(s2: np.ndarray, n: np.ndarray, sxx: np.ndarray, inflation: np.ndarray | None) -> np.ndarray:
    """A Theil-Sen slope's standard error from the residual variance ``s2`` of ``n`` inliers and
    the spread of their times ``sxx`` (see :func:`slope_sigma`); inf below 3 inliers."""
    dof = n - 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        var = s2 * THEIL_SEN_VARIANCE_FACTOR * _t_variance_factor(dof) / sxx
        if inflation is not None:
            var = var * inflation
    return np.where((n >= 3) & (sxx > 0), np.sqrt(np.maximum(var, 0.0)), np.inf)


def ar1_inflation(
    resid: np.ndarray, scale: np.ndarray | None = None, valid: np.ndarray | None = None
) -> np.ndarray:
    """How much correlated residuals (G, N, K) inflate a fitted slope's variance: ``(1 + r) / (1 - r)``
    with ``r`` the lag-1 autocorrelation of each series (outliers clipped at 3 robust sigmas;
    corrected for its bias over N samples, ``(1 + 3 r) / N``, which matters in a young track's
    short window; taken in [0, MAX_AUTOCORRELATION]). Box and flow errors are not independent from frame to
    frame - a detector sees nearly the same image twice, an anchor offset lasts - so N samples
    carry the information of fewer; treating them as independent made the fit's sigma over-confident.
    ``scale``: the residuals' :func:`_robust_scale`, when already computed. ``valid`` (G, N, 1):
    the samples of each series, which must be its last ones (None: all)."""
    scale = _robust_scale(resid, valid) if scale is None else scale
    lim = 3.0 * scale[:, None, :]
    rc = np.clip(resid, -lim, lim)
    rc = rc - _mean(rc, 1, valid, keepdims=True)
    n = resid.shape[1]
    if valid is not None:  # left-padded: zeros before the first sample add nothing to the sums
        rc = rc * valid
        n = valid.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (rc[:, 1:] * rc[:, :-1]).sum(axis=1) / (rc**2).sum(axis=1)
    r = np.nan_to_num(r)
    r = r + (1.0 + 3.0 * r) / n  # the estimate's bias from N samples (Kendall 1954)
    r = np.clip(r, 0.0, MAX_AUTOCORRELATION)
    return (1.0 + r) / (1.0 - r)


def robust_speed_fit(
    t: np.ndarray,
    xy: np.ndarray,
    *,
    n_speed: int | None = None,
    carry: bool = True,
    error_correlation_s: float = ERROR_CORRELATION_S,
    accel_sigma_mps2: float = ACCEL_SIGMA_MPS2,
) -> tuple[float, float, np.ndarray]:
    """Robust fit of ground position against time: the velocity at the last sample and its error.

    Args:
        t: (N,) timestamps in seconds (any order, N >= 2, at least two distinct values).
        xy: (N, 2) ground positions in metres.
        n_speed, carry, error_correlation_s, accel_sigma_mps2: see :func:`velocity_now_many` (the speed window's
            samples, the last ones, default all; repeated times: a straight line through all,
            its velocity at the middle, errors independent).

    Returns:
        ``(speed_m_s, sigma_m_s, velocity_xy)``: speed = |v|; sigma is one standard deviation of
        the speed, the per-axis standard errors propagated to |v| (delta method; at |v| ~ 0
        the RMS of the two axes). ``sigma`` is inf when the scatter cannot be estimated (N < 3).
    """
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    if len(t) != len(xy):
        raise ValueError(f"t has {len(t)} samples but xy has {len(xy)}")
    if len(t) < 2:
        raise ValueError("need at least 2 samples for a speed fit")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(xy))):
        raise ValueError("t and xy must be finite")
    if len(np.unique(t)) == len(t):
        order = np.argsort(t)
        speed, sigma, v = robust_speed_fit_many(
            t[order][None], xy[order][None], n_speed, carry, error_correlation_s, accel_sigma_mps2
        )
        return float(speed[0]), float(sigma[0]), v[0]
    t = t - t.mean()  # conditioning: intercepts at the window centre
    v, b = theil_sen(t, xy)
    resid = xy - (b + t[:, None] * v)
    sx, sy = (float(s) for s in slope_sigma(t, resid))
    return _speed_and_sigma(v, sx, sy)


def robust_speed_fit_many(
    t: np.ndarray,
    xy: np.ndarray,
    n_speed: int | None = None,
    carry: bool = True,
    error_correlation_s: float = ERROR_CORRELATION_S,
    accel_sigma_mps2: float = ACCEL_SIGMA_MPS2,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`robust_speed_fit` of G tracks with N samples each, in one vectorised pass: ``t``
    (G, N) distinct finite times per track, ``xy`` (G, N, 2) -> speeds (G,), sigmas (G,),
    velocities (G, 2) at each track's last sample time (:func:`velocity_now_many`); the same
    figures as fitting each track on its own (to rounding). ``n_speed``: the speed window's samples (the last
    ones; default all), the rest only serve the acceleration; ``carry=False``: the velocity at
    the speed window's middle; ``error_correlation_s``, ``accel_sigma_mps2``: see
    :func:`velocity_now_many` (0: the errors are taken as independent from frame to frame; no lag
    term)."""
    v, sig = velocity_now_many(t, xy, n_speed, carry, error_correlation_s, accel_sigma_mps2)
    out = [_speed_and_sigma(v[g], float(sig[g, 0]), float(sig[g, 1])) for g in range(len(t))]
    return np.array([o[0] for o in out]), np.array([o[1] for o in out]), v


def _sxx(t: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """(G, 1): the spread of each series' times, sum (t - tbar)^2 (over its ``valid`` ones)."""
    d2 = (t - _mean(t, 1, valid, keepdims=True)) ** 2
    return (d2 if valid is None else d2 * valid).sum(axis=1)[:, None]


def _inliers(resid: np.ndarray, axis: int, valid: np.ndarray | None = None) -> np.ndarray:
    """1.0 where a residual is within 3 robust sigmas (1.4826 x its median absolute value), else 0
    (and 0 where not ``valid``)."""
    scale = MAD_TO_SIGMA * np.expand_dims(_median(np.abs(resid), axis, valid), axis)
    inlier = np.abs(resid) <= 3.0 * np.maximum(scale, 1e-12)
    return (inlier if valid is None else inlier & valid).astype(np.float64)


def _parabola_residuals(
    t: np.ndarray,
    xy: np.ndarray,
    seed: np.ndarray | None = None,
    rounds: int = 2,
    valid: np.ndarray | None = None,
) -> np.ndarray:
    """Residuals (G, N, K) of parabolas through G series, fitted by least squares and refitted
    ``rounds`` times without the samples beyond 3 robust sigmas (gross errors do not bend them).
    ``seed``: residuals (G, N, K) of a robust fit already made (a line's) to leave the gross errors
    out of the fit: then it is fitted once. The normal equations are summed directly. ``valid``
    (G, N): the samples of each series (None: all)."""
    tc = t - _mean(t, 1, valid, keepdims=True)
    spread = np.abs(tc) if valid is None else np.abs(tc) * valid
    tc = (tc / np.maximum(spread.max(axis=1, keepdims=True), 1e-9))[:, None, :]  # (G, 1, N)
    powers = [np.ones_like(tc), tc, tc**2, tc**3, tc**4]
    y = np.moveaxis(xy, 2, 1)  # (G, K, N)
    mask = None if valid is None else valid[:, None, :]
    if seed is None:
        w = np.ones_like(y) if mask is None else np.broadcast_to(mask, y.shape).astype(np.float64)
    else:
        w = _inliers(np.moveaxis(seed, 2, 1), 2, mask)
    resid = y
    for k in range(rounds + 1 if seed is None else 1):
        if k:  # refit without the previous fit's gross errors
            w = _inliers(resid, 2, mask)
        m = [(w * p).sum(axis=2) for p in powers]  # (G, K) each
        a = np.stack(
            [
                np.stack([m[0], m[1], m[2]], -1),
                np.stack([m[1], m[2], m[3]], -1),
                np.stack([m[2], m[3], m[4]], -1),
            ],
            -2,
        )
        b = np.stack([(w * y * p).sum(axis=2) for p in powers[:3]], -1)
        c = np.linalg.solve(a + 1e-12 * np.eye(3), b[..., None])[..., 0]  # (G, K, 3)
        resid = y - (c[..., 0:1] + c[..., 1:2] * tc + c[..., 2:3] * powers[2])
    return np.moveaxis(resid, 1, 2)


def _line_fits(
    t: np.ndarray, xy: np.ndarray, valid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Theil-Sen lines of G series (times centred first): slopes (G, 2) and residuals (G, N, 2).
    ``valid`` (G, N): the samples of each series (None: all)."""
    tc = t - _mean(t, 1, valid, keepdims=True)
    v, b = theil_sen_many(tc, xy, valid)
    return v, xy - (b[:, None, :] + tc[:, :, None] * v[:, None, :])


def velocity_now_many(
    t: np.ndarray,
    xy: np.ndarray,
    n_speed: int | None = None,
    carry: bool = True,
    error_correlation_s: float = ERROR_CORRELATION_S,
    accel_sigma_mps2: float = ACCEL_SIGMA_MPS2,
) -> tuple[np.ndarray, np.ndarray]:
    """Each track's velocity at its last sample time and its per-axis standard error, (G, 2) each.

    A straight-line fit over the speed window (the last ``n_speed`` samples; all by default)
    gives the velocity at the window's middle, which trails a vehicle that speeds up or brakes by
    ``acceleration x half the window`` (0.5 m/s^2 over a 1 s window: 0.9 km/h). So the
    acceleration is estimated as well - from the Theil-Sen slopes of the earlier and later halves
    of all N samples, each thinned to ``HALF_SAMPLES`` (a longer history than the speed window: an
    acceleration is much noisier to estimate than a velocity, and changes more slowly) - and the
    velocity carried from the
    window's middle to the last sample. That carry ``c`` is noisy where positions are (a small
    vehicle seen from high up, a detector's box), so it is shrunk by ``w = c^2 / (c^2 + V)`` per
    axis, the weight that minimises the mean squared error of a correction estimated with
    variance ``V``: applied in full where it stands out of the noise, hardly at all where it does
    not. ``V`` is ``CARRY_NOISE_FACTOR`` (16) times what the residual scatter says: a detector's
    box errors last a second or more, longer than the frame-to-frame correlation sees (on four
    cells of the speed grid, shipped detector: speed MAE 0.32-0.77 km/h against 0.38-0.82 with no
    carry and 0.45-1.05 with the factor 1; exact boxes 0.05-0.23 against 0.23-0.66 with no carry).
    The carry applied, ``w c``, is added to the standard error in quadrature (what the speed was
    moved by is what it may be wrong by: the carry's component along the velocity, :func:`_along`).
    No history beyond the speed window (a young track), or ``carry`` False: no carry.

    A track without a carry has its lag in the standard error: a true lag ``a x lead`` (``lead``
    the last sample's time from the window's middle) has the prior variance ``P =
    (accel_sigma_mps2 x lead)^2`` (traffic's RMS acceleration, 0.5 m/s^2); what the window's own
    halves would measure of it (variance ``V``; too noisy to apply) leaves ``P V / (P + V)`` per
    axis, added in quadrature. A 0.75 s old track fitted over its 0.75 s is a third of a second
    late, up to 0.7 km/h of error its sigma did not hold before (shipped detector, 30-60 m cells of
    the speed grid: 1 sigma held 14-42 % of the errors of tracks 0.5-1 s old; 64-82 % with it).
    A track with a carry has the same term, its prior ``CARRIED_LAG_FRACTION`` (0.2) of that
    acceleration and ``V`` the carry's noise: the part of the lag the shrunk carry left.

    The noise is the residual scatter around a parabola through the speed window (a line's
    residuals would hold the curve an acceleration leaves), inflated for its correlation
    (:func:`ar1_inflation`), and by ``sqrt(1 + (error_correlation_s / history)^2)``: box errors
    that last about a second look like motion, not scatter, in a shorter history, so a young
    track's scatter understates its error (shipped detector, 30-60 m cells of the speed grid:
    1 sigma held 31-45 % of the errors of tracks younger than 1 s without it, 56-70 % of older ones).
    """
    n = t.shape[1]
    n_speed = n if n_speed is None else int(n_speed)
    first, second = half_indices(n)
    halves = (t[:, first], xy[:, first], t[:, second], xy[:, second]) if carry and n > n_speed else None
    return _velocity_now(
        t[:, n - n_speed :],
        xy[:, n - n_speed :],
        halves,
        t[:, -1] - t[:, 0],
        error_correlation_s,
        accel_sigma_mps2=accel_sigma_mps2,
    )


@lru_cache(maxsize=256)
def half_indices(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The samples of the earlier and later halves of an N-sample history the acceleration is
    estimated from: each thinned to at most ``HALF_SAMPLES``, evenly spaced (Theil-Sen's pairs grow
    as N^2: 3 s at 30 fps, 990 pairs a half -> 105)."""
    h = n // 2
    pick = np.unique(np.linspace(0, max(h - 1, 0), min(h, HALF_SAMPLES)).round().astype(int))
    return pick, n - h + pick


def _velocity_now(
    ts: np.ndarray,
    ys: np.ndarray,
    halves: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None,
    history_s: np.ndarray,
    error_correlation_s: float,
    valid: np.ndarray | None = None,
    accel_sigma_mps2: float = ACCEL_SIGMA_MPS2,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`velocity_now_many` of G tracks given their speed windows ``ts`` (G, K), ``ys``
    (G, K, 2), the (thinned) halves of their histories (times and positions of each, or None: no
    carry) and each history's length in seconds (G,). ``valid`` (G, K): windows of different
    lengths padded at the front (the padding finite, its times before the window's; None: none)
    - the figures of each window fitted alone, to rounding."""
    v, resid = _line_fits(ts, ys, valid)
    mask = None if valid is None else valid[:, :, None]
    # without a carry (a young track: its window is its history) the window is short enough for
    # the line's own residuals; with one, a parabola's (the line's hold an acceleration's curve)
    noise = _parabola_residuals(ts, ys, seed=resid, valid=valid) if halves is not None else resid
    var_noise, n_in, infl = noise_stats(noise, mask)
    sig = _slope_sigma(var_noise, n_in, _sxx(ts, valid), infl)
    # errors that last about error_correlation_s look like motion, not scatter, in a shorter history
    unseen = np.sqrt(1.0 + (error_correlation_s / np.maximum(history_s, 1e-3)) ** 2)[:, None]
    lead = (ts[:, -1] - _mean(ts, 1, valid))[:, None]  # the last sample's time from the window's middle
    if halves is None:
        prior = (accel_sigma_mps2 * lead) ** 2  # the lag's prior variance: traffic's accelerations
        # what the window itself says of its lag (not applied: too noisy, measured): from its two
        # halves, each a slope over half the samples and half the time span (8 x the variance),
        # their middles half a window apart, as far as the lead
        return v, np.sqrt((unseen * sig) ** 2 + _lag_variance(prior, CARRY_NOISE_FACTOR * 16.0 * sig**2))
    t1, y1, t2, y2 = halves
    v1, v2 = _slopes(t1, y1), _slopes(t2, y2)
    k = ts.shape[1] if valid is None else valid.sum(axis=1, keepdims=True)
    per_sample = n_in / k  # the window's share of inliers, taken for the halves too
    sig1 = _slope_sigma(var_noise, per_sample * t1.shape[1], _sxx(t1), infl)
    sig2 = _slope_sigma(var_noise, per_sample * t2.shape[1], _sxx(t2), infl)
    gap = (t2.mean(axis=1) - t1.mean(axis=1))[:, None]
    corr = (v2 - v1) / gap * lead
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        var_corr = CARRY_NOISE_FACTOR * (sig1**2 + sig2**2) * (lead / gap) ** 2
        known = np.isfinite(var_corr)  # else (a half with too few inliers): no carry
        w = np.where(known, np.nan_to_num(corr**2 / (corr**2 + var_corr)), 0.0)
    carried = w * corr
    # the history measured the lag: what the carry moved the speed by it may be wrong by (an
    # acceleration that changed over the history); and what it could not measure of the lag (the
    # carry shrunk towards 0 where noisy) is left, with a prior of CARRIED_LAG_FRACTION of
    # traffic's acceleration narrowed by the carry's noise. Without that term a track 1-2 s old
    # (its carry just begun, from a short history) had 50-54 % of its errors within 1 sigma,
    # against 73-78 % just younger (speed grid, shipped detector, pooled)
    prior = (CARRIED_LAG_FRACTION * accel_sigma_mps2 * lead) ** 2
    v_now = v + carried
    return v_now, np.sqrt((unseen * sig) ** 2 + _along(carried, v_now) ** 2 + _lag_variance(prior, var_corr))


def _along(d: np.ndarray, v: np.ndarray) -> np.ndarray:
    """How much the change ``d`` (G, 2) of velocities ending at ``v`` (G, 2) moved their speeds,
    as a per-axis standard error (G, 2): its component along ``v``, the same on both axes (which
    :func:`_speed_and_sigma` maps back to itself); ``|d|`` per axis where ``v`` is 0. Only that
    component changes a speed: a velocity that turned - a vehicle on a bend, or every track in
    the frame of a yawing drone (2 deg/s turns a 40 km/h velocity by 1.4 km/h a second, across it)
    - kept its speed. Per axis, such a turn counted as speed error: the speed grid's drifting and
    yawing cells had 73 % of their errors within 1 sigma against 68 % hovering and flying
    forward, up to 83 % in one cell."""
    speed = np.linalg.norm(v, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        along = np.abs((d * v).sum(axis=1, keepdims=True)) / speed
    return np.where(speed > 0, along, np.abs(d))


def _lag_variance(prior: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """The variance left of a lag with prior variance ``prior`` once measured with variance
    ``measured`` (inf: not measured): ``prior x measured / (prior + measured)``, at most either (0
    when both are)."""
    total = prior + measured
    with np.errstate(invalid="ignore"):  # inf x 0, inf / inf: masked below
        left = prior * measured / np.where(total > 0, total, 1.0)
    return np.where(np.isinf(measured), prior, left)


def _speed_and_sigma(v: np.ndarray, sx: float, sy: float) -> tuple[float, float, np.ndarray]:
    """|v| and its sigma from the per-axis slope errors (delta method; RMS of the axes at |v| ~ 0)."""
    speed = float(math.hypot(v[0], v[1]))
    if not (math.isfinite(sx) and math.isfinite(sy)):
        sigma = math.inf
    elif speed > 1e-9:
        sigma = math.sqrt((v[0] * sx) ** 2 + (v[1] * sy) ** 2) / speed
    else:
        sigma = math.sqrt(0.5 * (sx**2 + sy**2))
    return speed, float(sigma), v


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


def _padded_windows(
    windows: list[tuple[_TrackState, int]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The last ``k`` samples of each track as rows of one array, shorter ones padded at the
    front: times (G, K), positions (G, K, 2), box sizes (G, K; NaN in the padding) and which
    entries are samples (G, K). The padding repeats a row's first position at times 1 s apart
    before its first sample (finite, and distinct from its times, as the fits need)."""
    kmax = max(k for _, k in windows)
    g = len(windows)
    ts, ys = np.empty((g, kmax)), np.empty((g, kmax, 2))
    sizes, valid = np.full((g, kmax), np.nan), np.zeros((g, kmax), dtype=bool)
    for row, (st, k) in enumerate(windows):
        n, pad = len(st.t), kmax - k
        ts[row, pad:] = list(itertools.islice(st.t, n - k, n))
        ys[row, pad:] = list(itertools.islice(st.xy, n - k, n))
        sizes[row, pad:] = list(itertools.islice(st.size, n - k, n))
        valid[row, pad:] = True
        if pad:
            ts[row, :pad] = ts[row, pad] - np.arange(pad, 0, -1)
            ys[row, :pad] = ys[row, pad]
    return ts, ys, sizes, valid


def _window_size_changes(sizes: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """:func:`size_changes` of padded windows (:func:`_padded_windows`), each over its own
    measured sizes (a box cut by the frame's border has none): vectorised where a window's sizes
    are all measured and at least SIZE_SMOOTHING, else one window at a time."""
    measured = np.isfinite(sizes) & (sizes > 0)
    whole = (measured == valid).all(axis=1) & (valid.sum(axis=1) >= SIZE_SMOOTHING)
    changes = np.empty(len(sizes))
    if whole.any():
        changes[whole] = size_changes(sizes[whole], valid[whole])
    for g in np.flatnonzero(~whole):
        changes[g] = size_changes(sizes[g][measured[g]][None])[0]
    return changes


def _recent_size(st: _TrackState) -> float:
    """The median of a track's last SIZE_SMOOTHING known box sizes (NaN when none is known)."""
    recent = [x for x in itertools.islice(reversed(st.size), SIZE_SMOOTHING) if x > 0]
    return float(np.median(recent)) if recent else math.nan


@dataclass(slots=True)
class _TrackState:
    start_t: float  # when the current integration started (the track's age counts from here)
    last_t: float
    pos: np.ndarray  # integrated ground position (m) at last_t
    t: deque[float] = field(default_factory=deque)
    xy: deque[tuple[float, float]] = field(default_factory=deque)
    size: deque[float] = field(default_factory=deque)  # box size per sample; NaN when not given
    velocity: np.ndarray | None = None  # last accepted fit (m/s), bridges rejected steps
    jump_t: float | None = None  # when the box last jumped (a step far off the fitted path)
    trusted: bool = False  # whether its last estimate was


class SpeedEstimator:
    """Per-track speed over a trailing time window, re-fitted at every update (never locked).

    ``update(timestamp_s, track_ids, displacements_m)``: row i is track i's ground displacement
    (metres, stabilised frame) since the previous update of that track. A NaN row (new track, or
    position unknown) starts the track's integration again: its history and age restart.

    A step implying more than ``2 x max_plausible_kmh`` is a measurement error: it is dropped from
    the fit and the position is carried forward with the last fitted velocity (or integration
    restarts when there is none yet). Samples older than ``window_s`` (by timestamp) leave the fit.

    Trust: an estimate is ``trusted=False`` (with ``doubt`` saying why) while a jump lies within
    its window - a step landing more than ``max_step_jump_m`` from where the track's fitted
    velocity puts it (a box that jumped to a neighbouring vehicle or to part of its own) - or
    when the track's box size (``sizes`` of :meth:`update`) varies by more than
    ``max_box_size_change`` within it (a partial or merged box slides its anchor along the
    vehicle). The figure is still reported, computed as always; the rules count only trusted ones.
    (Leaving jumps out of the fit instead was measured on perturbed oracle boxes and not kept: it
    halved the p95 error on an oblique flight but doubled it on a nadir one.)
    An estimate is reported when the window holds at least ``min_samples`` samples and the track's
    age is at least ``min_track_age_s`` - or, younger, once the fit's sigma is at most
    ``early_max_sigma_kmh`` - unless it exceeds ``max_plausible_kmh`` (then it is
    logged at debug level and counted in ``n_implausible``). Its sigma combines the fit's standard
    error and ``altitude_sigma_frac * speed`` (scale uncertainty) in quadrature.
    """

    def __init__(self, cfg: SpeedConfig) -> None:
        self.cfg = cfg
        self._tracks: dict[int, _TrackState] = {}
        self.n_outliers = 0  # per-step displacements rejected
        self.n_implausible = 0  # fitted speeds above max_plausible_kmh (not reported)
        self._max_step_m_s = OUTLIER_FACTOR * float(m_per_s(cfg.max_plausible_kmh))

    def __len__(self) -> int:
        return len(self._tracks)

    @property
    def track_ids(self) -> list[int]:
        return list(self._tracks)

    def forget(self, track_id: int) -> None:
        self._tracks.pop(int(track_id), None)

    def bridge(self, track_id: int, timestamp_s: float, size: float = math.nan) -> bool:
        """The track's vehicle is the same but where it is now was not measured (another tracker
        track took it over, its box perhaps further along the vehicle): carry its position to
        ``timestamp_s`` at its fitted velocity, adding no sample, so that its next displacement
        goes on from there. Only for a track whose last estimate was trusted (a window holding a
        jump or a partial box would go on misleading the new box's fit: measured, the fresh
        start is better), and a box of the size its last ones had (``size``, as given to
        :meth:`update`: within ``max_box_size_change`` of their median; a box that now covers
        more or less of the vehicle would mix two anchors in one window). Otherwise (or without
        a velocity) the track is forgotten, restarting at its next update; returns whether bridged."""
        st = self._tracks.get(int(track_id))
        last = _recent_size(st) if st is not None else math.nan
        same_size = (
            size > 0 and last > 0 and not size_mismatch(size, last, self.cfg.max_box_size_change)[0, 0]
        )
        if (
            st is None
            or st.velocity is None
            or not st.trusted
            or not timestamp_s > st.last_t
            or not same_size
        ):
            self.forget(track_id)
            return False
        st.pos = st.pos + st.velocity * (timestamp_s - st.last_t)
        st.last_t = float(timestamp_s)
        return True

    def last_seen(self, track_id: int) -> tuple[float, np.ndarray | None, float] | None:
        """When the track was last updated, its last fitted ground velocity (m/s; None before its
        first fit) and its box's recent ground size (m: the median of its last few; NaN when
        unknown); None for a track not held."""
        st = self._tracks.get(int(track_id))
        if st is None:
            return None
        return st.last_t, None if st.velocity is None else st.velocity.copy(), _recent_size(st)

    def prune(self, active_ids: np.ndarray | list[int] | set[int]) -> None:
        """Drop every track not in ``active_ids``."""
        keep = {
            int(i)
            for i in np.asarray(list(active_ids) if isinstance(active_ids, set) else active_ids).ravel()
        }
        for tid in [k for k in self._tracks if k not in keep]:
            del self._tracks[tid]

    def reset(self) -> None:
        self._tracks.clear()

    def _restart(self, tid: int, t: float, size: float = math.nan) -> _TrackState:
        st = _TrackState(start_t=t, last_t=t, pos=np.zeros(2))
        st.t.append(t)
        st.xy.append((0.0, 0.0))
        st.size.append(size)
        self._tracks[tid] = st
        return st

    def _step(self, tid: int, t: float, d: np.ndarray, size: float = math.nan) -> _TrackState:
        st = self._tracks.get(tid)
        if st is None or not np.all(np.isfinite(d)):
            return self._restart(tid, t, size)
        dt = t - st.last_t
        if dt < 0:
            logger.debug("track %d: timestamp went back (%.3f -> %.3f); restarting", tid, st.last_t, t)
            return self._restart(tid, t)
        if dt == 0:  # a second update at the same instant: fold it into the last sample
            st.pos = st.pos + d
            st.xy[-1] = (float(st.pos[0]), float(st.pos[1]))
            return st
        step_speed = float(np.hypot(d[0], d[1])) / dt
        expected = self._expected_velocity(st)
        jumped = expected is not None and float(np.hypot(*(d - expected * dt))) > self.cfg.max_step_jump_m
        if jumped:
            st.jump_t = t
        if step_speed > self._max_step_m_s:
            self.n_outliers += 1
            logger.debug("track %d: step of %.1f km/h rejected as an outlier", tid, kmh(step_speed))
            if st.velocity is None:
                return self._restart(tid, t, size)
            st.pos = st.pos + st.velocity * dt  # carry on at the fitted velocity, no sample
            st.last_t = t
            return st
        st.pos = st.pos + d
        st.last_t = t
        st.t.append(t)
        st.xy.append((float(st.pos[0]), float(st.pos[1])))
        st.size.append(size)
        return st

    @staticmethod
    def _expected_velocity(st: _TrackState) -> np.ndarray | None:
        """The velocity a track's next step is checked against for a jump: its last fit's, or
        before it has one, the median of its steps so far (at least 3), so that a box jumping in
        a track's first half-second is caught as well."""
        if st.velocity is not None:
            return st.velocity
        if len(st.t) < 4:
            return None
        t = np.fromiter(st.t, dtype=np.float64, count=len(st.t))
        xy = np.asarray(st.xy, dtype=np.float64)
        return np.median(np.diff(xy, axis=0) / np.diff(t)[:, None], axis=0)

    @property
    def _history_s(self) -> float:
        """How far back a track's samples are kept: the speed window, or the acceleration's history."""
        return max(self.cfg.window_s, self.cfg.accel_window_s)

    def _trim(self, st: _TrackState, now: float) -> None:
        oldest = now - self._history_s - 1e-9
        while st.t and st.t[0] < oldest:
            st.t.popleft()
            st.xy.popleft()
            st.size.popleft()

    def _in_window(self, st: _TrackState, now: float) -> int:
        """How many of the track's samples lie in the speed window (the last ones: the history
        before them only serves the acceleration)."""
        oldest = now - self.cfg.window_s - 1e-9
        n = len(st.t)
        k = 0
        while k < n and st.t[n - 1 - k] >= oldest:
            k += 1
        return k

    def _carries(self, st: _TrackState, now: float) -> bool:
        """Whether the track's speed is carried to now by its acceleration: unless off, or a box
        jump lies in the history the acceleration is estimated from (a jump reads as one)."""
        return self.cfg.accel_window_s > 0 and (st.jump_t is None or now - st.jump_t > self._history_s + 1e-9)

    def _ready(self, st: _TrackState, now: float) -> bool:
        """Whether the track has the samples for an estimate (and the age, unless it may be
        reported early: ``early_max_sigma_kmh``, checked once fitted)."""
        return self._in_window(st, now) >= self.cfg.min_samples and (
            self.cfg.early_max_sigma_kmh is not None or self._of_age(st, now)
        )

    def _of_age(self, st: _TrackState, now: float) -> bool:
        return now - st.start_t >= self.cfg.min_track_age_s - 1e-9

    def _estimate(self, tid: int, st: _TrackState, now: float) -> SpeedEstimate | None:
        return self._estimates([(tid, st)], now).get(tid)

    def _estimates(self, tracks: list[tuple[int, _TrackState]], now: float) -> dict[int, SpeedEstimate]:
        """The estimates of the ready tracks, fitted together: one vectorised fit per kind (carried
        or not, and the thinned halves' length), windows of different lengths padded at the front
        (:func:`velocity_now_many`'s figures for each track, to rounding)."""
        groups: dict[tuple[int, bool], list[tuple[int, _TrackState, int]]] = {}
        for tid, st in tracks:
            if self._ready(st, now):
                n, k = len(st.t), self._in_window(st, now)
                # a track younger than its window has no history beyond it: no carry (its lag
                # is a fraction of a short window's)
                carry = self._carries(st, now) and n > k
                key = (len(half_indices(n)[0]) if carry else 0, carry)
                groups.setdefault(key, []).append((tid, st, k))
        out: dict[int, SpeedEstimate] = {}
        for (_, carry), group in groups.items():
            # a track's sample times only increase (_step folds a repeated time, restarts on one
            # going back), as the fits need; tracks of one group share their halves' shapes
            ts, ys, sizes, valid = _padded_windows([(st, k) for _, st, k in group])
            h1t, h1y, h2t, h2y, span = [], [], [], [], []
            for _, st, _k in group:
                span.append(st.t[-1] - st.t[0])
                if carry:
                    t, xy = list(st.t), list(st.xy)
                    first, second = half_indices(len(t))
                    h1t.append([t[i] for i in first])
                    h1y.append([xy[i] for i in first])
                    h2t.append([t[i] for i in second])
                    h2y.append([xy[i] for i in second])
            halves = (
                (np.array(h1t), np.array(h1y, np.float64), np.array(h2t), np.array(h2y, np.float64))
                if carry
                else None
            )
            padded = None if valid.all() else valid
            v, sig = _velocity_now(
                ts,
                ys,
                halves,
                np.array(span),
                self.cfg.error_correlation_s,
                padded,
                self.cfg.accel_sigma_mps2,
            )
            changes = _window_size_changes(sizes, valid)
            for g, (tid, st, k) in enumerate(group):
                speed, fit_sigma, velocity = _speed_and_sigma(v[g], float(sig[g, 0]), float(sig[g, 1]))
                window_t = ts[g, ts.shape[1] - k :]
                est = self._estimate_from(
                    tid, st, now, speed, fit_sigma, velocity, float(changes[g]), window_t
                )
                if est is not None:
                    out[tid] = est
        return out

    def _estimate_from(
        self,
        tid: int,
        st: _TrackState,
        now: float,
        speed: float,
        fit_sigma: float,
        velocity: np.ndarray,
        size_change: float,
        window_t: np.ndarray,
    ) -> SpeedEstimate | None:
        """The estimate of a fitted track, or None: when it is implausibly fast (counted), or the
        track is younger than ``min_track_age_s`` and its fit not yet precise enough
        (``early_max_sigma_kmh``). ``size_change``: :func:`size_changes` over the speed window;
        ``window_t``: its times."""
        if not self._of_age(st, now) and not float(kmh(fit_sigma)) <= (self.cfg.early_max_sigma_kmh or 0.0):
            return None
        speed_kmh = float(kmh(speed))
        if speed_kmh > self.cfg.max_plausible_kmh:
            self.n_implausible += 1
            logger.debug(
                "track %d: %.1f km/h above the plausible %.0f km/h; not reported",
                tid,
                speed_kmh,
                self.cfg.max_plausible_kmh,
            )
            return None
        st.velocity = velocity
        sigma = math.hypot(fit_sigma, self.cfg.altitude_sigma_frac * speed)
        doubt = self._doubt(st, now, size_change)
        st.trusted = not doubt
        return SpeedEstimate(
            track_id=tid,
            speed_kmh=speed_kmh,
            sigma_kmh=float(kmh(sigma)),
            n_samples=len(window_t),
            window_s=float(window_t[-1] - window_t[0]),
            trusted=not doubt,
            doubt=doubt,
        )

    def _doubt(self, st: _TrackState, now: float, size_change: float) -> str:
        """Why the track's speed cannot be trusted now ("" when it can). ``size_change``: the
        track's :func:`size_changes` over the speed window."""
        if st.jump_t is not None and now - st.jump_t <= self.cfg.window_s + 1e-9:
            return "box jumped (another vehicle, or part of one)"
        if size_change > self.cfg.max_box_size_change:
            return f"box size changed by {size_change:.0%} (partial or merged box)"
        return ""

    def update(
        self,
        timestamp_s: float,
        track_ids: np.ndarray,
        displacements_m: np.ndarray,
        sizes: np.ndarray | None = None,
    ) -> dict[int, SpeedEstimate]:
        """Add one frame's displacements; return the estimates of the tracks updated now.

        ``sizes``: each track's box size now for the trust check (the pipeline gives sqrt of the
        box area times the local GSD: metres, so that perspective does not count as a change).
        """
        ids = np.asarray(track_ids).reshape(-1)
        disp = np.asarray(displacements_m, dtype=np.float64).reshape(-1, 2)
        if len(ids) != len(disp):
            raise ValueError(f"{len(ids)} track ids but {len(disp)} displacements")
        sizes = np.full(len(ids), np.nan) if sizes is None else np.asarray(sizes, np.float64).reshape(-1)
        if len(sizes) != len(ids):
            raise ValueError(f"{len(ids)} track ids but {len(sizes)} box sizes")
        now = float(timestamp_s)
        tids = [int(i) for i in ids]
        if len(set(tids)) < len(tids):  # a track twice in one update: each step sees the one before
            out: dict[int, SpeedEstimate] = {}
            for tid, d, size in zip(tids, disp, sizes, strict=True):
                st = self._step(tid, now, d, float(size))
                self._trim(st, now)
                if (est := self._estimate(tid, st, now)) is not None:
                    out[tid] = est
            return out
        tracks = []
        for tid, d, size in zip(tids, disp, sizes, strict=True):
            st = self._step(tid, now, d, float(size))
            self._trim(st, now)
            tracks.append((tid, st))
        estimates = self._estimates(tracks, now)
        return {tid: estimates[tid] for tid in tids if tid in estimates}  # in the order given


__all__ = [
    "SpeedEstimator",
    "kmh",
    "m_per_s",
    "robust_speed_fit",
    "robust_speed_fit_many",
    "slope_sigma",
    "size_changes",
    "size_mismatch",
    "slope_sigma_many",
    "theil_sen",
    "theil_sen_many",
    "velocity_now_many",
    "ar1_inflation",
    "half_indices",
    "noise_stats",
]
