"""Tracking / speed / violation metrics on hand-made tracks, ablation parsing and the eval command."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json

import numpy as np
import pytest

from eval.groundtruth import GroundTruth, GtSpeeds, GtViolation, GtViolations
from eval.metrics import (
    PredTracks,
    association_counts,
    box_iou,
    ignore_coverage,
    prepare_sequence,
    raw_tracking_results,
    speed_samples,
    summarize_speed,
    summarize_tracking,
    violation_metrics,
)
from eval.variants import Variant, parse_ablations
from pipelines.config import ConfigError, PipelineConfig
from pipelines.types import Violation


def _gt(n_frames: int = 10, distractor_row: bool = False, ignore: bool = False) -> GroundTruth:
    """Two vehicles moving right, present in every frame."""
    frames, ids, boxes = [], [], []
    for f in range(1, n_frames + 1):
        for vid, y in ((1, 10.0), (2, 60.0)):
            frames.append(f)
            ids.append(vid)
            boxes.append([10.0 + 5 * f, y, 40.0 + 5 * f, y + 20])
    n = len(frames)
    distractor = np.zeros(n, bool)
    if distractor_row:
        frames.append(1)
        ids.append(99)
        boxes.append([300.0, 300, 330, 320])
        distractor = np.append(distractor, True)
        n += 1
    ign_f = np.array([1]) if ignore else np.zeros(0, int)
    ign_b = np.array([[200.0, 200, 260, 260]]) if ignore else np.zeros((0, 4))
    return GroundTruth(
        np.array(frames),
        np.array(ids),
        np.array(boxes),
        np.full(n, "car", dtype=object),
        np.ones(n),
        distractor,
        ign_f,
        ign_b,
    )


def _pred_from_gt(gt: GroundTruth, id_map=None, speed: float = 50.0, extra=()) -> PredTracks:
    sel = ~gt.distractor
    ids = np.array(
        [
            (id_map or {}).get((int(f), int(i)), int(i) + 100)
            for f, i in zip(gt.frames[sel], gt.ids[sel], strict=True)
        ]
    )
    frames = gt.frames[sel]
    boxes = gt.xyxy[sel]
    if extra:
        frames = np.append(frames, [e[0] for e in extra])
        ids = np.append(ids, [e[1] for e in extra])
        boxes = np.vstack([boxes, [e[2] for e in extra]])
    return PredTracks(frames, ids, boxes, np.full(len(frames), speed))


def test_box_iou_table():
    a = np.array([[0.0, 0, 10, 10]])
    b = np.array([[0.0, 0, 10, 10], [5, 0, 15, 10], [20, 20, 30, 30]])
    assert box_iou(a, b)[0].tolist() == pytest.approx([1.0, 1 / 3, 0.0])
    assert box_iou(np.zeros((0, 4)), b).shape == (0, 3)


@pytest.mark.parametrize(
    ("case", "mota", "idsw", "fp", "hota_perfect"),
    [
        ("perfect", 1.0, 0, 0, True),
        ("id_switch", 1.0 - 1 / 20, 1, 0, False),
        ("false_positive", 1.0 - 1 / 20, 0, 1, False),
        ("distractor_match", 1.0, 0, 0, True),  # a prediction on a distractor is not a false positive
        ("in_ignore_region", 1.0, 0, 0, True),  # nor is one inside an ignore region
    ],
)
def test_tracking_metrics(case, mota, idsw, fp, hota_perfect):
    gt = _gt(distractor_row=case == "distractor_match", ignore=case == "in_ignore_region")
    if case == "id_switch":
        pred = _pred_from_gt(gt, {(f, 1): 500 for f in range(6, 11)})
    elif case == "false_positive":
        pred = _pred_from_gt(gt, extra=[(3, 7, [500.0, 500, 520, 520])])
    elif case == "distractor_match":
        pred = _pred_from_gt(gt, extra=[(1, 7, [300.0, 300, 330, 320])])
    elif case == "in_ignore_region":
        pred = _pred_from_gt(gt, extra=[(1, 7, [210.0, 210, 250, 250])])
    else:
        pred = _pred_from_gt(gt)
    matched = prepare_sequence(gt, pred, 10, (640, 480))
    s = summarize_tracking(raw_tracking_results(matched))
    assert s["MOTA"] == pytest.approx(mota)
    assert s["IDSW"] == idsw and s["FP"] == fp
    assert (s["HOTA"] == pytest.approx(1.0)) == hota_perfect
    assert s["IDF1"] <= 1.0


def test_ignore_coverage_uses_the_union():
    regions = np.array([[0.0, 0, 10, 20], [10, 0, 20, 20]])  # two halves of one box
    cov = ignore_coverage(np.array([[0.0, 0, 20, 20], [30, 30, 40, 40]]), regions, (100, 100))
    assert cov[0] > 0.95 and cov[1] == 0


def test_speed_summary_and_bins():
    gt = _gt()
    pred = _pred_from_gt(gt, speed=52.0)
    matched = prepare_sequence(gt, pred, 10)
    truth = GtSpeeds(gt.frames, gt.ids, np.full(len(gt), 50.0), gt.frames / 30.0)
    samples = speed_samples("s", matched, pred, truth, altitude_m=100.0, pitch_deg=-90.0)
    s = summarize_speed(samples)
    assert s["n"] == 20 and s["coverage"] == 1.0
    assert s["mae_kmh"] == pytest.approx(2.0) and s["bias_kmh"] == pytest.approx(2.0)
    assert s["mape_pct"] == pytest.approx(4.0)
    assert list(s["by_speed"]) == ["50-70 km/h"] and list(s["by_altitude"]) == ["80-120 m"]


def _violation(track: int, t0: float, t1: float, peak: float = 70.0) -> Violation:
    return Violation(track, "global", 50.0, peak, peak - 5, 1.0, int(t0 * 30), int(t1 * 30), t0, t1)


@pytest.mark.parametrize(
    ("preds", "tp", "fp", "fn"),
    [
        ([_violation(101, 0.0, 0.3)], 1, 0, 0),
        ([_violation(101, 0.0, 0.3), _violation(102, 0.0, 0.3)], 1, 1, 0),  # vehicle 2 never violated
        ([], 0, 0, 1),
        ([_violation(101, 5.0, 6.0)], 0, 1, 1),  # no overlap in time
    ],
)
def test_violation_matching(preds, tp, fp, fn):
    gt = _gt()
    pred = _pred_from_gt(gt)
    matched = prepare_sequence(gt, pred, 10)
    truth = GtViolations(50.0, 0.2, (GtViolation(1, 0.0, 0.3, 72.0, 68.0),))
    m = violation_metrics(preds, truth, association_counts(matched, pred), slack_s=1.0)
    assert (m["tp"], m["fp"], m["fn"]) == (tp, fp, fn)


@pytest.mark.parametrize(
    ("max_time_s", "counted"),
    [
        (None, True),
        (0.5, True),  # lasted its 0.2 s minimum inside the processed frames
        (0.2, True),  # exactly the minimum
        (0.15, False),  # cut before it had lasted the minimum: nobody could report it
    ],
)
def test_violation_recall_on_cut_runs(max_time_s, counted):
    gt = _gt()
    pred = _pred_from_gt(gt)
    matched = prepare_sequence(gt, pred, 10)
    truth = GtViolations(50.0, 0.2, (GtViolation(1, 0.0, 0.3, 72.0, 68.0),))
    m = violation_metrics([], truth, association_counts(matched, pred), max_time_s=max_time_s)
    assert m["fn"] == (1 if counted else 0)


@pytest.mark.parametrize(
    "argv",
    [
        ["--oracle", "--drop", "1.5"],
        ["--oracle", "--jitter", "-1"],
        ["--max-frames", "0"],
        ["--drop", "nan"],
    ],
)
def test_eval_rejects_bad_numbers_up_front(argv, capsys):
    from eval.cli import register

    parser = argparse.ArgumentParser(prog="airpatrol")
    register(parser.add_subparsers())
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["eval", "somewhere", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "must be" in err or "expected" in err


@pytest.mark.parametrize(
    ("text", "names", "check"),
    [
        (None, ["base"], None),
        ("mask", ["base", "mask=on", "mask=off"], ("mask=off", "mask", "off")),
        (
            "egomotion",
            ["base", "egomotion=off"],
            ("egomotion=off", "overrides", (("egomotion", "enabled", False),)),
        ),
        ("oracle", ["base", "oracle"], ("oracle", "oracle", True)),
        ("detector=m.onnx+detector.classes=coco", ["base", "detector=m.onnx+detector.classes=coco"], None),
        ("tracker.lost_track_buffer=10", ["base", "tracker.lost_track_buffer=10"], None),
        ("effort=3,effort=4+mask=off", ["base", "effort=3", "effort=4+mask=off"], ("effort=3", "effort", 3)),
    ],
)
def test_parse_ablations(text, names, check):
    variants = parse_ablations(text, Variant("base"))
    assert [v.name for v in variants] == names
    if check:
        v = next(v for v in variants if v.name == check[0])
        assert getattr(v, check[1]) == check[2]
    cfg = variants[-1].apply(PipelineConfig())
    if text and text.startswith("tracker"):
        assert cfg.tracker.lost_track_buffer == 10
    if text and text.startswith("detector"):
        assert str(cfg.detector.weights) == "m.onnx" and cfg.detector.classes == "coco"


@pytest.mark.parametrize("text", ["warp=9", "tracker.no_such_field=1", "mask,mask=on", "effort=top"])
def test_parse_ablations_errors(text):
    with pytest.raises(ConfigError):
        parse_ablations(text, Variant("base"))


def test_eval_command_end_to_end(small_flight_dir, tmp_path):
    """`airpatrol eval` on the small flight: oracle, mask ablations (exact masks, U-Net), report files."""
    from eval.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    out = tmp_path / "report"
    args = parser.parse_args(
        [
            "eval",
            str(small_flight_dir),
            "--oracle",
            "--ablate",
            "mask=oracle,mask=on",
            "--max-frames",
            "60",
            "--out",
            str(out),
            "-q",
        ]
    )
    assert args.func(args) == 0
    data = json.loads((out / "metrics.json").read_text())
    assert [v["name"] for v in data["variants"]] == ["base", "mask=oracle", "mask=on"]
    seqs = {s["variant"]: s for s in data["sequences"]}
    assert seqs["mask=oracle"]["mask_source"].startswith("oracle")
    assert seqs["mask=on"]["mask_source"] == "U-Net airpatrol_road_unet_mnv3s.pt"  # the shipped default
    assert seqs["base"]["frames"] == 60
    assert seqs["base"]["tracking"]["MOTA"] > 0.9
    assert data["combined"]["base"]["speed"]["n"] > 0
    assert seqs["base"]["egomotion"]["pairs"] == 59  # the flight's exact camera: every frame pair
    report = (out / "report.md").read_text()
    assert "| base |" in report and "HOTA" in report and "## Ego-motion error" in report
    assert {p.name for p in (out / "plots").iterdir()} >= {
        "metrics_by_configuration.png",
        "speed_error_hist.png",
        "speed_error_vs_speed_altitude.png",
        "track_timeline.png",
    }
    assert (out / "tracks" / "base" / f"{small_flight_dir.name}.txt").read_text().strip()
    # every matched (frame, vehicle): what the speed figures are computed from, row by row
    with (out / "speeds" / "base" / f"{small_flight_dir.name}.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    speed = seqs["base"]["speed"]
    assert len(rows) == speed["matched"]
    errors = np.array([float(r["error_kmh"]) for r in rows if r["speed_kmh"]])
    assert len(errors) / len(rows) == pytest.approx(speed["coverage"])
    assert np.abs(errors).mean() == pytest.approx(speed["mae_kmh"], abs=1e-3)
    sigma = np.array([float(r["measurement_sigma_kmh"]) for r in rows if r["speed_kmh"]])
    assert np.mean(np.abs(errors) <= sigma) == pytest.approx(
        speed["measurement_sigma"]["within_1sigma"], abs=0.01
    )
    assert min(int(r["frame"]) for r in rows) >= 1 and min(int(r["track_frames"]) for r in rows) == 0


def test_simulate_command(tmp_path):
    from eval.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(
        ["simulate", str(tmp_path / "f"), "--duration", "0.3", "--fps", "10", "--size", "256x144", "--vehicles", "3",
         "--layout", "intersection", "--pitch", "-70", "--drift", "2,0", "-q"]
    )  # fmt: skip
    assert args.func(args) == 0
    from eval.simulate import FlightSpec

    spec = FlightSpec.from_yaml(tmp_path / "f" / "flight.yaml")
    assert (spec.width, spec.height, spec.layout, spec.pitch_deg, spec.drift_mps) == (
        256, 144, "intersection", -70.0, (2.0, 0.0),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("names", "kept_ids"),
    [(None, [1, 2, 3, 1]), (("car", "van", "truck", "bus"), [1, 3]), (("motorcycle",), [2, 1]), ((), [])],
)
def test_pred_tracks_of_classes(names, kept_ids):
    """Rows are kept by their own class (a track called a motorcycle in one frame and a car in the
    next keeps only its car rows under a four-wheel benchmark)."""
    tracks = PredTracks(
        np.array([1, 1, 1, 2]),
        np.array([1, 2, 3, 1]),
        np.arange(16, dtype=float).reshape(4, 4),
        np.full(4, np.nan),
        np.array(["car", "motorcycle", "bus", "motorcycle"], dtype=object),
    )
    out = tracks.of_classes(names)
    assert out.ids.tolist() == kept_ids and len(out.class_names) == len(out) == len(kept_ids)


def test_pred_tracks_of_classes_needs_class_names():
    """Scoring by class without each row's class is an error, not every row scored silently."""
    tracks = PredTracks(np.array([1]), np.array([1]), np.zeros((1, 4)), np.full(1, np.nan))
    assert tracks.of_classes(None) is tracks
    with pytest.raises(ValueError, match="1 tracked boxes but 0 class names"):
        tracks.of_classes(("car",))


def test_measurement_sigma_takes_the_altitude_term_out():
    """The reported sigma holds altitude_sigma_frac x speed in quadrature (a real flight's height
    error); a simulator's altitude is exact, so its calibration is checked on the rest."""
    gt = _gt()
    pred = _pred_from_gt(gt, speed=52.0)
    pred = dataclasses.replace(pred, sigma_kmh=np.full(len(pred), np.hypot(0.6, 0.02 * 52.0)))
    matched = prepare_sequence(gt, pred, 10)
    truth = GtSpeeds(gt.frames, gt.ids, np.full(len(gt), 51.5), gt.frames / 30.0)
    samples = speed_samples("s", matched, pred, truth, altitude_sigma_frac=0.02)
    np.testing.assert_allclose(samples.measurement_sigma_kmh, 0.6)
    s = summarize_speed(samples)
    assert s["sigma"]["within_1sigma"] == 1.0  # 0.5 km/h off, reported sigma 1.2
    assert s["measurement_sigma"]["within_1sigma"] == 1.0 and s["measurement_sigma"][
        "median_sigma_kmh"
    ] == pytest.approx(0.6)
    wide = speed_samples(
        "s",
        matched,
        pred,
        GtSpeeds(gt.frames, gt.ids, np.full(len(gt), 51.0), gt.frames / 30.0),
        altitude_sigma_frac=0.02,
    )
    assert summarize_speed(wide)["sigma"]["within_1sigma"] == 1.0  # 1.0 km/h off: within the reported 1.2 ...
    assert (
        summarize_speed(wide)["measurement_sigma"]["within_1sigma"] == 0.0
    )  # ... not within the measurement's 0.6


def test_an_effort_rung_is_scored_on_the_frames_it_processed(small_flight_dir, tmp_path):
    """``--ablate effort=4``: the pipeline on the live ladder's top rung (every 3rd frame, the
    detector at least every 8 of them): the frames read are the base's, tracking is scored on the
    frames it processed (a third of the ground truth's rows: no miss counted on a skipped frame),
    speeds are measured, fewer of them."""
    from eval.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    out = tmp_path / "report"
    argv = ["eval", str(small_flight_dir), "--oracle", "--detect-every", "3", "--ablate", "effort=4"]
    args = parser.parse_args(argv + ["--max-frames", "90", "--out", str(out), "-q"])
    assert args.func(args) == 0
    data = json.loads((out / "metrics.json").read_text())
    seqs = {s["variant"]: s for s in data["sequences"]}
    base, top = seqs["base"], seqs["effort=4"]
    assert base["frames"] == top["frames"] == 90
    gt_rows = {k: v["tracking"]["TP"] + v["tracking"]["FN"] for k, v in seqs.items()}
    assert gt_rows["effort=4"] == pytest.approx(gt_rows["base"] / 3, rel=0.05)  # the frames it saw
    assert top["egomotion"] is None
    assert any("every 3rd frame" in n for n in top["notes"])
    assert 0 < top["speed"]["matched"] < base["speed"]["matched"] / 2
    rows = (out / "tracks" / "effort=4" / f"{small_flight_dir.name}.txt").read_text().split()
    assert {int(r.split(",")[0]) % 3 for r in rows} == {1}  # MOT frames 1, 4, 7 ...: every 3rd
