"""Calibration of the engine's reported speed sigma: the share of errors within 1 and 2 sigma."""

from __future__ import annotations

import numpy as np
import pytest

from eval.metrics import sigma_calibration, vehicle_interval

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


def test_vehicle_interval_covers_the_share_of_a_cell():
    """Cells of 15 vehicles whose errors are alike within a vehicle (each its own share of hits,
    around 68 %): the 90 % interval over vehicles holds the true share in about 90 % of cells, while
    one over frames (as if every frame were independent) would be far too narrow."""
    rng = np.random.default_rng(11)
    held, widths = [], []
    for _ in range(200):
        p = np.clip(rng.normal(0.68, 0.18, 15), 0, 1)  # the vehicles' own shares
        frames = rng.integers(60, 240, 15)
        vehicles = np.repeat(np.arange(15), frames)
        hits = rng.random(len(vehicles)) < np.repeat(p, frames)
        lo, hi = vehicle_interval(hits, vehicles, resamples=500)
        held.append(lo <= 0.68 <= hi)
        widths.append(hi - lo)
    # 0.82 here: a percentile bootstrap over 15 vehicles runs a little narrow (its cells'
    # intervals read as slightly surer than they are, not less)
    assert 0.75 <= np.mean(held) <= 0.97, np.mean(held)
    assert 0.1 < np.median(widths) < 0.25  # +-5-12 points; over ~2,200 frames it would be +-1.6


@pytest.mark.parametrize(
    ("shares", "expect"),
    [
        ([0.7] * 10, (0.7, 0.7)),  # every vehicle alike: no spread
        ([0.4] * 5 + [0.9] * 5, (0.5, 0.8)),  # two kinds: wide, around the pooled 0.65
    ],
)
def test_vehicle_interval_table(shares, expect):
    vehicles = np.repeat(np.arange(len(shares)), 10)
    hits = np.concatenate([np.arange(10) < round(10 * s) for s in shares])
    lo, hi = vehicle_interval(hits, vehicles)
    assert lo == pytest.approx(expect[0], abs=0.05) and hi == pytest.approx(expect[1], abs=0.05)
    assert vehicle_interval(hits, vehicles) == (lo, hi)  # seeded: the same every run


def test_sigma_calibration_by_vehicle():
    gt = np.full(6, 50.0)
    pred = np.array([50.5, 50.5, 52.0, 52.0, 50.1, np.nan])
    got = sigma_calibration(gt, pred, np.ones(6), vehicles=np.array(["a", "a", "b", "b", "c", "c"]))
    assert got["vehicles"] == 3 and got["within_1sigma"] == pytest.approx(0.6)
    lo, hi = got["within_1sigma_90"]
    assert 0.0 <= lo <= 0.6 <= hi <= 1.0
