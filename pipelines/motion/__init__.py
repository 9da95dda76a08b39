"""Motion layer: vehicle detection, camera ego-motion, per-box optical flow and tracking.

See ``docs/ARCHITECTURE.md``. ultralytics is imported only when a :class:`YoloDetector` loads
weights, and the ByteTrack backend only when a :class:`Tracker` is built. Part of the engine:
the builder assembles these stages; anything above ``pipelines`` may use them (the server shares
one detector between streams, training scores detectors with its adapter).
"""

from pipelines.motion.detector import (
    CANONICAL_CLASSES,
    CLASS_TABLES,
    Detector,
    ImageDetector,
    YoloDetector,
    detections_from_result,
    resolve_class_map,
)
from pipelines.motion.egomotion import EgoMotionEstimator
from pipelines.motion.flow import BoxFlowRefiner, FlowParams
from pipelines.motion.tracker import Tracker

__all__ = [
    "CANONICAL_CLASSES",
    "CLASS_TABLES",
    "BoxFlowRefiner",
    "Detector",
    "ImageDetector",
    "EgoMotionEstimator",
    "FlowParams",
    "Tracker",
    "YoloDetector",
    "detections_from_result",
    "resolve_class_map",
]
