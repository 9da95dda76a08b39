"""Evaluation datasets: sequences with ground truth, described by a folder or a small YAML file.

Layouts and their ground truth:

* ``sim``: a folder written by :func:`eval.simulate.simulate_flight` (video.mp4, video.SRT,
  gt/gt.txt, gt/speeds.csv, gt/violations.json, flight.yaml).
* ``mot``: MOTChallenge ``gt.txt`` (frame,id,x,y,w,h,conf,class,visibility). ``conf == 0`` rows
  ("zero marked") and classes outside ``class_names`` (when given) are distractors.
* ``uavdt``: UAVDT-MOT. ``<seq>_gt.txt`` holds the boxes scored by the benchmark and
  ``<seq>_gt_ignore.txt`` the ignore regions; ``<seq>_gt_whole.txt`` gives the categories
  (1 car, 2 truck, 3 bus). Columns: frame_index,target_id,bbox_left,bbox_top,bbox_width,
  bbox_height,out_of_view,occlusion,object_category. Protocol (devkit ``dropObjectsInIgr``): ground
  truth and predictions with at least half of their box inside the ignore regions are removed.
* ``visdrone``: VisDrone-MOT (frame,id,x,y,w,h,score,category,truncation,occlusion). Scored vehicle
  categories: 4 car, 5 van, 6 truck, 9 bus (the benchmark scores these plus pedestrians). Category
  0 (ignored region), 11 (others) and rows with score 0 are ignore regions; the other categories
  (people, bicycles, tricycles, motors) are distractors: predictions matching them are not counted.

A dataset YAML::

    name: my-eval
    sequences:
      - name: m1303
        layout: uavdt
        video: uavdt/demo_M1303.mp4          # a video file or a frame folder
        gt: uavdt/M1303_gt.txt
        ignore: uavdt/M1303_gt_ignore.txt
        camera: dji_mavic_3                  # fixed camera when there is no telemetry
        altitude_m: 80
        pitch_deg: -60
        road_polygon: [[0, 200], [1023, 150], [1023, 539], [0, 539]]   # optional, image pixels
      - name: sim60
        layout: sim
        path: sims/alt60_p90                 # a simulator folder fills in everything else

Relative paths are relative to the YAML file.
"""

from __future__ import annotations

import csv
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from eval.oracle import GtFrame
from eval.simulate import SIM_CLASS_NAMES
from pipelines.errors import AirPatrolError

log = logging.getLogger(__name__)

Layout = Literal["mot", "uavdt", "visdrone", "sim"]
VIDEO_EXTENSIONS = (".mp4", ".mov", ".mkv", ".avi", ".m4v", ".ts")

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
        sel = self.frames <= max_frames
        isel = self.ignore_frames <= max_frames
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


def load_gt_speeds(path: str | Path) -> GtSpeeds:
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"speed ground truth not found: {path}")
    frames, ids, speeds, times = [], [], [], []
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"frame", "id", "speed_kmh"} - set(reader.fieldnames or ())
        if missing:
            raise DatasetError(
                f"{path}: speed ground truth needs the columns frame, id, speed_kmh; missing {sorted(missing)}"
            )
        for n, row in enumerate(reader, 2):
            try:
                frames.append(int(row["frame"]))
                ids.append(int(row["id"]))
                speeds.append(float(row["speed_kmh"]))
                times.append(float(row.get("time_s") or "nan"))
            except (TypeError, ValueError) as exc:
                raise DatasetError(f"{path}:{n}: cannot read this row ({exc})") from exc
    return GtSpeeds(np.array(frames, int), np.array(ids, int), np.array(speeds), np.array(times))


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


# --------------------------------------------------------------------------------------------------
# Sequences and datasets
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SequenceSpec:
    """One evaluation sequence: its frames, ground truth and what the camera was."""

    name: str
    layout: Layout
    video: Path  # video file or frame folder
    gt: Path | None = None
    ignore: Path | None = None
    gt_whole: Path | None = None
    telemetry: Path | None = None
    camera: str | None = None
    altitude_m: float | None = None
    pitch_deg: float | None = None
    focal_length_mm: float | None = None
    speeds: Path | None = None
    violations: Path | None = None
    flight_dir: Path | None = None  # simulator folder (oracle road masks)
    road_polygon: tuple[tuple[float, float], ...] | None = None
    class_names: tuple[tuple[int, str], ...] | None = None  # mot layout: class column -> name
    min_visibility: float = 0.0

    def load_gt(self) -> GroundTruth | None:
        if self.gt is None:
            return None
        if self.layout == "uavdt":
            return load_uavdt_gt(self.gt, self.ignore, self.gt_whole)
        if self.layout == "visdrone":
            return load_visdrone_gt(self.gt)
        names = (
            dict(self.class_names)
            if self.class_names
            else (SIM_CLASS_NAMES if self.layout == "sim" else None)
        )
        return load_mot_gt(self.gt, names, self.min_visibility)

    def load_speeds(self) -> GtSpeeds | None:
        return load_gt_speeds(self.speeds) if self.speeds is not None else None

    def load_violations(self) -> GtViolations | None:
        return load_gt_violations(self.violations) if self.violations is not None else None


@dataclass(frozen=True, slots=True)
class Dataset:
    name: str
    root: Path
    sequences: tuple[SequenceSpec, ...]


class _SequenceEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    layout: Layout | None = None
    path: str | None = None  # a folder to auto-detect (sim, MOT, UAVDT)
    video: str | None = None
    frames: str | None = None
    gt: str | None = None
    ignore: str | None = None
    gt_whole: str | None = None
    telemetry: str | None = None
    camera: str | None = None
    altitude_m: float | None = None
    pitch_deg: float | None = None
    focal_length_mm: float | None = None
    speeds: str | None = None
    violations: str | None = None
    road_polygon: list[tuple[float, float]] | None = None
    class_names: dict[int, str] | None = None
    min_visibility: float = 0.0


class _DatasetFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    sequences: list[_SequenceEntry]


def load_dataset(path: str | Path) -> Dataset:
    """A dataset YAML, a folder of sequences, or a single sequence folder."""
    path = Path(path)
    if not path.exists():
        raise DatasetError(f"dataset not found: {path}")
    if path.is_file():
        return _from_yaml(path)
    seqs = detect_sequences(path)
    if not seqs:
        raise DatasetError(
            f"no sequences found in {path}: expected a simulator folder (flight.yaml), a MOT sequence "
            "(seqinfo.ini + gt/gt.txt), UAVDT files (<seq>_gt.txt + a video) or VisDrone-MOT "
            "(sequences/ + annotations/), or pass a dataset YAML"
        )
    return Dataset(path.name, path, tuple(seqs))


def _from_yaml(path: Path) -> Dataset:
    try:
        raw = yaml.safe_load(path.read_text()) or {}
        spec = _DatasetFile.model_validate(raw)
    except yaml.YAMLError as exc:
        raise DatasetError(f"{path} is not valid YAML: {exc}") from exc
    except ValidationError as exc:
        raise DatasetError(f"invalid dataset file {path}:\n{exc}") from exc
    root = path.parent

    def rel(p: str | None) -> Path | None:
        if p is None:
            return None
        q = Path(p).expanduser()
        return q if q.is_absolute() else (root / q)

    seqs: list[SequenceSpec] = []
    for i, e in enumerate(spec.sequences):
        overrides = {
            k: v
            for k, v in {
                "camera": e.camera,
                "altitude_m": e.altitude_m,
                "pitch_deg": e.pitch_deg,
                "focal_length_mm": e.focal_length_mm,
                "road_polygon": tuple(tuple(p) for p in e.road_polygon) if e.road_polygon else None,
            }.items()
            if v is not None
        }
        if e.path is not None:
            found = detect_sequences(rel(e.path))
            if not found:
                raise DatasetError(f"{path}: sequence {i + 1}: nothing recognised in {rel(e.path)}")
            for s in found:
                changes = dict(overrides)
                if e.name and len(found) == 1:
                    changes["name"] = e.name
                seqs.append(_replace(s, **changes))
            continue
        video = rel(e.video or e.frames)
        if video is None:
            raise DatasetError(f"{path}: sequence {i + 1} needs 'video', 'frames' or 'path'")
        layout = e.layout or "mot"
        seqs.append(
            SequenceSpec(
                name=e.name or video.stem,
                layout=layout,
                video=video,
                gt=rel(e.gt),
                ignore=rel(e.ignore),
                gt_whole=rel(e.gt_whole),
                telemetry=rel(e.telemetry),
                speeds=rel(e.speeds),
                violations=rel(e.violations),
                class_names=tuple(sorted(e.class_names.items())) if e.class_names else None,
                min_visibility=e.min_visibility,
                **overrides,
            )
        )
    for s in seqs:  # before any sequence runs, not after the first one took minutes
        named = {"video or frame folder": s.video, "gt": s.gt, "ignore": s.ignore, "gt_whole": s.gt_whole}
        named |= {"telemetry": s.telemetry, "speeds": s.speeds, "violations": s.violations}
        for what, file in named.items():
            if file is not None and not Path(file).exists():
                raise DatasetError(f"{path}: sequence {s.name}: {what} not found: {file}")
    return Dataset(spec.name or path.stem, root, tuple(seqs))


def _replace(seq: SequenceSpec, **changes) -> SequenceSpec:
    import dataclasses

    return dataclasses.replace(seq, **changes)


def detect_sequences(folder: Path, depth: int = 1) -> list[SequenceSpec]:
    """Recognise the sequences in a folder (itself, or its sub-folders one level down)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    one = _detect_one(folder)
    if one:
        return one
    if depth <= 0:
        return []
    out: list[SequenceSpec] = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
        out.extend(detect_sequences(sub, depth - 1))
    return out


def _detect_one(folder: Path) -> list[SequenceSpec]:
    if (folder / "flight.yaml").is_file() and (folder / "video.mp4").is_file():
        return [sim_sequence(folder)]
    uavdt = sorted(folder.glob("*_gt.txt")) or sorted(folder.glob("*_gt_whole.txt"))
    videos = sorted(p for p in folder.iterdir() if p.suffix.lower() in VIDEO_EXTENSIONS)
    if uavdt:
        out = []
        for gt in uavdt:
            prefix = gt.name.rsplit("_gt", 1)[0]
            match = [v for v in videos if prefix in v.stem] or (videos if len(videos) == 1 else [])
            frames = folder / prefix
            video = match[0] if match else (frames if frames.is_dir() else None)
            if video is None:
                log.warning("UAVDT ground truth %s has no video or frame folder next to it", gt)
                continue
            ignore = folder / f"{prefix}_gt_ignore.txt"
            whole = folder / f"{prefix}_gt_whole.txt"
            out.append(
                SequenceSpec(
                    name=prefix,
                    layout="uavdt",
                    video=video,
                    gt=gt,
                    ignore=ignore if ignore.is_file() else None,
                    gt_whole=whole if whole.is_file() else None,
                )
            )
        return out
    if (folder / "sequences").is_dir() and (folder / "annotations").is_dir():
        out = []
        for seq_dir in sorted(p for p in (folder / "sequences").iterdir() if p.is_dir()):
            ann = folder / "annotations" / f"{seq_dir.name}.txt"
            out.append(SequenceSpec(seq_dir.name, "visdrone", seq_dir, ann if ann.is_file() else None))
        return out
    if (folder / "seqinfo.ini").is_file() and (folder / "gt" / "gt.txt").is_file():
        video = next((v for v in videos), None)
        img = folder / "img1"
        return [
            SequenceSpec(
                folder.name, "mot", video or (img if img.is_dir() else folder), folder / "gt" / "gt.txt"
            )
        ]
    return []


def sim_sequence(folder: Path) -> SequenceSpec:
    """The sequence of a simulator output folder (telemetry carries altitude, pitch and focal length)."""
    from eval.simulate import FlightSpec

    spec = FlightSpec.from_yaml(folder / "flight.yaml")
    gt_dir = folder / "gt"

    def opt(p: Path) -> Path | None:
        return p if p.exists() else None

    return SequenceSpec(
        name=folder.name,
        layout="sim",
        video=folder / "video.mp4",
        gt=opt(gt_dir / "gt.txt"),
        telemetry=opt(folder / "video.SRT"),
        camera=spec.camera,
        speeds=opt(gt_dir / "speeds.csv"),
        violations=opt(gt_dir / "violations.json"),
        flight_dir=folder,
        min_visibility=0.3,
    )
