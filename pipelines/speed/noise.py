"""A fitted slope's standard error from the residual scatter of its samples.

Robust scale (MAD), residual variance over the inliers, the lag-1 autocorrelation's inflation of
the variance (box and flow errors last from frame to frame), the Theil-Sen and Student-t
factors, and the residuals the scatter is measured on (a line's, or a parabola's through a window
whose vehicle accelerates). Pure numpy over G series at once; :mod:`pipelines.speed.velocity`
builds the speed's sigma from it.
"""

from __future__ import annotations

import math

import numpy as np

from pipelines.speed.fit import _mean, _median

MAD_TO_SIGMA = 1.4826  # MAD of a Gaussian -> its standard deviation
THEIL_SEN_VARIANCE_FACTOR = math.pi / 3.0  # 1 / asymptotic relative efficiency on Gaussian noise
MAX_AUTOCORRELATION = 0.9  # cap of the residuals' lag-1 autocorrelation (variance x 19 at most)


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
