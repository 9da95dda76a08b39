"""The lane ruler's bench (eval.lane_bench): the simulated table and the real aerial-cars frames."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from shared_material import shared_path

from eval import lane_bench
from eval.lane_bench import aerial_cars, format_aerial, sim_table

ROAD = Path(lane_bench.__file__).resolve().parents[1] / "weights" / "airpatrol_road_unet_mnv3s.pt"


def test_the_simulated_table_reads_every_frame_within_a_percent(monkeypatch) -> None:
    monkeypatch.setattr(lane_bench, "SIM_GRID", [(40.0, -90.0, 3.5), (50.0, -45.0, 3.25)])
    rows = sim_table((640, 360), ks=(1.0, 1.2))
    assert [(r["altitude_m"], r["k"]) for r in rows] == [(40.0, 1.0), (40.0, 1.2), (50.0, 1.0), (50.0, 1.2)]
    assert all(r["ratio"] == pytest.approx(1.0, abs=0.01) and r["pairs"] >= 10 for r in rows)


def test_real_nadir_frames_read_one_lane_width_per_road() -> None:
    folder = shared_path("aerial_cars_dji_frames")
    rows = aerial_cars(folder, ROAD, video="DJI-00760")  # one intersection, 11 frames
    assert len(rows) == 11 and all(r["lane_px"] is not None for r in rows)
    lanes = np.array([r["lane_px"] for r in rows])
    mid = float(np.median(lanes))  # the session's value is its frames' median
    assert 45.0 < mid < 58.0
    assert np.sum(np.abs(lanes / mid - 1) < 0.10) >= 9  # the same lanes frame after frame, bar a frame or two
    assert 1.4826 * np.median(np.abs(lanes - mid)) < 0.05 * mid
    ratios = sorted(r["lane_over_car"] for r in rows if r["lane_over_car"] is not None)
    assert 1.4 < ratios[len(ratios) // 2] < 2.1  # lanes 1.4-2.1 cars wide (labelled boxes a little loose)
    assert "| DJI-00760 | 11 | 11 |" in format_aerial(rows)
