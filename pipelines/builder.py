"""The one place the dual-layer pipeline is assembled (live server and offline evaluator alike):
:func:`build_pipeline` turns a :class:`~pipelines.config.PipelineConfig` into a
:class:`~pipelines.pipeline.Pipeline`, loading the models the config names (or the shipped ones)
unless they are injected. The road network is cached per process (:func:`build_road_segmenter`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from pipelines.base_layer import RoadMaskLayer
from pipelines.config import DEFAULT_WEIGHTS_DIR, DetectorConfig, PipelineConfig, RoadConfig
from pipelines.devices import is_cuda, resolve_device
from pipelines.displacement import GroundDisplacement
from pipelines.ground import GroundModel
from pipelines.motion.detector import Detector, YoloDetector
from pipelines.motion.egomotion import EgoMotionEstimator
from pipelines.motion.flow import BoxFlowRefiner
from pipelines.motion.input_size import AutoSizedDetector
from pipelines.motion.keyframes import BoxPropagator, KeyframeScheduler
from pipelines.motion.relink import TrackRelinker
from pipelines.motion.sensor_motion import IdealMotion
from pipelines.motion.shared_detector import SharedDetector, default_batch
from pipelines.motion.tracker import Tracker
from pipelines.pipeline import Pipeline
from pipelines.pitch_check import PitchCheck
from pipelines.road_network import (
    BatchedBackend,
    OpenVINOBackend,
    RoadCheckpoint,
    RoadSegmenter,
    TorchBackend,
    UNetSegmenter,
    load_road_model,
)
from pipelines.rules import ViolationDetector
from pipelines.scale_session import ScaleCheck
from pipelines.speed import SpeedEstimator
from pipelines.terrain_io import load_terrain
from pipelines.timestamps import TimestampCheck

log = logging.getLogger(__name__)

# Shipped road models (the detector's: pipelines.motion.detector.DEFAULT_WEIGHT_NAMES); explicit
# paths in the config win.
DEFAULT_ROAD_CANDIDATES = ("airpatrol_road_unet_mnv3s.pt", "airpatrol_road_unet.pt")


def default_weights(candidates: tuple[str, ...]) -> str | None:
    for name in candidates:
        path = DEFAULT_WEIGHTS_DIR / name
        if path.exists():
            return str(path)
    return None


_ROAD_NETWORKS: dict[tuple, tuple[Any, RoadCheckpoint]] = {}
_ROAD_LOCK = threading.Lock()


def _road_network(weights: Path, rcfg: RoadConfig) -> tuple[Any, RoadCheckpoint]:
    """The road U-Net as a segmenter backend, loaded (and converted for OpenVINO) once per process.

    The live server builds one pipeline per stream, often several at once: they share one network
    (read-only; OpenVINO streams each get their own infer request, a torch network runs the streams'
    inputs in batches: :class:`~pipelines.road_network.BatchedBackend`) instead of each loading and
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
            if rcfg.backend == "openvino" and rcfg.device == "cpu":
                size = rcfg.resolved(ckpt.input_size).input_size
                network: Any = OpenVINOBackend(model, size, num_threads=rcfg.torch_threads)
            else:  # torch: the streams' runs batched (a GPU's above all; on the CPU, torch's batches
                # of 4-8 cost more an image than one alone, 2 less: docs/scale-out.md)
                batch = default_batch(rcfg.device) if is_cuda(rcfg.device) else 2
                network = BatchedBackend(TorchBackend(model, rcfg.device), batch)
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
    rcfg = rcfg.model_copy(update={"device": resolve_device(rcfg.device, "the road U-Net")})
    backend, ckpt = _road_network(Path(weights), rcfg)
    rcfg = rcfg.resolved(ckpt.input_size, ckpt.threshold)
    return UNetSegmenter(backend, input_size=rcfg.input_size, device=rcfg.device), rcfg, Path(weights)


def build_detector_model(dcfg: DetectorConfig) -> YoloDetector:
    """The detector network of ``dcfg`` loaded on its device (the shipped one for that device when
    ``weights`` is unset: :meth:`YoloDetector.from_config`)."""
    return YoloDetector.from_config(dcfg)


def _displacement(config: PipelineConfig, refiner: BoxFlowRefiner) -> GroundDisplacement:
    """The ground displacement stage: the in-box flow where configured, and the camera's motion in
    the sensor's ideal image smoothed as the ego-motion is."""
    ego = config.egomotion
    return GroundDisplacement(
        config.speed.anchor,
        refiner if config.tracker.refine_with_flow else None,
        IdealMotion(ego.smooth_window, ego.smooth_gate_px),
    )


def build_pipeline(
    config: PipelineConfig,
    *,
    detector: Detector | None = None,
    segmenter: RoadSegmenter | None = None,
    model: YoloDetector | SharedDetector | None = None,
) -> Pipeline:
    """Assemble the pipeline from its config. Models may be injected (tests, the evaluator's oracle).
    ``detector`` replaces the whole detection stage; ``model`` is the loaded network the stage runs
    (a server's :class:`SharedDetector`), sized per frame as the config says like a loaded one."""
    meta: dict = {}
    terrain = None if config.camera.terrain is None else load_terrain(config.camera.terrain)
    if detector is None:
        dcfg = config.detector
        if model is None:
            model = build_detector_model(dcfg)
        detector = model
        meta["detector"] = str(model.weights)
        meta["detector_device"] = str(getattr(model, "device", dcfg.device))
        if dcfg.imgsz == "auto":
            detector = AutoSizedDetector(
                detector, GroundModel(config.camera, terrain, quiet=True), dcfg.auto_size
            )
            meta["detector_imgsz"] = detector.frames_at  # {input size: frames}, filled as it runs
        else:
            meta["detector_imgsz"] = dcfg.imgsz
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
    kcfg = config.keyframes
    refiner = BoxFlowRefiner()
    meta["detect_every"] = (
        f"keyframes: at least every {kcfg.interval} frames ({kcfg.max_interval} when behind)"
        if kcfg.enabled
        else "every frame"
    )
    pipeline = Pipeline(
        config=config,
        detector=detector,
        road=road,
        egomotion=ego,
        tracker=Tracker(config.tracker),
        displacement=_displacement(config, refiner),
        ground=GroundModel(config.camera, terrain, derive=config.scale_check),
        speed=SpeedEstimator(config.speed),
        rules=ViolationDetector(config.rules, scale_sigma_frac=config.speed.altitude_sigma_frac),
        metadata=meta,
        timestamps=TimestampCheck(config.tracker.frame_rate),
        keyframes=KeyframeScheduler(kcfg) if kcfg.enabled else None,
        scale_check=ScaleCheck(config.scale_check) if config.scale_check.enabled else None,
        pitch_check=PitchCheck(config.pitch_check) if config.pitch_check.enabled else None,
        propagator=BoxPropagator(refiner) if kcfg.enabled else None,
        relinker=TrackRelinker(
            config.tracker.relink_along_m,
            config.tracker.relink_across_m,
            config.tracker.relink_max_gap_s,
            config.speed.max_box_size_change,
        ),
    )
    log.info("pipeline built: %s", meta)
    return pipeline
