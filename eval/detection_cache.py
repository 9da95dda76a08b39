"""Detections computed once: the detector's (and the road network's) output per frame, recorded on a
flight's first run and replayed on later runs of the same video.

A benchmark that varies only the telemetry (:mod:`eval.simulate.telemetry_errors`, the correction
arms of :mod:`eval.correction`) runs each video many times; the detector is the expensive part
(0.5-1 min per 1080p flight on a 2-core machine) and sees only pixels, which do not change. Flow,
tracking, speed and rules still run every time: they are cheap, and they are what telemetry changes.

Models are injected into :func:`pipelines.builder.build_pipeline` as the evaluator's oracle is:

* :class:`RecordingModel` wraps the loaded detector network and keeps, per frame, the input size it
  ran at and a copy of its detections; :class:`ReplayModel` serves them back (``detect`` /
  ``detect_at``, the network's interface, so the builder still wraps it in the GSD-sized
  :class:`~pipelines.motion.input_size.AutoSizedDetector` and the pipeline still filters, tracks and
  measures as it would). A frame missing from the cache raises :class:`DetectionCacheError`, never
  a silent detection; a frame asked for at another input size than recorded (the GSD from wrong
  telemetry picks another size) is served the recorded detections and counted
  (``size_mismatch_frames``), so a benchmark can say how often that happened.
* :class:`RecordingSegmenter` keeps the road U-Net's logits of each frame it runs on;
  :class:`ReplaySegmenter` feeds them back through the same :class:`~pipelines.road_network.UNetSegmenter`
  (sigmoid, resize), so the masks are the same bits.

:class:`DetectionCache` keys an entry by the video's content hash (SHA-256) and the settings that
shape the output: the detector section (its weights by content hash, not path; ``threads`` left
out) and, when the U-Net runs, its weights, encoder, input size, backend and device. An entry is a
folder ``<video hash>-<settings hash>/`` (``detections.npz``, ``road.npz``, ``meta.json``),
written to a temporary folder and renamed, so a killed run leaves none half-written.
:meth:`DetectionCache.open` returns a :class:`CacheRun`: it records when the entry is missing
(unless the cache was opened ``record=False``: then a miss is an error) and replays otherwise.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import supervision as sv

from pipelines.config import PipelineConfig
from pipelines.errors import AirPatrolError
from pipelines.types import Frame

log = logging.getLogger(__name__)

CACHE_VERSION = 1
_DIGESTS: dict[tuple, str] = {}  # (path, size, mtime) -> SHA-256, per process


class DetectionCacheError(AirPatrolError, RuntimeError):
    """A detection the cache cannot serve (a missing entry or frame); the message says why."""


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's content, or of a folder's files (names and contents, sorted)."""
    path = Path(path).resolve()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    stamp = (str(path), *((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files))
    if stamp not in _DIGESTS:
        h = hashlib.sha256()
        for p in files:
            if path.is_dir():
                h.update(p.relative_to(path).as_posix().encode() + b"\0")
            with p.open("rb") as fh:
                for block in iter(lambda fh=fh: fh.read(1 << 20), b""):
                    h.update(block)
        _DIGESTS[stamp] = h.hexdigest()
    return _DIGESTS[stamp]


@dataclass(frozen=True, slots=True)
class CacheKey:
    """What an entry was computed from: the video's content and the model settings."""

    video_sha256: str
    detector: dict[str, Any]
    road: dict[str, Any] | None  # None: the road network's output is not part of the entry

    @property
    def settings_sha256(self) -> str:
        text = json.dumps({"v": CACHE_VERSION, "detector": self.detector, "road": self.road}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    @property
    def name(self) -> str:
        return f"{self.video_sha256[:16]}-{self.settings_sha256[:16]}"


def cache_key(video: str | Path, cfg: PipelineConfig, *, road: bool) -> CacheKey:
    """The key of ``video`` run under ``cfg``; ``road``: the U-Net's output goes into the entry
    (the run would build the network: the road mask on and no segmenter injected)."""
    from pipelines.builder import DEFAULT_ROAD_CANDIDATES, default_weights  # loads torch
    from pipelines.motion.detector import resolve_weights

    det = cfg.detector.model_dump(mode="json", exclude={"threads"})
    weights = resolve_weights(cfg.detector.weights)
    det["weights"] = {"name": weights.name, "sha256": file_digest(weights)}
    road_key = None
    if road:
        rw = cfg.road.weights or default_weights(DEFAULT_ROAD_CANDIDATES)
        if rw is not None:
            r = cfg.road
            road_key = {
                "weights": {"name": Path(rw).name, "sha256": file_digest(rw)},
                "encoder": r.encoder,
                "input_size": None if r.input_size is None else list(r.input_size),
                "backend": r.backend,
                "device": r.device,
            }
    return CacheKey(file_digest(video), det, road_key)


def _copy(det: sv.Detections) -> dict[str, Any]:
    if det.mask is not None:
        raise DetectionCacheError("the detection cache keeps boxes, not segmentation masks")
    return {
        "xyxy": np.array(det.xyxy, copy=True),
        "confidence": None if det.confidence is None else np.array(det.confidence, copy=True),
        "class_id": None if det.class_id is None else np.array(det.class_id, copy=True),
        "data": {k: np.array(v, copy=True) for k, v in det.data.items()},
    }


class RecordingModel:
    """The detector network, keeping each frame's input size and detections (see the module)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.frames: dict[int, tuple[int, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    @property
    def weights(self) -> Path:
        return self.inner.weights

    @property
    def imgsz(self) -> int:
        return self.inner.imgsz

    def _keep(self, frame: Frame, size: int, det: sv.Detections) -> sv.Detections:
        with self._lock:
            if frame.index in self.frames:
                raise DetectionCacheError(f"frame {frame.index} detected twice while recording")
            self.frames[frame.index] = (size, _copy(det))
        return det

    def detect(self, frame: Frame) -> sv.Detections:
        return self._keep(frame, -1, self.inner.detect(frame))

    def detect_at(self, frame: Frame, imgsz: int) -> sv.Detections:
        return self._keep(frame, int(imgsz), self.inner.detect_at(frame, imgsz))


def _pack(frames: Mapping[int, tuple[int, dict[str, Any]]]) -> dict[str, np.ndarray]:
    """Per-frame detections as flat arrays (``frames``, ``sizes``, ``counts`` and the concatenated
    fields; ``data.<key>`` and ``has.<key>``: a data field and the frames that had it)."""
    order = sorted(frames)
    dets = [frames[i][1] for i in order]
    out: dict[str, np.ndarray] = {
        "frames": np.array(order, dtype=np.int64),
        "sizes": np.array([frames[i][0] for i in order], dtype=np.int64),
        "counts": np.array([len(d["xyxy"]) for d in dets], dtype=np.int64),
        "xyxy": np.concatenate([d["xyxy"].reshape(-1, 4) for d in dets])
        if dets
        else np.zeros((0, 4), np.float32),
    }
    for field in ("confidence", "class_id"):
        out[f"has.{field}"] = np.array([d[field] is not None for d in dets], dtype=bool)
        present = [d[field] for d in dets if d[field] is not None]
        out[field] = np.concatenate([v for v in present if len(v)] or present[:1]) if present else np.zeros(0)
    for key in sorted({k for d in dets for k in d["data"]}):
        out[f"has.data.{key}"] = np.array([key in d["data"] for d in dets], dtype=bool)
        values = [d["data"][key] for d in dets if key in d["data"]]
        joined = np.concatenate([v for v in values if len(v)] or values[:1])
        out[f"data.{key}"] = joined.astype(str) if joined.dtype == object else joined
    return out


class CacheEntry:
    """One recorded run: detections by frame (and road logits), read from an entry folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.meta = json.loads((path / "meta.json").read_text())
        with np.load(path / "detections.npz") as z:
            arrays = {k: z[k] for k in z.files}
        self._sizes = dict(zip(arrays["frames"].tolist(), arrays["sizes"].tolist(), strict=True))
        self._dets: dict[int, dict[str, Any]] = {}
        offsets = np.concatenate([[0], np.cumsum(arrays["counts"])])
        field_pos = {
            k: np.concatenate([[0], np.cumsum(arrays["counts"] * arrays[f"has.{k}"])])
            for k in self._fields(arrays)
        }
        for j, index in enumerate(arrays["frames"].tolist()):
            det: dict[str, Any] = {"xyxy": arrays["xyxy"][offsets[j] : offsets[j + 1]], "data": {}}
            for k, pos in field_pos.items():
                value = arrays[k][pos[j] : pos[j + 1]] if arrays[f"has.{k}"][j] else None
                if k.startswith("data."):
                    if value is not None:
                        det["data"][k[5:]] = value
                else:
                    det[k] = value
            self._dets[index] = det
        self.logits: dict[int, np.ndarray] = {}
        if (path / "road.npz").is_file():
            with np.load(path / "road.npz") as z:
                self.logits = dict(zip(z["frames"].tolist(), z["logits"], strict=True))

    @staticmethod
    def _fields(arrays: Mapping[str, np.ndarray]) -> list[str]:
        return ["confidence", "class_id", *(k for k in arrays if k.startswith("data."))]

    @property
    def frames(self) -> int:
        return int(self.meta["frames"])

    def size(self, index: int) -> int | None:
        return self._sizes.get(index)

    def detections(self, index: int) -> sv.Detections:
        """Frame ``index``'s detections, as fresh arrays (the pipeline adds to a detection's data)."""
        d = self._dets[index]
        det = sv.Detections(
            xyxy=d["xyxy"].copy(),
            confidence=None if d["confidence"] is None else d["confidence"].copy(),
            class_id=None if d["class_id"] is None else d["class_id"].copy(),
        )
        for k, v in d["data"].items():
            det.data[k] = v.copy()
        return det


class ReplayModel:
    """Serves an entry's detections in place of the detector network (see the module)."""

    def __init__(self, entry: CacheEntry, video: str | Path) -> None:
        self.entry = entry
        self.video = str(video)
        self.size_mismatch_frames = 0
        self.served = 0

    @property
    def weights(self) -> Path:
        return Path(self.entry.meta["detector_weights"])

    @property
    def imgsz(self) -> int:
        return int(self.entry.meta["detector_imgsz"])

    def _serve(self, frame: Frame, size: int) -> sv.Detections:
        recorded = self.entry.size(frame.index)
        if recorded is None:
            raise DetectionCacheError(
                f"frame {frame.index} of {self.video} is not in the detection cache {self.entry.path} "
                f"({self.entry.frames} frames recorded): record the flight again (a longer run, another "
                "detector schedule) rather than detect it here"
            )
        if recorded != size:
            if not self.size_mismatch_frames:
                log.warning(
                    "%s frame %d: the detector input size would be %d, the cache ran it at %d: "
                    "served the recorded detections (counted as size_mismatch_frames)",
                    self.video,
                    frame.index,
                    size,
                    recorded,
                )
            self.size_mismatch_frames += 1
        self.served += 1
        return self.entry.detections(frame.index)

    def detect(self, frame: Frame) -> sv.Detections:
        return self._serve(frame, -1)

    def detect_at(self, frame: Frame, imgsz: int) -> sv.Detections:
        return self._serve(frame, int(imgsz))


class _Tap:
    """A road network backend that keeps its last output (the logits)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.last: np.ndarray | None = None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.last = np.array(self.inner(x), dtype=np.float32, copy=True)
        return self.last


class RecordingSegmenter:
    """The road U-Net (:class:`~pipelines.road_network.UNetSegmenter`), keeping each run's logits."""

    def __init__(self, unet: Any) -> None:
        self.unet = unet
        self._tap = _Tap(unet.backend)
        unet.backend = self._tap
        self.logits: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()

    @property
    def input_size(self) -> tuple[int, int]:
        return tuple(self.unet.input_size)

    def segment(self, frame: Frame) -> np.ndarray:
        with self._lock:
            prob = self.unet.segment(frame)
            self.logits[frame.index] = self._tap.last
            return prob


class _Feed:
    def __init__(self) -> None:
        self.next: np.ndarray | None = None

    def __call__(self, _x: np.ndarray) -> np.ndarray:
        return self.next


class ReplaySegmenter:
    """An entry's logits through the engine's own :class:`~pipelines.road_network.UNetSegmenter`."""

    def __init__(self, entry: CacheEntry, video: str | Path) -> None:
        from pipelines.road_network import UNetSegmenter  # loads torch

        self.entry = entry
        self.video = str(video)
        self._feed = _Feed()
        self.unet = UNetSegmenter(self._feed, input_size=tuple(entry.meta["road_input_size"]))
        self._lock = threading.Lock()

    def segment(self, frame: Frame) -> np.ndarray:
        logits = self.entry.logits.get(frame.index)
        if logits is None:
            raise DetectionCacheError(
                f"the road network's output for frame {frame.index} of {self.video} is not in the "
                f"detection cache {self.entry.path} (recorded on frames {sorted(self.entry.logits)})"
            )
        with self._lock:
            self._feed.next = logits
            return self.unet.segment(frame)


class CacheRun:
    """One run of a video through the cache: :meth:`prepare` the models, then :meth:`finish`."""

    def __init__(self, cache: DetectionCache, video: Path, key: CacheKey) -> None:
        self.cache, self.video, self.key = cache, video, key
        self.path = cache.root / key.name
        self.entry = CacheEntry(self.path) if (self.path / "meta.json").is_file() else None
        if self.entry is None and not cache.record:
            raise DetectionCacheError(
                f"no detections of {video} under these detector settings in the cache {cache.root} "
                f"(entry {key.name}): run the flight once with recording on first"
            )
        self.mode = "replay" if self.entry is not None else "record"
        self._model: RecordingModel | ReplayModel | None = None
        self._segmenter: RecordingSegmenter | ReplaySegmenter | None = None

    def prepare(self, cfg: PipelineConfig, model: Any = None) -> tuple[PipelineConfig, Any, Any]:
        """(config, detector network, road segmenter or None) for ``build_pipeline(cfg, model=...,
        segmenter=...)``: recording wrappers around the real models, or the entry's replay."""
        if self.entry is not None:
            self._model = ReplayModel(self.entry, self.video)
            if self.key.road is not None:
                self._segmenter = ReplaySegmenter(self.entry, self.video)
                road = self.entry.meta["road"]
                cfg = cfg.with_overrides(
                    road={"input_size": road["input_size"], "threshold": road["threshold"]}
                )
            return cfg, self._model, self._segmenter
        from pipelines.builder import build_detector_model, build_road_segmenter  # loads torch

        self._model = RecordingModel(model if model is not None else build_detector_model(cfg.detector))
        if self.key.road is not None:
            built = build_road_segmenter(cfg.road)
            if built is None:
                raise DetectionCacheError("the road network's weights vanished since the cache key was made")
            unet, rcfg, _ = built
            cfg = cfg.with_overrides(road={"input_size": list(rcfg.input_size), "threshold": rcfg.threshold})
            self._segmenter = RecordingSegmenter(unet)
        return cfg, self._model, self._segmenter

    def finish(self, frames: int, cfg: PipelineConfig) -> None:
        """After the run: a recording is written (atomically); a replay has nothing to write."""
        if not isinstance(self._model, RecordingModel):
            return
        tmp = self.cache.root / f".{self.key.name}.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        np.savez(tmp / "detections.npz", **_pack(self._model.frames))
        meta: dict[str, Any] = {
            "version": CACHE_VERSION,
            "video": str(self.video),
            "video_sha256": self.key.video_sha256,
            "frames": int(frames),
            "detector": self.key.detector,
            "detector_weights": str(self._model.weights),
            "detector_imgsz": int(self._model.imgsz),
            "road": None,
        }
        if isinstance(self._segmenter, RecordingSegmenter):
            seg = self._segmenter
            idx = sorted(seg.logits)
            np.savez_compressed(
                tmp / "road.npz",
                frames=np.array(idx, np.int64),
                logits=np.stack([seg.logits[i] for i in idx]),
            )
            meta["road"] = {
                **(self.key.road or {}),
                "input_size": list(cfg.road.input_size),
                "threshold": cfg.road.threshold,
            }
            meta["road_input_size"] = list(seg.input_size)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        try:
            tmp.rename(self.path)
        except OSError:  # another process recorded the same entry meanwhile: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
        log.info("detection cache: recorded %d frames of %s as %s", frames, self.video, self.path.name)

    def metadata(self) -> dict[str, Any]:
        """What the run's report says about the cache."""
        out: dict[str, Any] = {"mode": self.mode, "entry": self.key.name}
        if isinstance(self._model, ReplayModel):
            out["size_mismatch_frames"] = self._model.size_mismatch_frames
        return out


class DetectionCache:
    """Entries under ``root`` (see the module). ``record=False``: replay only (a miss is an error)."""

    def __init__(self, root: str | Path, *, record: bool = True) -> None:
        self.root = Path(root)
        self.record = record
        self.root.mkdir(parents=True, exist_ok=True)

    def open(self, video: str | Path, cfg: PipelineConfig, *, road: bool) -> CacheRun:
        """The run of ``video`` under ``cfg``; ``road``: the U-Net would run (record or replay it too)."""
        return CacheRun(self, Path(video), cache_key(video, cfg, road=road))


__all__ = [
    "CacheEntry",
    "CacheKey",
    "CacheRun",
    "DetectionCache",
    "DetectionCacheError",
    "RecordingModel",
    "RecordingSegmenter",
    "ReplayModel",
    "ReplaySegmenter",
    "cache_key",
    "file_digest",
]
