"""pipelines.speed.fit and .noise: units, Theil-Sen line fits and a slope's standard error."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.speed import kmh, m_per_s, slope_sigma, theil_sen


@pytest.mark.parametrize("ms, expected", [(0.0, 0.0), (1.0, 3.6), (13.8888889, 50.0), (-2.0, -7.2)])
def test_kmh(ms: float, expected: float) -> None:
    assert kmh(ms) == pytest.approx(expected)
    assert m_per_s(kmh(ms)) == pytest.approx(ms)


def test_theil_sen_columns_and_slope_sigma_matches_ols_scale() -> None:
    rng = np.random.default_rng(5)
    t = np.linspace(-0.5, 0.5, 200)
    y = np.column_stack([2.0 * t + 1.0, -3.0 * t]) + rng.normal(0, 0.1, (200, 2))
    slopes, intercepts = theil_sen(t, y)
    assert slopes == pytest.approx([2.0, -3.0], abs=0.1) and intercepts == pytest.approx([1.0, 0.0], abs=0.03)
    ols_se = 0.1 / math.sqrt(np.sum((t - t.mean()) ** 2))
    sig = slope_sigma(t, y - (intercepts + np.outer(t, slopes)))
    assert sig == pytest.approx([ols_se * math.sqrt(math.pi / 3)] * 2, rel=0.2)
