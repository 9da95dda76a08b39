"""Road-mask training data: image / mask pairs, their decoding, split by group and augmentation.

Pairs come from folders with the same file names (e.g. Massachusetts Roads), from simulated
flights (``eval.simulate``: ``video.mp4`` + exact ``road_mask/NNNNNN.png``), or from pseudo-labels
(:mod:`training.road_pseudo`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from pipelines.config import ConfigError
from training.samples import read_video_frames, video_group

log = logging.getLogger(__name__)


@dataclass
class RoadPair:
    image: Path  # an image, or a video when ``frame`` is set
    mask: Path  # single-channel PNG, > 127 = road
    group: str  # flight / tile id: the unit of splitting
    frame: int | None = None
    boxes: np.ndarray | None = None  # optional (N,4) ground-truth vehicle boxes for the keep-rate metric


def pairs_from_folders(images_dir: str | Path, masks_dir: str | Path) -> list[RoadPair]:
    """Images and masks with the same stem (any image extension); the group is the video id of
    the name (``DJI-00760-00001`` -> ``DJI-00760``, see :func:`training.samples.video_group`)."""
    images_dir, masks_dir = Path(images_dir), Path(masks_dir)
    masks = {
        p.stem: p
        for p in masks_dir.iterdir()
        if p.suffix.lower() in (".png", ".tif", ".tiff", ".jpg", ".bmp")
    }
    pairs = [
        RoadPair(p, masks[p.stem], video_group(p.stem))
        for p in sorted(images_dir.iterdir())
        if p.stem in masks and p.suffix.lower() in (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp")
    ]
    log.info("%d image/mask pairs in %s", len(pairs), images_dir)
    return pairs


def pairs_from_flight(flight_dir: str | Path) -> list[RoadPair]:
    """A simulated flight: ``road_mask/NNNNNN.png`` (0-based frame index) + ``video.mp4`` + ``gt/gt.txt``."""
    flight_dir = Path(flight_dir)
    video = flight_dir / "video.mp4"
    boxes: dict[int, list] = defaultdict(list)
    gt = flight_dir / "gt" / "gt.txt"
    if gt.exists():
        for line in gt.read_text().splitlines():
            p = line.split(",")
            if len(p) >= 6:
                f, x, y, w, h = int(p[0]) - 1, *(float(v) for v in p[2:6])
                boxes[f].append((x, y, x + w, y + h))
    pairs = []
    for m in sorted((flight_dir / "road_mask").glob("*.png")):
        k = int(m.stem)
        pairs.append(
            RoadPair(
                video,
                m,
                flight_dir.name,
                frame=k,
                boxes=np.asarray(boxes.get(k, []), np.float32).reshape(-1, 4),
            )
        )
    log.info("%d mask frames in flight %s", len(pairs), flight_dir)
    return pairs


def collect_pairs(pair_specs: Sequence[str] = (), flights: Sequence[str] = ()) -> list[RoadPair]:
    """``IMAGES_DIR:MASKS_DIR`` specs and simulated flight folders -> pairs."""
    pairs: list[RoadPair] = []
    for spec in pair_specs:
        images, sep, masks = spec.rpartition(":")
        if not sep:
            raise ConfigError(f"--pairs expects IMAGES_DIR:MASKS_DIR, got {spec!r}")
        pairs += pairs_from_folders(images, masks)
    for flight in flights:
        pairs += pairs_from_flight(flight)
    if not pairs:
        raise ConfigError("no road training pairs: give --pairs IMAGES:MASKS and/or --flights DIR")
    return pairs


def load_pairs(pairs: Sequence[RoadPair], max_side: int = 1024) -> list[tuple[np.ndarray, np.ndarray]]:
    """Decode pairs into memory (BGR uint8, mask uint8 {0,1}), downscaled to ``max_side``."""
    by_video: dict[Path, list[RoadPair]] = defaultdict(list)
    out: list[tuple[np.ndarray, np.ndarray]] = []
    images: dict[int, np.ndarray] = {}
    for i, p in enumerate(pairs):
        if p.frame is None:
            images[i] = cv2.imread(str(p.image), cv2.IMREAD_COLOR)
        else:
            by_video[p.image].append(p)
    frames: dict[tuple[Path, int], np.ndarray] = {}
    for video, ps in by_video.items():
        for k, img in read_video_frames(video, [p.frame for p in ps]).items():
            frames[(video, k)] = img
    for i, p in enumerate(pairs):
        img = images[i] if p.frame is None else frames[(p.image, p.frame)]
        mask = cv2.imread(str(p.mask), cv2.IMREAD_GRAYSCALE)
        if img is None or mask is None:
            raise OSError(f"cannot read {p.image} / {p.mask}")
        if mask.shape != img.shape[:2]:
            mask = cv2.resize(mask, (img.shape[1], img.shape[0]), interpolation=cv2.INTER_NEAREST)
        s = min(1.0, max_side / max(img.shape[:2]))
        if s < 1.0:
            img = cv2.resize(img, None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
            mask = cv2.resize(mask, (img.shape[1], img.shape[0]), interpolation=cv2.INTER_NEAREST)
        out.append((img, (mask > 127).astype(np.uint8)))
    return out


def split_pairs(
    pairs: Sequence[RoadPair], val_fraction: float, seed: int
) -> tuple[list[RoadPair], list[RoadPair]]:
    """By group (flight / tile), never by frame."""
    groups = sorted({p.group for p in pairs})
    rng = np.random.default_rng(seed)
    rng.shuffle(groups)
    n_val = max(1, int(round(val_fraction * len(groups)))) if len(groups) > 1 and val_fraction > 0 else 0
    val_groups = set(groups[:n_val])
    return [p for p in pairs if p.group not in val_groups], [p for p in pairs if p.group in val_groups]


def augment(
    img: np.ndarray, mask: np.ndarray, size: tuple[int, int], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random crop (scale 0.5-1 of the shorter side, any aspect near the target), resize to
    ``size`` (w, h), dihedral rotations (nadir), brightness / contrast / colour jitter."""
    tw, th = size
    h, w = img.shape[:2]
    if rng.random() < 0.5:  # rot90 / transpose: roads run in any direction in nadir views
        img, mask = np.ascontiguousarray(img.transpose(1, 0, 2)), np.ascontiguousarray(mask.T)
        h, w = w, h
    aspect = tw / th
    scale = rng.uniform(0.45, 1.0)
    ch = int(min(h, w / aspect) * scale)
    cw = int(ch * aspect)
    ch, cw = max(ch, 8), max(cw, 8)
    y0 = int(rng.integers(0, max(1, h - ch + 1)))
    x0 = int(rng.integers(0, max(1, w - cw + 1)))
    img = cv2.resize(img[y0 : y0 + ch, x0 : x0 + cw], (tw, th), interpolation=cv2.INTER_AREA)
    mask = cv2.resize(mask[y0 : y0 + ch, x0 : x0 + cw], (tw, th), interpolation=cv2.INTER_NEAREST)
    if rng.random() < 0.5:
        img, mask = img[:, ::-1], mask[:, ::-1]
    if rng.random() < 0.5:
        img, mask = img[::-1], mask[::-1]
    f = img.astype(np.float32)
    f = f * rng.uniform(0.75, 1.25) + rng.uniform(-25, 25)
    f = f * rng.uniform(0.9, 1.1, size=3)[None, None, :]
    if rng.random() < 0.3:
        k = int(rng.choice([3, 5]))
        f = cv2.GaussianBlur(f, (k, k), 0)
    return np.clip(f, 0, 255).astype(np.uint8), np.ascontiguousarray(mask)
