"""The speed-accuracy grid table: cells parsed from flight names, targets checked."""

from __future__ import annotations

import dataclasses
import json

import pytest

from eval.speed_grid import GridRow, format_rows, grid_rows, main, misses


def _seq(name: str, variant: str, **speed) -> dict:
    return {
        "sequence": name,
        "variant": variant,
        "altitude_m": 100.0,
        "pitch_deg": -45.0,
        "tracking": {"recall": 0.7},
        "speed": {"mae_kmh": 0.4, "p95_abs_kmh": 1.5, "bias_kmh": -0.1, "coverage": 0.9, **speed},
        "egomotion": {"mean_px": 0.03},
    }


METRICS = {
    "variants": [{"name": "base", "oracle": False}, {"name": "oracle", "oracle": True}],
    "sequences": [
        _seq(
            "alt100_pitch45_forward",
            "oracle",
            mae_kmh=0.7,
            sigma={"within_1sigma": 0.95},
            measurement_sigma={"within_1sigma": 0.9},
        ),
        _seq(
            "alt100_pitch45_forward",
            "base",
            sigma={"within_1sigma": 0.8},
            measurement_sigma={"within_1sigma": 0.66},
        ),
        _seq("alt100_pitch45_hover", "base"),
    ],
}


def test_rows_are_cells_in_grid_order():
    rows = grid_rows(METRICS)
    assert [(r.motion, r.variant) for r in rows] == [
        ("forward 10 m/s", "base"),
        ("forward 10 m/s", "oracle"),
        ("hovering", "base"),
    ]
    assert (
        rows[1].oracle
        and not rows[0].oracle
        and rows[0].within_1sigma == 0.66  # the measurement's own sigma is the one checked
        and rows[0].within_1sigma_reported == 0.8
        and rows[2].within_1sigma is None
    )


BASE = GridRow("s", "base", 100.0, -45.0, "hovering", False, 0.9, 0.5, 1.0, 0.1, 0.9, 0.68, 0.02)


@pytest.mark.parametrize(
    ("change", "missed"),
    [
        ({}, set()),
        ({"mae": 1.2}, {"mae"}),
        ({"mae": 0.7, "oracle": True}, {"mae"}),  # the oracle's target is 0.5 km/h
        ({"mae": 0.7}, set()),
        ({"p95": 3.5, "bias": -0.6}, {"p95", "bias"}),
        ({"coverage": 0.8}, {"coverage"}),
        ({"within_1sigma": 0.9}, {"within_1sigma"}),  # timid sigma
        ({"within_1sigma": 0.4}, {"within_1sigma"}),  # over-confident sigma
        ({"ego_px": 0.2}, {"ego_px"}),
        ({"recall": 0.5}, {"recall"}),
        ({"recall": 0.5, "oracle": True}, set()),
        (
            {"mae": None, "p95": None, "bias": None, "coverage": None, "within_1sigma": None, "ego_px": None},
            set(),
        ),
    ],
)
def test_targets(change, missed):
    assert misses(dataclasses.replace(BASE, **change)) == missed


def test_table_marks_misses(tmp_path, capsys):
    text = format_rows(grid_rows(METRICS), markdown=True)
    assert "| 100 m | -45 | forward 10 m/s | oracle | 0.700 | 0.70! |" in text  # oracle: no recall target
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(METRICS))
    assert main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "3 rows, 3 miss a target" in out  # recall 0.7 in both base rows, oracle MAE and sigma
    assert main([str(tmp_path / "missing.json")]) == 2


def test_the_sigma_share_with_its_interval_over_vehicles(tmp_path, capsys):
    """A cell's 1-sigma share over its ~15 vehicles is shown with its 90 % interval; a share out of
    the band stays marked, and the summary counts cells in the band and cells whose interval reaches it."""
    seqs = [
        _seq(name, "base", measurement_sigma={"within_1sigma": share, "within_1sigma_90": interval})
        for name, share, interval in [
            ("alt100_pitch45_forward", 0.68, [0.62, 0.74]),
            ("alt100_pitch45_hover", 0.78, [0.71, 0.84]),  # out of the band, its interval reaches it
            ("alt100_pitch45_drift", 0.85, [0.80, 0.90]),  # out, and so is its interval
        ]
    ]
    metrics = {"variants": [{"name": "base", "oracle": False}], "sequences": seqs}
    rows = grid_rows(metrics)
    assert [r.within_1sigma_90 for r in rows] == [(0.80, 0.90), (0.62, 0.74), (0.71, 0.84)]
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(metrics))
    assert main([str(path), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| 0.780! | 0.71-0.84 |" in out
    assert (
        "detector rows, errors within 1 sigma: 1 of 3 in 60%-75%, 2 with a 90 % interval over vehicles" in out
    )
