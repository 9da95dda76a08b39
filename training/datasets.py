"""Readers that convert public drone-traffic annotations into :class:`training.samples.Sample` lists.

Every reader returns samples in pixel coordinates with *canonical* class ids
(:data:`training.samples.CLASSES`) and a group (video / flight / sequence) per sample;
:func:`training.yolo_dataset.build_yolo_dataset` turns them into an ultralytics dataset.

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
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

import cv2
import numpy as np

from training.samples import CLASS_ID, CLASSES, Sample, video_group

log = logging.getLogger(__name__)

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


VISDRONE_DET_VIEWS = Path(__file__).with_name("visdrone_det_views.tsv")
VISDRONE_DET_HOLDOUT_EVERY = 5


def read_view_table(path: str | Path = VISDRONE_DET_VIEWS) -> dict[str, tuple[str, str]]:
    """``clip -> (view, light)`` from a tab-separated table (``#`` comments, a header row)."""
    table: dict[str, tuple[str, str]] = {}
    for line in Path(path).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        clip, view, light = (v.strip() for v in line.split("\t")[:3])
        if clip != "clip":
            table[clip] = (view, light)
    return table


def visdrone_det_holdout(
    clips: Iterable[str],
    views: dict[str, tuple[str, str]] | None = None,
    every: int = VISDRONE_DET_HOLDOUT_EVERY,
) -> list[str]:
    """The committed VisDrone-DET validation clips, a fixed rule so nobody can pick easy clips.

    Clips are grouped by ``(view, light)`` from the view table (nadir/oblique x day/night), sorted
    by id within each group, and every ``every``-th one counting from the third (ranks 2, 7, 12, ...)
    is held out: about one clip in five, and every view with at least three clips gets held-out
    clips. Frames of a clip are near-duplicates, so whole clips go one way.
    """
    views = read_view_table() if views is None else views
    strata: dict[tuple[str, str], list[str]] = defaultdict(list)
    for clip in sorted(set(clips)):
        strata[views.get(clip, ("unknown", "unknown"))].append(clip)
    held = [c for group in strata.values() for rank, c in enumerate(group) if rank % every == 2]
    return sorted(held)


def visdrone_det_heldout_among(clips: Iterable[str]) -> list[str]:
    """The committed held-out clips among ``clips``: :func:`visdrone_det_holdout` applied to the
    view table's clips (the committed clip list) together with any others given, then kept to
    those given. A tree that holds only some clips (a packed training copy, whose held-out clips
    stayed home; a partial download) holds out the same clips as the whole set - the rule applied
    to the present clips alone would rank them anew and hold out training clips instead."""
    present = set(clips)
    table = read_view_table()
    return [c for c in visdrone_det_holdout(present | set(table), table) if c in present]


FIXED_VIEWS: dict[str, tuple[str, ...]] = {
    "aerial-cars": ("nadir", "day"),  # DJI frames straight down, daylight
    "auair": ("low", "day"),  # AU-AIR: 5-30 m, oblique, daylight
}


def view_tags(kind: str) -> Callable[[Sample], tuple[str, ...]]:
    """Per-view tags of a dataset's samples for per-view scores: VisDrone-DET from the committed
    view table (``nadir``/``oblique`` and ``day``/``night``), whole datasets with one known view
    from :data:`FIXED_VIEWS`, nothing for the rest."""
    if kind == "visdrone-det":
        table = read_view_table()
        return lambda s: table.get(s.group, ())
    fixed = FIXED_VIEWS.get(kind, ())
    return lambda s: fixed


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
