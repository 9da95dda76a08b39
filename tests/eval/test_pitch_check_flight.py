"""The pitch check end to end: a simulated oblique flight run through a pitch 3 deg off (at 640x360, 12 s:
the traffic gives the pitch to about 0.5 deg; right, it would not yet say ok, which the synthetic tracks
of tests/pipelines/test_pitch_check.py show)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REGRESSION_SPEC

from eval.datasets import load_dataset
from eval.runner import run_sequence
from eval.simulate import simulate_flight
from eval.variants import OracleOptions, Variant
from pipelines.config import PipelineConfig

# 100 m at -45 deg, hovering over a straight road: half a minute's worth of vehicles in 12 s
PITCH_SPEC = REGRESSION_SPEC.replace(
    seed=23, duration_s=12.0, altitude_m=100.0, pitch_deg=-45.0, drift_mps=(0.0, 0.0), yaw_rate_dps=0.0,
    road_heading_deg=0.0, n_vehicles=40,
)  # fmt: skip


@pytest.fixture
def pitch_flight_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return simulate_flight(PITCH_SPEC, tmp_path_factory.mktemp("sim") / "pitch").out_dir


def test_the_traffic_says_the_pitch_is_off(pitch_flight_dir) -> None:
    bias_deg = 3.0
    reference = {"source": "site", "takeoff_above_road_m": 0.0, "sigma_m": 0.5, "pitch_bias_deg": bias_deg}
    config = PipelineConfig().with_overrides(camera={"height_reference": reference})
    seq = load_dataset(pitch_flight_dir).sequences[0]
    result = run_sequence(seq, config, Variant("oracle", oracle=True), oracle=OracleOptions(), progress=False)
    check = result.pipeline["pitch_check"]
    assert check["status"] == "suspect" and "deg off" in check["reason"], check
    assert abs(check["pitch_error_deg"] - bias_deg) <= max(3.0 * check["sigma_deg"], 0.3), check
    assert check["vehicles"] >= 10
