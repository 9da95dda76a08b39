"""pipelines.scale_judge: two rulers that agree within their uncertainty, one of them off on its own."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.config import ScaleCheckConfig
from pipelines.scale_judge import combine, judge


def _cars(log_ratio: float, margin_share: float = 0.05, n: int = 40) -> np.ndarray:
    """Track rows (log ratio, its sd, steady, sensitivity to a pixel of margin) of ``n`` cars spread
    evenly +-5 % about ``log_ratio``; the margin's 0.6 px makes their floor 0.6 x ``margin_share``."""
    x = log_ratio + np.linspace(-0.05, 0.05, n)
    return np.column_stack([x, np.full(n, 0.05), np.ones(n), np.full(n, margin_share)])


def _lanes(log_ratio: float, frames: int = 20) -> np.ndarray:
    return log_ratio + np.linspace(-0.003, 0.003, frames)


@pytest.mark.parametrize(
    ("cars", "lanes", "status", "words"),
    [
        # lanes 10.5 % wide (+-1.75 %: the site's width), cars 2 % (+-3 %, tight boxes): within their
        # uncertainty of each other, together 8.3 % (+-1.5 %), not beyond 5 % for sure; the lanes alone are
        (0.02, 0.10, "suspect", "the lanes alone measure 1.11 times the width they are built to"),
        # both right: ok
        (0.0, 0.0, "ok", ""),
        # the lanes 4 % wide alone: neither beyond
        (0.02, 0.04, "unverified", "not yet determined to 5%"),
    ],
)
def test_a_ruler_off_on_its_own_is_suspect_where_the_two_agree(
    cars: float, lanes: float, status: str, words: str
) -> None:
    cfg = ScaleCheckConfig(lane_width_sigma_m=0.05)
    est = combine(_cars(cars), cfg, lambda n: "too few", _lanes(lanes))
    assert est.ruler == "cars and the lanes" and [e.ruler for e in est.rulers] == ["cars", "lanes"]
    r = judge(_cars(cars), cfg, lambda n: "too few", _lanes(lanes))
    assert r.status == status, r
    assert words in r.reason
    if status == "suspect":  # the ruler's own reading, and the two together named
        assert r.ratio == pytest.approx(math.exp(lanes)) and r.sigma == pytest.approx(
            r.ratio * est.rulers[1].se
        )
        assert f"(the cars and the lanes together: {math.exp(est.mu):.2f})" in r.reason
        assert [x.ruler for x in r.rulers] == ["cars", "lanes"]


def test_one_ruler_is_its_own_reading() -> None:
    cfg = ScaleCheckConfig(lane_width_sigma_m=0.05)
    est = combine(_cars(0.0), cfg, lambda n: "too few", None)
    assert [e.ruler for e in est.rulers] == ["cars"] and est.parts == (est.rulers[0].reading(),)


def _shaped(
    log_ratio: float, loose_px: float, loose_sd: float = 4.0, margin_share: float = 0.02
) -> np.ndarray:
    """Cars as :func:`_cars`, each with how much looser than the margin its boxes are for a car's
    shape: spread evenly about ``loose_px``, each +-``loose_sd`` px."""
    rows = _cars(log_ratio, margin_share)
    loose = loose_px + np.linspace(-loose_sd, loose_sd, len(rows))
    return np.column_stack([rows, loose, np.full(len(rows), loose_sd)])


@pytest.mark.parametrize(
    ("cars", "loose", "margin_share", "status", "words"),
    [
        # boxes 8 px a side looser than a car's shape allows (+-0.6 px over 40 cars): their 14 % says
        # nothing, and with no lanes nothing judges
        (
            0.14,
            8.0,
            0.02,
            "unverified",
            "not shaped like cars: their length and width disagree by what a margin +8.0 px",
        ),
        (-0.10, -6.0, 0.02, "unverified", "a margin -6.0 px a side beyond the detector's (1.4 px)"),
        # a shape that fits (a right margin): the cars judge, a 10 % error is suspect, none is ok
        (0.10, 0.3, 0.02, "suspect", "the cars measure 1.11 times their usual size"),
        (0.0, -0.3, 0.02, "ok", ""),
        # looser, but by what moves the cars' reading under half the tolerance: they judge
        (0.0, 2.0, 0.005, "ok", ""),
    ],
)
def test_boxes_whose_shape_is_not_a_car_do_not_judge_the_scale(
    cars: float, loose: float, margin_share: float, status: str, words: str
) -> None:
    cfg = ScaleCheckConfig()
    r = judge(_shaped(cars, loose, margin_share=margin_share), cfg, lambda n: "too few")
    assert r.status == status, r
    assert words in r.reason
    if status == "unverified":  # the cars' reading is still shown
        assert r.ratio == pytest.approx(math.exp(cars), rel=0.01)


def test_with_loose_boxes_the_lanes_judge_alone() -> None:
    cfg = ScaleCheckConfig(lane_width_sigma_m=0.05)
    r = judge(_shaped(0.14, 8.0), cfg, lambda n: "too few", _lanes(0.0))
    assert r.status == "ok" and [x.ruler for x in r.rulers] == ["lanes"], r
    r = judge(_shaped(0.0, 8.0), cfg, lambda n: "too few", _lanes(0.12))
    assert r.status == "suspect" and "the lanes measure 1.13 times" in r.reason, r
