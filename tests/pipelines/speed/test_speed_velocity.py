"""pipelines.speed.velocity: the robust speed fit and its sigma (carry, lag, correlated errors) on
synthetic trajectories with known speed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from speed_tracks import straight

from pipelines.speed import kmh, m_per_s, robust_speed_fit, robust_speed_fit_many
from pipelines.speed.velocity import _lag_variance


@pytest.mark.parametrize("heading", [0.0, 37.0, 90.0, 145.0, 260.0])
@pytest.mark.parametrize("n", [3, 8, 31])
def test_fit_exact_line(heading: float, n: int) -> None:
    t = np.linspace(2.0, 3.0, n)
    xy = straight(50.0, heading, t)
    speed, sigma, v = robust_speed_fit(t, xy)
    assert kmh(speed) == pytest.approx(50.0, abs=1e-9)
    assert sigma == pytest.approx(0.0, abs=1e-9)
    assert math.degrees(math.atan2(v[1], v[0])) % 360 == pytest.approx(heading % 360)


@pytest.mark.parametrize("outlier_share", [0.1, 0.2, 0.25])
def test_fit_ignores_gross_outliers(outlier_share: float) -> None:
    rng = np.random.default_rng(11)
    t = np.arange(40) / 30.0
    xy = straight(72.0, 20.0, t) + rng.normal(0, 0.05, (40, 2))
    bad = rng.choice(40, int(outlier_share * 40), replace=False)
    xy[bad] += rng.uniform(5, 15, (len(bad), 2)) * rng.choice([-1, 1], (len(bad), 2))
    speed, sigma, _ = robust_speed_fit(t, xy)
    assert abs(kmh(speed) - 72.0) < 1.5
    assert kmh(sigma) < 2.0  # the outliers do not inflate the scatter estimate


def test_fit_order_independent_and_two_points() -> None:
    t = np.array([0.3, 0.0, 0.1, 0.2])
    xy = straight(36.0, 0.0, t)
    assert kmh(robust_speed_fit(t, xy)[0]) == pytest.approx(36.0)
    speed, sigma, _ = robust_speed_fit(t[:2], xy[:2])
    assert kmh(speed) == pytest.approx(36.0) and sigma == math.inf


@pytest.mark.parametrize(
    "t, xy, match",
    [
        (np.array([0.0]), np.zeros((1, 2)), "at least 2"),
        (np.array([0.0, 1.0]), np.zeros((3, 2)), "samples"),
        (np.array([0.0, np.nan]), np.zeros((2, 2)), "finite"),
        (np.array([1.0, 1.0]), np.zeros((2, 2)), "distinct"),
    ],
)
def test_fit_rejects_bad_input(t: np.ndarray, xy: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        robust_speed_fit(t, xy)


def test_sigma_is_calibrated_monte_carlo() -> None:
    rng = np.random.default_rng(2)
    errs, sigmas = [], []
    t = np.arange(16) / 15.0
    for _ in range(400):
        xy = straight(50.0, rng.uniform(0, 360), t) + rng.normal(0, 0.3, (16, 2))
        # independent errors, a constant speed: no lag to allow for
        s, sg, _ = robust_speed_fit(t, xy, error_correlation_s=0.0, accel_sigma_mps2=0.0)
        errs.append(s - m_per_s(50.0))
        sigmas.append(sg)
    ratio = np.std(errs) / np.median(sigmas)
    assert 0.8 < ratio < 1.25
    assert np.mean(np.abs(errs) < 3 * np.asarray(sigmas)) > 0.97


@pytest.mark.parametrize(("noise_m", "low", "high"), [(0.02, 0.55, 0.8), (0.1, 0.55, 0.8)])
def test_sigma_holds_the_lag_of_a_young_track(noise_m: float, low: float, high: float) -> None:
    """Vehicles speeding up or braking (accelerations of RMS 0.5 m/s^2, the prior), seen for 0.75 s:
    the fit's velocity is that of the window's middle, a third of a second late. The lag is in
    the sigma: about 68 % of the errors against the speed at the last frame are within 1 sigma;
    without the lag term (``accel_sigma_mps2=0``) far fewer."""
    rng = np.random.default_rng(4)
    t = np.arange(23) / 30.0
    within = {0.5: [], 0.0: []}
    for _ in range(400):
        a, v0, heading = rng.normal(0, 0.5), rng.uniform(8, 20), np.radians(rng.uniform(0, 360))
        along = v0 * t + 0.5 * a * t**2
        xy = np.column_stack([np.cos(heading) * along, np.sin(heading) * along])
        xy += rng.normal(0, noise_m, xy.shape)
        for prior in within:
            s, sg, _ = robust_speed_fit(t, xy, error_correlation_s=0.0, accel_sigma_mps2=prior)
            within[prior].append(abs(s - (v0 + a * t[-1])) <= sg)
    assert low <= np.mean(within[0.5]) <= high, np.mean(within[0.5])
    assert np.mean(within[0.0]) < low - 0.1, np.mean(within[0.0])


@pytest.mark.parametrize("heading", [45.0, 120.0, 200.0])
def test_a_turning_velocity_is_no_speed_error(heading: float) -> None:
    """A velocity that turns keeps its speed - every track in the frame of a yawing drone (3 deg/s
    here), a vehicle on a bend. The carry turns the fitted velocity to the last sample's heading;
    the speed's sigma takes only what the carry did along it (per axis, the turn counted as 0.6-0.8
    km/h of speed error). Sped up as much along its path instead, the carry is in the sigma in full."""
    rng = np.random.default_rng(3)
    t = np.arange(90) / 30.0
    v, turn = m_per_s(40.0), math.radians(3.0)
    h = math.radians(heading) + turn * t
    arc = np.cumsum(v / 30.0 * np.column_stack([np.cos(h), np.sin(h)]), axis=0)
    along = v * t + 0.5 * 0.25 * t**2  # speeding up as fast as the turn turns it: 0.25 m/s^2 at 40 km/h
    line = np.column_stack([np.cos(h[0]) * along, np.sin(h[0]) * along])
    fit = dict(n_speed=30, error_correlation_s=0.0, accel_sigma_mps2=0.0)
    speed, sigma, vel = robust_speed_fit(t, arc + rng.normal(0, 0.01, arc.shape), **fit)
    assert math.degrees(math.atan2(vel[1], vel[0])) % 360 == pytest.approx(math.degrees(h[-1]) % 360, abs=0.3)
    assert kmh(speed) == pytest.approx(40.0, abs=0.2)
    assert kmh(sigma) < 0.25
    xy = line + rng.normal(0, 0.01, line.shape)
    speed, sigma, _ = robust_speed_fit(t, xy, **fit)
    carried = speed - robust_speed_fit(t, xy, n_speed=30, carry=False)[0]
    assert kmh(speed) == pytest.approx(kmh(v + 0.25 * t[-1]), abs=0.1)
    assert kmh(carried) > 0.3 and sigma >= 0.95 * carried


@pytest.mark.parametrize(
    ("speed_kmh", "radius_m"),
    [(40.0, 50.0), (60.0, 150.0), (25.0, 20.0), (90.0, 400.0)],
)
def test_a_bend_at_a_steady_speed_reads_its_speed(speed_kmh: float, radius_m: float) -> None:
    """A vehicle on a bend at a steady speed, exact positions, 3 s of history: the carry moves the
    speed by the change of speed only (none here), not by the velocity's turn (carried as one
    vector, 40 km/h on a 50 m bend read 41.2 km/h, +3 %); the velocity still turns to the last
    sample's heading, as far as its shrunk carry reaches."""
    t = np.arange(90) / 30.0
    angle = m_per_s(speed_kmh) * t / radius_m
    xy = np.column_stack([radius_m * np.sin(angle), radius_m * (1.0 - np.cos(angle))])
    xy += np.random.default_rng(7).normal(0, 0.002, xy.shape)
    speed, _, vel = robust_speed_fit(t, xy, n_speed=30)
    # within 0.3 %: the window's chord (20 m at 25 km/h turns 20 deg in the 1 s window: -0.23 %)
    assert kmh(speed) == pytest.approx(speed_kmh, rel=0.003)
    middle = math.degrees(angle[-16])  # the heading at the speed window's middle
    heading = math.degrees(math.atan2(vel[1], vel[0]))
    assert middle < heading <= math.degrees(angle[-1]) + 0.1


def test_a_young_tracks_sigma_allows_for_errors_it_cannot_see_yet() -> None:
    """Errors lasting about error_correlation_s read as motion in a shorter history: its sigma is
    widened by sqrt(1 + (error_correlation_s / history)^2); a history of 3 s hardly at all."""
    rng = np.random.default_rng(4)
    t = np.arange(91) / 30.0
    xy = straight(50.0, 0.0, t) + rng.normal(0, 0.05, (91, 2))
    for n, factor in [(10, math.sqrt(1 + (1.0 / (9 / 30)) ** 2)), (91, math.sqrt(1 + (1.0 / 3.0) ** 2))]:
        _, plain, _ = robust_speed_fit(
            t[:n], xy[:n], carry=False, error_correlation_s=0.0, accel_sigma_mps2=0
        )
        _, wide, _ = robust_speed_fit(t[:n], xy[:n], carry=False, accel_sigma_mps2=0)
        assert wide == pytest.approx(plain * factor, rel=1e-9)


@pytest.mark.parametrize("n", [2, 3, 5, 6, 30, 61])
def test_fitting_many_tracks_at_once_gives_each_track_its_own_figures(n: int) -> None:
    """The vectorised fit of a frame's tracks (G tracks of N samples) is the per-track fit, to
    rounding (batched sums may add in another order)."""
    rng = np.random.default_rng(n)
    t = np.sort(rng.uniform(0, 1.5, (9, n)), axis=1)
    xy = rng.normal(0, 0.2, (9, n, 2)) + t[:, :, None] * rng.normal(0, 12, (9, 1, 2))
    xy[0, n // 2] += 30.0  # a gross outlier in one track
    speeds, sigmas, velocities = robust_speed_fit_many(t, xy)
    for g in range(9):
        speed, sigma, v = robust_speed_fit(t[g], xy[g])
        assert (speeds[g], sigmas[g]) == (pytest.approx(speed, rel=1e-9), pytest.approx(sigma, rel=1e-9))
        np.testing.assert_allclose(velocities[g], v, rtol=1e-9)


@pytest.mark.parametrize(
    ("prior", "measured", "left"),
    [
        (0.0, 0.0, 0.0),
        (1.0, math.inf, 1.0),
        (0.0, math.inf, 0.0),
        (2.0, 2.0, 1.0),
        (1.0, 0.0, 0.0),
        (3.0, 1.0, 0.75),
    ],
)
def test_lag_variance_table(prior: float, measured: float, left: float) -> None:
    got = _lag_variance(np.array([prior]), np.array([measured]))
    assert got[0] == pytest.approx(left)
