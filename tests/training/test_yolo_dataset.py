"""Tiling with box clipping, and writing a tiled YOLO dataset with copy-paste."""

from __future__ import annotations

import cv2
import numpy as np
import yaml

from training.copy_paste import CopyPaste
from training.datasets import read_yolo_folder
from training.samples import CLASSES, split_by_group
from training.yolo_dataset import build_yolo_dataset, clip_boxes, tile_image, tile_origins


def test_tile_origins_cover_and_overlap():
    assert tile_origins(1920, 640, 0.2) == [0, 512, 1024, 1280]
    assert tile_origins(500, 640, 0.2) == [0]


def test_clip_boxes_drops_remnants():
    boxes = np.array(
        [
            [0, 10, 10, 50, 30],  # inside
            [1, 90, 10, 130, 30],  # half inside (x 90..100 of 90..130: 25 %) -> dropped at min_visible 0.4
            [2, 80, 40, 110, 60],  # 2/3 inside -> clipped
            [0, 98, 70, 140, 90],  # 2 px remnant -> dropped
        ],
        np.float32,
    )
    out = clip_boxes(boxes, (0, 0, 100, 100), min_visible=0.4, min_size=4)
    np.testing.assert_allclose(out, [[0, 10, 10, 50, 30], [2, 80, 40, 100, 60]])
    shifted = clip_boxes(boxes[:1], (5, 5, 105, 105))
    np.testing.assert_allclose(shifted, [[0, 5, 5, 45, 25]])


def test_tile_image_and_build_dataset(tmp_path):
    src = tmp_path / "src"
    img = np.random.default_rng(0).integers(0, 255, (300, 500, 3), dtype=np.uint8)
    src.mkdir()
    for g in ("vidA", "vidB"):
        cv2.imwrite(str(src / f"{g}-0001.jpg"), img)
        (src / f"{g}-0001.txt").write_text("0 0.5 0.5 0.04 0.05\n1 0.1 0.1 0.04 0.05\n")
    tiles = tile_image(img, np.array([[0, 240, 140, 260, 155]], np.float32), tile=256, overlap=0.25)
    assert all(c.shape[:2] == (256, 256) for _, c, _ in tiles)
    assert sum(len(b) for _, _, b in tiles) >= 1
    samples = read_yolo_folder(src)
    split = split_by_group(samples, val_groups=["vidB"])
    data_yaml = build_yolo_dataset(
        split,
        tmp_path / "out",
        tile=256,
        scales=(1.0, 0.5),
        copy_paste=CopyPaste(per_image=2),
        transpose_prob=0.5,
    )
    data = yaml.safe_load(data_yaml.read_text())
    assert data["names"] == dict(enumerate(CLASSES))
    train_imgs = sorted((tmp_path / "out" / "images" / "train").glob("*.jpg"))
    assert train_imgs and all(p.name.startswith("vidA") for p in train_imgs)
    val_imgs = list((tmp_path / "out" / "images" / "val").glob("*.jpg"))
    assert [p.name for p in val_imgs] == ["vidB-0001.jpg"]  # validation stays whole frames
    for p in train_imgs:
        im = cv2.imread(str(p))
        lines = (tmp_path / "out" / "labels" / "train" / (p.stem + ".txt")).read_text().split()
        vals = np.array(lines, float).reshape(-1, 5)
        assert im.shape[0] <= 256 and im.shape[1] <= 256
        assert ((vals[:, 1:] >= 0) & (vals[:, 1:] <= 1)).all()
