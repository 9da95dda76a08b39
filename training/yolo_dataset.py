"""Writing an ultralytics (YOLO) detection dataset from :class:`training.samples.Sample` splits.

:func:`build_yolo_dataset` resizes and tiles the training frames (overlapping tiles, boxes clipped
to each tile, tiny remnants dropped), optionally pastes vehicle crops
(:class:`training.copy_paste.CopyPaste`) and writes ``images/<split>``, ``labels/<split>``,
``data.yaml`` and ``summary.json``.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path

import cv2
import numpy as np
import yaml

from training.copy_paste import CopyPaste
from training.samples import CLASSES, Sample, iter_loaded

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------ tiling


def tile_origins(length: int, tile: int, overlap: float) -> list[int]:
    """Start offsets covering ``[0, length)`` with tiles of ``tile`` px overlapping by ``overlap``."""
    if length <= tile:
        return [0]
    stride = max(1, int(round(tile * (1.0 - overlap))))
    starts = list(range(0, length - tile, stride))
    starts.append(length - tile)
    return sorted(set(starts))


def clip_boxes(
    boxes: np.ndarray,
    window: tuple[int, int, int, int],
    min_visible: float = 0.4,
    min_size: float = 4.0,
) -> np.ndarray:
    """Boxes (cls,x1,y1,x2,y2) clipped to ``window`` (x1,y1,x2,y2) and shifted to its origin.

    A box is kept when at least ``min_visible`` of its area lies inside and the clipped box is at
    least ``min_size`` px on each side; tiny remnants at tile borders are dropped.
    """
    boxes = np.asarray(boxes, np.float32).reshape(-1, 5)
    wx1, wy1, wx2, wy2 = window
    x1 = np.clip(boxes[:, 1], wx1, wx2)
    y1 = np.clip(boxes[:, 2], wy1, wy2)
    x2 = np.clip(boxes[:, 3], wx1, wx2)
    y2 = np.clip(boxes[:, 4], wy1, wy2)
    area = (boxes[:, 3] - boxes[:, 1]) * (boxes[:, 4] - boxes[:, 2])
    inter = (x2 - x1) * (y2 - y1)
    keep = (inter >= min_visible * np.maximum(area, 1e-6)) & (x2 - x1 >= min_size) & (y2 - y1 >= min_size)
    out = np.stack([boxes[:, 0], x1 - wx1, y1 - wy1, x2 - wx1, y2 - wy1], axis=1)[keep]
    return out.astype(np.float32)


def tile_image(
    image: np.ndarray,
    boxes: np.ndarray,
    tile: int = 640,
    overlap: float = 0.2,
    min_visible: float = 0.4,
    min_size: float = 4.0,
) -> list[tuple[tuple[int, int], np.ndarray, np.ndarray]]:
    """Cut ``image`` into overlapping ``tile`` x ``tile`` crops: ``[((x0, y0), crop, boxes), ...]``.

    An image smaller than ``tile`` along an axis gives one crop of its full extent on that axis.
    """
    h, w = image.shape[:2]
    out = []
    for y0 in tile_origins(h, tile, overlap):
        for x0 in tile_origins(w, tile, overlap):
            x1, y1 = x0 + min(tile, w), y0 + min(tile, h)
            crop = image[y0:y1, x0:x1]
            out.append(((x0, y0), crop, clip_boxes(boxes, (x0, y0, x1, y1), min_visible, min_size)))
    return out


def _blank_ignore(image: np.ndarray, ignore: np.ndarray) -> np.ndarray:
    """Grey out ignore regions so unlabelled vehicles there do not become negatives."""
    if len(ignore) == 0:
        return image
    image = image.copy()
    h, w = image.shape[:2]
    fill = image.reshape(-1, image.shape[2]).mean(axis=0).astype(image.dtype)
    for x1, y1, x2, y2 in ignore.astype(int):
        image[max(0, y1) : min(h, y2), max(0, x1) : min(w, x2)] = fill
    return image


# ------------------------------------------------------------------------------------------ writer


def _yolo_lines(boxes: np.ndarray, w: int, h: int) -> str:
    lines = []
    for c, x1, y1, x2, y2 in boxes:
        lines.append(
            f"{int(c)} {(x1 + x2) / 2 / w:.6f} {(y1 + y2) / 2 / h:.6f} {(x2 - x1) / w:.6f} {(y2 - y1) / h:.6f}"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def build_yolo_dataset(
    splits: dict[str, Sequence[Sample]],
    out_dir: str | Path,
    tile: int | None = 640,
    overlap: float = 0.2,
    scales: Sequence[float] = (1.0,),
    min_visible: float = 0.4,
    min_size: float = 4.0,
    empty_fraction: float = 0.25,
    copy_paste: CopyPaste | None = None,
    full_frame_splits: Iterable[str] = ("val",),
    transpose_prob: float = 0.0,
    seed: int = 0,
) -> Path:
    """Write ``images/<split>``, ``labels/<split>`` and ``data.yaml``; return the YAML path.

    Each training image is resized by every factor in ``scales`` and cut into ``tile`` px tiles
    (``tile=None``: whole images). Tiles without boxes are kept with probability
    ``empty_fraction`` (background examples). Splits named in ``full_frame_splits`` are written
    as whole frames (validation at deployment geometry). ``copy_paste`` pastes vehicle crops into
    the training split only. ``transpose_prob`` transposes training tiles (with the flips that
    ultralytics applies this gives every 90-degree rotation, without loosening the boxes the way
    an arbitrary rotation does).
    """
    out_dir = Path(out_dir)
    rng = np.random.default_rng(seed)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    full_frame = set(full_frame_splits)
    counts: dict[str, dict[str, int]] = {}
    if copy_paste is not None and splits.get("train"):
        copy_paste.collect(iter_loaded(splits["train"]))
    for split, samples in splits.items():
        img_dir, lbl_dir = out_dir / "images" / split, out_dir / "labels" / split
        img_dir.mkdir(parents=True, exist_ok=True)
        lbl_dir.mkdir(parents=True, exist_ok=True)
        n_img = n_box = 0
        for s, img in iter_loaded(samples):
            img = _blank_ignore(img, s.ignore)
            boxes = s.boxes
            if copy_paste is not None and split == "train":
                img, boxes = copy_paste.apply(s, img, rng)
            if split in full_frame or tile is None:
                pieces = [("", img, boxes)]
            else:
                pieces = _scaled_tiles(img, boxes, scales, tile, overlap, min_visible, min_size)
            for suffix, crop, tb in pieces:
                if len(tb) == 0 and suffix and rng.random() >= empty_fraction:
                    continue
                name = f"{s.name}{suffix}"
                if split == "train" and transpose_prob > 0 and rng.random() < transpose_prob:
                    crop = np.ascontiguousarray(crop.transpose(1, 0, 2))
                    tb = tb[:, [0, 2, 1, 4, 3]]
                    name += "_t"
                cv2.imwrite(str(img_dir / f"{name}.jpg"), crop, [cv2.IMWRITE_JPEG_QUALITY, 95])
                (lbl_dir / f"{name}.txt").write_text(_yolo_lines(tb, crop.shape[1], crop.shape[0]))
                n_img += 1
                n_box += len(tb)
        counts[split] = {"images": n_img, "boxes": n_box, "groups": len({s.group for s in samples})}
    return _write_index(out_dir, splits, counts)


def _scaled_tiles(
    img: np.ndarray,
    boxes: np.ndarray,
    scales: Sequence[float],
    tile: int,
    overlap: float,
    min_visible: float,
    min_size: float,
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(name suffix, crop, boxes)`` of every tile of ``img`` resized by each of ``scales``."""
    pieces = []
    for scale in scales:
        im = img if scale == 1.0 else cv2.resize(img, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
        bx = boxes.copy()
        bx[:, 1:] *= scale
        for (x0, y0), crop, tb in tile_image(im, bx, tile, overlap, min_visible, min_size):
            pieces.append((f"_s{int(round(scale * 100))}_{x0}_{y0}", crop, tb))
    return pieces


def _write_index(
    out_dir: Path, splits: dict[str, Sequence[Sample]], counts: dict[str, dict[str, int]]
) -> Path:
    """``data.yaml`` (ultralytics' dataset file) and ``summary.json`` (counts and groups per split)."""
    data = {
        "path": str(out_dir.resolve()),
        **{split: f"images/{split}" for split in splits},
        "names": dict(enumerate(CLASSES)),
    }
    if "val" not in splits and "train" in splits:
        data["val"] = "images/train"
    yaml_path = out_dir / "data.yaml"
    yaml_path.write_text(yaml.safe_dump(data, sort_keys=False))
    (out_dir / "summary.json").write_text(
        json.dumps(
            {"counts": counts, "groups": {k: sorted({s.group for s in v}) for k, v in splits.items()}},
            indent=2,
        )
    )
    log.info("wrote %s: %s", yaml_path, counts)
    return yaml_path
