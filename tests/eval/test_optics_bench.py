"""The lens and shutter bench's bookkeeping (eval.optics_bench): what each arm tells the engine, and
the split of a run's errors by the part of the frame (lens) and the direction (shutter) read from
the flight's ground truth."""

from __future__ import annotations

import pytest
import yaml

from eval.optics_bench import CELLS, arm_config, cell_spec, split_rows


@pytest.mark.parametrize(
    ("cell", "arm", "camera"),
    [
        ("lens-nadir", "pinhole", {"takeoff_above_road_m": 0.0}),
        (
            "lens-oblique",
            "known",
            {
                "takeoff_above_road_m": 0.0,
                "lens": {"k1": -0.1, "k2": 0.0, "p1": 0.0, "p2": 0.0, "k3": 0.0, "source": "the flight's"},
            },
        ),
        ("shutter-drift", "known", {"takeoff_above_road_m": 0.0, "readout_ms": 30.0}),
        ("shutter-nadir", "pinhole", {"takeoff_above_road_m": 0.0}),
    ],
)
def test_each_arm_tells_the_engine_what_it_knows(cell, arm, camera):
    spec = cell_spec(cell, 1, None)
    assert arm_config(arm, spec) == {"camera": camera}
    assert spec.altitude_m == 60.0 and spec.pitch_deg == CELLS[cell]["pitch_deg"]


def _flight(tmp_path, name, width, rows):
    """A flight folder with a flight.yaml and a gt.txt of (frame, id, x, y, w, h) rows."""
    d = tmp_path / name
    (d / "gt").mkdir(parents=True)
    (d / "flight.yaml").write_text(yaml.safe_dump({"width": width, "height": 100}))
    (d / "gt" / "gt.txt").write_text("".join(f"{f},{i},{x},{y},{w},{h},1,1,1\n" for f, i, x, y, w, h in rows))
    return d


def test_a_lens_run_is_split_into_the_frame_s_centre_and_edges(tmp_path):
    # vehicle 1 in the middle third (u = 500 of 1000), vehicle 2 at the edge (u = 50): +1 % and +3 %
    rows = [(f, 1, 490, 40, 20, 20) for f in (1, 2, 3)] + [(f, 2, 40, 40, 20, 20) for f in (1, 2, 3)]
    d = _flight(tmp_path, "lens-nadir_s00", 1000, rows)
    run = {
        "status": "ok",
        "scenario": "lens-nadir",
        "arm": "pinhole",
        "flight": "lens-nadir_s00",
        "flight_dir": str(d),
        "speed": {
            "frame": [1, 2, 3, 1, 2, 3],
            "gt_id": [1, 1, 1, 2, 2, 2],
            "gt_kmh": [50.0] * 6,
            "pred_kmh": [50.5] * 3 + [51.5] * 3,
        },
    }
    [row] = split_rows([run])
    assert row[:3] == ["lens-nadir", "pinhole", "1"]
    assert row[3].startswith("centre +1.00") and "n=3" in row[3]
    assert row[4].startswith("edge +3.00")
    assert row[5] == "edge-centre +2.00 !"  # over the 0.5 % target


def test_a_shutter_run_is_split_by_the_direction_in_the_image(tmp_path):
    # vehicle 1 moves down 10 px a frame, vehicle 2 up: -0.1 % and +0.2 %
    rows = [(f, 1, 100, 10 * f, 20, 20) for f in (1, 2, 3)] + [
        (f, 2, 300, 80 - 10 * f, 20, 20) for f in (1, 2, 3)
    ]
    d = _flight(tmp_path, "shutter-nadir_s00", 1000, rows)
    run = {
        "status": "ok",
        "scenario": "shutter-nadir",
        "arm": "known",
        "flight": "shutter-nadir_s00",
        "flight_dir": str(d),
        "speed": {"frame": [2, 2], "gt_id": [1, 2], "gt_kmh": [50.0, 50.0], "pred_kmh": [49.95, 50.1]},
    }
    [row] = split_rows([run])
    assert row[3].startswith("down -0.10") and row[4].startswith("up +0.20")
    assert row[5] == "worst 0.20"  # within the 0.3 % target
