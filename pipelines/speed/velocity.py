"""The velocity at a track's last sample and its sigma: the sigma model of the speed.

:func:`velocity_now_many` fits a line over the speed window, carries its velocity to the last
sample by an acceleration estimated from a longer history (shrunk where noisy), and gives the
per-axis standard error: the window's scatter (:mod:`pipelines.speed.noise`), widened for errors
a short history cannot see, the carry applied, and the lag left unmeasured. :func:`robust_speed_fit`
and :func:`robust_speed_fit_many` turn it into a speed (m/s) and its sigma.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from pipelines.speed.fit import _line_fits, _mean, _slopes, theil_sen
from pipelines.speed.noise import _parabola_residuals, _slope_sigma, _sxx, noise_stats, slope_sigma

HALF_SAMPLES = 15  # samples of each half of the history the acceleration is estimated from, at most
# how long a detector's box errors last (s): a shorter history sees them as motion (velocity_now_many)
ERROR_CORRELATION_S = 1.0
# how much the noise of the acceleration carry exceeds what its residual scatter says (velocity_now_many)
CARRY_NOISE_FACTOR = 16.0
# RMS acceleration of traffic (m/s^2): the prior of a young track's lag, in its sigma (velocity_now_many)
ACCEL_SIGMA_MPS2 = 0.5
# A carried track's lag left unmeasured has the prior of this share of traffic's RMS acceleration
# (velocity_now_many). Speed grid, 36 cells, shipped detector, errors within 1 sigma pooled / cells
# in 60-75 % (under, over): 0 -> 64 % / 25 (9, 2); 0.2 -> 69 % / 24 (3, 9); 0.4 -> 73 % / 20 (0, 16);
# 0.7 -> 75 % / 19; 1 -> 78 % / 12. 0.2: by track age, 60-78 % in every bin (0: 50-75 %). Since the
# carry counts only along the velocity (_along): 0.2 -> 68.7 % / 27 (3, 6), every age bin 63-74 %.
CARRIED_LAG_FRACTION = 0.2


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
    v, sig, _ = _velocity_now(
        t[:, n - n_speed :],
        xy[:, n - n_speed :],
        halves,
        t[:, -1] - t[:, 0],
        error_correlation_s,
        accel_sigma_mps2=accel_sigma_mps2,
    )
    return v, sig


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
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`velocity_now_many` of G tracks given their speed windows ``ts`` (G, K), ``ys``
    (G, K, 2), the (thinned) halves of their histories (times and positions of each, or None: no
    carry) and each history's length in seconds (G,). ``valid`` (G, K): windows of different
    lengths padded at the front (the padding finite, its times before the window's; None: none)
    - the figures of each window fitted alone, to rounding. Third: the per-axis standard error
    of the window's scatter alone (G, 2), without the carry's and the lag's terms."""
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
        lag = _lag_variance(prior, CARRY_NOISE_FACTOR * 16.0 * sig**2)
        return v, np.sqrt((unseen * sig) ** 2 + lag), unseen * sig
    t1, y1, t2, y2 = halves
    v1, v2 = _slopes(t1, y1), _slopes(t2, y2)
    k = ts.shape[1] if valid is None else valid.sum(axis=1, keepdims=True)
    per_sample = n_in / k  # the window's share of inliers, taken for the halves too
    sig1 = _slope_sigma(var_noise, per_sample * t1.shape[1], _sxx(t1), infl)
    sig2 = _slope_sigma(var_noise, per_sample * t2.shape[1], _sxx(t2), infl)
    gap = (t2.mean(axis=1) - t1.mean(axis=1))[:, None]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        var_corr = CARRY_NOISE_FACTOR * (sig1**2 + sig2**2) * (lead / gap) ** 2
        v_now = _carry(v, (v2 - v1) / gap * lead, v1 + v2, var_corr)
    carried = v_now - v
    # the history measured the lag: what the carry moved the speed by it may be wrong by (an
    # acceleration that changed over the history); and what it could not measure of the lag (the
    # carry shrunk towards 0 where noisy) is left, with a prior of CARRIED_LAG_FRACTION of
    # traffic's acceleration narrowed by the carry's noise. Without that term a track 1-2 s old
    # (its carry just begun, from a short history) had 50-54 % of its errors within 1 sigma,
    # against 73-78 % just younger (speed grid, shipped detector, pooled)
    prior = (CARRIED_LAG_FRACTION * accel_sigma_mps2 * lead) ** 2
    total = np.sqrt((unseen * sig) ** 2 + _along(carried, v_now) ** 2 + _lag_variance(prior, var_corr))
    return v_now, total, unseen * sig


def _carry(v: np.ndarray, corr: np.ndarray, bisector: np.ndarray, var_corr: np.ndarray) -> np.ndarray:
    """G velocities ``v`` (G, 2) carried by the change ``corr`` (G, 2; per-axis variance
    ``var_corr``) between the halves of their histories, whose velocities sum to ``bisector``.
    The speed changes by the change of *speed* alone: the component of ``corr`` along the halves'
    bisector, shrunk by ``w = c^2 / (c^2 + V)`` (V its variance there). The direction turns as
    the change, shrunk per axis the same way, turns it. A velocity that only turned - a vehicle
    on a bend, every track in the frame of a yawing drone - keeps its speed: its halves' difference
    is perpendicular to their bisector. (Carried as one vector, a turn's change added to the
    speed: a car at 40 km/h on a 50 m bend read 41.2 km/h from exact positions, +3 %; the
    simulated oblique flight on a curved road, exact boxes, 0.557 km/h MAE against 0.453 now.)
    Where the halves' or the window's velocity is 0 the change is carried as a vector; NaN
    ``var_corr`` (a half with too few inliers): no carry."""
    known = np.isfinite(var_corr).all(axis=1, keepdims=True)
    corr = np.where(known, corr, 0.0)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        w = np.nan_to_num(corr**2 / (corr**2 + var_corr))  # 0 where not known (corr 0)
        turned = v + w * corr  # the carry as one vector: its direction is kept
        b_norm = np.linalg.norm(bisector, axis=1, keepdims=True)
        v_norm = np.linalg.norm(v, axis=1, keepdims=True)
        t_norm = np.linalg.norm(turned, axis=1, keepdims=True)
        moving = known & (b_norm > 0) & (v_norm > 0) & (t_norm > 0)
        ub = bisector / np.where(moving, b_norm, 1.0)
        c = (corr * ub).sum(axis=1, keepdims=True)  # the change of speed
        var_c = (var_corr * ub**2).sum(axis=1, keepdims=True)  # NaN only where not moving
        speed = np.maximum(v_norm + np.nan_to_num(c**2 / (c**2 + var_c)) * c, 0.0)
        along = turned / np.where(moving, t_norm, 1.0) * speed
    return np.where(moving, along, turned)


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
