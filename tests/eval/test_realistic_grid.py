"""eval.realistic_grid: the 36 cells with the real world's errors drawn per flight, and a measured base
drawn through a distorting lens (eval.correction) solved through the lens the engine is told."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eval.correction import measured_base
from eval.error_budget_table import BudgetRow
from eval.realistic_grid import (
    ARMS,
    CALIBRATION,
    K1_RANGE,
    READOUT_RANGE_MS,
    cell_names,
    cell_of,
    cell_spec,
    checks_at_end,
    render,
    render_table,
    same_flight,
    target_rows,
    why_held,
)
from eval.simulate import TelemetryErrors
from eval.simulate.camera import CameraPath
from eval.simulate.spec import SimulationError
from eval.simulate.writers import write_spec
from pipelines.lens import LensModel


def test_the_36_cells_draw_their_optics_and_a_calibration_of_them():
    names = cell_names()
    assert len(names) == len(set(names)) == 36 and "alt30_pitch90_hover" in names
    k1s = []
    for name in names:
        spec, told = cell_spec(name, None)
        assert spec.vehicle_height and spec.vehicle_sizes == "realistic"
        k1 = spec.lens_distortion[0]
        k1s.append(k1)
        assert K1_RANGE[0] <= k1 <= K1_RANGE[1]
        assert READOUT_RANGE_MS[0] <= spec.readout_ms <= READOUT_RANGE_MS[1]
        assert abs(told["lens"]["k1"] - k1) < 5 * CALIBRATION["k1"]
        assert abs(told["readout_ms"] - spec.readout_ms) < 5 * CALIBRATION["readout_ms"]
        CameraPath(spec)  # every cell can be rendered (the image top well below the horizon)
    assert cell_spec(names[5], None) == cell_spec(names[5], None)  # seeded
    assert len(set(k1s)) == 36


@pytest.mark.parametrize(
    ("without", "lens", "readout", "solids"),
    [
        ((), True, True, True),
        (("lens",), False, True, True),
        (("shutter",), True, False, True),
        (("solids",), True, True, False),
        (("lens", "shutter", "solids"), False, False, False),
    ],
)
def test_a_variant_leaves_out_the_errors_it_names_and_keeps_the_rest(without, lens, readout, solids):
    """The grid's variants (--without) fly the same flight, the named errors left out of the
    rendering and of what the engine is told."""
    full, told_full = cell_spec("alt60_pitch45_forward", None)
    spec, told = cell_spec("alt60_pitch45_forward", None, without)
    assert (spec.lens_distortion is not None) == lens and ("lens" in told) == lens
    assert bool(spec.readout_ms) == readout and bool(told["readout_ms"]) == readout
    assert spec.vehicle_height == solids
    assert spec.seed == full.seed and spec.drift_mps == full.drift_mps and spec.vehicle_sizes == "realistic"
    if lens:
        assert told["lens"] == told_full["lens"]
    with pytest.raises(ValueError, match="unknown errors"):
        cell_spec("alt60_pitch45_forward", None, ("fog",))


def test_a_flight_simulated_with_other_settings_is_not_taken_for_a_variant(tmp_path):
    """A folder of flights with the lens is refused for the variant without it (another --out)."""
    spec, _ = cell_spec("alt30_pitch90_hover", None)  # no shared frames given: procedural vehicles
    (tmp_path / "sims" / "alt30_pitch90_hover" / "gt").mkdir(parents=True)
    (tmp_path / "sims" / "alt30_pitch90_hover" / "gt" / "gt.txt").write_text("")
    write_spec(tmp_path / "sims" / "alt30_pitch90_hover" / "flight.yaml", spec)
    told = render(tmp_path, ["alt30_pitch90_hover"], shared=None)  # the same flight: kept
    assert told["alt30_pitch90_hover"]["readout_ms"] > 0
    with pytest.raises(SimulationError, match="other settings"):
        render(tmp_path, ["alt30_pitch90_hover"], shared=None, without=("lens",))
    assert same_flight(spec, cell_spec("alt30_pitch90_hover", "elsewhere")[0])


@pytest.mark.parametrize(
    ("run", "cell"),
    [
        ({"flight": "alt30_pitch90_hover"}, "alt30_pitch90_hover"),
        ({"flight": "alt30_pitch90_hover_d3"}, "alt30_pitch90_hover"),
        ({"flight": "alt150_pitch45_drift_d12"}, "alt150_pitch45_drift"),
    ],
)
def test_a_draw_belongs_to_its_cell(run, cell):
    assert cell_of(run) == cell


@pytest.mark.parametrize(("told", "max_error_pct"), [("exact", 0.05), ("none", None)])
def test_a_base_drawn_through_a_wide_lens_solves_through_the_lens_it_is_told(told, max_error_pct):
    """Lines drawn on the distorted frame (the road across it, barrel k1 = -0.12), clicks and lengths
    all but exact: told the lens, the height is right (measured: -0.002 %); not told, the base reads the
    distortion."""
    spec, _ = cell_spec("alt60_pitch90_hover", None)
    spec = spec.replace(lens_distortion=(-0.12, 0.0, 0.0, 0.0, 0.0))
    lens = LensModel(-0.12, source="test") if told == "exact" else None
    base = measured_base(
        spec,
        TelemetryErrors(),
        np.random.default_rng(0),
        click_sigma_px=0.01,
        length_sigma_frac=1e-5,
        lens=lens,
    )
    error_pct = 100.0 * abs(base.height_error_m) / base.true_height_m
    if max_error_pct is not None:
        assert error_pct < max_error_pct, error_pct
    else:
        assert error_pct > 0.25, error_pct  # measured: 0.37 % (the lines lie near the centre)


def test_the_targets_count_the_cells_that_meet_them():
    def row(cell, mae, bias, within):
        summary = {
            "mae_kmh": mae,
            "p95_abs_kmh": 2.0,
            "bias_pct": bias,
            "tickets": {"ticket_error": {"within_tolerance": within}},
        }
        return BudgetRow(cell, "base", 1, 0, summary)

    rows = [row("a", 0.5, 0.2, 1.0), row("b", 1.4, -1.5, 0.99)]
    (got,) = target_rows(rows)
    assert got[:2] == ["base", "2"]
    assert got[2].startswith("1/2 (worst 1.4, b)") and got[3].startswith("2/2")
    assert got[4].startswith("1/2 (worst 1.5, b)") and got[5].startswith("1/2 (worst 0.99, b)")
    assert "lrf" in ARMS


def test_why_tickets_were_not_enforceable_is_counted_per_arm():
    def run(arm, *statuses):
        violations = [{"status": st, "status_reason": why} for st, why in statuses]
        return {"arm": arm, "tickets": {"vehicles": {}, "violations": violations}}

    held = "held for review: scale check suspect: 1.20 +- 0.04 from 15 vehicles"
    runs = [
        run(
            "base",
            ("enforceable", ""),
            ("not_enforceable", held),
            ("not_enforceable", "within the tolerance: x"),
        ),
        run("base", ("not_enforceable", held)),
        run("lrf", ("enforceable", "")),
        {"arm": "site", "tickets": None},  # a failed run: nothing counted
    ]
    assert why_held(runs, ["base", "lrf", "site"]).splitlines() == [
        "base: 4 violations, 1 enforceable; not: held for review: scale check suspect 2, within the tolerance 1",
        "lrf: 1 violations, 1 enforceable; not: none",
        "site: 0 violations, 0 enforceable; not: none",
    ]


def test_the_scale_checks_at_the_flights_end_are_counted_per_arm():
    shape = (
        "the cars' boxes are not shaped like cars: their length and width disagree by what a margin +9.7 px"
    )
    runs = [
        {"arm": "base", "scale_check": {"status": "unverified", "reason": shape}},
        {"arm": "base", "scale_check": {"status": "unverified", "reason": shape.replace("9.7", "4.1")}},
        {"arm": "base", "scale_check": {"status": "ok", "reason": ""}},
        {"arm": "base", "scale_check": {"status": "suspect", "reason": "the cars measure 1.12 times (x)"}},
        {"arm": "lrf"},  # run before the check was recorded
    ]
    assert checks_at_end(runs, ["base", "lrf"]).splitlines() == [
        "base: ok 1, suspect 1, unverified 2; not ok: the cars' boxes are not shaped like cars (2); "
        "the cars measure 1.12 times (1)",
        "lrf: not recorded 1",
    ]


def test_on_its_own_source_an_arm_s_table_leaves_out_the_frames_before_it(tmp_path):
    """``table --on-source``: the laser arm's frames measured on the take-off altitude before its third
    reading (a road 10 % off) are left out; the frames on the laser's scale are what it is worth."""
    folder = tmp_path / "runs" / "prior" / "lrf"
    folder.mkdir(parents=True)
    speed = {"frame": list(range(10)), "gt_id": [1] * 10, "gt_kmh": [50.0] * 10, "sigma_kmh": [1.0] * 10,
             "pred_kmh": [55.0] * 5 + [50.5] * 5, "scale_source": ["flight"] * 5 + ["lrf"] * 5}  # fmt: skip
    record = {"flight": "alt30_pitch60_drift", "scenario": "prior", "arm": "lrf", "status": "ok",
              "speed": speed, "tickets": None, "scale": []}  # fmt: skip
    (folder / "alt30_pitch60_drift.json").write_text(json.dumps(record))

    def cell_row(table):
        return next(line.split() for line in table.splitlines() if line.startswith("alt30_pitch60_drift"))

    every, own = cell_row(render_table(tmp_path)), cell_row(render_table(tmp_path, own_source=True))
    assert every[3:5] == ["10", "2.75"] and own[3:5] == ["5", "0.50"]
