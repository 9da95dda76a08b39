"""The speed over a measuring base: exact on exact positions, its mean for an accelerating
vehicle, and a sigma that holds its errors (white and correlated position noise)."""

from __future__ import annotations

import numpy as np
import pytest

from pipelines.speed.base import base_speed


def track(
    duration_s: float, v_mps: float, accel: float = 0.0, fps: float = 30.0
) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(int(round(duration_s * fps)) + 1) / fps
    along = v_mps * t + accel * t**2 / 2
    heading = np.array([0.6, 0.8])
    return t + 100.0, along[:, None] * heading


@pytest.mark.parametrize(
    "duration, v, accel", [(1.0, 15.0, 0.0), (3.0, 25.0, 0.0), (2.0, 14.0, 1.5), (2.0, 20.0, -2.0)]
)
def test_exact_positions_give_the_mean_speed(duration: float, v: float, accel: float) -> None:
    t, xy = track(duration, v, accel)
    speed, sigma = base_speed(t, xy)
    assert speed == pytest.approx(v + accel * duration / 2, rel=1e-6)  # the mean over the base
    assert sigma == pytest.approx(0.0, abs=1e-6)


def ar1(rng: np.random.Generator, n: int, rho: float, sigma: float) -> np.ndarray:
    e = np.empty((n, 2))
    e[0] = rng.normal(0.0, sigma, 2)
    for k in range(1, n):
        e[k] = rho * e[k - 1] + rng.normal(0.0, sigma * np.sqrt(1 - rho**2), 2)
    return e


@pytest.mark.parametrize(
    "duration, rho, noise_m, accel, white_m",
    [
        (1.0, 0.0, 0.15, 0.0, 0.0),  # white box jitter
        (2.0, 0.0, 0.3, 0.0, 0.0),
        (2.0, 0.9, 0.2, 0.0, 0.0),  # errors that last a few frames
        (3.0, 0.97, 0.2, 0.0, 0.0),  # ... about a second (a detector's box offset)
        (1.0, 0.97, 0.2, 0.0, 0.0),
        (2.0, 0.9, 0.2, 1.0, 0.0),  # an accelerating vehicle
        (2.0, 0.97, 0.2, 0.0, 0.1),  # a lasting offset and jitter together
    ],
)
def test_the_sigma_holds_the_errors(duration, rho, noise_m, accel, white_m) -> None:
    """Over 200 seeded tracks, 1 sigma holds at least 68 % of the errors (a Gaussian's; more is
    allowed: a ticket's sigma must not be over-confident) and 1.645 sigma at least 85 %."""
    rng = np.random.default_rng(7)
    errors, sigmas = [], []
    for _ in range(200):
        t, xy = track(duration, 16.0, accel)
        speed, sigma = base_speed(t, xy + ar1(rng, len(t), rho, noise_m) + rng.normal(0.0, white_m, xy.shape))
        errors.append(speed - (16.0 + accel * duration / 2))
        sigmas.append(sigma)
    z = np.abs(np.array(errors)) / np.array(sigmas)
    assert np.mean(z <= 1.0) >= 0.68
    assert np.mean(z <= 1.645) >= 0.85


@pytest.mark.parametrize(
    "t, xy, message",
    [
        ([0.0], [[0.0, 0.0]], "at least 2"),
        ([0.0, 0.0, 1.0], [[0, 0], [0, 0], [0, 1]], "increasing"),
        ([0.0, 1.0], [[0, 0]], "samples but"),
        ([0.0, 1.0], [[0, 0], [np.nan, 1]], "finite"),
    ],
)
def test_bad_input_is_refused(t, xy, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        base_speed(np.array(t), np.array(xy, float))


def test_three_samples_have_no_sigma() -> None:
    speed, sigma = base_speed(np.array([0.0, 0.5, 1.0]), np.array([[0.0, 0.0], [0.0, 7.5], [0.0, 15.0]]))
    assert speed == pytest.approx(15.0) and sigma == np.inf
