"""Ground truth of evaluation sequences: the containers (boxes per frame, true speeds, violations)
and the readers of each annotation format.

* MOTChallenge ``gt.txt`` (frame,id,x,y,w,h,conf,class,visibility), also written by the simulator
  (classes :data:`eval.simulate.SIM_CLASS_IDS`). ``conf == 0`` rows ("zero marked") and classes
  outside ``class_names`` (when given) are distractors.
* UAVDT-MOT: ``<seq>_gt.txt`` holds the boxes scored by the benchmark and ``<seq>_gt_ignore.txt``
  the ignore regions; ``<seq>_gt_whole.txt`` gives the categories (1 car, 2 truck, 3 bus). Columns:
  frame_index,target_id,bbox_left,bbox_top,bbox_width,bbox_height,out_of_view,occlusion,
  object_category. Protocol (devkit ``dropObjectsInIgr``): ground truth and predictions with at
  least half of their box inside the ignore regions are removed.
* VisDrone-MOT (frame,id,x,y,w,h,score,category,truncation,occlusion). Scored vehicle categories:
  4 car, 5 van, 6 truck, 9 bus (the benchmark scores these plus pedestrians). Category 0 (ignored
  region), 11 (others) and rows with score 0 are ignore regions; the other categories (people,
  bicycles, tricycles, motors) are distractors: predictions matching them are not counted.
* The simulator's ``gt/speeds.csv`` (true speed per frame and vehicle), ``gt/violations.json`` and
  ``gt/camera.csv`` (the exact world -> image homography of every frame).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np

from pipelines.errors import AirPatrolError

T = TypeVar("T")

UAVDT_CLASSES: dict[int, str] = {1: "car", 2: "truck", 3: "bus"}
VISDRONE_VEHICLES: dict[int, str] = {4: "car", 5: "van", 6: "truck", 9: "bus"}
VISDRONE_IGNORE = (0, 11)
# VisDrone occlusion: 0 none, 1 partial (1-50 %), 2 heavy (50-100 %) -> visible share (rough)
VISDRONE_VISIBILITY = {0: 1.0, 1: 0.75, 2: 0.25}


class DatasetError(AirPatrolError, ValueError):
    """A dataset description or ground-truth file that cannot be used."""


# --------------------------------------------------------------------------------------------------
# Ground truth containers
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class GtFrame:
    """Ground-truth boxes of one frame."""

    ids: np.ndarray  # (N,) int
    xyxy: np.ndarray  # (N, 4) float
    class_names: np.ndarray  # (N,) object (canonical names)
    visibility: np.ndarray  # (N,) float in [0, 1]

    @staticmethod
    def empty() -> GtFrame:
        return GtFrame(np.zeros(0, int), np.zeros((0, 4)), np.zeros(0, dtype=object), np.zeros(0))

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True, slots=True, eq=False)
class GroundTruth:
    """Boxes of one sequence (frames 1-based), distractor flags and ignore regions."""

    frames: np.ndarray  # (N,) int, 1-based
    ids: np.ndarray  # (N,) int
    xyxy: np.ndarray  # (N, 4) float
    class_names: np.ndarray  # (N,) object
    visibility: np.ndarray  # (N,) float
    distractor: np.ndarray  # (N,) bool: neither scored nor counted as a false positive when matched
    ignore_frames: np.ndarray = field(default_factory=lambda: np.zeros(0, int))  # (M,)
    ignore_xyxy: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))  # (M, 4)

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def last_frame(self) -> int:
        return int(self.frames.max()) if len(self.frames) else 0

    def by_frame(self, include_distractors: bool = False) -> dict[int, GtFrame]:
        """1-based frame -> :class:`GtFrame` (scored boxes only unless asked otherwise)."""
        sel = np.ones(len(self), bool) if include_distractors else ~self.distractor
        out: dict[int, GtFrame] = {}
        frames = self.frames[sel]
        order = np.argsort(frames, kind="stable")
        idx = np.nonzero(sel)[0][order]
        if len(idx) == 0:
            return out
        splits = np.nonzero(np.diff(self.frames[idx]))[0] + 1
        for chunk in np.split(idx, splits):
            f = int(self.frames[chunk[0]])
            out[f] = GtFrame(
                self.ids[chunk], self.xyxy[chunk], self.class_names[chunk], self.visibility[chunk]
            )
        return out

    def distractors_by_frame(self) -> dict[int, np.ndarray]:
        return _group_boxes(self.frames[self.distractor], self.xyxy[self.distractor])

    def ignore_by_frame(self) -> dict[int, np.ndarray]:
        return _group_boxes(self.ignore_frames, self.ignore_xyxy)

    def truncated(self, max_frames: int | None) -> GroundTruth:
        if max_frames is None:
            return self
        return self._select(self.frames <= max_frames, self.ignore_frames <= max_frames)

    def on_frames(self, frames: set[int]) -> GroundTruth:
        """Only the rows of these (1-based) frames: a run that processed every Nth frame (a live
        stream's effort rung, ``--ablate effort=N``) is scored on the frames it saw."""
        keep = np.array(sorted(frames), dtype=int)
        return self._select(np.isin(self.frames, keep), np.isin(self.ignore_frames, keep))

    def _select(self, sel: np.ndarray, isel: np.ndarray) -> GroundTruth:
        return GroundTruth(
            self.frames[sel],
            self.ids[sel],
            self.xyxy[sel],
            self.class_names[sel],
            self.visibility[sel],
            self.distractor[sel],
            self.ignore_frames[isel],
            self.ignore_xyxy[isel],
        )


def _group_boxes(frames: np.ndarray, xyxy: np.ndarray) -> dict[int, np.ndarray]:
    out: dict[int, list] = {}
    for f, b in zip(frames.tolist(), xyxy, strict=True):
        out.setdefault(int(f), []).append(b)
    return {f: np.asarray(v, dtype=np.float64).reshape(-1, 4) for f, v in out.items()}


@dataclass(frozen=True, slots=True, eq=False)
class GtSpeeds:
    """Per-frame true speeds (simulator ``gt/speeds.csv``); frames 1-based."""

    frames: np.ndarray
    ids: np.ndarray
    speed_kmh: np.ndarray
    time_s: np.ndarray

    def lookup(self) -> dict[tuple[int, int], float]:
        return {
            (int(f), int(i)): float(s) for f, i, s in zip(self.frames, self.ids, self.speed_kmh, strict=True)
        }


@dataclass(frozen=True, slots=True)
class GtViolation:
    id: int
    start_time_s: float
    end_time_s: float
    peak_speed_kmh: float
    mean_speed_kmh: float
    class_name: str = "vehicle"


@dataclass(frozen=True, slots=True)
class GtViolations:
    speed_limit_kmh: float
    min_duration_s: float
    violations: tuple[GtViolation, ...]


# --------------------------------------------------------------------------------------------------
# Loaders
# --------------------------------------------------------------------------------------------------


def _read_rows(path: Path, min_cols: int) -> np.ndarray:
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"ground-truth file not found: {path}")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p for p in line.replace(";", ",").replace(" ", ",").split(",") if p != ""]
        if len(parts) < min_cols:
            raise DatasetError(
                f"{path}:{n}: expected at least {min_cols} comma-separated values, got {line!r}"
            )
        try:
            rows.append([float(p) for p in parts])
        except ValueError as exc:
            raise DatasetError(f"{path}:{n}: not a number in {line!r}") from exc
    if not rows:
        return np.zeros((0, min_cols))
    width = max(len(r) for r in rows)
    return np.array([r + [np.nan] * (width - len(r)) for r in rows], dtype=np.float64)


def _xywh_to_xyxy(a: np.ndarray) -> np.ndarray:
    return np.column_stack([a[:, 0], a[:, 1], a[:, 0] + a[:, 2], a[:, 1] + a[:, 3]])


def load_mot_gt(
    path: str | Path,
    class_names: Mapping[int, str] | None = None,
    min_visibility: float = 0.0,
) -> GroundTruth:
    """MOTChallenge ``gt.txt``. ``class_names`` maps the class column to canonical names; rows of
    other classes, zero-marked rows and rows below ``min_visibility`` become distractors."""
    a = _read_rows(Path(path), 6)
    n = len(a)
    conf = a[:, 6] if a.shape[1] > 6 else np.ones(n)
    cls = a[:, 7] if a.shape[1] > 7 else np.ones(n)
    vis = a[:, 8] if a.shape[1] > 8 else np.ones(n)
    vis = np.where(np.isfinite(vis) & (vis >= 0), vis, 1.0)
    if class_names is None:
        names = np.full(n, "vehicle", dtype=object)
        known = np.ones(n, bool)
    else:
        names = np.array(
            [class_names.get(int(c), "other") if np.isfinite(c) else "other" for c in cls], dtype=object
        )
        known = np.array([np.isfinite(c) and int(c) in class_names for c in cls], bool)
    distractor = (np.nan_to_num(conf, nan=1.0) == 0) | ~known | (vis < min_visibility)
    return GroundTruth(
        a[:, 0].astype(int), a[:, 1].astype(int), _xywh_to_xyxy(a[:, 2:6]), names, vis, distractor
    )


def load_uavdt_gt(
    gt_path: str | Path,
    ignore_path: str | Path | None = None,
    whole_path: str | Path | None = None,
) -> GroundTruth:
    """UAVDT-MOT ground truth (``_gt.txt`` scored boxes; categories from ``_gt_whole.txt`` when the
    scored file has none) with the ``_gt_ignore.txt`` regions."""
    a = _read_rows(Path(gt_path), 6)
    n = len(a)
    cats = a[:, 8] if a.shape[1] > 8 else np.full(n, -1.0)
    if whole_path is not None and Path(whole_path).is_file() and (cats < 1).any():
        w = _read_rows(Path(whole_path), 9)
        by_key = {(int(r[0]), int(r[1])): int(r[8]) for r in w}
        cats = np.array(
            [by_key.get((int(f), int(i)), -1) for f, i in zip(a[:, 0], a[:, 1], strict=True)], float
        )
    names = np.array([UAVDT_CLASSES.get(int(c), "car") for c in cats], dtype=object)
    ign = _read_rows(Path(ignore_path), 6) if ignore_path is not None else np.zeros((0, 6))
    return GroundTruth(
        a[:, 0].astype(int),
        a[:, 1].astype(int),
        _xywh_to_xyxy(a[:, 2:6]),
        names,
        np.ones(n),
        np.zeros(n, bool),
        ign[:, 0].astype(int),
        _xywh_to_xyxy(ign[:, 2:6]) if len(ign) else np.zeros((0, 4)),
    )


def load_visdrone_gt(path: str | Path) -> GroundTruth:
    """VisDrone-MOT annotations: vehicles scored, ignored regions and other classes handled per the
    benchmark (see the module docstring)."""
    a = _read_rows(Path(path), 8)
    score, cat = a[:, 6], a[:, 7].astype(int)
    occ = a[:, 9] if a.shape[1] > 9 else np.zeros(len(a))
    is_ignore = np.isin(cat, VISDRONE_IGNORE) | (score == 0)
    obj = ~is_ignore
    b = a[obj]
    names = np.array([VISDRONE_VEHICLES.get(int(c), "other") for c in cat[obj]], dtype=object)
    vis = np.array([VISDRONE_VISIBILITY.get(int(o), 1.0) if np.isfinite(o) else 1.0 for o in occ[obj]])
    distractor = ~np.isin(cat[obj], list(VISDRONE_VEHICLES))
    ign = a[is_ignore]
    return GroundTruth(
        b[:, 0].astype(int),
        b[:, 1].astype(int),
        _xywh_to_xyxy(b[:, 2:6]),
        names,
        vis,
        distractor,
        ign[:, 0].astype(int),
        _xywh_to_xyxy(ign[:, 2:6]) if len(ign) else np.zeros((0, 4)),
    )


def _read_csv_rows(
    path: Path, what: str, required: Sequence[str], columns_text: str, parse: Callable[[dict], T]
) -> list[T]:
    """``parse(row)`` of every row of a CSV file with a header; :class:`DatasetError` naming the file
    when it is missing, lacks a ``required`` column (``columns_text`` names them), or a row fails."""
    if not path.is_file():
        raise DatasetError(f"{what} not found: {path}")
    out: list[T] = []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = set(required) - set(reader.fieldnames or ())
        if missing:
            raise DatasetError(f"{path}: {what} needs the columns {columns_text}; missing {sorted(missing)}")
        for n, row in enumerate(reader, 2):
            try:
                out.append(parse(row))
            except (TypeError, ValueError) as exc:
                raise DatasetError(f"{path}:{n}: cannot read this row ({exc})") from exc
    return out


def load_gt_speeds(path: str | Path) -> GtSpeeds:
    path = Path(path)
    rows = _read_csv_rows(
        path,
        "speed ground truth",
        ("frame", "id", "speed_kmh"),
        "frame, id, speed_kmh",
        lambda row: (
            int(row["frame"]),
            int(row["id"]),
            float(row["speed_kmh"]),
            float(row.get("time_s") or "nan"),
        ),
    )
    frames, ids, speeds, times = zip(*rows, strict=True) if rows else ((), (), (), ())
    return GtSpeeds(np.array(frames, int), np.array(ids, int), np.array(speeds), np.array(times))


@dataclass(frozen=True, slots=True, eq=False)
class CameraTruth:
    """Exact world -> image homographies (simulator ``gt/camera.csv``); frames 1-based, ascending."""

    frames: np.ndarray  # (N,) int
    world_to_image: np.ndarray  # (N, 3, 3), h33 = 1

    def at(self, frame: int) -> np.ndarray | None:
        """The homography of a 1-based ``frame``, or None when the file has no such frame."""
        i = int(np.searchsorted(self.frames, frame))
        if i < len(self.frames) and self.frames[i] == frame:
            return self.world_to_image[i]
        return None


CAMERA_H_COLUMNS = tuple(f"h{i}{j}" for i in range(1, 4) for j in range(1, 4))


def load_camera_truth(path: str | Path) -> CameraTruth:
    """Read ``gt/camera.csv`` (columns ``frame``, ``h11`` .. ``h33``; others are ignored)."""
    path = Path(path)
    rows = _read_csv_rows(
        path,
        "camera ground truth",
        ("frame", *CAMERA_H_COLUMNS),
        "frame, h11 .. h33",
        lambda row: (int(row["frame"]), [float(row[c]) for c in CAMERA_H_COLUMNS]),
    )
    frames = [f for f, _ in rows]
    mats = [m for _, m in rows]
    f = np.array(frames, dtype=int)
    h = np.array(mats, dtype=np.float64).reshape(-1, 3, 3)
    if len(f) and (np.any(np.diff(f) <= 0) or f[0] < 1):
        raise DatasetError(f"{path}: frames must be 1-based and strictly increasing")
    if not np.all(np.isfinite(h)) or np.any(np.abs(h[:, 2, 2]) < 1e-12):
        raise DatasetError(f"{path}: a homography is not finite or has h33 = 0")
    return CameraTruth(f, h / h[:, 2:3, 2:3])


def load_gt_violations(path: str | Path) -> GtViolations:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise DatasetError(f"violation ground truth not found: {path}") from exc
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path} is not valid JSON: {exc}") from exc
    try:
        items = tuple(
            GtViolation(
                id=int(v["id"]),
                start_time_s=float(v["start_time_s"]),
                end_time_s=float(v["end_time_s"]),
                peak_speed_kmh=float(v.get("peak_speed_kmh", float("nan"))),
                mean_speed_kmh=float(v.get("mean_speed_kmh", float("nan"))),
                class_name=str(v.get("class_name", "vehicle")),
            )
            for v in data.get("violations", [])
        )
        return GtViolations(float(data["speed_limit_kmh"]), float(data.get("min_duration_s", 0.0)), items)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DatasetError(
            f"{path}: violation ground truth needs speed_limit_kmh and violations with id, "
            f"start_time_s, end_time_s ({type(exc).__name__}: {exc})"
        ) from exc
