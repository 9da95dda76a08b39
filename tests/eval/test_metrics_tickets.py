"""Ticket metrics (eval.metrics.tickets) on hand-made truth and violations: wrong, within-tolerance
and unmatched tickets, missed clear speeders, the exact upper bound, the lower-bound rule offline."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from eval.groundtruth import GroundTruth, GtSpeeds
from eval.metrics import (
    PredTracks,
    TicketRules,
    TicketSamples,
    prepare_sequence,
    summarize_tickets,
    ticket_samples,
)
from eval.metrics.tickets import (
    TicketRecord,
    VehicleCounts,
    _VehicleTruth,
    binomial_upper,
    clear_speeder,
    not_enforceable_why,
    reason_kind,
    vehicle_of,
)
from pipelines.serialize import to_jsonable
from pipelines.types import MeasuringBase, Violation

FPS = 30.0
N_FRAMES = 60  # 2 s
RULES = TicketRules(speed_limit_kmh=50.0)

# gt id -> true speed per frame (km/h): the scene of most tests below
SPEEDS = {
    1: np.full(N_FRAMES, 48.0),  # under the limit, ticketed: a wrong ticket
    2: np.full(N_FRAMES, 60.0),  # clear speeder, ticketed within the tolerance
    3: np.full(N_FRAMES, 52.0),  # over the limit, within its tolerance: may be ticketed
    4: np.full(N_FRAMES, 65.0),  # clear speeder, never ticketed: missed
    5: np.full(N_FRAMES, 45.0),  # under the limit, a violation that is not enforceable
    6: np.linspace(55.0, 65.0, N_FRAMES),  # accelerating: mean 60 over the whole flight
}


def _scene() -> tuple[GroundTruth, PredTracks, GtSpeeds]:
    """Every vehicle in every frame in a row of its own; each tracked perfectly as 100 + its id."""
    frames, ids, boxes, speeds = [], [], [], []
    for f in range(1, N_FRAMES + 1):
        for gid, v in SPEEDS.items():
            frames.append(f)
            ids.append(gid)
            boxes.append([2.0 * f, 40.0 * gid, 2.0 * f + 30, 40.0 * gid + 20])
            speeds.append(v[f - 1])
    n = len(frames)
    f, i, b = np.array(frames), np.array(ids), np.array(boxes)
    gt = GroundTruth(f, i, b, np.full(n, "car", dtype=object), np.ones(n), np.zeros(n, bool))
    pred = PredTracks(f, i + 100, b, np.full(n, 50.0))
    return gt, pred, GtSpeeds(f, i, np.array(speeds), (f - 1) / FPS)


def _violation(
    track: int,
    ticket: float | None,
    status: str = "enforceable",
    sigma: float = 1.0,
    peak: float | None = None,
) -> Violation:
    base = MeasuringBase(0.0, (N_FRAMES - 1) / FPS, 1, N_FRAMES, 30.0, N_FRAMES) if ticket else None
    peak = (ticket or 55.0) + 2.0 if peak is None else peak
    return Violation(
        track, "global", 50.0, peak, peak - 1, sigma, 1, N_FRAMES, 0.0, (N_FRAMES - 1) / FPS,
        ticket_speed_kmh=ticket, ticket_sigma_kmh=sigma if ticket else None,
        tolerance_kmh=3.0 if ticket else None, confidence_k=1.645 if ticket else None, base=base, status=status,
    )  # fmt: skip


PREDICTED = [
    _violation(101, 54.0),  # vehicle 1 (48 km/h): wrong
    _violation(102, 61.0),  # vehicle 2 (60): error +1, within the tolerance
    _violation(103, 56.0),  # vehicle 3 (52): error +4, outside the tolerance, not wrong
    _violation(105, None, status="not_enforceable"),  # vehicle 5: no base, not a ticket
    _violation(106, 60.5),  # vehicle 6 (accelerating, mean 60): error +0.5
    _violation(999, 70.0),  # a track matched to no vehicle: an unmatched ticket
]


def _samples(predicted=PREDICTED, rules=RULES, visible=None) -> TicketSamples:
    gt, pred, speeds = _scene()
    matched = prepare_sequence(gt, pred, N_FRAMES)
    return ticket_samples("s", predicted, matched, pred, speeds, rules, visible=visible, fps=FPS)


def test_scene_counts():
    s = _samples()
    assert s.vehicles == VehicleCounts(
        vehicles=6, at_or_below_limit=2, wrongly_ticketed=1, clear_speeders=3, missed=1
    )
    by_track = {r.track_id: r for r in s.records}
    assert [by_track[t].gt_id for t in (101, 102, 103, 105, 106, 999)] == [1, 2, 3, 5, 6, None]
    assert by_track[106].true_kmh == pytest.approx(60.0) and by_track[106].accelerating
    assert by_track[101].wrong and not by_track[103].wrong and not by_track[105].wrong


def test_scene_summary():
    t = summarize_tickets(_samples())
    assert (t["violations"], t["with_ticket_speed"], t["enforceable"], t["unmatched_tickets"]) == (6, 5, 5, 1)
    assert (t["at_or_below_limit"], t["wrong_tickets"], t["wrongly_ticketed_vehicles"]) == (2, 1, 1)
    assert t["wrong_per_1000"] == pytest.approx(500.0)
    assert t["wrong_per_1000_upper95"] == pytest.approx(1000 * math.sqrt(0.95))  # Beta(2, 1): x^2
    assert t["wrong_share"] == pytest.approx(1 / 4)  # of the matched enforceable tickets
    assert (t["clear_speeders"], t["missed_violations"], t["missed_share"]) == (3, 1, pytest.approx(1 / 3))
    e = t["ticket_error"]
    assert e["n"] == 4 and e["median_kmh"] == pytest.approx(2.5)  # errors 6, 1, 4, 0.5
    assert e["max_abs_kmh"] == pytest.approx(6.0) and e["median_abs_kmh"] == pytest.approx(2.5)
    assert e["within_tolerance"] == pytest.approx(0.5)  # 1 and 0.5 are within 3 km/h
    assert e["within_1sigma"] == pytest.approx(0.5) and e["within_1645sigma"] == pytest.approx(0.5)
    assert t["ticket_error_accelerating"]["n"] == 1
    assert t["ticket_error_accelerating"]["median_kmh"] == pytest.approx(0.5)
    assert t["ticket_error_steady"]["n"] == 3
    # the peak (ticket + 2 here) against the highest true speed: vehicle 6 peaked at 65, not 60
    assert t["peak_error"]["max_kmh"] == pytest.approx(8.0)
    assert t["peak_error"]["median_kmh"] == pytest.approx(np.median([8.0, 3.0, 6.0, -2.5]))
    # lower bound (speed - 1.645 sigma > 50): all five tickets; vehicle 1's true 48 km/h is wrong
    assert t["lower_bound"] == {"tickets": 5, "unmatched": 1, "wrong": 1, "wrong_share": pytest.approx(0.25)}


@pytest.mark.parametrize(
    ("ticket", "sigma", "lower_bound", "wrong"),
    [
        (54.0, 1.0, True, True),  # 54 - 1.645 > 50, and the driver did 48
        (54.0, 2.5, False, False),  # 54 - 4.1 is not above the limit: no lower-bound ticket
        (51.7, 1.0, True, True),
    ],
)
def test_lower_bound_rule_offline(ticket, sigma, lower_bound, wrong):
    t = summarize_tickets(_samples([_violation(101, ticket, sigma=sigma)]))["lower_bound"]
    assert t["tickets"] == int(lower_bound) and t["wrong"] == int(wrong)


@pytest.mark.parametrize(
    ("status", "gt_id", "true_max", "wrong"),
    [
        ("enforceable", 1, 50.0, True),  # exactly at the limit: not speeding
        ("enforceable", 1, 50.01, False),  # over the limit, if within the tolerance: may be ticketed
        ("not_enforceable", 1, 40.0, False),  # no ticket
        ("enforceable", None, 40.0, False),  # no vehicle: an unmatched ticket instead
    ],
)
def test_wrong_ticket(status, gt_id, true_max, wrong):
    nan = float("nan")
    r = TicketRecord("s", 1, gt_id, status, 50.0, 54.0, 1.0, 1.645, 3.0, 56.0, 48.0, 0.0, true_max, nan)
    assert r.wrong is wrong


def test_a_clear_speeder_seen_for_less_than_a_base_is_not_missed():
    visible = {(f, g) for f in range(1, N_FRAMES + 1) for g in SPEEDS if g != 4 or f <= 20}
    s = _samples(visible=visible)
    assert s.vehicles == VehicleCounts(
        vehicles=6, at_or_below_limit=2, wrongly_ticketed=1, clear_speeders=2, missed=0
    )


@pytest.mark.parametrize(
    ("k", "n", "upper"),
    [
        (0, 1, 0.95),
        (0, 3000, 1 - 0.05 ** (1 / 3000)),  # about 3 / n: the rule of three
        (1, 2, math.sqrt(0.95)),
        (5, 5, 1.0),
    ],
)
def test_binomial_upper(k, n, upper):
    assert binomial_upper(k, n) == pytest.approx(upper, rel=1e-6)


@pytest.mark.parametrize(("k", "n"), [(0, 500), (3, 1000), (12, 1560)])
def test_binomial_upper_is_where_k_or_fewer_events_become_5_percent_likely(k, n):
    from scipy.stats import binom

    assert binom.cdf(k, n, binomial_upper(k, n)) == pytest.approx(0.05, rel=1e-6)


def test_binomial_upper_of_nothing():
    assert math.isnan(binomial_upper(0, 0))


@pytest.mark.parametrize(
    ("matches", "base", "expected"),
    [
        ({7: [(f, 1) for f in range(1, 31)] + [(f, 2) for f in range(31, 61)]}, (35, 55), 2),  # by the base
        ({7: [(f, 1) for f in range(1, 41)] + [(f, 2) for f in range(41, 61)]}, None, 1),  # the span's most
        ({7: [(f, 1) for f in range(1, 21)]}, (35, 55), 1),  # none in the base: the span
        ({7: [(f, 2) for f in range(1, 11)] + [(f, 1) for f in range(11, 21)]}, None, 1),  # a tie: lower id
        ({8: [(f, 1) for f in range(1, 61)]}, (35, 55), None),  # its track never matched
    ],
)
def test_vehicle_of(matches, base, expected):
    b = None if base is None else MeasuringBase(0.0, 1.0, base[0], base[1], 20.0, 20)
    v = Violation(7, "global", 50.0, 60, 58, 1, 1, 60, 0.0, 2.0, base=b)
    assert vehicle_of(v, matches) == expected


def _truth(speed: float, frames: int, gap_at: int | None = None) -> _VehicleTruth:
    f = np.arange(1, frames + 1)
    visible = np.ones(frames, bool)
    if gap_at is not None:
        visible[gap_at] = False
    return _VehicleTruth(f, (f - 1) / FPS, np.full(frames, speed), visible)


@pytest.mark.parametrize(
    ("speed", "frames", "gap_at", "clear"),
    [
        (58.0, 31, None, True),  # limit 50 + tolerance 3 + 5, for exactly 1 s (16 m)
        (57.9, 61, None, False),  # never at limit + tolerance + 5
        (70.0, 30, None, False),  # 0.97 s: shorter than a base
        (58.0, 61, 30, False),  # seen 2 s in all, never 1 s on end (a frame unseen)
        (80.0, 63, 31, True),  # 1 s on end before the gap
    ],
)
def test_clear_speeder(speed, frames, gap_at, clear):
    assert clear_speeder(_truth(speed, frames, gap_at), RULES) is clear


def test_clear_speeder_needs_the_distance_too():
    assert not clear_speeder(_truth(58.0, 31), TicketRules(50.0, base_min_s=1.0, base_min_m=20.0))


def test_json_round_trip_and_concat():
    s = _samples()
    back = TicketSamples.from_json(json.loads(json.dumps(to_jsonable(s.to_json(), float_digits=6))))
    one, two = summarize_tickets(back), summarize_tickets(TicketSamples.concat([s, back]))
    assert back.vehicles == s.vehicles and len(back.records) == len(s.records)
    assert json.dumps(to_jsonable(one, float_digits=4)) == json.dumps(
        to_jsonable(summarize_tickets(s), float_digits=4)
    )
    assert back.records[3].gt_id == 5 and math.isnan(back.records[3].ticket_kmh)
    assert two["wrong_tickets"] == 2 and two["at_or_below_limit"] == 4
    assert two["wrong_per_1000"] == pytest.approx(one["wrong_per_1000"])
    assert two["wrong_per_1000_upper95"] < one["wrong_per_1000_upper95"]  # more vehicles, tighter bound
    assert two["ticket_error"]["median_kmh"] == pytest.approx(one["ticket_error"]["median_kmh"])


HELD = "held for review: scale check suspect: 1.201 +- 0.043 from 15 vehicles (the cars measure 1.20 times)"


@pytest.mark.parametrize(
    "reason, kind",
    [
        ("", ""),
        ("within the tolerance: 52.1 - 3.0 km/h is not above the limit 50", "within the tolerance"),
        ("measuring base too short: 0.66 s, 10.8 m, 18 positions", "measuring base too short"),
        (HELD, "held for review: scale check suspect"),
        ("the limits changed during the episode", "the limits changed during the episode"),
    ],
)
def test_reason_kind(reason, kind):
    assert reason_kind(reason) == kind


def test_why_a_violation_was_not_enforceable_is_kept_and_counted():
    """The record keeps the violation's reason through JSON; the summary counts the kinds, most first."""
    reasons = ["within the tolerance: 50.2 - 3.0", HELD, "within the tolerance: 51.0 - 3.0", ""]
    predicted = [
        dataclasses.replace(_violation(102 + i, 55.0, status="not_enforceable"), status_reason=why)
        for i, why in enumerate(reasons)
    ] + [_violation(101, 54.0)]
    s = _samples(predicted)
    back = TicketSamples.from_json(json.loads(json.dumps(to_jsonable(s.to_json(), float_digits=6))))
    assert [r.status_reason for r in back.records[:4]] == reasons
    assert summarize_tickets(back)["not_enforceable"] == {
        "within the tolerance": 2,
        "held for review: scale check suspect": 1,
        "(no reason recorded)": 1,
    }
    assert not_enforceable_why(r for r in back.records if r.enforceable) == {}


def test_no_violations_still_counts_vehicles():
    t = summarize_tickets(_samples([]))
    assert (t["violations"], t["wrong_tickets"], t["at_or_below_limit"], t["missed_violations"]) == (
        0,
        0,
        2,
        3,
    )
    assert t["ticket_error"] == {"n": 0} and math.isnan(t["lower_bound"]["wrong_share"])
    assert t["wrong_per_1000_upper95"] == pytest.approx(1000 * (1 - 0.05**0.5))


@pytest.mark.parametrize(
    "bbox, snapshot_frame, expected",
    [
        ((20.0, 160.0, 60.0, 180.0), 10, 4),  # vehicle 4's box at frame 10 (20, 160, 50, 180), boxed larger
        ((20.0, 160.0, 60.0, 180.0), None, None),  # no snapshot frame: nothing to look under
        ((20.0, 500.0, 60.0, 520.0), 10, None),  # nothing under it
        ((20.0, 150.0, 120.0, 200.0), 10, None),  # IoU 0.12 with vehicle 4: too loose
    ],
)
def test_an_unmatched_track_is_the_vehicle_under_its_snapshot(bbox, snapshot_frame, expected):
    """A track the IoU-0.5 matching never matched (a motorcycle boxed larger than its gt box) is
    given the vehicle under its box on the snapshot's frame at IoU >= 0.3."""
    gt, pred, speeds = _scene()
    base = MeasuringBase(0.0, 1.0, 1, 31, 20.0, 31, snapshot_frame=snapshot_frame, snapshot_time_s=None)
    v = dataclasses.replace(_violation(999, 66.0), bbox_xyxy=bbox, base=base)
    matched = prepare_sequence(gt, pred, N_FRAMES)
    (record,) = ticket_samples("s", [v], matched, pred, speeds, RULES, fps=FPS, gt=gt).records
    assert record.gt_id == expected
