"""The per-frame engine of one stream: :class:`Pipeline`. Build it with
:func:`pipelines.builder.build_pipeline` (the live server and the offline evaluator alike).

Per frame::

    detect -> ego-motion (background LK + RANSAC) -> road mask (U-Net every K frames, warped between
    runs) -> keep detections on the road -> ByteTrack on ego-compensated boxes -> per-track ground
    displacement (pipelines.displacement) -> windowed robust speed -> speeding rules

With ``keyframes.enabled`` the scheduler (pipelines.motion.keyframes) skips the detector on
frames that do not need it; there ego-motion runs first and the previous boxes, propagated by the
optical flow inside them, stand in for the detections (no road filter: they are tracks already)::

    ego-motion -> propagate boxes (in-box LK) -> ByteTrack -> displacement (same flow) -> ...
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
import supervision as sv

from pipelines.base_layer import RoadMaskLayer, filter_by_mask
from pipelines.config import PipelineConfig
from pipelines.displacement import GroundDisplacement, centre_gsd, ground_sizes, speed_columns
from pipelines.effort import Effort, keyframes_at
from pipelines.geometry import GroundProjector
from pipelines.ground import GroundModel
from pipelines.height import ScaleTerms, track_scale_terms, travel_directions
from pipelines.motion.detector import CLOSED_DETECTOR, Detector
from pipelines.motion.egomotion import EgoMotionEstimator
from pipelines.motion.keyframes import (
    FLOW_KEY,
    BoxPropagator,
    KeyframeScheduler,
    carried_boxes,
    late_keyframe,
)
from pipelines.motion.relink import LostTrack, TrackRelinker
from pipelines.motion.tracker import Tracker, frames_between
from pipelines.pitch_check import PitchCheck
from pipelines.rules import ViolationDetector
from pipelines.scale_session import ScaleCheck, hold_for_check
from pipelines.speed import SpeedEstimator
from pipelines.timestamps import TimestampCheck
from pipelines.types import (
    EXTRAPOLATED_KEY,
    PROPAGATED_KEY,
    EgoMotion,
    Frame,
    FrameResult,
    HeightReference,
    SpeedEstimate,
    Violation,
)
from pipelines.vehicle_height import measured_points, moving_camera_factor, sigma_frac

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, eq=False)
class Prepared:
    """A frame's grey image and camera motion, computed ahead by :meth:`Pipeline.prepare`."""

    gray: np.ndarray
    ego: EgoMotion
    ms: float  # what preparing it took


STAGES = ("detect", "flow", "mask", "propagate", "track", "speed", "scale_check", "rules", "schedule")


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
    # keyframes.enabled: when to detect, and the boxes carried between detections (else None)
    keyframes: KeyframeScheduler | None = None
    propagator: BoxPropagator | None = None
    # ByteTrack's ids -> the output ids, a broken track continuing its id (None: ids as tracked)
    relinker: TrackRelinker | None = None
    timestamps: TimestampCheck = field(default_factory=TimestampCheck)  # are speeds timed right?
    scale_check: ScaleCheck | None = None  # the scale against the vehicles' sizes (None: off)
    pitch_check: PitchCheck | None = None  # the pitch against the traffic's speeds (None: off)
    effort: Effort = Effort()  # a live stream's rung of the effort ladder (set_effort)

    _prev_time: float | None = None
    _last_late: bool = False
    _prev_gray: np.ndarray | None = None
    _last_mask: np.ndarray | None = None
    _held: dict[int, SpeedEstimate] = field(default_factory=dict)  # keyframes: last estimate per track
    _bridged: set[int] = field(default_factory=set)  # tracks relinked in this frame (_relink)
    _last_xyxy: np.ndarray | None = None  # the last frame's tracked boxes (prepare's exclusions)
    frames_processed: int = 0
    closed: bool = False

    def __post_init__(self) -> None:
        self._detect_thread: ThreadPoolExecutor | None = None  # started at the first keyframe
        if self.keyframes is not None:
            self.metadata["keyframes"] = Counter()  # {why the detector ran, or "propagated": frames}

    def _detect(self, frame: Frame) -> sv.Detections:
        dets = self.detector.detect(frame)
        if "class_name" not in dets.data:
            dets.data["class_name"] = np.full(len(dets), "vehicle", dtype=object)
        dets.data[PROPAGATED_KEY] = np.zeros(len(dets), dtype=bool)
        return dets

    def _ego(self, gray: np.ndarray, vehicles_xyxy: np.ndarray | None, warnings: list[str]) -> EgoMotion:
        if self.egomotion is None:
            return EgoMotion.identity()
        ego = self.egomotion.update(
            gray, vehicles_xyxy if vehicles_xyxy is not None and len(vehicles_xyxy) else None
        )
        if not ego.valid:
            warnings.append("ego-motion estimate unreliable for this frame")
        return ego

    def prepare(self, frame: Frame) -> Prepared:
        """The grey image and camera motion of ``frame``, ahead of :meth:`process` (which then takes
        them as ``prepared``), so that a second thread can do this part while this pipeline
        processes the frame before. Call it for the frames to be processed, in order, from one
        thread, and process every frame prepared (the camera motion runs from one prepared frame
        to the next: frames skipped before preparing cost nothing). Ego-motion keeps its corners
        off where the vehicles are predicted (their last boxes)."""
        t0 = time.perf_counter()
        gray = cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY)
        boxes = self.propagator.predicted_xyxy() if self.propagator is not None else self._last_xyxy
        ego = self._ego(gray, boxes, [])
        return Prepared(gray, ego, (time.perf_counter() - t0) * 1e3)

    def _schedule(self, backlog: int) -> str | None:
        """Why the detector runs on this frame; None: propagate (keyframes on, something to carry)."""
        if self.keyframes is None or self.propagator is None:
            return "every frame"
        reason = self.keyframes.decide(backlog)
        if reason is None and self._prev_gray is None:
            reason = "first frame"
        self.metadata["keyframes"][reason or "propagated"] += 1
        return reason

    def _find(
        self, frame: Frame, timings: dict[str, float], warnings: list[str], prepared: Prepared | None = None
    ) -> tuple[sv.Detections, np.ndarray, EgoMotion, np.ndarray | None]:
        """Detect, ego-motion, road mask and the road filter: the vehicles of a keyframe. With
        keyframes on (and ``keyframes.overlap``), the detector runs on a thread of its own while
        ego-motion runs here, its corners kept off the predicted boxes instead of the detections."""
        clock = time.perf_counter
        t0 = clock()
        if prepared is not None:
            detections = self._detect(frame)
            timings["detect"] = (clock() - t0) * 1e3
            return self._on_road(frame, detections, prepared.gray, prepared.ego, timings, clock())
        if self.keyframes is not None and self.keyframes.cfg.overlap and self.propagator is not None:
            if self._detect_thread is None:
                self._detect_thread = ThreadPoolExecutor(1, thread_name_prefix="detect")
            pending = self._detect_thread.submit(self._timed_detect, frame)
            gray = cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY)
            ego = self._ego(gray, self.propagator.predicted_xyxy(), warnings)
            t_ego = clock()
            detections, timings["detect"] = pending.result()
            timings["flow"] = (t_ego - t0) * 1e3
            t2 = clock()
            return self._on_road(frame, detections, gray, ego, timings, t2)
        detections = self._detect(frame)
        t1 = clock()
        timings["detect"] = (t1 - t0) * 1e3
        gray = cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY)
        ego = self._ego(gray, detections.xyxy, warnings)
        t2 = clock()
        timings["flow"] = (t2 - t1) * 1e3
        return self._on_road(frame, detections, gray, ego, timings, t2)

    def _timed_detect(self, frame: Frame) -> tuple[sv.Detections, float]:
        t0 = time.perf_counter()
        detections = self._detect(frame)
        return detections, (time.perf_counter() - t0) * 1e3

    def _on_road(
        self,
        frame: Frame,
        detections: sv.Detections,
        gray: np.ndarray,
        ego: EgoMotion,
        timings: dict[str, float],
        t0: float,
    ) -> tuple[sv.Detections, np.ndarray, EgoMotion, np.ndarray | None]:
        """The road mask of this frame, and the detections on it."""
        mask = self.road.update(frame, ego)
        self._last_mask = mask
        detections = filter_by_mask(detections, mask, self.config.road.min_overlap)
        timings["mask"] = (time.perf_counter() - t0) * 1e3
        return detections, gray, ego, mask

    def _propagate(
        self, frame: Frame, timings: dict[str, float], warnings: list[str], prepared: Prepared | None = None
    ) -> tuple[sv.Detections, np.ndarray, EgoMotion, np.ndarray | None, float, bool]:
        """Ego-motion, then the previous boxes carried by their in-box flow: a frame without
        detection, unless a new vehicle could not be carried after frames went missing
        (:func:`late_keyframe`): then the detector runs after all (the last flag)."""
        assert self.propagator is not None and self._prev_gray is not None
        clock = time.perf_counter
        t1 = clock()
        if prepared is not None:
            gray, ego = prepared.gray, prepared.ego
        else:
            gray = cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY)
            ego = self._ego(gray, self.propagator.predicted_xyxy(), warnings)
        t2 = clock()
        timings["flow"] = (t2 - t1) * 1e3
        step = self.propagator.propagate(self._prev_gray, gray, ego)
        timings["propagate"] = (clock() - t2) * 1e3
        gap = frames_between(frame.timestamp_s, self._prev_time, self.config.tracker.frame_rate)
        self._last_late = late_keyframe(step.stranded, gap, self._last_late)
        if not self._last_late:
            self.road.advance(ego)
            return step.detections, gray, ego, self._last_mask, step.lost_share, False
        self.metadata["keyframes"].update({"propagated": -1, "new vehicle not carried": 1})
        detections = self._detect(frame)
        timings["detect"] = (clock() - t2) * 1e3 - timings["propagate"]
        return (*self._on_road(frame, detections, gray, ego, timings, clock()), step.lost_share, True)

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
        """Measure the tracks' ground displacement and update their speeds (empty when it can't).
        A propagated box measures with the flow that carried it; an extrapolated one not at all; one
        clipped by the border by an edge the border does not cut (GroundDisplacement.measure)."""
        measurable = np.ones(len(tracked), dtype=bool)
        extrapolated = tracked.data.get(EXTRAPOLATED_KEY)
        if extrapolated is not None:
            measurable &= ~np.asarray(extrapolated, dtype=bool)
        flow = tracked.data.pop(FLOW_KEY, None)  # the propagation's, for the speed stage only
        speeds: dict[int, SpeedEstimate] = {}
        relinked, self._bridged = self._bridged, set()
        # no speed across a timestamp that did not advance (TimestampCheck says so)
        if self._prev_time is None or frame.timestamp_s > self._prev_time:
            m_ids, m_xyxy = ids[measurable], tracked.xyxy[measurable]
            m_flow = None if flow is None else np.asarray(flow)[measurable]
            names = tracked.data.get("class_name")  # each class's measured point above the road
            names = None if names is None else np.asarray(names)[measurable]
            sizes = ground_sizes(m_xyxy, proj, frame) if proj is not None else None
            cfg = self.config.speed
            heights, sig_heights = measured_points(
                names, sizes, cfg.point_height_m, cfg.point_size_bounds_m, len(m_ids)
            )
            positions, disp = self.displacement.measure(gray, m_ids, m_xyxy, ego, proj, m_flow, heights)
            if proj is not None:
                seen = frame.timestamp_s + proj.row_times(positions)  # each row's time (lens.py)
                # a relinked track (a box of the size it had) is carried over its gap at its speed
                # and measured from its new box on: where on the vehicle that box sits is no motion
                keep = ~np.array([int(t) in relinked and self.speed.bridge(t, float(when), size)
                                  for t, size, when in zip(m_ids, sizes, seen, strict=True)], dtype=bool)  # fmt: skip
                scale = self.ground.scale
                speeds = self.speed.update(
                    frame.timestamp_s, m_ids[keep], disp[keep], sizes[keep],
                    scale_sigma_frac=self._scale_terms(
                        m_ids[keep], positions[keep], disp[keep], proj, heights[keep], sig_heights[keep], keep
                    ),
                    scale_source=scale.source if scale is not None else "",
                    row_times_s=seen[keep] - frame.timestamp_s if proj.readout_s else None,
                )  # fmt: skip
                relinked -= {int(t) for t in m_ids}  # bridged, or restarted by bridge()
            self._prev_time = frame.timestamp_s
            self.displacement.remember(frame.index, m_ids, positions, m_xyxy)
        for tid in relinked:  # relinked but not measured now: its speed starts again
            self.speed.forget(tid)
        horizon = self.config.tracker.lost_track_buffer + 1
        for tid in self.displacement.expire(frame.index, horizon):
            self.speed.forget(tid)
            self._held.pop(tid, None)
        if self.keyframes is not None:
            self._held.update(speeds)
            # an extrapolated box has no position to measure: its track keeps the estimate of its
            # last measurement (the fit over the window up to then) until it is detected again
            for tid in ids[np.asarray(extrapolated, dtype=bool)] if extrapolated is not None else ():
                if int(tid) in self._held and int(tid) not in speeds:
                    speeds[int(tid)] = self._held[int(tid)]
        return speeds

    def _measure(
        self,
        frame: Frame,
        gray: np.ndarray,
        mask: np.ndarray | None,
        tracked: sv.Detections,
        ids: np.ndarray,
        ego: EgoMotion,
        proj: GroundProjector | None,
        warnings: list[str],
        timings: dict[str, float],
    ) -> tuple[dict[int, SpeedEstimate], np.ndarray]:
        """The tracks' speeds and ground positions (their columns set on ``tracked``), and the scale
        check's update with this frame's vehicles and lanes (``mask``: the road's; its time:
        ``timings["scale_check"]``)."""
        speeds = self._speeds(frame, gray, tracked, ids, ego, proj, warnings)
        if self.ground.probing:  # measured at a height the vehicles have not given yet
            speeds = {}
        elif self.pitch_check is not None:  # the traffic's pitch is weighed in from the next frame on
            self.pitch_check.update(speeds.values(), self.ground.traffic_shift)
            self.ground.set_traffic_pitch(self.pitch_check.observation(frame.timestamp_s))
        view = None if self.ground.probing or proj is None or not len(tracked) else proj
        ground_xy = speed_columns(tracked, ids, speeds, view, self.displacement.anchors(tracked.xyxy))
        t0 = time.perf_counter()
        if self.scale_check is not None and proj is None:
            self.scale_check.no_view(self.ground.status.reason)
        elif self.scale_check is not None:
            check = self.scale_check
            check.update(
                frame, proj, self.ground.scale, tracked, ids, self.speed.velocity, gray, mask,
                pitch_known=self.ground.pitch_known,
            )  # fmt: skip
            # no altitude: the vehicles' own pitch (where none is known) and height, in that order
            if not self.ground.set_fitted_pitch(check.fitted_pitch()) and self.ground.set_derived(
                check.derived_height()
            ):
                self.speed.reset()  # what it measured at the starting height goes
                self._held.clear()
        timings["scale_check"] = (time.perf_counter() - t0) * 1e3
        return speeds, ground_xy

    def _scale_terms(
        self, ids, pixels, disp, proj: GroundProjector, heights, sig_heights, keep
    ) -> ScaleTerms | None:
        """Each track's scale sigma now (pipelines.height.ScaleTerms): the height's and the gimbal
        pitch's at its ground point along its direction of travel (its fitted velocity, else this
        step's displacement, else the worse axis), its measured point's height above the road
        (pipelines.vehicle_height; ``sig_heights``: the heights whose share is its sigma; under a
        moving camera on its motion relative to the camera's) in quadrature. ``keep``: which of the
        displacement stage's measured tracks these are."""
        if not len(ids):
            return None
        ground = proj.to_ground(pixels)
        directions = travel_directions([self.speed.velocity(int(t)) for t in ids], disp)
        cfg = self.config.speed
        clearance = proj.height_above_ground(ground)
        point = sigma_frac(heights, clearance, cfg.point_height_sigma_frac, sig_heights)
        point = point * moving_camera_factor(disp, self.displacement.camera_steps[keep])
        model = self.ground.scale_model
        return track_scale_terms(self.ground.scale, model, ground, directions, point, cfg.altitude_sigma_frac)

    def _ground_warnings(self, proj: GroundProjector | None) -> list[str]:
        """Why a frame has no speed (no ground projection, or the vehicles' height not yet known),
        or the assumption its scale rests on."""
        status = self.ground.status
        if proj is None:
            return [f"speeds disabled: {status.assumption if self.ground.probing else status.reason}"]
        return [status.assumption] if status.assumption else []

    def set_effort(self, effort: Effort) -> None:
        """A live stream's rung of the effort ladder from the next frame on (:mod:`pipelines.effort`):
        its detector and road U-Net rates and ego-motion's working width (the stride is the
        caller's: it skips the frames)."""
        self.effort = effort
        if self.keyframes is not None:
            self.keyframes.cfg = keyframes_at(self.config.keyframes, effort)
        self.road.set_every_n_frames(effort.road_every_n_frames)
        if self.egomotion is not None:
            self.egomotion.set_max_width(effort.ego_max_width or self.config.egomotion.max_width)

    def set_height_reference(self, reference: HeightReference | None) -> None:
        """Measure with ``reference`` (a measured base, a session's take-off height above the road)
        from the next frame on; None: the configuration's. Call it from the thread that processes."""
        self.ground.set_reference(reference)
        if self.pitch_check is not None:
            self.pitch_check.reset()  # its speeds were measured through the reference's pitch

    def _relink(
        self, frame: Frame, tracked: sv.Detections, raw: np.ndarray, proj: GroundProjector | None
    ) -> np.ndarray:
        """The output ids of this frame's tracks: a track born where one lost within the relink gap
        would be now continues its id (pipelines.motion.relink)."""
        assert self.relinker is not None
        ids, born = self.relinker.output_ids(raw)
        if not born.any() or proj is None or not self.relinker.enabled:
            return ids
        now, present = frame.timestamp_s, {int(i) for i in ids}
        lost: list[LostTrack] = []
        for tid in self.speed.track_ids:
            seen = self.speed.last_seen(tid)
            if tid in present or seen is None or seen[1] is None:
                continue
            last_t, v, size = seen
            gap = now - last_t
            anchor = self.displacement.carried_anchor(tid)
            if not 0 < gap <= self.relinker.max_gap_s or anchor is None:
                continue
            was = proj.to_ground(anchor[None])[0]  # where it was, on the ground now
            lost.append(
                LostTrack(
                    tid,
                    (float(was[0] + v[0] * gap), float(was[1] + v[1] * gap)),
                    (float(v[0]), float(v[1])),
                    size,
                )
            )
        if not lost:
            return ids
        new_xyxy = tracked.xyxy[born]
        new_xy = proj.to_ground(self.displacement.anchors(new_xyxy))
        links = self.relinker.link(raw[born], new_xy, lost, ground_sizes(new_xyxy, proj, frame))
        for r, o in links.items():
            log.debug("track %d continues track %d", r, o)
            self._bridged.add(o)
        return np.array([links.get(int(r), int(i)) for r, i in zip(raw, ids, strict=True)], dtype=int)

    def _remeasure(self) -> None:
        """The ground is measured anew (:attr:`GroundModel.reinterpreted`): so is what the tracks had; the
        estimates a keyframe schedule holds for carried boxes were measured on the old scale and go."""
        if self.ground.reinterpreted is not None:
            self.speed.rescale(*self.ground.reinterpreted)
            self._held.clear()

    def process(self, frame: Frame, *, backlog: int = 0, prepared: Prepared | None = None) -> FrameResult:
        """One frame, in order. ``backlog``: frames waiting behind this one (the live server's
        queue); with keyframes on, a backlog stretches the detection interval. ``prepared``: its
        grey image and camera motion from :meth:`prepare` (then not computed here)."""
        if self.closed:
            raise RuntimeError("the pipeline is closed: build a new one for a new stream")
        timings: dict[str, float] = {}
        warnings: list[str] = []
        clock = time.perf_counter
        if clock_problem := self.timestamps.observe(frame.timestamp_s):
            warnings.append(clock_problem)

        t0 = clock()
        keyframe = self._schedule(backlog) is not None
        if prepared is not None:
            timings["prepare"] = prepared.ms  # done ahead, on another thread: not in total
            if not prepared.ego.valid and self.egomotion is not None:
                warnings.append("ego-motion estimate unreliable for this frame")
        if keyframe:
            self._last_late, lost_share = False, 0.0
            detections, gray, ego, mask = self._find(frame, timings, warnings, prepared)
        else:
            detections, gray, ego, mask, lost_share, keyframe = self._propagate(
                frame, timings, warnings, prepared
            )
        t3 = clock()

        tracked = self.tracker.update(detections, ego, frame.timestamp_s)
        self.displacement.advance(ego, frame.timestamp_s)
        t4 = clock()
        timings["track"] = (t4 - t3) * 1e3

        proj = self.ground.projector(frame, laser_spot=(mask, tracked.xyxy))
        self._remeasure()
        ids = tracked.tracker_id.astype(int) if tracked.tracker_id is not None else np.zeros(0, int)
        if self.relinker is not None:
            ids = self._relink(frame, tracked, ids, proj)
            tracked.tracker_id = ids
        speeds, ground_xy = self._measure(frame, gray, mask, tracked, ids, ego, proj, warnings, timings)
        t5 = clock()
        timings["speed"] = (t5 - t4) * 1e3 - timings.get("scale_check", 0.0)

        if self.ground.probing:  # measured at a height the vehicles have not given yet: no speed
            proj = None
        scale = self.ground.scale if proj is not None else None
        violations = self._held_by_clock(self.rules.update(frame, tracked, speeds, ground_xy, scale))
        t6 = clock()
        timings["rules"] = (t6 - t5) * 1e3
        timings["total"] = (t6 - t0) * 1e3

        self.displacement.end_frame(frame.index, gray)
        self._last_xyxy = tracked.xyxy
        if self.keyframes is not None and self.propagator is not None:
            carried = carried_boxes(tracked, self.tracker.pending)
            self.propagator.remember(carried, ego.homography if ego.valid else None, self.tracker.confirmed)
            self.keyframes.observe(
                detected=keyframe, gray=gray, ego=ego, boxes_xyxy=carried.xyxy, lost_share=lost_share
            )
            self._prev_gray = gray
            t7 = clock()
            timings["schedule"] = (t7 - t6) * 1e3  # what the next frame's schedule needs
            timings["total"] = (t7 - t0) * 1e3
        self.frames_processed += 1
        warnings += self._ground_warnings(proj)
        return FrameResult(
            frame=frame,
            detections=tracked,
            road_mask=mask,
            ego=ego,
            gsd_m_per_px=centre_gsd(proj, frame),
            speeds=speeds,
            violations=tuple(violations),
            timings_ms=timings,
            warnings=tuple(warnings),
            keyframe=keyframe,
            scale=scale,
            scale_check=self.scale_check.current() if self.scale_check is not None else None,
            pitch_check=self.pitch_check.current(frame.timestamp_s) if self.pitch_check is not None else None,
        )

    def finish(self) -> list[Violation]:
        """Close the stream: every open violation is returned (and nothing is lost). The detector,
        road and scale check threads stop here (the check's pending lane frame or pitch fit counted);
        a later frame would start them again."""
        self._stop_detect_thread()
        self.road.stop()
        if self.scale_check is not None:
            self.scale_check.drain()
        return self._held_by_clock(self.rules.finish())

    def summary(self) -> dict[str, Any]:
        """What a stream's session record keeps of the engine's state: the rangefinder's readings
        (used, refused and why), the lens and shutter corrected for, the scale and pitch checks'
        summaries, the road network's runs (its mask taken, and lost: a run that failed)."""
        out: dict[str, Any] = {}
        if self.road.segmenter is not None:
            out["road"] = {"runs": self.road.n_runs, "runs_lost": self.road.runs_lost}
        lrf = self.ground.rangefinder
        if lrf is not None and (readings := lrf.summary()) is not None:
            out["rangefinder"] = readings
        out["optics"] = self.ground.optics_summary()
        if self.scale_check is not None:
            out["scale_check"] = self.scale_check.summary()
        if self.pitch_check is not None:
            out["pitch_check"] = self.pitch_check.result().to_dict()
        return out

    def _held_by_clock(self, violations: list[Violation]) -> list[Violation]:
        """Not enforceable where the frame clock was implausible (``TimestampCheck.hold``); each
        carries the session's scale and pitch checks, held for review where the site says so."""
        out = self.timestamps.hold(violations)
        return self.rehold(out, later=False) if out else out

    def rehold(self, violations: Sequence[Violation], later: bool = True) -> list[Violation]:
        """Violations closed earlier, weighed against the scale and pitch checks now: an enforceable
        one from a session a check has since found suspect (a status ``rules.hold_scale_check``,
        ``rules.hold_pitch_check`` holds) is held for review too, and carries the check that held it."""
        rules, out = self.config.rules, list(violations)
        if self.scale_check is not None:
            check = self.scale_check.result
            out = [hold_for_check(v, check, rules.hold_scale_check, later) for v in out]
        if self.pitch_check is not None and out:
            pitch = self.pitch_check.result()
            out = [hold_for_check(v, pitch, rules.hold_pitch_check, later) for v in out]
        return out

    def _stop_detect_thread(self) -> None:
        if self._detect_thread is not None:
            self._detect_thread.shutdown(wait=True)
            self._detect_thread = None

    def close(self) -> None:
        """Release the stream's models (detector, road segmenter) and state (tracks, images), so a
        finished stream holds no memory even while something still refers to the pipeline. It
        processes no frame after this; closing twice is harmless."""
        self.closed = True
        self.detector = CLOSED_DETECTOR
        self.road.release()
        self.displacement.reset()
        self.tracker.reset()
        if self.relinker is not None:
            self.relinker.reset()
        self.speed.reset()
        self.road.reset()
        if self.egomotion is not None:
            self.egomotion.reset()
        if self.keyframes is not None:
            self.keyframes.reset()
        if self.propagator is not None:
            self.propagator.reset()
        if self.scale_check is not None:
            self.scale_check.stop()
            self.scale_check.reset()
        self._prev_gray = self._last_mask = None
        self._held.clear()
        self._last_xyxy = None
        self._stop_detect_thread()


__all__ = ["STAGES", "Pipeline", "Prepared"]
