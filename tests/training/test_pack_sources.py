"""training/recipes/pack_sources.py: the packed tree reads back through the same converters."""

from __future__ import annotations

import importlib.util

import cv2
import numpy as np
import pytest
from shared_material import REPO

from training.datasets import read_aerial_cars, read_mot, read_visdrone_det, visdrone_det_holdout

CLIPS = [f"00000{i}" for i in range(1, 7)]  # not in the view table: one "unknown" stratum


def _load(monkeypatch, shared):
    monkeypatch.setenv("AIRPATROL_SHARED_DATA", str(shared))
    spec = importlib.util.spec_from_file_location("pack_sources", REPO / "training/recipes/pack_sources.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _image(seed: int) -> np.ndarray:
    img = np.random.default_rng(seed).integers(0, 255, (48, 64, 3), np.uint8)
    cv2.rectangle(img, (10, 10), (30, 20), (255, 255, 255), -1)
    return img


@pytest.fixture()
def sources(tmp_path):
    shared = tmp_path / "shared"
    vis = shared / "visdrone_det"
    (vis / "images").mkdir(parents=True)
    (vis / "annotations").mkdir()
    for i, clip in enumerate(CLIPS):
        stem = f"{clip}_00001_d_0000001"
        cv2.imwrite(str(vis / "images" / f"{stem}.jpg"), _image(i))
        (vis / "annotations" / f"{stem}.txt").write_text("10,10,20,10,1,4,0,0\n40,30,8,8,0,0,0,0\n")
    cars = shared / "aerial_cars_dji_frames" / "dji_video_frames"
    cars.mkdir(parents=True)
    cv2.imwrite(str(cars / "DJI_0005-00001.jpg"), _image(9))
    (cars / "DJI_0005-00001.txt").write_text("0 0.3125 0.3125 0.3125 0.2083\n")
    flight = tmp_path / "sims" / "train_alt30_pitch90"
    (flight / "gt").mkdir(parents=True)
    (flight / "gt" / "gt.txt").write_text(
        "1,1,10,10,20,10,1,1,1\n21,1,12,10,20,10,1,2,1\n22,1,13,10,20,10,1,2,1\n"
    )
    (flight / "flight.yaml").write_text("altitude_m: 30\n")
    (flight / "seqinfo.ini").write_text("[Sequence]\nname=train_alt30_pitch90\n")
    writer = cv2.VideoWriter(str(flight / "video.mp4"), cv2.VideoWriter_fourcc(*"mp4v"), 30, (64, 48))
    for k in range(25):
        writer.write(_image(k))
    writer.release()
    return shared, tmp_path / "sims"


def test_pack_round_trips_through_the_readers(tmp_path, monkeypatch, sources):
    shared, sims = sources
    pack = _load(monkeypatch, shared)
    out = tmp_path / "packed"
    assert pack.pack(out, sims, quality=70, parts=2) > 0

    held = visdrone_det_holdout(CLIPS, views={})
    assert held == ["000003"]  # the committed rule, applied to these clips
    packed = read_visdrone_det(out / "A" / "visdrone_det") + read_visdrone_det(out / "B" / "visdrone_det")
    assert sorted(s.group for s in packed) == [c for c in CLIPS if c not in held]  # held-out clips stay home
    assert {s.image.suffix for s in packed} == {".webp"}
    for s in packed:  # boxes and ignored regions as in the originals; the image decodes at full size
        assert s.boxes.tolist() == [[0, 10, 10, 30, 20]] and s.ignore.tolist() == [[40, 30, 48, 38]]
        assert cv2.imread(str(s.image)).shape == (48, 64, 3)

    (car,) = read_aerial_cars(out / "A" / "aerial_cars")
    assert car.group == "DJI_0005" and car.boxes.shape == (1, 5)

    frames = read_mot(out / "B" / "sim")  # every 20th frame, named by its 1-based MOT number
    assert [s.name for s in frames] == ["train_alt30_pitch90_000001", "train_alt30_pitch90_000021"]
    assert [s.boxes[:, 0].tolist() for s in frames] == [[0], [1]]  # car on frame 1, van on 21
