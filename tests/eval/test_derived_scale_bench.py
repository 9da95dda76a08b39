"""The vehicles' own scale's bench (eval.derived_scale_bench): on recordings of cars of the prior's
spread seen through the true altitude, the height they give is the true one to its sigma; the
sessions' summary counts what it says it counts; the command writes its table and refuses a folder
without recordings."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scale_helpers import scale_record as _record

from eval.derived_scale_bench import height_error, main, score_flights, summarize
from eval.scale_check_bench import track_values
from pipelines.config import ScaleCheckConfig


@pytest.mark.parametrize("pitch", [-90.0, -60.0])
def test_each_flight_gives_the_true_height_to_its_sigma(pitch: float) -> None:
    cfg = ScaleCheckConfig(lanes=False)
    flights = score_flights([_record(seed, pitch=pitch) | {"seed": seed} for seed in (1, 2)], cfg)
    for f in flights:
        assert f["n"] == 36  # the trucks left out
        assert abs(math.log1p(f["error"])) < 3 * f["sigma"], f
        assert 0.03 <= f["sigma"] < 0.06  # the fleet's 3 % and the margin's share: known to 6 %


def test_too_few_vehicles_give_no_height() -> None:
    cfg = ScaleCheckConfig(lanes=False)
    values = list(track_values(_record(3, vehicles=5), cfg, 1.0).values())
    arr = np.array([(t.mid, t.sd, 1.0, t.per_margin) for t in values])
    assert all(math.isnan(v) for v in height_error(arr, None, cfg))


def test_the_summary_counts_known_sessions_and_their_errors_in_sigmas() -> None:
    errors = np.array([0.01, -0.02, 0.05, np.nan, 0.2])
    sigmas = np.array([0.02, 0.015, 0.03, np.nan, 0.1])  # the last is not known to 6 %
    s = summarize(errors, sigmas, 0.06)
    assert (s["with_height"], s["known"]) == (0.8, 0.6)
    assert s["median_abs_error"] == pytest.approx(0.02)
    # |log1p(e)| / sigma: 0.50, 1.35, 1.63
    assert (s["within_1_sigma"], s["within_2_sigma"]) == (pytest.approx(1 / 3, abs=1e-3), 1.0)


def test_the_command_writes_its_table_and_refuses_a_folder_without_recordings(tmp_path, capsys) -> None:
    assert main([str(tmp_path), "--sessions", "2"]) == 2
    assert "no recorded flights" in capsys.readouterr().err
    (tmp_path / "records").mkdir()
    rec = _record(4) | {"cell": "nadir-60", "seed": 1, "lanes": []}
    (tmp_path / "records" / "nadir-60_s01.json").write_text(json.dumps(rec))
    assert main([str(tmp_path), "--sessions", "2"]) == 0
    out = capsys.readouterr().out
    assert "### the cars alone" in out and "| nadir-60 |" in out
    table = json.loads((tmp_path / "derived_scores.json").read_text())
    assert table["cars"]["nadir-60"]["sessions"]["1min"]["known"] == 1.0
    # the pitch its cars give, beside the true one (the recording's camera)
    assert "### the pitch the cars give (no pitch known)" in out
    (pitch,) = table["pitch"]["nadir-60"]
    assert pitch["true"] == -60.0 and abs(pitch["fitted"] + 60.0) < 2 * pitch["sigma"], pitch
