"""The error budget (eval.error_budget, eval.error_budget_table): its figures on records of known
errors, and a tiny grid end to end (the small simulated flight, two scenarios, three arms: the
detector runs once)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from eval.error_budget import (
    SCENARIOS,
    build_grid,
    main,
    on_source,
    parse_names,
    render,
    run_grid,
    source_flights,
)
from eval.error_budget_table import budget_rows, format_rows, summarize_runs
from eval.metrics.tickets import TicketRecord, TicketSamples, VehicleCounts


def _ticket(
    seq: str, ticket: float, true: float, sigma: float = 1.0, status: str = "enforceable"
) -> TicketRecord:
    return TicketRecord(seq, 1, 1, status, 50.0, ticket, sigma, 1.645, 3.0, ticket, true, 0.0, true, true)


def _run(name: str, scale: float, sigma_frac: float, *, arm: str = "none", scenario: str = "road+8") -> dict:
    """A flight whose speeds (and its one ticket) are all ``scale`` times the truth, each with a sigma of
    ``sigma_frac``."""
    gt = np.array([40.0, 50.0, 60.0, 3.0])
    tickets = TicketSamples(
        (_ticket(name, 60.0 * scale, 60.0, sigma=60.0 * scale * sigma_frac),),
        VehicleCounts(vehicles=4, at_or_below_limit=3),
    )
    return {
        "flight": name,
        "scenario": scenario,
        "arm": arm,
        "status": "ok",
        "speed": {
            "gt_id": [1, 2, 3, 4],
            "gt_kmh": gt.tolist(),
            "pred_kmh": (gt * scale).tolist(),
            "sigma_kmh": (gt * scale * sigma_frac).tolist(),
        },
        "tickets": tickets.to_json(),
        "altitude_m": 60.0,
        "pitch_deg": -90.0,
        "scale": [
            {
                "sigma_pct": 100 * sigma_frac,
                "height_above_road_m": 60.0 * scale,  # straight down: the height's error is the speed's
                "height_sigma_m": 60.0 * sigma_frac,
                "pitch_deg": -90.0,
                "pitch_sigma_deg": 1.0,
            }
        ],
        "detection_cache": {"mode": "replay", "size_mismatch_frames": 2},
        "arm_record": {"base": {"height_error_m": 0.6, "true_height_m": 60.0}}
        if arm == "base"
        else {"arm": arm},
    }


def test_the_figures_of_flights_with_known_scale_errors():
    runs = [_run("a", 1.10, 0.08), _run("b", 1.05, 0.08)]  # 10 % and 5 % high, sigma 8 %
    s = summarize_runs(runs)
    assert s["frames"] == 8
    errors = np.abs(np.array([40.0, 50.0, 60.0, 3.0]))
    assert s["mae_kmh"] == pytest.approx(np.mean(np.concatenate([0.10 * errors, 0.05 * errors])))
    assert s["bias_pct"] == pytest.approx(7.5)  # 5.0 km/h of truth and below left out
    assert s["within_1sigma"] == pytest.approx(0.5)  # flight b within, flight a not
    assert s["within_1sigma_90"] == [0.0, 1.0]  # two flights: the interval is all there is
    assert s["flights_within_1sigma"] == [1, 2]
    assert s["scale_sigma_pct"] == pytest.approx(8.0)
    t = s["tickets"]
    assert t["with_ticket_speed"] == 2 and t["bias_pct"] == pytest.approx(7.5)
    assert t["ticket_error"]["within_tolerance"] == 0.5  # 6 and 3 km/h off, the tolerance 3 km/h
    assert t["wrong_tickets"] == 0 and t["at_or_below_limit"] == 6
    assert s["size_mismatch_frames"] == 4 and math.isnan(s["base_height_error_pct"])
    assert summarize_runs([_run("c", 1.0, 0.01, arm="base")])["base_height_error_pct"] == pytest.approx(1.0)


def _scale(height: float, height_sigma: float, pitch: float, pitch_sigma: float, corr: float = 0.0) -> dict:
    reference = {"sigma_m": height_sigma, "height_pitch_corr": corr} if corr else None
    return {
        "height_above_road_m": height,
        "height_sigma_m": height_sigma,
        "pitch_deg": pitch,
        "pitch_sigma_deg": pitch_sigma,
        "reference": reference,
    }


# at -45 deg a degree of pitch stretches a vehicle moving along the image's vertical by 2 cot(45) deg
ALONG_45 = 2.0 * math.pi / 180.0


@pytest.mark.parametrize(
    ("truth", "scales", "z"),
    [
        ((60.0, -90.0), [_scale(61.2, 1.2, -90.0, 1.4)], 0.02 / (1.2 / 61.2)),  # straight down: the height's
        # the median of the flight's violations'
        ((60.0, -90.0), [_scale(61.2, 1.2, -90.0, 1.4), _scale(57.6, 1.2, -90.0, 1.4)], (1.02 - 1.92) / 2),
        # -45 deg, 1 deg steeper than true: -3.5 % from the pitch over 1.41 deg's 4.9 %
        (
            (60.0, -45.0),
            [_scale(60.0, 0.5, -46.0, 1.41)],
            -ALONG_45 / math.hypot(0.5 / 60.0, 1.41 * ALONG_45),
        ),
        # a measured base: 1.2 m high and 1 deg steeper, solved together (corr -0.95): small error and
        # small sigma along the lines' direction
        (
            (60.0, -45.0),
            [_scale(61.2, 1.2, -46.0, 0.7, corr=-0.95)],
            (0.02 - ALONG_45)
            / math.sqrt((1.2 / 61.2) ** 2 + (0.7 * ALONG_45) ** 2 - 2 * 0.95 * 1.2 * 0.7 * ALONG_45 / 61.2),
        ),
        # the laser's, moved by the traffic: the covariance it records, not its reference's correlation
        # times the reference's own (wider) height sigma, which would cancel the two terms to nothing
        (
            (60.0, -45.0),
            [
                _scale(60.5, 0.5, -45.5, 0.5)
                | {"height_pitch_cov": -0.24, "reference": {"sigma_m": 1.4, "height_pitch_corr": -0.99}}
            ],
            (0.5 / 60.5 - 0.5 * ALONG_45)
            / math.sqrt((0.5 / 60.5) ** 2 + (0.5 * ALONG_45) ** 2 - 2 * 0.24 * ALONG_45 / 60.5),
        ),
        ((None, -45.0), [_scale(60.0, 0.5, -46.0, 1.41)], None),  # no truth: not judged
        ((60.0, -45.0), [{"sigma_pct": 2.0}], None),  # a scale without its height and pitch
    ],
)
def test_a_flight_is_judged_by_its_scale_error_at_the_image_s_centre(truth, scales, z):
    run = _run("f", 1.0, 0.02) | {"altitude_m": truth[0], "pitch_deg": truth[1], "scale": scales}
    if z is None:
        assert summarize_runs([run])["flights_within_1sigma"] == [0, 0]
        return
    from eval.error_budget_table import _flight_z

    assert _flight_z(run) == pytest.approx(z, rel=0.02)
    assert summarize_runs([run])["flights_within_1sigma"] == [int(abs(z) <= 1.0), 1]


def test_rows_follow_the_grid_and_count_failures():
    runs = [
        _run("a", 1.0, 0.02, scenario="exact", arm="site"),
        _run("a", 1.1, 0.08, scenario="road+8"),
        _run("a", 1.0, 0.02, scenario="exact"),
        {"flight": "b", "scenario": "exact", "arm": "none", "status": "failed", "error": "arm: no road"},
    ]
    rows = budget_rows(runs, ["exact", "road+8"], ["none", "site"])
    assert [(r.scenario, r.arm, r.flights, r.failed) for r in rows] == [
        ("exact", "none", 1, 1),
        ("exact", "site", 1, 0),
        ("road+8", "none", 1, 0),
    ]
    text = format_rows(rows, markdown=True)
    assert text.splitlines()[0].startswith("| scenario | arm | flights | frames | MAE km/h | bias %")
    assert "| exact | none | 1 (1 failed) | 4 |" in text
    assert "| road+8 | none | 1 | 4 | " in text and "| +10.00 |" in text


def test_names_sources_and_scenarios(small_flight_dir, tmp_path):
    assert parse_names(None, ["a", "b"], ["a"], "arms") == ["a"]
    assert parse_names("b, a", ["a", "b"], ["a"], "arms") == ["b", "a"]
    with pytest.raises(SystemExit, match="unknown arms"):
        parse_names("c", ["a", "b"], ["a"], "arms")
    assert source_flights([small_flight_dir]) == [small_flight_dir]
    assert source_flights([small_flight_dir.parent]) == [small_flight_dir]
    with pytest.raises(SystemExit):
        source_flights([tmp_path / "nothing"])
    prior = SCENARIOS["prior"]
    assert prior.errors_for(0, "f") == prior.errors_for(0, "f") != prior.errors_for(0, "g")
    assert SCENARIOS["road+8"].errors_for(0, "f").road_level_m == 8.0
    assert "N(0, 5 m)" in prior.describe()


def test_a_tiny_grid_end_to_end(small_flight_dir, tmp_path, capsys):
    out = tmp_path / "budget"
    arms = ["none", "site", "base", "terrain", "terrain-glo30"]
    jobs = build_grid([small_flight_dir], out, ["exact", "road+8"], arms, seed=1)
    assert len(jobs) == 10 and [j.record for j in jobs] == [True] + [False] * 9
    run_grid(jobs, out / "cache", max_frames=60)
    assert len([p for p in (out / "cache").iterdir() if not p.name.startswith(".")]) == 1  # detected once
    records = {
        (r["scenario"], r["arm"]): r
        for r in (json.loads(p.read_text()) for p in (out / "runs").rglob("*.json"))
    }
    assert all(r["status"] == "ok" for r in records.values())
    assert records["exact", "none"]["detection_cache"]["mode"] == "record"
    assert {records[k]["detection_cache"]["mode"] for k in records if k != ("exact", "none")} == {"replay"}
    rows = {(r.scenario, r.arm): r.summary for r in budget_rows(records.values())}
    exact = rows["exact", "none"]["bias_pct"]
    assert rows["road+8", "none"]["bias_pct"] - exact == pytest.approx(
        100 * 8 / 60, abs=1.5
    )  # 68 m read at 60 m
    assert rows["road+8", "site"]["bias_pct"] == pytest.approx(exact, abs=0.05)  # the site value takes it off
    assert abs(rows["road+8", "base"]["bias_pct"] - exact) < 1.5
    assert abs(records["road+8", "base"]["arm_record"]["base"]["height_z"]) < 3.0  # within its sigma
    assert rows["road+8", "base"]["base_height_error_pct"] < 3.0  # 640x360: a pixel is 0.2 m here
    # a terrain model of the site: a lidar DTM with the take-off point on it takes the 8 m off; a 30 m
    # model (2 m, ellipsoidal heights) with the absolute altitude (above sea level, through EGM96)
    # takes it off to the model's error (a datum not converted would leave 22 m: -37 % at 60 m)
    for arm, within in (("terrain", 0.6), ("terrain-glo30", 6.0)):
        assert set(records["road+8", arm]["speed"]["scale_source"]) == {"terrain"}
        assert abs(rows["road+8", arm]["bias_pct"] - exact) < within, arm
    assert main(["table", str(out), "--markdown"]) == 0
    text = capsys.readouterr().out
    assert "| road+8 | base |" in text and "road+8: road +8 m above take-off" in text
    assert render(tmp_path / "empty").startswith("no run records")


def test_a_run_on_one_scale_source_keeps_its_speeds_and_tickets_only() -> None:

    run = {
        "speed": {
            "gt_kmh": [50.0, 60.0, 70.0],
            "pred_kmh": [56.0, 60.1, 70.2],
            "scale_source": ["flight", "lrf", "lrf"],
        },
        "tickets": {"vehicles": {}, "violations": [{"scale_source": "flight"}, {"scale_source": "lrf"}]},
        "scale": [{"source": "flight"}, {"source": "lrf"}],
    }
    got = on_source(run, "lrf")
    assert got["speed"] == {"gt_kmh": [60.0, 70.0], "pred_kmh": [60.1, 70.2], "scale_source": ["lrf", "lrf"]}
    assert got["tickets"]["violations"] == [{"scale_source": "lrf"}] and got["scale"] == [{"source": "lrf"}]
    assert on_source(run, "site")["speed"]["gt_kmh"] == [] and run["speed"]["gt_kmh"] == [50.0, 60.0, 70.0]
