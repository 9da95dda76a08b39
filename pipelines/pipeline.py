"""The per-frame engine of one stream: :class:`Pipeline`. Build it with
:func:`pipelines.builder.build_pipeline` (the live server and the offline evaluator alike).

Per frame::

    detect -> ego-motion (background LK + RANSAC) -> road mask (U-Net every K frames, warped
    between runs) -> keep detections on the road -> ByteTrack on ego-compensated boxes ->
    per-track ground displacement (pipelines.displacement) -> windowed robust speed ->
    speeding rules
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import cv2
import numpy as np
import supervision as sv

from pipelines.base_layer import RoadMaskLayer, filter_by_mask
from pipelines.config import PipelineConfig
from pipelines.displacement import GroundDisplacement, box_anchors, touches_border
from pipelines.geometry import GroundProjector
from pipelines.ground import GroundModel
from pipelines.motion.detector import Detector
from pipelines.motion.egomotion import EgoMotionEstimator
from pipelines.motion.tracker import Tracker
from pipelines.rules import ViolationDetector
from pipelines.speed import SpeedEstimator
from pipelines.types import EgoMotion, Frame, FrameResult, SpeedEstimate, Violation

log = logging.getLogger(__name__)

STAGES = ("detect", "flow", "mask", "track", "speed", "rules")


@dataclass
class Pipeline:
    """Stateful per-stream engine: :meth:`process` each frame in order, then :meth:`finish`."""

    config: PipelineConfig
    detector: Detector
    road: RoadMaskLayer
    egomotion: EgoMotionEstimator | None
    tracker: Tracker
    displacement: GroundDisplacement
    ground: GroundModel
    speed: SpeedEstimator
    rules: ViolationDetector
    metadata: dict = field(default_factory=dict)

    _prev_time: float | None = None
    frames_processed: int = 0
    closed: bool = False

    def _detect(self, frame: Frame) -> sv.Detections:
        dets = self.detector.detect(frame)
        if "class_name" not in dets.data:
            dets.data["class_name"] = np.full(len(dets), "vehicle", dtype=object)
        return dets

    def _ego(self, gray: np.ndarray, detections: sv.Detections, warnings: list[str]) -> EgoMotion:
        if self.egomotion is None:
            return EgoMotion.identity()
        ego = self.egomotion.update(gray, detections.xyxy if len(detections) else None)
        if not ego.valid:
            warnings.append("ego-motion estimate unreliable for this frame")
        return ego

    def _speeds(
        self,
        frame: Frame,
        gray: np.ndarray,
        tracked: sv.Detections,
        ids: np.ndarray,
        ego: EgoMotion,
        proj: GroundProjector | None,
        warnings: list[str],
    ) -> dict[int, SpeedEstimate]:
        """Measure the tracks' ground displacement and update their speeds (empty when it can't)."""
        measurable = ~touches_border(tracked.xyxy, frame.width, frame.height)
        speeds: dict[int, SpeedEstimate] = {}
        if self._prev_time is not None and frame.timestamp_s <= self._prev_time:
            warnings.append(f"non-increasing timestamp {frame.timestamp_s:.4f} s: speed update skipped")
        else:
            m_ids, m_xyxy = ids[measurable], tracked.xyxy[measurable]
            positions, disp = self.displacement.measure(gray, m_ids, m_xyxy, ego, proj)
            if proj is not None:
                # box size on the ground (px x local GSD): a vehicle nearing an oblique camera
                # grows in pixels, not in metres, so only a partial or merged box changes it
                w, h = m_xyxy[:, 2] - m_xyxy[:, 0], m_xyxy[:, 3] - m_xyxy[:, 1]
                gsd = proj.gsd_at(box_anchors(m_xyxy)) if len(m_ids) else 1.0  # at the box centres
                sizes = np.sqrt(np.clip(w * h, 0, None)) * gsd
                speeds = self.speed.update(frame.timestamp_s, m_ids, disp, sizes)
            self._prev_time = frame.timestamp_s
            self.displacement.remember(frame.index, m_ids, positions, m_xyxy)
        horizon = self.config.tracker.lost_track_buffer + 1
        for tid in self.displacement.expire(frame.index, horizon):
            self.speed.forget(tid)
        return speeds

    def process(self, frame: Frame) -> FrameResult:
        if self.closed:
            raise RuntimeError("the pipeline is closed: build a new one for a new stream")
        timings: dict[str, float] = {}
        warnings: list[str] = []
        clock = time.perf_counter

        t0 = clock()
        detections = self._detect(frame)
        t1 = clock()
        timings["detect"] = (t1 - t0) * 1e3

        gray = cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY)
        ego = self._ego(gray, detections, warnings)
        t2 = clock()
        timings["flow"] = (t2 - t1) * 1e3

        mask = self.road.update(frame, ego)
        detections = filter_by_mask(detections, mask, self.config.road.min_overlap)
        t3 = clock()
        timings["mask"] = (t3 - t2) * 1e3

        tracked = self.tracker.update(detections, ego)
        self.displacement.advance(ego)
        t4 = clock()
        timings["track"] = (t4 - t3) * 1e3

        proj = self.ground.projector(frame)
        ids = tracked.tracker_id.astype(int) if tracked.tracker_id is not None else np.zeros(0, int)
        speeds = self._speeds(frame, gray, tracked, ids, ego, proj, warnings)
        n = len(tracked)
        tracked.data["speed_kmh"] = np.array(
            [speeds[t].speed_kmh if t in speeds else np.nan for t in ids], dtype=float
        )
        tracked.data["speed_sigma_kmh"] = np.array(
            [speeds[t].sigma_kmh if t in speeds else np.nan for t in ids], dtype=float
        )
        tracked.data["speed_trusted"] = np.array(
            [speeds[t].trusted if t in speeds else False for t in ids], bool
        )
        anchors = self.displacement.anchors(tracked.xyxy)  # the same anchor the speeds were measured at
        ground_xy = proj.to_ground(anchors) if (proj is not None and n) else np.full((n, 2), np.nan)
        tracked.data["ground_xy_m"] = ground_xy
        t5 = clock()
        timings["speed"] = (t5 - t4) * 1e3

        violations = self.rules.update(frame, tracked, speeds, ground_xy)
        t6 = clock()
        timings["rules"] = (t6 - t5) * 1e3
        timings["total"] = (t6 - t0) * 1e3

        self.displacement.end_frame(frame.index, gray)
        self.frames_processed += 1
        if proj is None:
            warnings.append(f"speeds disabled: {self.ground.status.reason}")
        elif self.ground.status.assumption:
            warnings.append(self.ground.status.assumption)
        return FrameResult(
            frame=frame,
            detections=tracked,
            road_mask=mask,
            ego=ego,
            gsd_m_per_px=_centre_gsd(proj, frame),
            speeds=speeds,
            violations=tuple(violations),
            timings_ms=timings,
            warnings=tuple(warnings),
        )

    def finish(self) -> list[Violation]:
        """Close the stream: every open violation is returned (and nothing is lost)."""
        return self.rules.finish()

    def close(self) -> None:
        """Release the stream's models (detector, road segmenter) and state (tracks, images), so a
        finished stream holds no memory even while something still refers to the pipeline. It
        processes no frame after this; closing twice is harmless."""
        self.closed = True
        self.detector = _CLOSED_DETECTOR
        self.road.release()
        self.displacement.reset()
        self.tracker.reset()
        self.speed.reset()
        self.road.reset()
        if self.egomotion is not None:
            self.egomotion.reset()


class _ClosedDetector:
    def detect(self, frame: Frame) -> sv.Detections:
        raise RuntimeError("the pipeline is closed")


_CLOSED_DETECTOR = _ClosedDetector()


def _centre_gsd(proj: GroundProjector | None, frame: Frame) -> float | None:
    if proj is None:
        return None
    return float(proj.gsd_at(np.array([[frame.width / 2, frame.height / 2]]))[0])


__all__ = ["STAGES", "Pipeline"]
