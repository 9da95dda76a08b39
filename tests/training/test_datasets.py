"""Dataset readers (tiny synthetic datasets + the shared real files)."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from shared_material import shared_path

from training import datasets as ds
from training.samples import CLASSES, split_by_group


def _img(path: Path, w: int = 200, h: int = 120) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((h, w, 3), 90, np.uint8))
    return path


def test_yolo_folder_aerial_classes_and_groups(tmp_path):
    for name in ("DJI_0005-0018", "DJI-00760-00001"):
        _img(tmp_path / f"{name}.jpg")
        # car, minibus (-> van), cyclist (dropped)
        (tmp_path / f"{name}.txt").write_text("0 0.5 0.5 0.1 0.1\n3 0.2 0.2 0.1 0.2\n4 0.8 0.8 0.05 0.05\n")
    samples = ds.read_aerial_cars(tmp_path)
    assert {s.group for s in samples} == {"DJI_0005", "DJI-00760"}
    s = samples[0]
    assert s.boxes.shape == (2, 5)
    assert [CLASSES[int(c)] for c in s.boxes[:, 0]] == ["car", "van"]
    np.testing.assert_allclose(s.boxes[0, 1:], [90, 54, 110, 66], atol=1e-4)


def test_yolo_folder_images_labels_layout(tmp_path):
    _img(tmp_path / "images" / "train" / "seqA_000001.jpg")
    (tmp_path / "labels" / "train").mkdir(parents=True)
    (tmp_path / "labels" / "train" / "seqA_000001.txt").write_text("2 0.5 0.5 0.2 0.2\n")
    (s,) = ds.read_yolo_folder(tmp_path)
    assert s.group == "seqA" and CLASSES[int(s.boxes[0, 0])] == "truck"


def test_auair_flight_names():
    assert ds.auair_flight("frame_20190829091111_x_0000249.jpg") == "20190829091111"


def test_visdrone_det(tmp_path):
    _img(tmp_path / "images" / "0000002_00005_d_0000014.jpg")
    (tmp_path / "annotations").mkdir()
    (tmp_path / "annotations" / "0000002_00005_d_0000014.txt").write_text(
        "10,10,20,10,1,4,0,0\n"  # car
        "40,10,20,10,1,5,0,0\n"  # van
        "70,10,20,10,1,1,0,0\n"  # pedestrian (dropped)
        "100,10,30,30,0,0,0,0\n"  # ignored region
        "150,10,10,10,1,10,0,0\n"  # motor
    )
    (s,) = ds.read_visdrone_det(tmp_path)
    assert s.group == "0000002"
    assert [CLASSES[int(c)] for c in s.boxes[:, 0]] == ["car", "van", "motorcycle"]
    np.testing.assert_allclose(s.ignore, [[100, 10, 130, 40]])


def test_visdrone_mot(tmp_path):
    for k in (1, 2):
        _img(tmp_path / "sequences" / "uav0000013_00000_v" / f"{k:07d}.jpg")
    (tmp_path / "annotations").mkdir()
    (tmp_path / "annotations" / "uav0000013_00000_v.txt").write_text(
        "1,1,10,10,20,10,1,4,0,0\n2,1,12,10,20,10,1,4,0,0\n2,2,50,50,30,20,1,9,0,0\n2,-1,0,0,5,5,0,0,0,0\n"
    )
    samples = ds.read_visdrone_mot(tmp_path)
    assert len(samples) == 2 and all(s.group == "uav0000013_00000_v" for s in samples)
    assert len(samples[1].boxes) == 2 and CLASSES[int(samples[1].boxes[1, 0])] == "bus"
    assert len(samples[1].ignore) == 1


def test_uavdt_frames_and_ignore(tmp_path):
    for k in (1, 2, 3):
        _img(tmp_path / "M0101" / f"img{k:06d}.jpg")
    (tmp_path / "M0101_gt_whole.txt").write_text(
        "1,1,10,20,30,15,1,1,1\n2,1,12,20,30,15,1,1,2\n3,2,50,50,40,20,1,1,3\n"
    )
    (tmp_path / "M0101_gt_ignore.txt").write_text("1,-1,150,0,40,40,-1,-1,-1\n")
    samples = ds.read_uavdt(tmp_path, every=1)
    assert [s.name for s in samples] == ["M0101_000001", "M0101_000002", "M0101_000003"]
    assert CLASSES[int(samples[1].boxes[0, 0])] == "truck" and CLASSES[int(samples[2].boxes[0, 0])] == "bus"
    assert len(samples[0].ignore) == 1 and len(samples[1].ignore) == 0


def test_auair(tmp_path):
    name = "frame_20190829091111_x_0000249.jpg"
    _img(tmp_path / "images" / name)
    ann = {
        "categories": ["Human", "Car", "Truck", "Van", "Motorbike", "Bicycle", "Bus", "Trailer"],
        "annotations": [
            {
                "image_name": name,
                "bbox": [
                    {"top": 10, "left": 20, "height": 30, "width": 40, "class": 1},
                    {"top": 50, "left": 60, "height": 10, "width": 10, "class": 0},
                    {"top": 50, "left": 100, "height": 20, "width": 50, "class": 7},
                ],
            }
        ],
    }
    (tmp_path / "annotations.json").write_text(json.dumps(ann))
    (s,) = ds.read_auair(tmp_path)
    assert s.group == "20190829091111"
    np.testing.assert_allclose(s.boxes, [[0, 20, 10, 60, 40], [2, 100, 50, 150, 70]])


def _write_video(path: Path, n: int, w: int = 96, h: int = 64) -> None:
    vw = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (w, h))
    for k in range(n):
        vw.write(np.full((h, w, 3), 20 * k, np.uint8))
    vw.release()


def test_mot_img1_and_video_and_simulated_classes(tmp_path):
    seq = tmp_path / "MOT-01"
    for k in (1, 2):
        _img(seq / "img1" / f"{k:06d}.jpg")
    (seq / "gt").mkdir(parents=True)
    (seq / "gt" / "gt.txt").write_text(
        "1,1,10,10,20,20,1,3,1.0\n2,1,12,10,20,20,1,3,1.0\n2,2,0,0,5,5,0,1,1.0\n"
    )
    sim = tmp_path / "flight"
    (sim / "gt").mkdir(parents=True)
    _write_video(sim / "video.mp4", 3)
    (sim / "flight.yaml").write_text("seed: 0\n")
    (sim / "gt" / "gt.txt").write_text("1,1,10,10,20,10,1,2,1.0\n3,2,30,30,20,10,1,4,0.8\n")
    samples = ds.read_mot(tmp_path)
    by_group = {}
    for s in samples:
        by_group.setdefault(s.group, []).append(s)
    assert len(by_group["MOT-01"]) == 2 and len(by_group["MOT-01"][1].boxes) == 1  # conf 0 skipped
    flight = by_group["flight"]
    assert [s.frame for s in flight] == [0, 1, 2]
    assert CLASSES[int(flight[0].boxes[0, 0])] == "van" and CLASSES[int(flight[2].boxes[0, 0])] == "bus"
    assert flight[1].load().shape == (64, 96, 3)


@pytest.mark.shared
def test_real_aerial_cars_and_split():
    root = shared_path("aerial_cars_dji_frames", "dji_video_frames")
    samples = ds.read_aerial_cars(root)
    assert len(samples) == 49
    groups = {s.group for s in samples}
    assert groups == {"DJI_0005", "DJI-00760", "DJI_0762", "DJI_0013"}
    assert sum(len(s.boxes) for s in samples) == 855 - 0  # no cyclists in this subset
    split = split_by_group(samples, val_groups=["DJI-00760"])
    assert len(split["val"]) == 11 and sum(len(s.boxes) for s in split["val"]) == 280


@pytest.mark.shared
def test_real_auair():
    samples = ds.read_auair(shared_path("auair_subset"))
    assert len(samples) == 80
    assert sum(len(s.boxes) for s in samples) == 319  # Car/Truck/Van/Bus/Trailer (no motorbikes here)
    assert len({s.group for s in samples}) >= 2


@pytest.mark.shared
def test_real_uavdt_gt_from_video():
    clip = shared_path("uavdt_M1303_overlay_clip")
    samples = ds.read_uavdt(clip, video=clip / "demo_M1303.mp4", every=100)
    assert [s.frame for s in samples] == [0, 100, 200, 300, 400]
    assert samples[0].group == "M1303" and len(samples[0].boxes) > 10
    assert samples[1].load().shape == (540, 1024, 3)


VIEWS = {f"{i:07d}": ("nadir" if i < 6 else "oblique", "night" if i >= 20 else "day") for i in range(28)}


@pytest.mark.parametrize(
    ("views", "held"),
    [
        # strata sorted by id, ranks 2, 7, 12 ... held out: nadir 0-5 -> rank 2 is 0000002;
        # oblique day 6-19 -> ranks 2, 7, 12 are 8, 13, 18; oblique night 20-27 -> 22, 27
        (VIEWS, ["0000002", "0000008", "0000013", "0000018", "0000022", "0000027"]),
        # one stratum: every 5th from the third
        ({f"{i:07d}": ("oblique", "day") for i in range(12)}, ["0000002", "0000007"]),
        # a view with fewer than three clips keeps them all for training
        ({"0000001": ("nadir", "day"), "0000002": ("nadir", "day")}, []),
    ],
)
def test_visdrone_det_holdout_is_a_fixed_stratified_rule(views, held):
    assert ds.visdrone_det_holdout(views, views) == held
    assert ds.visdrone_det_holdout(reversed(list(views)), views) == held  # order-free


def test_a_partial_tree_holds_out_the_committed_clips_and_no_others():
    """A tree with only some clips (a packed training copy, a partial download) holds out the
    committed clips it has; the rule applied to its clips alone would hold out training clips."""
    table = ds.read_view_table()
    full = ds.visdrone_det_holdout(table)
    training = [c for c in table if c not in full]
    assert ds.visdrone_det_heldout_among(table) == full
    assert ds.visdrone_det_heldout_among(training) == []  # the packed copy: nothing to hold out
    partial = training[::2] + full[:3]
    assert ds.visdrone_det_heldout_among(reversed(partial)) == full[:3]
    assert set(ds.visdrone_det_holdout(training)) - set(full)  # ranked anew: training clips held out
    assert ds.visdrone_det_heldout_among(["9999999", *training]) == []  # an unknown clip: its own stratum


def test_view_table_covers_every_clip_of_the_shared_set():
    table = ds.read_view_table()
    assert set(v for v, _ in table.values()) == {"nadir", "oblique"}
    assert set(light for _, light in table.values()) == {"day", "night"}
    clips_tsv = shared_path("visdrone_det", "clips.tsv")
    clips = [line.split("\t")[0] for line in clips_tsv.read_text().splitlines()[1:] if line.strip()]
    assert sorted(clips) == sorted(table)
    held = ds.visdrone_det_holdout(clips)
    assert len(held) == 17  # about a fifth of 86 clips, night and nadir among them
    assert {table[c] for c in held} == {("oblique", "day"), ("oblique", "night"), ("nadir", "day")}


@pytest.mark.parametrize(
    ("kind", "group", "tags"),
    [
        ("visdrone-det", "0000333", ("nadir", "day")),
        ("visdrone-det", "0000117", ("oblique", "night")),
        ("visdrone-det", "not-a-clip", ()),
        ("aerial-cars", "DJI_0005", ("nadir", "day")),
        ("auair", "20190829091111", ("low", "day")),
        ("uavdt", "M1303", ()),
    ],
)
def test_view_tags(kind, group, tags):
    sample = ds.Sample(Path("x.jpg"), np.zeros((0, 5)), group)
    assert tuple(ds.view_tags(kind)(sample)) == tags
