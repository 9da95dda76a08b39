"""The one place the dual-layer pipeline is assembled (live server and offline evaluator alike).

Per frame::

    detect -> ego-motion (background LK + RANSAC) -> road mask (U-Net every K frames, warped
    between runs) -> keep detections on the road -> ByteTrack on ego-compensated boxes ->
    per-track ground displacement (flow inside the box, minus camera motion, through this
    frame's ground homography) -> windowed robust speed -> speeding rules
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import supervision as sv

from pipelines.base_layer import (
    OpenVINOBackend,
    RoadCheckpoint,
    RoadMaskLayer,
    RoadSegmenter,
    UNetSegmenter,
    filter_by_mask,
    load_road_model,
)
from pipelines.config import DEFAULT_WEIGHTS_DIR, PipelineConfig, RoadConfig
from pipelines.errors import WeightsError
from pipelines.geometry import GroundProjector
from pipelines.ground import GroundModel
from pipelines.motion.detector import Detector, YoloDetector
from pipelines.motion.egomotion import EgoMotionEstimator
from pipelines.motion.flow import BoxFlowRefiner
from pipelines.motion.tracker import Tracker
from pipelines.rules import ViolationDetector
from pipelines.speed import SpeedEstimator
from pipelines.types import EgoMotion, Frame, FrameResult, Violation

log = logging.getLogger(__name__)

BORDER_MARGIN_PX = 2.0
# Complementary filter of in-box flow and box anchor (see Pipeline._displacements): the weight of
# flow, and the disagreement (share of the box size) beyond which flow is taken to have failed.
FLOW_WEIGHT = 0.8
FLOW_GATE = 0.25

STAGES = ("detect", "flow", "mask", "track", "speed", "rules")

# Shipped defaults (issue 5 trains and commits them); explicit paths in the config win.
DEFAULT_DETECTOR_CANDIDATES = (
    "airpatrol_vehicles_n_openvino_model",
    "airpatrol_vehicles_n.onnx",
    "airpatrol_vehicles_n.pt",
)
DEFAULT_ROAD_CANDIDATES = ("airpatrol_road_unet_mnv3s.pt", "airpatrol_road_unet.pt")


def default_weights(candidates: tuple[str, ...]) -> str | None:
    for name in candidates:
        path = DEFAULT_WEIGHTS_DIR / name
        if path.exists():
            return str(path)
    return None


def touches_border(
    xyxy: np.ndarray, width: int, height: int, margin_px: float = BORDER_MARGIN_PX
) -> np.ndarray:
    """True for boxes within ``margin_px`` of the image border."""
    xyxy = np.asarray(xyxy, dtype=float).reshape(-1, 4)
    return (
        (xyxy[:, 0] <= margin_px)
        | (xyxy[:, 1] <= margin_px)
        | (xyxy[:, 2] >= width - margin_px)
        | (xyxy[:, 3] >= height - margin_px)
    )


@dataclass(slots=True)
class _TrackMemory:
    """Where a track was last seen, to measure its displacement on the ground."""

    frame_index: int
    anchor_px: np.ndarray  # (2,) pixel in that frame
    cum_h: np.ndarray  # reference -> that frame, static ground
    box: np.ndarray  # (4,) xyxy in that frame


@dataclass
class Pipeline:
    """Stateful per-stream engine; build it with :func:`build_pipeline`."""

    config: PipelineConfig
    detector: Detector
    road: RoadMaskLayer
    egomotion: EgoMotionEstimator | None
    tracker: Tracker
    refiner: BoxFlowRefiner | None
    ground: GroundModel
    speed: SpeedEstimator
    rules: ViolationDetector
    metadata: dict = field(default_factory=dict)

    _prev_gray: np.ndarray | None = None
    _prev_index: int = -1
    _prev_time: float | None = None
    _cum_h: np.ndarray = field(default_factory=lambda: np.eye(3))
    _tracks: dict[int, _TrackMemory] = field(default_factory=dict)
    frames_processed: int = 0

    # ---------------------------------------------------------------- helpers
    def _detect(self, frame: Frame) -> sv.Detections:
        detect_frame = getattr(self.detector, "detect_frame", None)
        dets = detect_frame(frame) if detect_frame is not None else self.detector(frame.image)
        if "class_name" not in dets.data:
            dets.data["class_name"] = np.full(len(dets), "vehicle", dtype=object)
        return dets

    def _anchors(self, xyxy: np.ndarray) -> np.ndarray:
        x = (xyxy[:, 0] + xyxy[:, 2]) / 2.0
        y = xyxy[:, 3] if self.config.speed.anchor == "bottom" else (xyxy[:, 1] + xyxy[:, 3]) / 2.0
        return np.column_stack([x, y])

    def _displacements(
        self,
        gray: np.ndarray,
        tracked: sv.Detections,
        ego: EgoMotion,
        proj: GroundProjector | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each tracked vehicle's position now (pixels) and ground displacement (metres) since it
        was last measured; NaN displacement = unknown (a new track, or no ground scale)."""
        n = len(tracked)
        anchors = self._anchors(tracked.xyxy) if n else np.zeros((0, 2))
        positions = anchors.copy()
        disp = np.full((n, 2), np.nan)
        ids = tracked.tracker_id.astype(int) if n else np.zeros(0, int)
        prev_idx = [i for i, tid in enumerate(ids) if tid in self._tracks]
        if not prev_idx:
            return positions, disp
        prev_pos = np.array([self._tracks[ids[i]].anchor_px for i in prev_idx])
        # Where the (static) ground under each previous position lies in this frame.
        static_now = np.empty_like(prev_pos)
        for row, i in enumerate(prev_idx):
            mem = self._tracks[ids[i]]
            p = (self._cum_h @ np.linalg.inv(mem.cum_h)) @ np.array([*mem.anchor_px, 1.0])
            static_now[row] = p[:2] / p[2]
        # Sub-pixel refinement for tracks seen in the previous frame: a complementary filter.
        # Flow inside the box carries the frame-to-frame motion (precise, but possibly biased by
        # the aperture problem); the detector's box anchors the position (unbiased, but jittery).
        # position = w * (previous position + flow) + (1 - w) * box anchor. A constant flow bias
        # then only offsets the position by a constant, which no speed fit sees, and box jitter is
        # smoothed instead of accumulating.
        if self.refiner is not None and self._prev_gray is not None:
            rows = [r for r, i in enumerate(prev_idx) if self._tracks[ids[i]].frame_index == self._prev_index]
            if rows:
                prev_boxes = np.array([self._tracks[ids[prev_idx[r]]].box for r in rows])
                flow = self.refiner.displacements(self._prev_gray, gray, prev_boxes, ego.homography)
                for r, d in zip(rows, flow, strict=True):
                    i = prev_idx[r]
                    box = tracked.xyxy[i]
                    size = max(box[2] - box[0], box[3] - box[1])
                    predicted = prev_pos[r] + d
                    if np.all(np.isfinite(d)) and np.linalg.norm(predicted - anchors[i]) < FLOW_GATE * size:
                        positions[i] = FLOW_WEIGHT * predicted + (1.0 - FLOW_WEIGHT) * anchors[i]
        if proj is not None:
            disp[prev_idx] = proj.to_ground(positions[prev_idx]) - proj.to_ground(static_now)
        return positions, disp

    # ---------------------------------------------------------------- main
    def process(self, frame: Frame) -> FrameResult:
        timings: dict[str, float] = {}
        warnings: list[str] = []
        clock = time.perf_counter

        t0 = clock()
        detections = self._detect(frame)
        t1 = clock()
        timings["detect"] = (t1 - t0) * 1e3

        gray = cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY)
        if self.egomotion is not None:
            ego = self.egomotion.update(gray, detections.xyxy if len(detections) else None)
            if not ego.valid:
                warnings.append("ego-motion estimate unreliable for this frame")
        else:
            ego = EgoMotion.identity()
        t2 = clock()
        timings["flow"] = (t2 - t1) * 1e3

        mask = self.road.update(frame, ego)
        detections = filter_by_mask(detections, mask, self.config.road.min_overlap)
        t3 = clock()
        timings["mask"] = (t3 - t2) * 1e3

        tracked = self.tracker.update(detections, ego)
        self._cum_h = ego.homography @ self._cum_h
        self._cum_h /= self._cum_h[2, 2]
        t4 = clock()
        timings["track"] = (t4 - t3) * 1e3

        proj = self.ground.projector(frame)
        ids = tracked.tracker_id.astype(int) if tracked.tracker_id is not None else np.zeros(0, int)
        # A box cut by the image border moves slower than its vehicle (it grows or shrinks as the
        # vehicle enters or leaves): such boxes are not measured.
        measurable = ~touches_border(tracked.xyxy, frame.width, frame.height)
        if self._prev_time is not None and frame.timestamp_s <= self._prev_time:
            warnings.append(f"non-increasing timestamp {frame.timestamp_s:.4f} s: speed update skipped")
            speeds = {}
        else:
            positions, disp = self._displacements(gray, tracked[measurable], ego, proj)
            speeds = self.speed.update(frame.timestamp_s, ids[measurable], disp) if proj is not None else {}
            self._prev_time = frame.timestamp_s
            # Remember where each measurable track is now (a clipped box keeps its last full view).
            for row, i in enumerate(np.flatnonzero(measurable)):
                self._tracks[int(ids[i])] = _TrackMemory(
                    frame.index, positions[row], self._cum_h.copy(), tracked.xyxy[i].copy()
                )
        anchors = self._anchors(tracked.xyxy) if len(tracked) else np.zeros((0, 2))
        horizon = self.config.tracker.lost_track_buffer + 1
        for tid in [t for t, m in self._tracks.items() if frame.index - m.frame_index > horizon]:
            del self._tracks[tid]
            self.speed.forget(tid)
        n = len(tracked)
        tracked.data["speed_kmh"] = np.array(
            [speeds[t].speed_kmh if t in speeds else np.nan for t in ids], dtype=float
        )
        tracked.data["speed_sigma_kmh"] = np.array(
            [speeds[t].sigma_kmh if t in speeds else np.nan for t in ids], dtype=float
        )
        ground_xy = proj.to_ground(anchors) if (proj is not None and n) else np.full((n, 2), np.nan)
        tracked.data["ground_xy_m"] = ground_xy
        t5 = clock()
        timings["speed"] = (t5 - t4) * 1e3

        violations = self.rules.update(frame, tracked, speeds, ground_xy)
        t6 = clock()
        timings["rules"] = (t6 - t5) * 1e3
        timings["total"] = (t6 - t0) * 1e3

        self._prev_gray = gray
        self._prev_index = frame.index
        self.frames_processed += 1
        gsd = (
            float(proj.gsd_at(np.array([[frame.width / 2, frame.height / 2]]))[0])
            if proj is not None
            else None
        )
        if proj is None:
            warnings.append(f"speeds disabled: {self.ground.status.reason}")
        elif self.ground.status.assumption:
            warnings.append(self.ground.status.assumption)
        return FrameResult(
            frame=frame,
            detections=tracked,
            road_mask=mask,
            ego=ego,
            gsd_m_per_px=gsd,
            speeds=speeds,
            violations=tuple(violations),
            timings_ms=timings,
            warnings=tuple(warnings),
        )

    def finish(self) -> list[Violation]:
        """Close the stream: every open violation is returned (and nothing is lost)."""
        return self.rules.finish()


_ROAD_NETWORKS: dict[tuple, tuple[Any, RoadCheckpoint]] = {}
_ROAD_LOCK = threading.Lock()


def _road_network(weights: Path, rcfg: RoadConfig) -> tuple[Any, RoadCheckpoint]:
    """The road U-Net as a segmenter backend, loaded (and converted for OpenVINO) once per process.

    The live server builds one pipeline per stream, often several at once: they share one network
    (read-only; OpenVINO streams each get their own infer request) instead of each loading and
    converting it, which costs seconds and is not safe to do from several threads at a time.
    """
    path = weights.resolve()
    stamp = path.stat().st_mtime_ns if path.exists() else None
    key = (str(path), stamp, rcfg.encoder, rcfg.device, rcfg.backend, rcfg.input_size, rcfg.torch_threads)
    with _ROAD_LOCK:
        if key not in _ROAD_NETWORKS:
            if rcfg.torch_threads is not None and rcfg.device == "cpu":
                import torch

                torch.set_num_threads(rcfg.torch_threads)
            model, ckpt = load_road_model(weights, rcfg.encoder, device=rcfg.device)
            network: Any = model
            if rcfg.backend == "openvino" and rcfg.device == "cpu":
                size = rcfg.resolved(ckpt.input_size).input_size
                network = OpenVINOBackend(model, size, num_threads=rcfg.torch_threads)
            _ROAD_NETWORKS[key] = (network, ckpt)
        network, ckpt = _ROAD_NETWORKS[key]
    return (network.fork() if isinstance(network, OpenVINOBackend) else network), ckpt


def build_road_segmenter(rcfg: RoadConfig) -> tuple[UNetSegmenter, RoadConfig, Path] | None:
    """The road U-Net of ``rcfg`` exactly as the pipeline runs it: ``(segmenter, config with the
    checkpoint's input size and threshold filled in, weights path)``; None without weights
    (``rcfg.weights`` unset and nothing shipped under weights/)."""
    weights = rcfg.weights if rcfg.weights is not None else default_weights(DEFAULT_ROAD_CANDIDATES)
    if weights is None:
        return None
    backend, ckpt = _road_network(Path(weights), rcfg)
    rcfg = rcfg.resolved(ckpt.input_size, ckpt.threshold)
    return UNetSegmenter(backend, input_size=rcfg.input_size, device=rcfg.device), rcfg, Path(weights)


def build_pipeline(
    config: PipelineConfig,
    *,
    detector: Detector | None = None,
    segmenter: RoadSegmenter | None = None,
) -> Pipeline:
    """Assemble the pipeline from its config. Models may be injected (tests, the evaluator's oracle)."""
    meta: dict = {}
    if detector is None:
        dcfg = config.detector
        if dcfg.weights is None:
            found = default_weights(DEFAULT_DETECTOR_CANDIDATES)
            if found is None:
                raise WeightsError(
                    "no vehicle detector weights: pass --detector PATH (a .pt, .onnx or OpenVINO folder "
                    f"ultralytics can load) or put the shipped model under {DEFAULT_WEIGHTS_DIR}/"
                )
            dcfg = dcfg.model_copy(update={"weights": found})
        detector = YoloDetector.from_config(dcfg)
        meta["detector"] = str(dcfg.weights)
    else:
        meta["detector"] = type(detector).__name__

    rcfg = config.road
    if rcfg.enabled and segmenter is None:
        built = build_road_segmenter(rcfg)
        if built is not None:
            segmenter, rcfg, weights = built
            meta["road_backend"] = rcfg.backend if rcfg.device == "cpu" else rcfg.device
            meta["road_weights"] = str(weights)
            meta["road_threshold"] = rcfg.threshold
        elif rcfg.polygon is None:
            log.warning("no road U-Net weights: the road mask is disabled (all detections are kept)")
    road = RoadMaskLayer(
        rcfg, segmenter if rcfg.enabled else None, min_early_gap_frames=rcfg.min_early_gap_frames
    )
    meta["road_mask"] = road.status

    ego = EgoMotionEstimator(config.egomotion) if config.egomotion.enabled else None
    meta["egomotion"] = "enabled" if ego is not None else "disabled"
    pipeline = Pipeline(
        config=config,
        detector=detector,
        road=road,
        egomotion=ego,
        tracker=Tracker(config.tracker),
        refiner=BoxFlowRefiner() if config.tracker.refine_with_flow else None,
        ground=GroundModel(config.camera),
        speed=SpeedEstimator(config.speed),
        rules=ViolationDetector(config.rules),
        metadata=meta,
    )
    log.info("pipeline built: %s", meta)
    return pipeline
