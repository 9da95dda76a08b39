"""The ticket: tolerance profiles, the confidence factor, measuring bases and the ticket rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.config import ConfigError, RulesConfig, ZoneConfig
from pipelines.ticket import (
    ENFORCEABLE,
    NOT_ENFORCEABLE,
    BaseSample,
    TicketMeasurement,
    Tolerance,
    choose_bases,
    confidence_factor,
    decide,
    measure,
    tolerance_at,
    too_short_reason,
)
from pipelines.types import MeasuringBase

OIML = Tolerance()  # 3 km/h or 3 %, the larger


@pytest.mark.parametrize(
    "speed, tol, expected",
    [
        (50.0, OIML, 3.0),
        (100.0, OIML, 3.0),  # OIML R 91: 3 km/h up to 100 km/h
        (150.0, OIML, 4.5),  # 3 % above
        (150.0, Tolerance(kmh=3.0, mode="kmh"), 3.0),
        (50.0, Tolerance(percent=5.0, mode="percent"), 2.5),
        (50.0, Tolerance(kmh=0.0, percent=0.0), 0.0),
        (-5.0, Tolerance(kmh=0.0, mode="percent"), 0.0),
    ],
)
def test_tolerance_at(speed: float, tol: Tolerance, expected: float) -> None:
    assert tolerance_at(speed, tol) == pytest.approx(expected)


def test_a_zone_tolerance_overrides_the_site_one_field_by_field() -> None:
    zone = ZoneConfig(name="school", polygon=[(0, 0), (1, 0), (1, 1)], speed_limit_kmh=30, tolerance_kmh=2.0)
    cfg = RulesConfig(tolerance_kmh=5.0, tolerance_percent=4.0, zones=[zone])
    assert Tolerance.of(cfg) == Tolerance(5.0, 4.0, "max")
    assert Tolerance.of(cfg, zone) == Tolerance(2.0, 4.0, "max")


@pytest.mark.parametrize(
    "confidence, m, k",
    [(0.95, 1, 1.6449), (0.975, 1, 1.9600), (0.95, 2, 1.9546), (0.95, 3, 2.1212), (0.99, 1, 2.3263)],
)
def test_confidence_factor_and_sidak(confidence: float, m: int, k: float) -> None:
    assert confidence_factor(confidence, m) == pytest.approx(k, abs=1e-4)


@pytest.mark.parametrize("confidence, m", [(0.5, 1), (1.0, 1), (0.95, 0)])
def test_confidence_factor_refuses_nonsense(confidence: float, m: int) -> None:
    with pytest.raises(ValueError):
        confidence_factor(confidence, m)


@pytest.mark.parametrize(
    "field, value",
    [
        ("confidence", 0.4),
        ("confidence", 1.0),
        ("tolerance_mode", "radar"),
        ("ticket_rule", "peak"),
        ("max_bases", 0),
    ],
)
def test_rules_config_refuses_bad_ticket_settings(field: str, value) -> None:
    from pipelines.config import PipelineConfig

    with pytest.raises(ConfigError):
        PipelineConfig.from_dict({"rules": {field: value}})


def samples(
    duration_s: float, speed_kmh: float = 60.0, fps: float = 30.0, start: float = 0.0
) -> list[BaseSample]:
    n = int(round(duration_s * fps)) + 1
    v = speed_kmh / 3.6
    return [BaseSample(start + k / fps, k + 1, 0.0, v * k / fps) for k in range(n)]


@pytest.mark.parametrize(
    "duration, speed, max_bases, expected",
    [
        (2.0, 60.0, 1, 1),
        (2.0, 60.0, 3, 1),  # halves of 2 s hold under 1 s of positions each
        (2.1, 60.0, 3, 2),  # 35 m: two bases of >= 1 s and 15 m, not three
        (6.0, 60.0, 3, 3),
        (0.9, 60.0, 1, 0),  # shorter than base_min_s
        (3.0, 15.0, 1, 0),  # 12.5 m: shorter than base_min_m
    ],
)
def test_choose_bases_by_time_and_distance(duration, speed, max_bases, expected) -> None:
    cfg = RulesConfig(max_bases=max_bases)
    bases = choose_bases(samples(duration, speed), cfg)
    assert len(bases) == expected
    flat = [s.t for b in bases for s in b]
    assert flat == sorted(set(flat))  # non-overlapping, in order
    for b in bases:
        assert b[-1].t - b[0].t >= cfg.base_min_s - 1e-9


def test_measure_an_exact_track_and_its_base() -> None:
    m = measure(samples(2.0, 72.0), RulesConfig(), scale_sigma_frac=0.02)
    assert m.speed_kmh == pytest.approx(72.0)
    assert m.fit_sigma_kmh == pytest.approx(0.0, abs=1e-6)
    assert m.sigma_kmh == pytest.approx(0.02 * 72.0)  # the scale's share alone
    assert m.k == pytest.approx(1.6449, abs=1e-4)
    assert m.base == MeasuringBase(0.0, 2.0, 1, 61, pytest.approx(40.0), 61, 1, 1)


def test_measure_reports_the_highest_of_several_bases_with_sidak() -> None:
    """A vehicle speeding up from 50 to 80 km/h over 6 s: three bases, the last is the fastest."""
    t = np.arange(0, 181) / 30.0
    v0, a = 50 / 3.6, (30 / 3.6) / 6.0
    run = [BaseSample(float(tk), k + 1, 0.0, float(v0 * tk + a * tk**2 / 2)) for k, tk in enumerate(t)]
    m = measure(run, RulesConfig(max_bases=3), scale_sigma_frac=0.0)
    assert (m.base.index, m.base.of) == (3, 3)
    assert m.speed_kmh == pytest.approx(75.0, abs=0.1)  # the mean over its last 2 s
    assert m.k == pytest.approx(confidence_factor(0.95, 3))
    one = measure(run, RulesConfig(max_bases=1), scale_sigma_frac=0.0)
    assert one.speed_kmh == pytest.approx(65.0, abs=0.1) and one.base.of == 1


def test_too_short_reason_says_what_is_missing() -> None:
    cfg = RulesConfig()
    assert "needs 1 s, 15 m" in too_short_reason(samples(0.5), cfg)
    assert "no trusted ground positions" in too_short_reason([], cfg)
    assert measure(samples(0.5), cfg, scale_sigma_frac=0.02) is None


def measured(speed: float, sigma: float, k: float = 1.645) -> TicketMeasurement:
    return TicketMeasurement(speed, sigma, sigma, k, MeasuringBase(0.0, 2.0, 1, 61, 30.0, 61))


@pytest.mark.parametrize(
    "rule, speed, sigma, tol, status, reason",
    [
        ("tolerance", 53.5, 1.0, OIML, ENFORCEABLE, ""),
        ("tolerance", 53.0, 1.0, OIML, NOT_ENFORCEABLE, "within the tolerance"),  # 53 - 3 is not > 50
        ("tolerance", 53.2, 0.5, OIML, ENFORCEABLE, ""),
        ("tolerance", 80.0, 1.9, OIML, NOT_ENFORCEABLE, "uncertainty too large"),  # 1.645 x 1.9 > 3
        ("tolerance", 120.0, 2.0, OIML, ENFORCEABLE, ""),  # 1.645 x 2.0 within 3 % of 120 = 3.6
        ("tolerance", 120.0, 2.5, OIML, NOT_ENFORCEABLE, "uncertainty too large"),  # 4.1 > 3.6
        ("tolerance_and_sigma", 54.5, 1.0, OIML, NOT_ENFORCEABLE, "tolerance + k sigma"),  # 54.5-3-1.6
        ("tolerance_and_sigma", 55.0, 0.5, OIML, ENFORCEABLE, ""),
        ("lower_bound", 52.0, 1.0, Tolerance(0.0, 0.0), ENFORCEABLE, ""),  # 52 - 1.645 > 50
        ("lower_bound", 51.5, 1.0, Tolerance(0.0, 0.0), NOT_ENFORCEABLE, "lower bound 49.9"),
        ("lower_bound", 80.0, 10.0, Tolerance(0.0, 0.0), ENFORCEABLE, ""),  # no validity test
        ("tolerance", 60.0, math.inf, OIML, NOT_ENFORCEABLE, "uncertainty unknown"),
    ],
)
def test_decide(rule, speed, sigma, tol, status, reason) -> None:
    d = decide(measured(speed, sigma), 50.0, rule, tol)
    assert d.status == status
    assert reason in d.reason and (d.reason == "") == (status == ENFORCEABLE)
    assert d.tolerance_kmh == pytest.approx(tolerance_at(speed, tol))
