"""eval.bands: the per-altitude-band table of eval/examples/altitude_bands.sh."""

from __future__ import annotations

import argparse
import json

import pytest
from shared_material import REPO

from eval.bands import altitude_band, band_rows, describe_sizes, format_rows, main, view_of


@pytest.mark.parametrize(
    ("altitude", "band"),
    [(None, "?"), (30.0, "30-45 m"), (44.9, "30-45 m"), (45.0, "45-80 m"), (60.0, "45-80 m"),
     (100.0, "80-120 m"), (120.0, "120-150 m"), (150.0, "120-150 m")],
)  # fmt: skip
def test_altitude_band(altitude, band):
    assert altitude_band(altitude) == band


@pytest.mark.parametrize(
    ("pitch", "view"), [(None, "?"), (-90.0, "nadir"), (-80.0, "nadir"), (-45.0, "oblique")]
)
def test_view_of(pitch, view):
    assert view_of(pitch) == view


@pytest.mark.parametrize(
    ("sizes", "text"),
    [(640, "640"), ({"960": 30}, "auto 960"), ({960: 10, 1280: 30}, "auto 1280 (75%)/960 (25%)"), ("?", "?")],
)
def test_describe_sizes(sizes, text):
    assert describe_sizes(sizes) == text


def test_table_from_a_real_eval(small_flight_dir, tmp_path, capsys):
    """`airpatrol eval` with the shipped detector at `imgsz: auto` and a fixed size, then the table:
    one row per configuration, the sizes the detector really ran at, the run's own MOTA."""
    if not (REPO / "weights" / "airpatrol_vehicles_n_openvino_model").exists():
        pytest.skip("no shipped detector under weights/")
    from eval.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    out = tmp_path / "eval"
    args = parser.parse_args(
        ["eval", str(small_flight_dir), "--imgsz", "auto", "--ablate", "detector.imgsz=320"]
        + ["--max-frames", "20", "--out", str(out), "-q"]
    )
    assert args.func(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    rows = band_rows(metrics)
    assert [(r.variant, r.imgsz) for r in rows] == [("base", "auto 640"), ("detector.imgsz=320", "320")]
    for row, seq in zip(rows, metrics["sequences"], strict=True):
        assert (row.band, row.view) == ("45-80 m", "nadir")
        assert row.mota == pytest.approx(seq["tracking"]["MOTA"])
        assert row.detect_ms > 0 and row.total_ms >= row.detect_ms and row.fps > 0

    capsys.readouterr()
    assert main([str(out / "metrics.json"), "--markdown"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| band | view | flight | configuration | imgsz | MOTA")
    assert len(table) == 2 + len(rows) and "| auto 640 |" in table[2]
    assert len(format_rows(rows).splitlines()) == 1 + len(rows)


@pytest.mark.parametrize("content", [None, "{not json"])
def test_unreadable_metrics_is_one_line_and_exit_2(tmp_path, capsys, content):
    path = tmp_path / "metrics.json"
    if content is not None:
        path.write_text(content)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("eval.bands: cannot read") and err.count("\n") == 1
