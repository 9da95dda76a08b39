"""Evaluation datasets: sequences with ground truth, described by a folder or a small YAML file.

Layouts (ground-truth formats: :mod:`eval.groundtruth`):

* ``sim``: a folder written by :func:`eval.simulate.simulate_flight` (video.mp4, video.SRT,
  gt/gt.txt, gt/speeds.csv, gt/violations.json, flight.yaml), or by
  :func:`eval.simulate.derive_flight` (the same with real-world telemetry errors); its
  ``config.yaml``, where there is one, holds the flight's own pipeline overrides.
* ``mot``: a MOTChallenge sequence (seqinfo.ini, gt/gt.txt, a video or img1/).
* ``uavdt``: UAVDT-MOT files (``<seq>_gt.txt``, ``_gt_ignore.txt``, ``_gt_whole.txt``) beside a
  video or a frame folder.
* ``visdrone``: VisDrone-MOT (``sequences/<seq>/`` and ``annotations/<seq>.txt``).

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
        scored_classes: [car, van, truck, bus]   # optional: only tracks of these classes are scored
        config: m1303_site.yaml              # optional: this sequence's own pipeline overrides
      - name: sim60
        layout: sim
        path: sims/alt60_p90                 # a simulator folder fills in everything else

Relative paths are relative to the YAML file.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from eval.groundtruth import (
    CameraTruth,
    DatasetError,
    GroundTruth,
    GtSpeeds,
    GtViolations,
    load_camera_truth,
    load_gt_speeds,
    load_gt_violations,
    load_mot_gt,
    load_uavdt_gt,
    load_visdrone_gt,
)
from eval.simulate import FLIGHT_CONFIG, SIM_CLASS_NAMES, FlightSpec
from pipelines.config import PipelineConfig, read_yaml_mapping
from pipelines.motion.detector import CANONICAL_CLASSES

log = logging.getLogger(__name__)

Layout = Literal["mot", "uavdt", "visdrone", "sim"]
VIDEO_EXTENSIONS = (".mp4", ".mov", ".mkv", ".avi", ".m4v", ".ts")


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
    camera_truth: Path | None = None  # simulator gt/camera.csv: exact homographies (ego-motion error)
    road_polygon: tuple[tuple[float, float], ...] | None = None
    class_names: tuple[tuple[int, str], ...] | None = None  # mot layout: class column -> name
    min_visibility: float = 0.0
    # The benchmark's object classes (canonical names): predicted boxes of other classes (say a
    # motorcycle where only cars, trucks and buses are annotated) are left out of the scores, as a
    # MOT benchmark scores only its own classes. None: every predicted box is scored.
    scored_classes: tuple[str, ...] | None = None
    # the sequence's own pipeline overrides (a YAML of config sections, e.g. a site's height
    # reference: a simulated flight's config.yaml, eval.simulate.FLIGHT_CONFIG), applied under
    # the configuration being evaluated
    config: Path | None = None
    # a simulated flight whose vehicles are flat sprites (FlightSpec.vehicle_height false): the box
    # and the flow are on the road, and the run says so (eval.runner.sequence_config: speed.point_height_m 0)
    flat_vehicles: bool = False

    def load_config(self) -> dict[str, dict]:
        """The sequence's own overrides (:attr:`config`), as ``PipelineConfig.with_overrides`` takes them."""
        if self.config is None:
            return {}
        data = read_yaml_mapping(self.config, f"sequence {self.name}'s config", DatasetError)
        bad = [k for k, v in data.items() if not isinstance(v, dict) or k not in PipelineConfig.model_fields]
        if bad:
            raise DatasetError(
                f"{self.config}: each top-level key must be a config section mapping, not {bad}"
            )
        return data

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

    def load_camera_truth(self) -> CameraTruth | None:
        return load_camera_truth(self.camera_truth) if self.camera_truth is not None else None


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
    scored_classes: list[str] | None = None
    config: str | None = None  # the sequence's own pipeline overrides (a YAML of config sections)

    @field_validator("scored_classes")
    @classmethod
    def _known_classes(cls, v: list[str] | None) -> list[str] | None:
        unknown = sorted(set(v or ()) - set(CANONICAL_CLASSES))
        if unknown:
            raise ValueError(f"unknown classes {unknown}: expected some of {list(CANONICAL_CLASSES)}")
        return v


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
                "scored_classes": tuple(e.scored_classes) if e.scored_classes else None,
                "config": rel(e.config),
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
                seqs.append(dataclasses.replace(s, **changes))
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
        named |= {
            "telemetry": s.telemetry,
            "speeds": s.speeds,
            "violations": s.violations,
            "config": s.config,
        }
        for what, file in named.items():
            if file is not None and not Path(file).exists():
                raise DatasetError(f"{path}: sequence {s.name}: {what} not found: {file}")
    return Dataset(spec.name or path.stem, root, tuple(seqs))


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
        camera_truth=opt(gt_dir / "camera.csv"),
        min_visibility=0.3,
        config=opt(folder / FLIGHT_CONFIG),
        flat_vehicles=not spec.vehicle_height,
    )
