"""Oracle detector and the ground-truth loaders (MOT, UAVDT, VisDrone, simulator, dataset YAML)."""

from __future__ import annotations

import numpy as np
import pytest
from shared_material import shared_path

from eval.datasets import load_dataset
from eval.groundtruth import (
    DatasetError,
    GtFrame,
    load_camera_truth,
    load_gt_speeds,
    load_gt_violations,
    load_mot_gt,
    load_uavdt_gt,
    load_visdrone_gt,
)
from eval.oracle import OracleDetector, OracleSegmenter
from pipelines.types import Frame


def _frame(index: int, w: int = 200, h: int = 100) -> Frame:
    return Frame(index, index / 30.0, np.zeros((h, w, 3), np.uint8))


GT = {
    1: GtFrame(
        np.array([1, 2, 3]),
        np.array([[10.0, 10, 40, 30], [50, 20, 90, 40], [0, 0, 5, 5]]),
        np.array(["car", "bus", "van"], dtype=object),
        np.array([1.0, 1.0, 0.1]),
    ),
}


@pytest.mark.parametrize(
    ("kwargs", "index", "expected"),
    [
        ({}, 0, 3),  # frame.index 0 -> GT frame 1
        ({}, 1, 0),  # GT frame 2 has nothing
        ({"min_visibility": 0.5}, 0, 2),
        ({"drop_rate": 0.999, "seed": 1}, 0, 0),
    ],
)
def test_oracle_detector_counts(kwargs, index, expected):
    det = OracleDetector(GT, **kwargs).detect(_frame(index))
    assert len(det) == expected
    assert len(det.data["class_name"]) == expected


@pytest.mark.parametrize(
    ("kwargs", "check"),
    [
        # a partial box keeps 55 % of the vehicle's length along its longer side (x here), one end
        ({"partial_rate": 1.0}, lambda b, e: np.allclose(b[:2, 2] - b[:2, 0], 0.55 * (e[:2, 2] - e[:2, 0]))),
        # a jump moves the whole box by 1.2 lengths along it (clipped to the image)
        ({"jump_rate": 1.0}, lambda b, e: np.allclose(np.abs(b[:1, 0] - e[:1, 0]), 36.0)),
        (
            {"jump_rate": 1.0, "jump_lengths": 0.5},
            lambda b, e: np.allclose(np.abs(b[:2, 0] - e[:2, 0]), [15, 20]),
        ),
        ({"partial_rate": 0.0, "jump_rate": 0.0}, lambda b, e: np.array_equal(b, e)),
    ],
)
def test_oracle_bad_boxes(kwargs, check):
    exact = OracleDetector(GT).detect(_frame(0)).xyxy
    bad = OracleDetector(GT, seed=3, **kwargs).detect(_frame(0)).xyxy
    assert check(bad, exact)
    assert np.array_equal(bad, OracleDetector(GT, seed=3, **kwargs).detect(_frame(0)).xyxy)  # deterministic
    assert np.allclose(bad[:, 2] - bad[:, 0] > 0, True)


@pytest.mark.parametrize(
    "kwargs", [{"partial_rate": 0.7, "jump_rate": 0.7}, {"jump_rate": -0.1}, {"bad_box_frames": 0}]
)
def test_oracle_bad_box_options_are_checked(kwargs):
    with pytest.raises(ValueError):
        OracleDetector(GT, **kwargs)


def test_oracle_jitter_is_deterministic_and_bounded():
    a = OracleDetector(GT, jitter_px=2.0, seed=5).detect(_frame(0))
    b = OracleDetector(GT, jitter_px=2.0, seed=5).detect(_frame(0))
    c = OracleDetector(GT, jitter_px=2.0, seed=6).detect(_frame(0))
    assert np.array_equal(a.xyxy, b.xyxy) and not np.array_equal(a.xyxy, c.xyxy)
    exact = OracleDetector(GT).detect(_frame(0))
    assert np.abs(a.xyxy[:2] - exact.xyxy[:2]).max() < 10
    assert list(exact.data["class_name"]) == ["car", "bus", "van"]
    assert exact.confidence.tolist() == pytest.approx([0.9] * 3)


def test_oracle_from_mot_file(tmp_path):
    gt = tmp_path / "gt.txt"
    gt.write_text("1,7,10,20,30,15,1,1,1.0\n2,7,12,20,30,15,1,4,1.0\n")
    det = OracleDetector.from_mot(gt)
    first, second = det.detect(_frame(0)), det.detect(_frame(1))
    assert first.xyxy.tolist() == [[10, 20, 40, 35]]
    assert list(second.data["class_name"]) == ["bus"]


@pytest.mark.parametrize(
    ("text", "names", "min_vis", "scored"),
    [
        ("1,1,0,0,10,10,1,1,1\n1,2,0,0,10,10,0,1,1\n", None, 0.0, 1),  # zero-marked -> distractor
        ("1,1,0,0,10,10,1,1,1\n1,2,0,0,10,10,1,9,1\n", {1: "car"}, 0.0, 1),  # unknown class
        ("1,1,0,0,10,10,1,1,0.2\n1,2,0,0,10,10,1,1,0.9\n", None, 0.5, 1),  # low visibility
        ("1,1,0,0,10,10\n2,1,1,0,10,10\n", None, 0.0, 2),  # six columns are enough
    ],
)
def test_mot_loader(tmp_path, text, names, min_vis, scored):
    path = tmp_path / "gt.txt"
    path.write_text(text)
    gt = load_mot_gt(path, names, min_vis)
    assert int((~gt.distractor).sum()) == scored
    assert gt.xyxy[0].tolist() == [0, 0, 10, 10]


def test_mot_loader_errors(tmp_path):
    bad = tmp_path / "gt.txt"
    bad.write_text("1,2,3\n")
    with pytest.raises(DatasetError, match="at least 6"):
        load_mot_gt(bad)
    with pytest.raises(DatasetError, match="not found"):
        load_mot_gt(tmp_path / "missing.txt")


def test_uavdt_loader_uses_whole_for_classes_and_keeps_ignore(tmp_path):
    (tmp_path / "S_gt.txt").write_text("1,1,10,10,20,10,1,1,-1\n1,2,50,10,20,10,1,1,-1\n")
    (tmp_path / "S_gt_whole.txt").write_text("1,1,10,10,20,10,1,1,1\n1,2,50,10,20,10,1,1,3\n")
    (tmp_path / "S_gt_ignore.txt").write_text("1,-1,100,0,40,40,-1,-1,-1\n")
    gt = load_uavdt_gt(tmp_path / "S_gt.txt", tmp_path / "S_gt_ignore.txt", tmp_path / "S_gt_whole.txt")
    assert list(gt.class_names) == ["car", "bus"]
    assert gt.ignore_by_frame()[1].tolist() == [[100, 0, 140, 40]]
    assert not gt.distractor.any()


def test_visdrone_loader_classes(tmp_path):
    rows = [
        "1,1,0,0,10,10,1,4,0,0",  # car, scored
        "1,2,20,0,10,10,1,9,0,1",  # bus, partly occluded
        "1,3,40,0,10,10,1,1,0,0",  # pedestrian: distractor
        "1,4,60,0,10,10,1,10,0,0",  # motor: distractor
        "1,0,80,0,30,30,0,0,0,0",  # ignored region
        "1,0,120,0,30,30,1,11,0,0",  # others: ignored
        "1,5,160,0,10,10,0,4,0,0",  # score 0: ignored
    ]
    path = tmp_path / "a.txt"
    path.write_text("\n".join(rows))
    gt = load_visdrone_gt(path)
    assert sorted(gt.ids[~gt.distractor].tolist()) == [1, 2]
    assert sorted(gt.ids[gt.distractor].tolist()) == [3, 4]
    assert len(gt.ignore_xyxy) == 3
    assert gt.visibility[gt.ids == 2][0] < 1.0
    assert list(gt.class_names[~gt.distractor]) == ["car", "bus"]


def test_real_uavdt_m1303():
    folder = shared_path("uavdt_M1303_overlay_clip")
    ds = load_dataset(folder)
    (seq,) = ds.sequences
    assert seq.layout == "uavdt" and seq.video.name == "demo_M1303.mp4"
    gt = seq.load_gt()
    assert len(gt) == 10149 and gt.last_frame == 445
    assert set(gt.class_names) == {"car"}
    assert len(gt.ignore_xyxy) == 912
    assert len(np.unique(gt.ids)) <= 60


def test_sim_folder_and_speed_files(small_flight_dir):
    ds = load_dataset(small_flight_dir)
    (seq,) = ds.sequences
    assert seq.layout == "sim" and seq.telemetry is not None and seq.camera == "dji_mavic_3"
    gt = seq.load_gt()
    assert set(gt.class_names[~gt.distractor]) <= {"car", "van", "truck", "bus", "motorcycle"}
    speeds = load_gt_speeds(seq.speeds)
    assert len(speeds.frames) == len(gt)
    cam = seq.load_camera_truth()
    assert cam is not None and list(cam.frames) == list(range(1, seq.load_gt().frames.max() + 1))
    truth = load_gt_violations(seq.violations)
    assert truth.speed_limit_kmh == 50.0
    assert all(v.peak_speed_kmh > 50.0 for v in truth.violations)
    # the parent folder holds one sequence too (folders are searched one level down)
    assert [s.name for s in load_dataset(small_flight_dir.parent).sequences] == [seq.name]


def test_oracle_segmenter_matches_written_masks(small_flight_dir):
    import cv2

    seg = OracleSegmenter(small_flight_dir)
    prob = seg.segment(_frame(30, 640, 360))
    written = cv2.imread(str(small_flight_dir / "road_mask" / "000030.png"), cv2.IMREAD_GRAYSCALE)
    assert np.array_equal(prob > 0.5, written > 0)


def test_dataset_yaml(tmp_path, small_flight_dir):
    (tmp_path / "v.mp4").write_bytes(b"x")
    (tmp_path / "gt.txt").write_text("1,1,0,0,10,10,1,3,1\n")
    (tmp_path / "ds.yaml").write_text(
        f"""
name: mixed
sequences:
  - name: sim
    path: {small_flight_dir}
  - name: cam
    layout: mot
    video: v.mp4
    gt: gt.txt
    camera: dji_mavic_3
    altitude_m: 80
    pitch_deg: -70
    class_names: {{3: car}}
    road_polygon: [[0, 0], [10, 0], [10, 10]]
    scored_classes: [car, bus]
"""
    )
    ds = load_dataset(tmp_path / "ds.yaml")
    assert ds.name == "mixed"
    sim, cam = ds.sequences
    assert sim.name == "sim" and sim.layout == "sim"
    assert (cam.altitude_m, cam.pitch_deg, cam.camera) == (80.0, -70.0, "dji_mavic_3")
    assert cam.video == tmp_path / "v.mp4" and cam.road_polygon == ((0, 0), (10, 0), (10, 10))
    assert list(cam.load_gt().class_names) == ["car"]
    assert (sim.scored_classes, cam.scored_classes) == (None, ("car", "bus"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sequences: [{video: missing.mp4}]", "not found"),
        ("sequences: [{name: x}]", "needs 'video'"),
        ("sequences: [{video: v.mp4, altitude: 3}]", "altitude"),
        ("[1, 2", "not valid YAML"),
        ("sequences: [{video: v.mp4, speeds: nope.csv}]", "speeds not found: .*nope.csv"),
        ("sequences: [{video: v.mp4, gt: gt.txt, violations: v.json}]", "violations not found"),
        ("sequences: [{video: v.mp4, scored_classes: [car, lorry]}]", "unknown classes \\['lorry'\\]"),
    ],
)
def test_dataset_yaml_errors(tmp_path, text, message):
    (tmp_path / "v.mp4").write_bytes(b"x")
    (tmp_path / "gt.txt").write_text("1,1,0,0,10,10,1,1,1\n")
    (tmp_path / "ds.yaml").write_text(text)
    with pytest.raises(DatasetError, match=message):
        load_dataset(tmp_path / "ds.yaml")


@pytest.mark.parametrize(
    ("loader", "name", "text", "message"),
    [
        ("speeds", "speeds.csv", "frame,id\n1,1\n", "missing \\['speed_kmh'\\]"),
        ("speeds", "speeds.csv", "frame,id,speed_kmh\n1,1,fast\n", "speeds.csv:2: cannot read"),
        ("violations", "v.json", '{"violations": []}', "needs speed_limit_kmh"),
        ("violations", "v.json", '{"speed_limit_kmh": 50, "violations": [{"id": 1}]}', "start_time_s"),
    ],
)
def test_malformed_speed_and_violation_truth_is_a_dataset_error(tmp_path, loader, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    load = load_gt_speeds if loader == "speeds" else load_gt_violations
    with pytest.raises(DatasetError, match=message):
        load(path)


_H = ",".join(["1", "0", "5", "0", "1", "7", "0", "0", "1"])
_HEAD = "frame,time_s,h11,h12,h13,h21,h22,h23,h31,h32,h33\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("frame,h11\n1,1\n", "missing \\['h12'"),
        (_HEAD + "1,0.0,1,0,5,0,1,7,0,0,one\n", "camera.csv:2: cannot read"),
        (_HEAD + f"2,0.0,{_H}\n1,0.1,{_H}\n", "strictly increasing"),
        (_HEAD + f"0,0.0,{_H}\n", "1-based"),
        (_HEAD + "1,0.0,1,0,5,0,1,7,0,0,0\n", "h33 = 0"),
    ],
)
def test_malformed_camera_truth_is_a_dataset_error(tmp_path, text, message):
    path = tmp_path / "camera.csv"
    path.write_text(text)
    with pytest.raises(DatasetError, match=message):
        load_camera_truth(path)


def test_camera_truth_lookup_and_scale(tmp_path):
    path = tmp_path / "camera.csv"
    path.write_text(_HEAD + "1,0.0,2,0,10,0,2,14,0,0,2\n3,0.1,1,0,0,0,1,0,0,0,1\n")
    cam = load_camera_truth(path)
    assert np.allclose(cam.at(1), [[1, 0, 5], [0, 1, 7], [0, 0, 1]])  # scaled to h33 = 1
    assert cam.at(2) is None and cam.at(4) is None and np.allclose(cam.at(3), np.eye(3))
    with pytest.raises(DatasetError, match="not found"):
        load_camera_truth(tmp_path / "missing.csv")


def test_empty_folder_is_a_user_error(tmp_path):
    with pytest.raises(DatasetError, match="no sequences"):
        load_dataset(tmp_path)


def test_example_uavdt_dataset_file():
    from pathlib import Path

    shared_path("uavdt_M1303_overlay_clip")
    example = Path(__file__).resolve().parents[2] / "eval" / "examples" / "uavdt_m1303.yaml"
    (seq,) = load_dataset(example).sequences
    assert seq.layout == "uavdt" and seq.road_polygon is not None and seq.ignore is not None
    assert seq.scored_classes == ("car", "van", "truck", "bus")  # UAVDT annotates no two-wheelers
