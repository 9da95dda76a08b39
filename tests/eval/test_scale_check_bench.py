"""The scale-check bench's replay (eval.scale_check_bench): recorded tracks replayed with the altitude
scaled give the check's ratio scaled; sessions drawn from them are suspect for large errors and
never for none. Recorded here from synthetic boxes (the projected shapes of varied cars), not a
rendered flight: the bench's rendering and detection are the engine's, tested elsewhere."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scale_helpers import scale_record as _record

from eval.scale_check_bench import (
    ERRORS,
    calibrate_margin,
    format_scores,
    lane_values,
    score_cell,
    track_values,
)
from pipelines.config import ScaleCheckConfig


@pytest.mark.parametrize("k", [0.9, 1.0, 1.1])
def test_a_replay_with_the_altitude_scaled_scales_every_car(k: float) -> None:
    rec, cfg = _record(1), ScaleCheckConfig()
    plain, scaled = track_values(rec, cfg, 1.0), track_values(rec, cfg, k)
    cars = [t for t, v in plain.items() if v.label == "car"]
    # every third frame of each, as live; the carried one (step 3) left out: steps 0, 4 and 7
    assert len(cars) == 36 and all(plain[t].n == 3 for t in cars)
    shift = np.array([scaled[t].mid - plain[t].mid for t in cars])
    assert np.all(np.abs(shift - math.log(k)) < 0.01)  # the margin is pixels: it does not scale
    assert all(plain[t].steady for t in cars)  # steady boxes


def test_sessions_are_suspect_for_large_errors_and_never_for_none() -> None:
    records = [_record(s) for s in (2, 3)]
    # the margin known to 0.3 px (these cars are 25-60 px: the default 0.6 px would leave 10 % errors
    # unjudged in some sessions)
    result = score_cell(records, ScaleCheckConfig(box_margin_sigma_px=0.3), sessions=4, seed=0)
    assert result["pool_tracks"] == 80
    assert result["vehicles_per_min"] == 80.0
    assert result["session_vehicles"] == 2400
    assert result["1.00"]["ever_suspect_30min"] == 0.0
    assert result["1.00"]["ok_at_100"] == 1.0
    for k in ("0.85", "0.90", "1.10", "1.15"):
        assert result[k]["suspect_at_30"] == 1.0
    assert abs(result["pool_median_ratio"] - 1.0) < 0.02
    result["box_margin_px"] = 1.4
    table = format_scores({"cells": {"test": result}, "pooled": {}})
    assert "| test | 1.40 | 80 | 80.0 |" in table
    assert len(ERRORS) == 9


def test_the_margin_is_calibrated_on_the_tracked_boxes_against_the_truth(tmp_path) -> None:
    gt: list[str] = []
    rec = _record(4, vehicles=12, gt=gt)
    (tmp_path / "gt.txt").write_text("\n".join(gt) + "\n")
    margin, spread = calibrate_margin(rec, tmp_path / "gt.txt")
    assert abs(margin - 1.4) < 0.2 and spread < 0.5


def test_the_lanes_join_the_sessions_and_scale_with_the_error() -> None:
    records = [_record(s) for s in (2, 3)]
    for r in records:  # a lane frame a second, 0.4 % scatter, and one that found no lines
        r["lanes"] = [{"frame": f, "width_m": 3.5 * (1 + 0.004 * np.sin(f))} for f in range(0, 900, 30)]
        r["lanes"].append({"frame": 905, "width_m": None})
    assert np.median(lane_values(records, ScaleCheckConfig(), 1.1)) == pytest.approx(math.log(1.1), abs=0.003)
    cfg = ScaleCheckConfig(box_margin_sigma_px=3.0, lane_width_sigma_m=0.05)  # the cars alone cannot judge
    cars = score_cell(records, cfg.model_copy(update={"lanes": False}), sessions=4, seed=0)
    both = score_cell(records, cfg, sessions=4, seed=0)
    assert (cars["pool_lane_frames"], both["pool_lane_frames"]) == (0, 60)
    assert cars["1.15"]["suspect_at_100"] == 0.0 and both["1.15"]["suspect_at_100"] == 1.0
    assert both["0.85"]["suspect_at_30"] == 1.0
    assert both["1.00"]["ever_suspect_30min"] == 0.0
    assert both["pool_lane_ratio"] == pytest.approx(1.0, abs=0.005)


def test_score_runs_the_variants_named_each_with_its_margin_and_tolerance(tmp_path, capsys) -> None:
    """``score --variants``: only those, each cell's own calibrated margin for a ``cells`` variant, the
    shipped one for a ``default`` one, the cells' pooled one otherwise; a variant's tolerance is its
    own (cars 25-60 px whose margin is known judge a right scale ok to 5 %, never to 3 %). An
    unknown name is refused."""
    import json

    from eval.scale_check_bench import CELLS, main

    (tmp_path / "records").mkdir()
    for seed in (2, 3):  # the calibration flight (_s00) is not scored
        rec = _record(seed) | {"cell": "nadir-60", "seed": seed, "duration_s": 30.0}
        (tmp_path / "records" / f"nadir-60_s{seed:02d}.json").write_text(json.dumps(rec))
    # the recorded boxes' own margin (1.4 px) for the cell; another pooled
    cal = {"per_cell": dict.fromkeys(CELLS, [2.5, 1.0]) | {"nadir-60": [1.4, 1.0]}, "pooled": [1.9, 1.1]}
    (tmp_path / "calibration.json").write_text(json.dumps(cal))
    keys = ["cells", "cells_tol3", "pooled_tol3", "default_site_lanes"]
    args = ["score", str(tmp_path), "--sessions", "4", "--jobs", "1", "--variants", ",".join(keys)]
    assert main(args) == 0
    table = json.loads((tmp_path / f"scores_{'_'.join(keys)}.json").read_text())
    assert set(table) == {"calibration", *keys}
    cell = {key: table[key]["nadir-60"] for key in keys}
    assert {key: r["box_margin_px"] for key, r in cell.items()} == {
        "cells": 1.4,
        "cells_tol3": 1.4,
        "pooled_tol3": 1.9,
        "default_site_lanes": 1.4,
    }
    assert cell["cells"]["1.00"]["ok_at_100"] == 1.0 and cell["cells_tol3"]["1.00"]["ok_at_100"] == 0.0
    assert "tolerance 3 %" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no variant nope"):
        main(["score", str(tmp_path), "--variants", "cells,nope"])
