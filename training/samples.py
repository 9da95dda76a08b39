"""The annotated frame every dataset reader produces, and how frames are decoded and split.

A :class:`Sample` is one image (or one frame of a video) with vehicle boxes in pixels and
*canonical* class ids (:data:`CLASSES`). Splits are made by *group* (video / flight / sequence),
never by frame (:func:`split_by_group`): consecutive frames of one video are near duplicates, and a
frame-level split would measure memorisation.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

log = logging.getLogger(__name__)

CLASSES: tuple[str, ...] = ("car", "van", "truck", "bus", "motorcycle")
CLASS_ID = {name: i for i, name in enumerate(CLASSES)}


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
        return read_video_frames(self.image, [self.frame])[self.frame]


def read_video_frames(path: Path, frames: Iterable[int]) -> dict[int, np.ndarray]:
    """The wanted frames (0-based) of a video, decoded in one sequential pass."""
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


def iter_loaded(samples: Sequence[Sample]) -> Iterable[tuple[Sample, np.ndarray]]:
    """Images of the samples, decoding each video once (in frame order)."""
    by_video: dict[Path, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.frame is None:
            yield s, s.load()
        else:
            by_video[s.image].append(s)
    for video, ss in by_video.items():
        frames = read_video_frames(video, [s.frame for s in ss])
        for s in ss:
            yield s, frames[s.frame]


def video_group(name: str) -> str:
    """Video id of a frame file name: ``DJI_0005-0018`` -> ``DJI_0005``, ``DJI-00760-00001`` -> ``DJI-00760``.

    The trailing frame number (after the last ``-``/``_``) is dropped; names without one are their
    own group.
    """
    m = re.match(r"^(.*?)[-_](\d+)$", name)
    return m.group(1) if m else name


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
