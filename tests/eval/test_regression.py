"""Regression: a small simulated flight, oracle detector, the real pipeline (build_pipeline).

Three small flights (nadir and oblique, both drifting and yawing; and a slice of the speed grid:
100 m oblique, flying forward at 10 m/s, whose ego-motion error is held too). Fails when MOTA, HOTA, IDF1 or the
share of matched boxes with a speed drop, or the identity switches or the speed MAE rise, beyond the
committed baselines in eval/baselines/sim_oracle.json, or when a ground-truth violation is missed
or a false one reported. Those numbers were measured, not chosen: update them only on purpose
(after a deliberate change to the pipeline, with the new measured values), never to silence a failure.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.datasets import load_dataset
from eval.runner import run_sequence
from eval.variants import OracleOptions, Variant
from pipelines.config import PipelineConfig

BASELINES = json.loads(
    (Path(__file__).resolve().parents[2] / "eval" / "baselines" / "sim_oracle.json").read_text()
)
MARGINS = BASELINES["margins"]
FLIGHT_FIXTURES = {
    "nadir": "small_flight_dir",
    "oblique": "oblique_flight_dir",
    "high_forward": "high_forward_flight_dir",
}
CASES = [(flight, name) for flight, configs in BASELINES["flights"].items() for name in sorted(configs)]


@pytest.mark.parametrize(("flight", "name"), CASES, ids=[f"{f}-{n}" for f, n in CASES])
def test_sim_oracle_regression(request, flight, name):
    base = BASELINES["flights"][flight][name]
    flight_dir = request.getfixturevalue(FLIGHT_FIXTURES[flight])
    config = PipelineConfig().with_overrides(**base["overrides"]) if base["overrides"] else PipelineConfig()
    seq = load_dataset(flight_dir).sequences[0]
    result = run_sequence(seq, config, Variant(name, oracle=True), oracle=OracleOptions(), progress=False)
    measured = {
        "mota": result.tracking["MOTA"],
        "hota": result.tracking["HOTA"],
        "idf1": result.tracking["IDF1"],
        "idsw": result.tracking["IDSW"],
        "speed_mae_kmh": result.speed["mae_kmh"],
        "speed_coverage": result.speed["coverage"],
    }
    report = f"{flight}/{name}: measured {measured}, baseline {base}"
    for metric in ("mota", "hota", "idf1"):
        assert measured[metric] >= base[metric] - MARGINS[metric], report
    assert measured["idsw"] <= base["idsw"] + MARGINS["idsw"], report
    allowed = base["speed_mae_kmh"] + max(
        MARGINS["speed_mae_kmh_abs"], MARGINS["speed_mae_rel"] * base["speed_mae_kmh"]
    )
    assert measured["speed_mae_kmh"] <= allowed, report
    # a pipeline that stops estimating speeds must not pass on a good MAE of the few it keeps
    assert measured["speed_coverage"] >= base["speed_coverage"] - MARGINS["speed_coverage"], report
    if "ego_mean_px" in base:  # the camera's own motion, against the simulator's exact camera
        assert result.egomotion["mean_px"] <= base["ego_mean_px"] + MARGINS["ego_mean_px_abs"], report
    # every ground-truth violation of these flights is found, and nothing else
    assert result.violations["fn"] == 0 and result.violations["fp"] == 0, result.violations
