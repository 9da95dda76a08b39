"""Calibration of the engine's reported speed sigma: the share of errors within 1 and 2 sigma."""

from __future__ import annotations

import numpy as np
import pytest

from eval.metrics import sigma_calibration

RNG = np.random.default_rng(5)
TRUE = np.full(4000, 50.0)
NOISE = RNG.normal(0.0, 1.0, 4000)


@pytest.mark.parametrize(
    ("sigma_scale", "within1", "within2"),
    [
        (1.0, 0.683, 0.954),  # honest: a Gaussian's shares
        (0.5, 0.383, 0.683),  # over-confident: half the true scatter
        (2.0, 0.954, 0.9999),  # timid
    ],
)
def test_sigma_calibration_matches_gaussian_shares(sigma_scale, within1, within2):
    got = sigma_calibration(TRUE, TRUE + 0.8 * NOISE, np.full(4000, 0.8 * sigma_scale))
    assert got["n_with_sigma"] == 4000
    assert got["within_1sigma"] == pytest.approx(within1, abs=0.02)
    assert got["within_2sigma"] == pytest.approx(within2, abs=0.02)
    assert got["median_sigma_kmh"] == pytest.approx(0.8 * sigma_scale)


def test_sigma_calibration_skips_unknowns():
    gt = np.array([50.0, 50.0, np.nan, 50.0])
    pred = np.array([51.0, np.nan, 50.0, 53.0])
    sigma = np.array([2.0, 1.0, 1.0, np.inf])
    assert sigma_calibration(gt, pred, sigma) == {
        "n_with_sigma": 1,
        "within_1sigma": 1.0,
        "within_2sigma": 1.0,
        "median_sigma_kmh": 2.0,
    }
    assert sigma_calibration(gt[:0], pred[:0], sigma[:0]) == {"n_with_sigma": 0}
