"""The ego-motion benchmark script runs a cell end to end (tiny flight) and prints its table."""

from __future__ import annotations

import json

from eval.bench_egomotion import main


def test_bench_runs_one_tiny_cell(tmp_path, capsys):
    out = tmp_path / "cells.json"
    argv = ["--flights", str(tmp_path / "f"), "--size", "320x192", "--duration", "0.4", "--altitudes", "60",
            "--pitches", "-90", "--motions", "drift_yaw", "--set", "scale=1.0", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "alt60_p90_drift_yaw" in printed and "'scale': 1.0" in printed
    (cell,) = json.loads(out.read_text())["cells"]
    s = cell["config"]
    assert s["pairs"] == 11 and s["true_median_px"] > 0 and s["ms_median"] > 0
    assert s["mean_px"] < s["true_median_px"]  # it estimated the motion, not identity
    # a second run re-uses the simulated flight (same spec)
    stamp = (tmp_path / "f" / "alt60_p90_drift_yaw" / "video.mp4").stat().st_mtime_ns
    assert main(argv) == 0
    assert (tmp_path / "f" / "alt60_p90_drift_yaw" / "video.mp4").stat().st_mtime_ns == stamp


def test_bench_compares_with_a_baseline(tmp_path, capsys):
    out = tmp_path / "cells.json"
    argv = ["--flights", str(tmp_path / "f"), "--size", "320x192", "--duration", "0.3", "--altitudes", "60",
            "--pitches", "-45", "--motions", "hover", "--baseline", "before", "--baseline", "max_features=100",
            "--repeat", "2", "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert (
        data["configs"]["baseline"]["corners"] == "global"
        and data["configs"]["baseline"]["max_features"] == 100
    )
    assert data["configs"]["config"]["corners"] == "fill"
    (cell,) = data["cells"]
    assert cell["baseline"]["pairs"] == cell["config"]["pairs"] == 8
    assert "baseline: worst mean" in capsys.readouterr().out
