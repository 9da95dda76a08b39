"""Oracle models for evaluation: ground truth served as detections (and road masks).

``OracleDetector`` and ``OracleSegmenter`` are frame-aware implementations of the pipeline's
``Detector`` and ``RoadSegmenter`` protocols: the pipeline calls ``detect(frame)`` and
``segment(frame)``, and they look the frame up by its index (frame.index is 0-based; ground-truth
frame numbers are 1-based, so frame ``i`` gets the boxes of GT frame ``i + 1``). Jitter and random
drops are deterministic per (seed, frame index), so results do not depend on call order.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

import cv2
import numpy as np
import supervision as sv

from eval.groundtruth import GtFrame, load_mot_gt
from eval.simulate import SIM_CLASS_NAMES, FlightSpec, Scene
from pipelines.types import Frame

log = logging.getLogger(__name__)


class OracleDetector:
    """Serves ground-truth boxes as detections, with Gaussian jitter and random drops.

    ``gt_by_frame`` maps 1-based GT frame numbers to :class:`GtFrame`. ``jitter_px`` is the standard
    deviation of independent noise on each box edge; ``drop_rate`` the chance that a box is missed;
    ``min_visibility`` hides boxes that are mostly out of view or occluded (a detector would too).

    Bad boxes, as a real detector gives them (to test the speed stage's robustness and its trust
    flag): time is cut into blocks of ``bad_box_frames`` frames, and in each block each vehicle
    has a ``partial_rate`` chance of a *partial* box (cut to ``partial_keep`` of its length along
    its longer side, front or back: an occlusion, a truncated truck) and a ``jump_rate`` chance of
    a box that *jumps* ``jump_lengths`` of its length along that side (onto the vehicle in front or
    behind; from about 0.7 lengths on, the tracker breaks the track instead) for the whole block. Deterministic per (seed, vehicle, block).
    """

    def __init__(
        self,
        gt_by_frame: Mapping[int, GtFrame],
        jitter_px: float = 0.0,
        drop_rate: float = 0.0,
        seed: int = 0,
        min_visibility: float = 0.0,
        confidence: float = 0.9,
        partial_rate: float = 0.0,
        jump_rate: float = 0.0,
        bad_box_frames: int = 10,
        partial_keep: float = 0.55,
        jump_lengths: float = 1.2,
    ):
        if jitter_px < 0 or not 0 <= drop_rate < 1:
            raise ValueError("jitter_px must be >= 0 and drop_rate in [0, 1)")
        if not (0 <= partial_rate <= 1 and 0 <= jump_rate <= 1 and partial_rate + jump_rate <= 1):
            raise ValueError("partial_rate and jump_rate must be in [0, 1] and sum to at most 1")
        if bad_box_frames < 1:
            raise ValueError("bad_box_frames must be >= 1")
        self.partial_rate = float(partial_rate)
        self.jump_rate = float(jump_rate)
        self.bad_box_frames = int(bad_box_frames)
        self.partial_keep = float(partial_keep)
        self.jump_lengths = float(jump_lengths)
        self.gt_by_frame = gt_by_frame
        self.jitter_px = float(jitter_px)
        self.drop_rate = float(drop_rate)
        self.seed = int(seed)
        self.min_visibility = float(min_visibility)
        self.confidence = float(confidence)

    @classmethod
    def from_mot(
        cls, path: str | Path, class_names: Mapping[int, str] | None = None, **kwargs
    ) -> OracleDetector:
        """Load a MOTChallenge ``gt.txt`` (the simulator's class table unless ``class_names`` is given)."""
        names = SIM_CLASS_NAMES if class_names is None else class_names
        return cls(load_mot_gt(path, class_names=names).by_frame(), **kwargs)

    def detect(self, frame: Frame) -> sv.Detections:
        return self._detections(frame.index + 1, frame.width, frame.height)

    def _detections(self, gt_frame: int, width: int, height: int) -> sv.Detections:
        gt = self.gt_by_frame.get(gt_frame)
        if gt is None or len(gt) == 0:
            return _empty_detections()
        keep = gt.visibility >= self.min_visibility
        rng = np.random.default_rng([self.seed, gt_frame])
        if self.drop_rate > 0:
            keep &= rng.random(len(gt)) >= self.drop_rate
        xyxy = gt.xyxy[keep].astype(np.float32).copy()
        if (self.partial_rate > 0 or self.jump_rate > 0) and len(xyxy):
            xyxy = self._bad_boxes(gt.ids[keep], xyxy, gt_frame)
        if self.jitter_px > 0 and len(xyxy):
            xyxy += rng.normal(0.0, self.jitter_px, xyxy.shape).astype(np.float32)
        if len(xyxy):
            xyxy[:, [0, 2]] = np.clip(xyxy[:, [0, 2]], 0, width - 1)
            xyxy[:, [1, 3]] = np.clip(xyxy[:, [1, 3]], 0, height - 1)
            ok = (xyxy[:, 2] - xyxy[:, 0] >= 1) & (xyxy[:, 3] - xyxy[:, 1] >= 1)
        else:
            ok = np.zeros(0, bool)
        names = gt.class_names[keep][ok]
        det = sv.Detections(
            xyxy=xyxy[ok],
            confidence=np.full(int(ok.sum()), self.confidence, dtype=np.float32),
            class_id=np.array([_CLASS_INDEX.get(str(n), 0) for n in names], dtype=int),
        )
        det.data["class_name"] = np.array(names, dtype=object)
        return det

    def _bad_boxes(self, ids: np.ndarray, xyxy: np.ndarray, gt_frame: int) -> np.ndarray:
        block = (gt_frame - 1) // self.bad_box_frames
        out = xyxy.copy()
        for row, gid in enumerate(ids.tolist()):
            u, side = np.random.default_rng([self.seed, 7919, int(gid), block]).random(2)
            x1, y1, x2, y2 = (float(v) for v in xyxy[row])
            axis = 0 if x2 - x1 >= y2 - y1 else 1  # along the vehicle's longer side
            length = (x2 - x1, y2 - y1)[axis]
            sign = 1.0 if side < 0.5 else -1.0
            if u < self.partial_rate:  # keep the front or the back part
                cut = (1.0 - self.partial_keep) * length
                if sign > 0:
                    out[row, axis] += cut
                else:
                    out[row, axis + 2] -= cut
            elif u < self.partial_rate + self.jump_rate:
                out[row, [axis, axis + 2]] += sign * self.jump_lengths * length
        return out


# Class ids of the canonical names (the pipeline reads data["class_name"]; ids only need to be stable).
_CLASS_INDEX = {"car": 0, "van": 1, "truck": 2, "bus": 3, "motorcycle": 4, "vehicle": 0}


def _empty_detections() -> sv.Detections:
    det = sv.Detections.empty()
    det.data["class_name"] = np.zeros(0, dtype=object)
    return det


class OracleSegmenter:
    """Exact road masks of a simulated flight (by frame index), for the road-mask ablation."""

    def __init__(self, flight_dir: str | Path):
        spec = FlightSpec.from_yaml(Path(flight_dir) / "flight.yaml")
        # Vehicles never change the road (separate random streams): build the scene without them.
        # (model_copy does not validate; both values are valid for any spec.)
        self.scene = Scene(spec.model_copy(update={"n_vehicles": 0, "sprites_dir": None}))

    def segment(self, frame: Frame) -> np.ndarray:
        mask = self.scene.road_mask(frame.index)
        if mask.shape[:2] != (frame.height, frame.width):
            mask = cv2.resize(mask, (frame.width, frame.height), interpolation=cv2.INTER_NEAREST)
        return (mask > 0).astype(np.float32)
