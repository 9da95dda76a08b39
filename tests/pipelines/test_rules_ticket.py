"""The violation detector's ticket: measured over a base of the track's ground positions when the
vehicle leaves its zone, never the peak of the per-frame speeds."""

from __future__ import annotations

import math

import numpy as np
import pytest
import supervision as sv

from pipelines.config import RulesConfig, ZoneConfig
from pipelines.rules import GLOBAL_ZONE, ViolationDetector
from pipelines.types import Frame, SpeedEstimate

FPS = 30.0
IMG_W, IMG_H = 320, 240
LEFT_HALF = [(0.0, 0.0), (159.0, 0.0), (159.0, 239.0), (0.0, 239.0)]
SCHOOL = ZoneConfig(name="school", polygon=LEFT_HALF, speed_limit_kmh=30.0)
IN_SCHOOL = (40.0, 100.0, 80.0, 130.0)
OUTSIDE = (220.0, 100.0, 260.0, 130.0)


def frame_at(i: int) -> Frame:
    return Frame(index=i, timestamp_s=2.0 + i / FPS, image=np.full((IMG_H, IMG_W, 3), i % 256, np.uint8))


def drive(
    det: ViolationDetector,
    true_kmh: float,
    frame_kmh,
    n: int,
    *,
    box=OUTSIDE,
    boxes=None,
    trusted=lambda i: True,
    segment=lambda i: 1,
    tid: int = 1,
    gone_after: bool = True,
) -> list:
    """One vehicle at ``true_kmh`` along y, its per-frame speeds ``frame_kmh(i)`` (noise of the
    speed stage), for ``n`` frames; then it is gone (lost) when ``gone_after``."""
    out = []
    for i in range(n):
        t = 2.0 + i / FPS
        e = SpeedEstimate(
            track_id=tid,
            speed_kmh=frame_kmh(i),
            sigma_kmh=1.0,
            n_samples=30,
            window_s=1.0,
            trusted=trusted(i),
            doubt="" if trusted(i) else "box jumped",
            position_m=(0.0, true_kmh / 3.6 * i / FPS),
            position_t=t,
            segment=segment(i),
        )
        b = boxes(i) if boxes else box
        d = sv.Detections(
            xyxy=np.array([b], float), tracker_id=np.array([tid]), data={"class_name": np.array(["car"])}
        )
        out += det.update(frame_at(i), d, {tid: e}, np.array([[0.0, 5.0 + i]]))
    if gone_after:
        for i in range(n, n + int(1.2 * FPS)):
            out += det.update(frame_at(i), sv.Detections.empty(), {})
    return out


def noisy(mean: float, amplitude: float):
    return lambda i: mean + amplitude * np.sin(i / 3.0)


def test_the_ticket_is_the_speed_over_the_base_not_the_peak() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0), scale_sigma_frac=0.02)
    (v,) = drive(det, 60.0, noisy(60.0, 8.0), 90)
    assert v.peak_speed_kmh == pytest.approx(68.0, abs=0.1)  # informative: biased upward
    assert v.ticket_speed_kmh == pytest.approx(60.0, abs=1e-6)
    assert v.ticket_sigma_kmh == pytest.approx(0.02 * 60.0, abs=1e-3)  # exact positions: the scale's share
    assert v.status == "enforceable" and v.status_reason == "" and v.enforceable
    assert v.tolerance_kmh == pytest.approx(3.0) and v.confidence_k == pytest.approx(1.645, abs=1e-3)
    base = v.base
    assert (base.start_frame, base.end_frame, base.n_samples) == (1, 90, 90)  # the whole trusted run
    assert base.distance_m == pytest.approx(60.0 / 3.6 * 89 / FPS)
    assert v.snapshot is not None and v.bbox_xyxy == OUTSIDE
    d = v.to_dict()
    assert d["status"] == "enforceable" and d["base"]["n_samples"] == 90 and d["ticket_speed_kmh"] == 60.0


@pytest.mark.parametrize(
    "true_kmh, status, reason",
    [
        (49.0, None, ""),  # per-frame speeds crossed 50; over its base it drove 49: no violation
        (52.0, "not_enforceable", "within the tolerance"),  # over the limit, not by the tolerance
        (53.5, "enforceable", ""),
    ],
)
def test_near_the_limit(true_kmh: float, status: str | None, reason: str) -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.2))
    got = drive(det, true_kmh, noisy(true_kmh, 4.0), 60)
    if status is None:
        assert got == [] and det.n_cleared == 1 and det.n_emitted == 0
        return
    (v,) = got
    assert v.status == status and reason in v.status_reason
    assert v.ticket_speed_kmh == pytest.approx(true_kmh, abs=1e-6)


def test_the_violation_waits_for_the_vehicle_to_leave_its_zone() -> None:
    """The per-frame episode ends at frame 20 (speeds drop below the limit) but the vehicle stays in
    the zone: it is measured when it is lost, over all 60 frames."""
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.3))
    got = drive(det, 55.0, lambda i: 58.0 if i < 20 else 49.0, 60, gone_after=False)
    assert got == [] and det.open_track_ids == [1]
    (v,) = det.finish()
    assert (v.start_frame, v.end_frame) == (1, 20)  # the per-frame episode
    assert (v.base.start_frame, v.base.end_frame) == (1, 60) and v.ticket_speed_kmh == pytest.approx(55.0)


def test_leaving_the_zone_measures_the_zone_part_only() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=80.0, zones=[SCHOOL]))
    got = drive(
        det, 45.0, noisy(45.0, 2.0), 90, boxes=lambda i: IN_SCHOOL if i < 60 else OUTSIDE, gone_after=False
    )
    (v,) = got  # measured on the frame it left the school zone
    assert v.zone == "school" and v.speed_limit_kmh == 30.0
    assert (v.base.start_frame, v.base.end_frame) == (1, 60)
    assert v.status == "enforceable" and v.ticket_speed_kmh == pytest.approx(45.0)


@pytest.mark.parametrize(
    "trusted, segment, base_frames",
    [
        (lambda i: not 20 <= i < 30, lambda i: 1, (31, 90)),  # the longest trusted run
        (lambda i: True, lambda i: 1 if i < 50 else 2, (1, 50)),  # integration restarted at 50
        (lambda i: i < 20, lambda i: 1, None),  # 0.63 s of trusted track: too short for a base
    ],
)
def test_the_base_is_one_trusted_continuous_run(trusted, segment, base_frames) -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, require_trusted=False))
    (v,) = drive(det, 70.0, noisy(70.0, 3.0), 90, trusted=trusted, segment=segment)
    if base_frames is None:
        assert v.base is None and v.ticket_speed_kmh is None and v.status == "not_enforceable"
        assert "measuring base too short: 0.63 s" in v.status_reason
        assert v.peak_speed_kmh == pytest.approx(73.0, abs=0.1)  # the per-frame figure stays informative
    else:
        assert (v.base.start_frame, v.base.end_frame) == base_frames
        assert v.ticket_speed_kmh == pytest.approx(70.0)


def test_a_too_short_track_is_kept_not_enforceable_with_its_reason() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, min_duration_s=0.3))
    (v,) = drive(det, 80.0, lambda i: 80.0, 20)
    assert v.status == "not_enforceable" and v.base is None
    assert "needs 1 s, 15 m and 5 positions" in v.status_reason


def test_a_limit_changed_during_the_episode_is_never_enforceable() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0))
    drive(det, 70.0, lambda i: 70.0, 60, gone_after=False)
    (v,) = det.set_rules(RulesConfig(speed_limit_kmh=80.0))
    assert v.ticket_speed_kmh == pytest.approx(70.0) and v.speed_limit_kmh == 50.0
    assert v.status == "not_enforceable" and v.status_reason == "the limits changed during the episode"


def test_an_accelerating_vehicle_with_several_bases() -> None:
    """From 50 to 80 km/h over 6 s: with three bases the last (75 km/h mean) is reported, k raised."""
    a = (30.0 / 3.6) / 6.0
    cfg = RulesConfig(speed_limit_kmh=60.0, max_bases=3)
    det = ViolationDetector(cfg, scale_sigma_frac=0.0)
    out = []
    for i in range(181):
        t = i / FPS
        pos = (0.0, 50 / 3.6 * t + a * t * t / 2)
        e = SpeedEstimate(
            1, 50.0 + 30.0 * t / 6.0, 1.0, 30, 1.0, position_m=pos, position_t=2.0 + t, segment=1
        )
        d = sv.Detections(xyxy=np.array([OUTSIDE], float), tracker_id=np.array([1]))
        out += det.update(frame_at(i), d, {1: e})
    (v,) = out + det.finish()
    assert (v.base.index, v.base.of) == (3, 3) and v.ticket_speed_kmh == pytest.approx(75.0, abs=0.1)
    assert v.confidence_k == pytest.approx(2.121, abs=1e-3)


def test_a_zone_has_its_own_tolerance() -> None:
    strict = ZoneConfig(**{**SCHOOL.model_dump(), "tolerance_kmh": 1.5, "tolerance_percent": 0.0})
    det = ViolationDetector(RulesConfig(speed_limit_kmh=80.0, zones=[strict]))
    (v,) = drive(det, 32.0, noisy(32.0, 2.0), 60, box=IN_SCHOOL)
    assert v.zone == "school" and v.tolerance_kmh == pytest.approx(1.5) and v.status == "enforceable"
    det = ViolationDetector(RulesConfig(speed_limit_kmh=80.0, zones=[SCHOOL]))
    (v,) = drive(det, 32.0, noisy(32.0, 2.0), 60, box=IN_SCHOOL)
    assert v.tolerance_kmh == pytest.approx(3.0) and v.status == "not_enforceable"


def test_snapshots_come_from_the_base() -> None:
    """The per-frame peak lies before the base (an untrusted stretch in between): the snapshot is
    from the base's middle, not from the peak."""
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0, require_trusted=False))
    (v,) = drive(det, 60.0, lambda i: 90.0 if i == 5 else 60.0, 100, trusted=lambda i: not 10 <= i < 20)
    assert (v.base.start_frame, v.base.end_frame) == (21, 100)
    mid = (20 + 99) // 2
    assert v.snapshot is not None and abs(int(v.snapshot[0, 0, 0]) - mid) <= 6  # frame i is filled with i
    assert v.base.snapshot_frame == int(v.snapshot[0, 0, 0]) + 1  # the evidence names its frame
    assert v.base.snapshot_time_s == pytest.approx(2.0 + (v.base.snapshot_frame - 1) / FPS)


def test_the_global_zone_is_named() -> None:
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0))
    (v,) = drive(det, 60.0, lambda i: 60.0, 40)
    assert v.zone == GLOBAL_ZONE


@pytest.mark.parametrize(
    ("untrusted", "in_base"),
    [
        (set(), 90),  # the whole run is the base
        (set(range(40, 45)), 45),  # a break: the longer stretch after it is the base (frames 46-90)
    ],
)
def test_the_violation_carries_its_tracks_record(untrusted: set[int], in_base: int) -> None:
    """Every measured position the engine had (its evidence record), with the per-frame speeds and
    the points the ticket's base was measured over."""
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0))
    (v,) = drive(det, 60.0, noisy(60.0, 8.0), 90, trusted=lambda i: i not in untrusted)
    assert len(v.trace) == 90 and [p.frame for p in v.trace] == list(range(1, 91))
    assert [p.speed_kmh for p in v.trace[:3]] == pytest.approx([noisy(60.0, 8.0)(i) for i in range(3)])
    assert all(p.sigma_kmh == 1.0 and p.zone == GLOBAL_ZONE for p in v.trace)
    based = [p for p in v.trace if p.in_base]
    assert len(based) == in_base == v.base.n_samples
    assert (based[0].frame, based[-1].frame) == (v.base.start_frame, v.base.end_frame)
    assert all(p.trusted for p in based) and not any(p.in_base for p in v.trace if not p.trusted)
    assert v.trace[5].ground_xy_m == (0.0, 10.0) and np.isnan(v.trace[5].gsd_m_per_px)  # no projector column


def two_tracks_of_one_van(det: ViolationDetector, part_frames: range, whole_frames: range) -> list:
    """A van boxed twice: track 1 on a part of it that slides along it (its positions read 52 km/h),
    track 2 on the whole van (60 km/h, 2 m ahead on the ground): one vehicle to the rules."""
    out = []
    part_box, whole_box = (230.0, 100.0, 250.0, 115.0), (220.0, 100.0, 260.0, 130.0)
    for i in range(max(part_frames.stop, whole_frames.stop) + int(1.2 * FPS)):
        t = 2.0 + i / FPS
        rows, speeds, gxy = [], {}, []
        for tid, frames, kmh, box, ahead in (
            (1, part_frames, 52.0, part_box, 0.0),
            (2, whole_frames, 60.0, whole_box, 2.0),
        ):
            if i not in frames:
                continue
            y = kmh / 3.6 * i / FPS + ahead
            speeds[tid] = SpeedEstimate(tid, kmh, 1.0, 30, 1.0, position_m=(0.0, y), position_t=t, segment=1)
            rows.append((tid, box))
            gxy.append((0.0, 60.0 / 3.6 * i / FPS + ahead))
        d = sv.Detections(
            xyxy=np.array([b for _, b in rows], float).reshape(-1, 4),
            tracker_id=np.array([tid for tid, _ in rows], dtype=int),
            data={"class_name": np.array(["van"] * len(rows))},
        )
        out += det.update(frame_at(i), d, speeds, np.array(gxy).reshape(-1, 2))
    return out + det.finish()


@pytest.mark.parametrize(
    ("part_frames", "whole_frames", "ticket_kmh", "measured_on"),
    [
        (range(0, 45), range(15, 120), 60.0, 2),  # the whole van followed longer: its run is measured
        (range(0, 90), range(15, 40), 52.0, None),  # the violation's own track's run is the longer
    ],
)
def test_a_vehicle_boxed_twice_is_measured_on_its_longer_run(
    part_frames: range, whole_frames: range, ticket_kmh: float, measured_on: int | None
) -> None:
    """One violation (track 1's), its ticket measured over the longest run of any of its vehicle's
    tracks, chosen by time, not by speed; the base names the track it was measured on."""
    (v,) = two_tracks_of_one_van(
        ViolationDetector(RulesConfig(speed_limit_kmh=50.0)), part_frames, whole_frames
    )
    assert v.track_id == 1 and v.ticket_speed_kmh == pytest.approx(ticket_kmh, abs=1e-6)
    assert v.base.track_id == measured_on and v.to_dict()["base"]["track_id"] == measured_on
    assert v.bbox_xyxy == ((220.0, 100.0, 260.0, 130.0) if measured_on == 2 else (230.0, 100.0, 250.0, 115.0))
    assert v.base.n_samples == len([p for p in v.trace if p.in_base])  # the record is the measured track's


@pytest.mark.parametrize(
    ("young_frames", "status", "base_start"), [(15, "enforceable", 1), (0, "not_enforceable", 16)]
)
def test_a_young_track_s_first_positions_reach_its_base(
    young_frames: int, status: str, base_start: int
) -> None:
    """A vehicle seen for 1.3 s at 60 km/h whose first 15 frames had no speed yet (a young track): its
    first estimate hands in those positions (SpeedEstimate.earlier) and the base starts at its first
    frame, each earlier sample with its own frame's box and no per-frame speed. Without them the run is
    0.83 s, too short for a base."""
    det = ViolationDetector(RulesConfig(speed_limit_kmh=50.0))
    out = []
    for i in range(40 + int(1.2 * FPS)):
        t, y = 2.0 + i / FPS, 60.0 / 3.6 * i / FPS
        if i >= 40:
            out += det.update(frame_at(i), sv.Detections.empty(), {})
            continue
        box = (220.0, 100.0 + i, 260.0, 130.0 + i)
        d = sv.Detections(
            xyxy=np.array([box]), tracker_id=np.array([1]), data={"class_name": np.array(["car"])}
        )
        speeds = {}
        if i >= 15:
            before = tuple((2.0 + j / FPS, 0.0, 60.0 / 3.6 * j / FPS) for j in range(15 - young_frames, 15))
            speeds[1] = SpeedEstimate(
                1,
                60.0,
                1.0,
                30,
                1.0,
                position_m=(0.0, y),
                position_t=t,
                segment=1,
                earlier=before if i == 15 else (),
            )
        out += det.update(frame_at(i), d, speeds, np.array([[0.0, 5.0 + i]]))
    (v,) = out + det.finish()
    assert v.status == status
    first = v.trace[0]
    assert first.frame == base_start and first.bbox_xyxy == (
        220.0,
        100.0 + base_start - 1,
        260.0,
        130.0 + base_start - 1,
    )
    if young_frames:
        assert v.ticket_speed_kmh == pytest.approx(60.0) and (v.base.start_frame, v.base.end_frame) == (1, 40)
        assert all(math.isnan(p.speed_kmh) for p in v.trace[:15]) and v.trace[15].speed_kmh == 60.0
        assert [p.ground_xy_m for p in v.trace[:2]] == [(0.0, 5.0), (0.0, 6.0)]  # each its own frame's
    else:
        assert "measuring base too short" in v.status_reason
