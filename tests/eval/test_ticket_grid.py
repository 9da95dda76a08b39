"""The ticket grid table (eval.ticket_grid): cells from flight names, records pooled per cell and
over the grid; and the ticket metrics of a real simulated flight through ``airpatrol eval``."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from eval.metrics.tickets import TicketRecord, TicketSamples, VehicleCounts
from eval.ticket_grid import flights, format_rows, main, render, ticket_rows

NAN = float("nan")


def _record(seq: str, gt_id: int | None, ticket: float, true: float, true_max: float, change: float = 0.0):
    return TicketRecord(
        seq,
        1,
        gt_id,
        "enforceable",
        50.0,
        ticket,
        1.0,
        1.645,
        3.0,
        ticket + 2,
        true,
        change,
        true_max,
        true_max,
    )


def _seq(name: str, altitude: float, pitch: float, records, counts: VehicleCounts, variant="base") -> dict:
    return {
        "sequence": name,
        "variant": variant,
        "altitude_m": altitude,
        "pitch_deg": pitch,
        "ticket_records": TicketSamples(tuple(records), counts).to_json(),
    }


METRICS = {
    "variants": [{"name": "base", "oracle": False}],
    "sequences": [
        _seq(
            "alt100_pitch45_drift_accel_s03",
            100.0,
            -45.0,
            [_record("a", 1, 60.5, 60.0, 61.0, change=2.0)],
            VehicleCounts(20, 9, 0, 4, 1),
        ),
        _seq(
            "alt100_pitch45_hover_steady_s00",
            100.0,
            -45.0,
            [_record("b", 1, 54.0, 48.0, 48.0), _record("b", None, 70.0, NAN, NAN)],
            VehicleCounts(20, 11, 1, 4, 0),
        ),
        _seq(
            "alt30_pitch90_hover_steady_s00",
            30.0,
            -90.0,
            [_record("c", 2, 61.0, 60.0, 60.0)],
            VehicleCounts(18, 10, 0, 3, 0),
        ),
        {"sequence": "no_truth", "variant": "base", "ticket_records": None},
    ],
}


def test_flights_read_names_and_records():
    fl = {f.sequence: f for f in flights(METRICS)}
    assert set(fl) == {
        "alt100_pitch45_drift_accel_s03",
        "alt100_pitch45_hover_steady_s00",
        "alt30_pitch90_hover_steady_s00",
    }
    f = fl["alt100_pitch45_drift_accel_s03"]
    assert (f.motion, f.traffic, len(f.samples.records)) == ("drift", "accelerating", 1)


def test_rows_pool_cells_then_the_grid():
    rows = ticket_rows(METRICS)
    assert [(r.cell, r.flights) for r in rows] == [
        ("30 m, -90", 1),
        ("100 m, -45", 2),
        ("pooled: all", 3),
        ("pooled: steady", 2),
        ("pooled: accelerating", 1),
    ]
    cell = rows[1].summary
    assert (cell["at_or_below_limit"], cell["wrong_tickets"], cell["unmatched_tickets"]) == (20, 1, 1)
    assert cell["wrong_per_1000"] == pytest.approx(50.0)
    assert (cell["clear_speeders"], cell["missed_violations"]) == (8, 1)
    assert cell["ticket_error"]["median_kmh"] == pytest.approx((0.5 + 6.0) / 2)
    assert cell["ticket_error_accelerating"]["median_kmh"] == pytest.approx(0.5)
    pooled = rows[2].summary
    assert (pooled["at_or_below_limit"], pooled["wrong_tickets"], pooled["clear_speeders"]) == (30, 1, 11)


@pytest.mark.parametrize("markdown", [False, True])
def test_table(markdown):
    text = format_rows(ticket_rows(METRICS), markdown=markdown)
    lines = text.splitlines()
    assert len(lines) == (7 if markdown else 6)
    assert "wrong" in lines[0] and "peak err med/max" in lines[0]
    row = next(line for line in lines if "100 m, -45" in line)
    assert "50.00" in row and "+3.25 / +6.00" in row and "+4.75 / +8.00" in row  # ticket, then peak
    if markdown:
        assert lines[1].startswith("|---")


def test_render_and_main(tmp_path, capsys):
    assert "base: 1 wrong ticket(s) on 30 vehicles" in render(METRICS)
    assert render({"sequences": []}).startswith("no flight with ticket records")
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps(METRICS).replace("NaN", "null"))
    assert main([str(path), "--markdown"]) == 0
    assert "| 100 m, -45 | base | 2 |" in capsys.readouterr().out
    assert main([str(tmp_path / "missing.json")]) == 2


def test_the_pooled_line_says_why_tickets_were_not_enforceable():
    held = dataclasses.replace(
        _record("c", 2, 51.5, 51.0, 51.0),
        status="not_enforceable",
        status_reason="within the tolerance: 51.5 - 3.0",
    )
    metrics = {
        "variants": METRICS["variants"],
        "sequences": [
            _seq("alt60_pitch90_hover_steady_s01", 60.0, -90.0, [held], VehicleCounts(5, 0, 0, 1, 1))
        ],
    }
    assert render(metrics).endswith("over 1 flights; not enforceable: within the tolerance 1")
    assert "not enforceable" not in render(METRICS)  # every ticket of it enforceable


def test_tickets_of_a_simulated_flight_end_to_end(small_flight_dir, tmp_path):
    """`airpatrol eval` (oracle) on the small flight: ticket metrics per sequence and combined, the
    records behind them, the report's table, and the grid's table from its metrics.json."""
    from eval.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    out = tmp_path / "report"
    # the simulator's altitude is the height above the road: the pilot took off on the road (the
    # site source; without it the road's level is unknown and no ticket is enforceable)
    argv = ["eval", str(small_flight_dir), "--oracle", "--takeoff-above-road", "0"]
    args = parser.parse_args([*argv, "--out", str(out), "-q"])
    assert args.func(args) == 0
    data = json.loads((out / "metrics.json").read_text())
    seq = data["sequences"][0]
    t = seq["tickets"]
    assert t["vehicles"] >= 6 and t["at_or_below_limit"] >= 1
    assert t["wrong_tickets"] == 0 and t["unmatched_tickets"] == 0  # the oracle: exact boxes
    assert t["enforceable"] >= 1 and t["ticket_error"]["n"] >= 1
    assert t["ticket_error"]["max_abs_kmh"] < 3.0 and t["ticket_error"]["within_tolerance"] == 1.0
    assert len(seq["ticket_records"]["violations"]) == len(seq["predicted_violations"])
    assert data["combined"]["base"]["tickets"]["wrong_tickets"] == 0
    assert "peak_speed_bias_kmh" in seq["violations"]
    assert "## Tickets" in (out / "report.md").read_text()
    rows = ticket_rows(data)
    assert [r.cell for r in rows] == ["60 m, -90", "pooled: all"]  # the name is no grid cell's: "?"
    assert rows[1].summary["enforceable"] == t["enforceable"]
