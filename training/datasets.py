"""Convert drone-traffic annotations into one ultralytics (YOLO) detection dataset.

Every reader returns :class:`Sample` objects in pixel coordinates with *canonical* class ids
(:data:`CLASSES`); :func:`build_yolo_dataset` tiles them and writes ``images/<split>``,
``labels/<split>`` and ``data.yaml``. Splits are made by *group* (video / flight / sequence),
never by frame: consecutive frames of one video are near duplicates, and a frame-level split
would measure memorisation.

Readers:

* :func:`read_yolo_folder` - YOLO txt next to images or in ``images/`` + ``labels/`` (aerial-cars)
* :func:`read_visdrone_det` - VisDrone2019-DET (``images/``, ``annotations/``)
* :func:`read_visdrone_mot` - VisDrone2019-MOT (``sequences/<seq>/``, ``annotations/<seq>.txt``)
* :func:`read_uavdt` - UAVDT (``<seq>/img*.jpg`` or a video + ``<seq>_gt_whole.txt``, ignore regions)
* :func:`read_auair` - AU-AIR ``annotations.json``
* :func:`read_mot` - MOTChallenge (``<seq>/img1`` or a video, ``gt/gt.txt``), incl. the output of
  ``eval.simulate.simulate_flight``

Licences travel with the data: AU-AIR is non-commercial (evaluation only here), UAVDT and
VisDrone are research-only, and the UAVDT M1303 clip in ``shared/data`` has third-party boxes burned
into its pixels (never train on it).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import yaml

log = logging.getLogger(__name__)

CLASSES: tuple[str, ...] = ("car", "van", "truck", "bus", "motorcycle")
CLASS_ID = {name: i for i, name in enumerate(CLASSES)}
IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
VIDEO_EXTS = (".mp4", ".avi", ".mov", ".mkv", ".m4v")

# source class id -> canonical name (None: not a vehicle, dropped)
AERIAL_CARS_CLASSES: dict[int, str | None] = {
    0: "car",
    1: "truck",
    2: "bus",
    3: "van",
    4: None,
}  # minibus -> van
VISDRONE_CLASSES: dict[int, str | None] = {
    4: "car",
    5: "van",
    6: "truck",
    9: "bus",
    10: "motorcycle",
}  # 0 ignored region, 1 pedestrian, 2 people, 3 bicycle, 7 tricycle, 8 awning-tricycle, 11 others
UAVDT_CLASSES: dict[int, str | None] = {1: "car", 2: "truck", 3: "bus"}
AUAIR_CLASSES: dict[int, str | None] = {1: "car", 2: "truck", 3: "van", 4: "motorcycle", 6: "bus", 7: "truck"}
MOT_CLASSES: dict[int, str | None] = {3: "car", 5: "motorcycle"}  # MOT17/20: 3 car, 4 bicycle, 5 motorbike
# eval.simulate.SIM_CLASS_IDS (flights carry a flight.yaml): 1 car, 2 van, 3 truck, 4 bus, 5 motorcycle
SIM_CLASSES: dict[int, str | None] = {1: "car", 2: "van", 3: "truck", 4: "bus", 5: "motorcycle"}


@dataclass
class Sample:
    """One annotated image (or one frame of a video)."""

    image: Path  # image file, or a video file when ``frame`` is set
    boxes: np.ndarray  # (N, 5) float: class, x1, y1, x2, y2 in pixels (canonical class ids)
    group: str  # video / flight / sequence id: the unit of splitting
    frame: int | None = None  # 0-based frame index inside ``image`` when it is a video
    ignore: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.float32))  # x1,y1,x2,y2 regions
    name: str = ""

    def __post_init__(self) -> None:
        self.boxes = np.asarray(self.boxes, dtype=np.float32).reshape(-1, 5)
        self.ignore = np.asarray(self.ignore, dtype=np.float32).reshape(-1, 4)
        if not self.name:
            stem = self.image.stem
            self.name = f"{stem}_{self.frame:06d}" if self.frame is not None else stem

    def load(self) -> np.ndarray:
        if self.frame is None:
            img = cv2.imread(str(self.image), cv2.IMREAD_COLOR)
            if img is None:
                raise OSError(f"cannot read image {self.image}")
            return img
        return _read_video_frames(self.image, [self.frame])[self.frame]


def _read_video_frames(path: Path, frames: Iterable[int]) -> dict[int, np.ndarray]:
    wanted = sorted(set(frames))
    out: dict[int, np.ndarray] = {}
    cap = cv2.VideoCapture(str(path))
    if not cap.isOpened():
        raise OSError(f"cannot open video {path}")
    try:
        idx = 0
        for want in wanted:
            while idx <= want:
                ok, img = cap.read()
                if not ok:
                    raise OSError(f"{path}: frame {want} not readable (video has {idx})")
                if idx == want:
                    out[want] = img
                idx += 1
    finally:
        cap.release()
    return out


def _map_classes(
    rows: Iterable[tuple[int, float, float, float, float]], table: dict[int, str | None]
) -> np.ndarray:
    out = []
    for cls, x1, y1, x2, y2 in rows:
        name = table.get(int(cls))
        if name is not None and x2 > x1 and y2 > y1:
            out.append((CLASS_ID[name], x1, y1, x2, y2))
    return np.asarray(out, dtype=np.float32).reshape(-1, 5)


def _image_size(path: Path) -> tuple[int, int]:
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise OSError(f"cannot read image {path}")
    return img.shape[1], img.shape[0]


def video_group(name: str) -> str:
    """Video id of a frame file name: ``DJI_0005-0018`` -> ``DJI_0005``, ``DJI-00760-00001`` -> ``DJI-00760``.

    The trailing frame number (after the last ``-``/``_``) is dropped; names without one are their
    own group.
    """
    m = re.match(r"^(.*?)[-_](\d+)$", name)
    return m.group(1) if m else name


# ----------------------------------------------------------------------------------------- readers


def read_yolo_folder(
    root: str | Path,
    class_map: dict[int, str | None] | None = None,
    group_fn: Callable[[str], str] = video_group,
) -> list[Sample]:
    """YOLO txt labels (``cls xc yc w h``, normalised) next to the images or under ``labels/``."""
    root = Path(root)
    table = class_map if class_map is not None else {i: n for i, n in enumerate(CLASSES)}
    samples = []
    for img in sorted(p for p in root.rglob("*") if p.suffix.lower() in IMAGE_EXTS):
        label = img.with_suffix(".txt")
        if not label.exists():
            parts = list(img.parts)
            if "images" in parts:
                parts[len(parts) - 1 - parts[::-1].index("images")] = "labels"
                label = Path(*parts).with_suffix(".txt")
        if not label.exists():
            log.debug("no label for %s: skipped", img)
            continue
        w, h = _image_size(img)
        rows = []
        for line in label.read_text().splitlines():
            p = line.split()
            if len(p) < 5:
                continue
            c, xc, yc, bw, bh = int(float(p[0])), *(float(v) for v in p[1:5])
            rows.append((c, (xc - bw / 2) * w, (yc - bh / 2) * h, (xc + bw / 2) * w, (yc + bh / 2) * h))
        samples.append(Sample(img, _map_classes(rows, table), group_fn(img.stem)))
    log.info("yolo folder %s: %d images", root, len(samples))
    return samples


def read_aerial_cars(root: str | Path) -> list[Sample]:
    """jekhor aerial-cars-dataset frames (``<video>-<frame>.jpg`` + YOLO txt)."""
    return read_yolo_folder(root, AERIAL_CARS_CLASSES)


def read_visdrone_det(root: str | Path) -> list[Sample]:
    """VisDrone2019-DET: ``images/<seq>_<...>.jpg`` + ``annotations/<same>.txt``.

    Rows ``x,y,w,h,score,category,truncation,occlusion``; score 0 / category 0 are ignored regions.
    The group is the leading sequence id of the file name (``0000002_00005_d_0000014`` -> ``0000002``).
    """
    root = Path(root)
    samples = []
    for img in sorted((root / "images").iterdir()):
        if img.suffix.lower() not in IMAGE_EXTS:
            continue
        ann = root / "annotations" / (img.stem + ".txt")
        rows, ignore = [], []
        if ann.exists():
            for line in ann.read_text().splitlines():
                p = [v for v in line.replace(" ", "").split(",") if v != ""]
                if len(p) < 6:
                    continue
                x, y, w, h, score, cat = (float(v) for v in p[:6])
                if int(score) == 0 or int(cat) in (0, 11):
                    ignore.append((x, y, x + w, y + h))
                else:
                    rows.append((int(cat), x, y, x + w, y + h))
        samples.append(
            Sample(img, _map_classes(rows, VISDRONE_CLASSES), img.stem.split("_")[0], ignore=ignore)
        )
    log.info("VisDrone-DET %s: %d images", root, len(samples))
    return samples


def _frames_of(seq_dir: Path) -> list[Path]:
    return sorted(p for p in seq_dir.iterdir() if p.suffix.lower() in IMAGE_EXTS)


def read_visdrone_mot(root: str | Path, every: int = 1) -> list[Sample]:
    """VisDrone2019-MOT: ``sequences/<seq>/0000001.jpg`` + ``annotations/<seq>.txt``.

    Rows ``frame,id,x,y,w,h,score,category,truncation,occlusion`` (frame 1-based).
    """
    root = Path(root)
    samples = []
    for seq in sorted(p for p in (root / "sequences").iterdir() if p.is_dir()):
        per_frame: dict[int, list] = defaultdict(list)
        ign: dict[int, list] = defaultdict(list)
        ann = root / "annotations" / f"{seq.name}.txt"
        for line in ann.read_text().splitlines() if ann.exists() else []:
            p = line.split(",")
            if len(p) < 8:
                continue
            f, x, y, w, h, score, cat = int(p[0]), *(float(v) for v in p[2:6]), int(p[6]), int(p[7])
            if score == 0 or cat in (0, 11):
                ign[f].append((x, y, x + w, y + h))
            else:
                per_frame[f].append((cat, x, y, x + w, y + h))
        for i, img in enumerate(_frames_of(seq)):
            if i % every:
                continue
            f = int(re.sub(r"\D", "", img.stem) or i + 1)
            samples.append(
                Sample(
                    img, _map_classes(per_frame.get(f, []), VISDRONE_CLASSES), seq.name, ignore=ign.get(f, [])
                )
            )
    log.info("VisDrone-MOT %s: %d frames", root, len(samples))
    return samples


def _read_mot_rows(path: Path) -> list[list[float]]:
    rows = []
    for line in path.read_text().splitlines():
        p = [v.strip() for v in line.split(",")]
        if len(p) >= 6:
            rows.append([float(v) for v in p])
    return rows


def read_uavdt(
    root: str | Path,
    gt_dir: str | Path | None = None,
    every: int = 1,
    video: str | Path | None = None,
) -> list[Sample]:
    """UAVDT (UAV-benchmark-M): ``<root>/<seq>/img000001.jpg`` and ``<gt_dir>/<seq>_gt_whole.txt``.

    Rows ``frame,id,x,y,w,h,out_of_view,occlusion,category`` (frame 1-based; category 1 car,
    2 truck, 3 bus); ``<seq>_gt_ignore.txt`` gives ignore regions. ``video`` reads the frames of
    one sequence from a video file instead (``root`` then holds only the GT files and the sequence
    name is taken from the ``*_gt_whole.txt`` / ``*_gt.txt`` file).
    """
    root = Path(root)
    gt_dir = Path(gt_dir) if gt_dir else root
    seqs: list[tuple[str, Path | None]] = []
    if video is not None:
        gts = sorted(gt_dir.glob("*_gt_whole.txt")) or sorted(gt_dir.glob("*_gt.txt"))
        if not gts:
            raise FileNotFoundError(f"no UAVDT *_gt_whole.txt / *_gt.txt in {gt_dir}")
        seqs.append((gts[0].name.split("_gt")[0], None))
    else:
        seqs = [(p.name, p) for p in sorted(root.iterdir()) if p.is_dir() and any(_frames_of(p))]
    samples = []
    for name, seq_dir in seqs:
        gt = gt_dir / f"{name}_gt_whole.txt"
        if not gt.exists():
            gt = gt_dir / f"{name}_gt.txt"
        per_frame: dict[int, list] = defaultdict(list)
        for r in _read_mot_rows(gt) if gt.exists() else []:
            cat = int(r[8]) if len(r) > 8 and r[8] > 0 else 1
            per_frame[int(r[0])].append((cat, r[2], r[3], r[2] + r[4], r[3] + r[5]))
        ign: dict[int, list] = defaultdict(list)
        ign_file = gt_dir / f"{name}_gt_ignore.txt"
        for r in _read_mot_rows(ign_file) if ign_file.exists() else []:
            ign[int(r[0])].append((r[2], r[3], r[2] + r[4], r[3] + r[5]))
        if seq_dir is None:
            n = int(cv2.VideoCapture(str(video)).get(cv2.CAP_PROP_FRAME_COUNT))
            for k in range(0, n, every):
                samples.append(
                    Sample(
                        Path(video),
                        _map_classes(per_frame.get(k + 1, []), UAVDT_CLASSES),
                        name,
                        frame=k,
                        ignore=ign.get(k + 1, []),
                        name=f"{name}_{k + 1:06d}",
                    )
                )
        else:
            for i, img in enumerate(_frames_of(seq_dir)):
                if i % every:
                    continue
                f = int(re.sub(r"\D", "", img.stem) or i + 1)
                samples.append(
                    Sample(
                        img,
                        _map_classes(per_frame.get(f, []), UAVDT_CLASSES),
                        name,
                        ignore=ign.get(f, []),
                        name=f"{name}_{f:06d}",
                    )
                )
    log.info("UAVDT %s: %d frames", root, len(samples))
    return samples


def auair_flight(image_name: str) -> str:
    """``frame_20190829091111_x_0000249.jpg`` -> ``20190829091111`` (the flight / video id)."""
    m = re.match(r"frame_(\d+)_", image_name)
    return m.group(1) if m else Path(image_name).stem


def read_auair(root: str | Path, annotations: str | Path | None = None) -> list[Sample]:
    """AU-AIR: ``annotations.json`` (boxes ``top,left,height,width,class``) + ``images/``.

    Classes: 0 Human, 1 Car, 2 Truck, 3 Van, 4 Motorbike, 5 Bicycle, 6 Bus, 7 Trailer (-> truck).
    AU-AIR is CC BY-NC(-SA): non-commercial, use for evaluation only in this project.
    """
    root = Path(root)
    ann_path = Path(annotations) if annotations else root / "annotations.json"
    data = json.loads(ann_path.read_text())
    img_dir = root / "images" if (root / "images").is_dir() else root
    samples = []
    for entry in data["annotations"]:
        rows = [
            (b["class"], b["left"], b["top"], b["left"] + b["width"], b["top"] + b["height"])
            for b in entry.get("bbox", [])
        ]
        img = img_dir / entry["image_name"]
        if not img.exists():
            log.debug("AU-AIR image missing: %s", img)
            continue
        samples.append(Sample(img, _map_classes(rows, AUAIR_CLASSES), auair_flight(entry["image_name"])))
    log.info("AU-AIR %s: %d images", root, len(samples))
    return samples


def read_mot(
    root: str | Path,
    class_map: dict[int, str | None] | None = None,
    every: int = 1,
    min_visibility: float = 0.0,
) -> list[Sample]:
    """MOTChallenge sequences: ``<seq>/img1/*.jpg`` (or ``<seq>/*.mp4``) + ``<seq>/gt/gt.txt``.

    Rows ``frame,id,x,y,w,h,conf,class,visibility`` (frame 1-based). ``root`` may be one sequence
    or a folder of sequences. Rows whose ``conf`` is 0 (MOT17 "ignore") are skipped. ``class_map``
    maps the class column. By default a simulated flight (``flight.yaml`` beside ``gt/``) uses
    :data:`SIM_CLASSES`; other sequences treat a class column that is absent, ``-1`` or ``1`` as
    "car" (single-class annotations) and MOT17's 3/5 as car/motorcycle.
    """
    root = Path(root)
    seq_dirs = (
        [root]
        if (root / "gt" / "gt.txt").exists()
        else sorted(p for p in root.iterdir() if (p / "gt" / "gt.txt").exists())
    )
    samples = []
    for seq in seq_dirs:
        if class_map is not None:
            table: dict[int, str | None] = dict(class_map)
        elif (seq / "flight.yaml").exists():
            table = dict(SIM_CLASSES)
        else:
            table = {-1: "car", 1: "car", **MOT_CLASSES}
        per_frame: dict[int, list] = defaultdict(list)
        for r in _read_mot_rows(seq / "gt" / "gt.txt"):
            if len(r) > 6 and r[6] == 0:
                continue
            if len(r) > 8 and r[8] < min_visibility:
                continue
            cls = int(r[7]) if len(r) > 7 else -1
            per_frame[int(r[0])].append((cls, r[2], r[3], r[2] + r[4], r[3] + r[5]))
        img_dir = seq / "img1"
        if img_dir.is_dir():
            for i, img in enumerate(_frames_of(img_dir)):
                if i % every:
                    continue
                f = int(re.sub(r"\D", "", img.stem) or i + 1)
                samples.append(
                    Sample(
                        img, _map_classes(per_frame.get(f, []), table), seq.name, name=f"{seq.name}_{f:06d}"
                    )
                )
            continue
        videos = sorted(p for p in seq.iterdir() if p.suffix.lower() in VIDEO_EXTS)
        if not videos:
            log.warning("MOT sequence %s has neither img1/ nor a video: skipped", seq)
            continue
        n = int(cv2.VideoCapture(str(videos[0])).get(cv2.CAP_PROP_FRAME_COUNT))
        for k in range(0, n, every):
            samples.append(
                Sample(
                    videos[0],
                    _map_classes(per_frame.get(k + 1, []), table),
                    seq.name,
                    frame=k,
                    name=f"{seq.name}_{k + 1:06d}",
                )
            )
    log.info("MOT %s: %d frames from %d sequences", root, len(samples), len(seq_dirs))
    return samples


# ------------------------------------------------------------------------------------------ splits


def split_by_group(
    samples: Sequence[Sample],
    val_groups: Iterable[str] | None = None,
    val_fraction: float = 0.2,
    seed: int = 0,
) -> dict[str, list[Sample]]:
    """Split into ``train``/``val`` by group (video), never by frame.

    With ``val_groups`` those groups form the validation split; otherwise whole groups are drawn
    (seeded) until about ``val_fraction`` of the samples are in ``val``.
    """
    groups: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        groups[s.group].append(s)
    if val_groups is not None:
        val_set = set(val_groups)
        missing = val_set - set(groups)
        if missing:
            raise ValueError(f"validation groups not in the data: {sorted(missing)} (have {sorted(groups)})")
    else:
        rng = np.random.default_rng(seed)
        order = sorted(groups)
        rng.shuffle(order)
        val_set, n = set(), 0
        target = val_fraction * len(samples)
        for g in order:
            if n >= target or len(val_set) == len(groups) - 1:
                break
            val_set.add(g)
            n += len(groups[g])
    split = {
        "train": [s for g in sorted(groups) if g not in val_set for s in groups[g]],
        "val": [s for g in sorted(groups) if g in val_set for s in groups[g]],
    }
    log.info(
        "split by group: train %d samples (%s), val %d (%s)",
        len(split["train"]),
        sorted(set(groups) - val_set),
        len(split["val"]),
        sorted(val_set),
    )
    return split


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


# ----------------------------------------------------------------------------------- copy-paste


@dataclass
class CopyPaste:
    """Paste vehicle crops from the training split onto training tiles.

    Crops are pasted with a random 90-degree rotation and flips (nadir views have no up) where
    ``placement`` allows it: by default near where vehicles of the same group were annotated
    (a hovering drone sees the same roads in every frame, so the union of the group's boxes,
    dilated, approximates its roads). A placement never overlaps an existing box.
    """

    per_image: int = 6
    dilate_px: int = 25
    seed: int = 0
    crops: list[tuple[int, np.ndarray]] = field(default_factory=list)
    masks: dict[str, np.ndarray] = field(default_factory=dict)

    def collect(self, samples_with_images: Iterable[tuple[Sample, np.ndarray]]) -> None:
        for s, img in samples_with_images:
            h, w = img.shape[:2]
            mask = self.masks.setdefault(s.group, np.zeros((h, w), np.uint8))
            if mask.shape != (h, w):
                continue
            for c, x1, y1, x2, y2 in s.boxes:
                xi1, yi1, xi2, yi2 = max(0, int(x1)), max(0, int(y1)), min(w, int(x2)), min(h, int(y2))
                if xi2 - xi1 < 6 or yi2 - yi1 < 6:
                    continue
                self.crops.append((int(c), img[yi1:yi2, xi1:xi2].copy()))
                d = self.dilate_px
                mask[max(0, yi1 - d) : yi2 + d, max(0, xi1 - d) : xi2 + d] = 1
        log.info("copy-paste bank: %d vehicle crops from %d groups", len(self.crops), len(self.masks))

    def apply(
        self, sample: Sample, image: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        if not self.crops or self.per_image <= 0:
            return image, sample.boxes
        image = image.copy()
        boxes = [tuple(b) for b in sample.boxes]
        h, w = image.shape[:2]
        mask = self.masks.get(sample.group)
        if mask is not None and mask.shape != (h, w):
            mask = None
        for _ in range(self.per_image):
            cls, crop = self.crops[int(rng.integers(len(self.crops)))]
            crop = np.rot90(crop, int(rng.integers(4)))
            if rng.random() < 0.5:
                crop = crop[:, ::-1]
            ch, cw = crop.shape[:2]
            if ch >= h or cw >= w:
                continue
            for _try in range(20):
                x0, y0 = int(rng.integers(0, w - cw)), int(rng.integers(0, h - ch))
                if mask is not None and not mask[y0 + ch // 2, x0 + cw // 2]:
                    continue
                if any(not (x0 + cw <= b[1] or b[3] <= x0 or y0 + ch <= b[2] or b[4] <= y0) for b in boxes):
                    continue
                image[y0 : y0 + ch, x0 : x0 + cw] = crop
                boxes.append((cls, x0, y0, x0 + cw, y0 + ch))
                break
        return image, np.asarray(boxes, np.float32).reshape(-1, 5)


# ------------------------------------------------------------------------------------------ writer


def _yolo_lines(boxes: np.ndarray, w: int, h: int) -> str:
    lines = []
    for c, x1, y1, x2, y2 in boxes:
        lines.append(
            f"{int(c)} {(x1 + x2) / 2 / w:.6f} {(y1 + y2) / 2 / h:.6f} {(x2 - x1) / w:.6f} {(y2 - y1) / h:.6f}"
        )
    return "\n".join(lines) + ("\n" if lines else "")


def iter_loaded(samples: Sequence[Sample]) -> Iterable[tuple[Sample, np.ndarray]]:
    """Images of the samples, decoding each video once (in frame order)."""
    by_video: dict[Path, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.frame is None:
            yield s, s.load()
        else:
            by_video[s.image].append(s)
    for video, ss in by_video.items():
        frames = _read_video_frames(video, [s.frame for s in ss])
        for s in ss:
            yield s, frames[s.frame]


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
                pieces = []
                for scale in scales:
                    im = (
                        img
                        if scale == 1.0
                        else cv2.resize(img, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
                    )
                    bx = boxes.copy()
                    bx[:, 1:] *= scale
                    for (x0, y0), crop, tb in tile_image(im, bx, tile, overlap, min_visible, min_size):
                        pieces.append((f"_s{int(round(scale * 100))}_{x0}_{y0}", crop, tb))
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
