"""Detection on keyframes, optical-flow propagation in between (``keyframes.enabled``).

The detector is the costliest stage (17-26 ms a 1080p frame on two CPU cores, against 7-9 ms for
ego-motion and 3-7 ms for the in-box flow the speed stage runs anyway). Vehicles move smoothly from
one frame to the next, so most frames do not need it: between keyframes every tracked box is
carried forward by the optical flow inside it (:class:`BoxPropagator`; the same
:class:`~pipelines.motion.flow.BoxFlowRefiner` vectors the speed stage uses, computed once), and the
tracker is fed those propagated boxes.

:class:`KeyframeScheduler` decides per frame whether to detect (:func:`detect_reason`, pure). It
detects at least every ``interval`` frames and earlier when

- the flow of moving vehicles failed (``lost_share`` of them: textureless, occluded, turning),
- the camera moves fast (``ego_shift_px`` per frame) or its motion is unknown,
- something not covered by a track changed in the band along the image border
  (:class:`BorderWatch`: a vehicle entering the view),
- the previous frame had no track at all (nothing to propagate).

A trigger needs ``min_gap`` frames since the last detection (2: the detector runs on at most every
other frame but for the interval, so a stretch of triggers cannot turn every frame into a keyframe).
When the live server falls behind (frames waiting, ``backlog``), the interval stretches to
``max_interval`` and a trigger needs at least two frames since the last detection.

Propagated boxes carry ``data["propagated"] = True``. The tracker never starts a track from one
(their confidence is capped under ByteTrack's activation threshold) and the rules never open a
violation on one: detections still anchor everything, propagation only fills the gaps.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import cv2
import numpy as np
import supervision as sv

from pipelines.config import KeyframeConfig
from pipelines.displacement import touches_border
from pipelines.geometry import apply_homography
from pipelines.motion.flow import BoxFlowRefiner
from pipelines.motion.tracker import jacobians
from pipelines.types import EXTRAPOLATED_KEY, PROPAGATED_KEY, EgoMotion

log = logging.getLogger(__name__)

FLOW_KEY = "flow_px"  # Detections.data: (N, 2) in-box flow of a propagated box (see Propagation)
MOVING_PX = 0.5  # own image motion per frame above which a vehicle counts as moving
VELOCITY_BLEND = 0.5  # weight of the newest measurement in a track's own-motion estimate


@dataclass(frozen=True, slots=True)
class ScheduleSignals:
    """What the scheduler knows before a frame (all from the previous frame but ``backlog``)."""

    frames_since_detect: int  # 1 = the previous frame was a keyframe
    tracks: int  # boxes to propagate
    lost_share: float = 0.0  # share of moving vehicles whose flow failed
    ego_valid: bool = True
    ego_shift_px: float = 0.0  # median background motion, full-resolution px per frame
    entering: bool = False  # unexplained change along the border
    backlog: int = 0  # frames waiting behind this one (live server); 0 offline


def detect_reason(cfg: KeyframeConfig, s: ScheduleSignals) -> str | None:
    """Why this frame needs the detector (``None``: propagate). Pure."""
    if not cfg.enabled:
        return "every frame"
    loaded = s.backlog > 0
    interval = cfg.max_interval if loaded else cfg.interval
    if s.frames_since_detect >= interval:
        return "interval"
    if s.frames_since_detect < (max(cfg.min_gap, 2) if loaded else cfg.min_gap):
        return None
    if s.tracks == 0:
        return "no tracks"
    if not s.ego_valid:
        return "ego-motion unknown"
    if s.ego_shift_px > cfg.ego_shift_px:
        return "fast camera"
    if s.lost_share > cfg.lost_share:
        return "flow lost"
    if s.entering:
        return "entering"
    return None


def late_keyframe(stranded: int, gap_frames: float, was_late: bool) -> bool:
    """Whether a frame meant to be propagated is detected after all: a vehicle that just appeared
    could not be carried (``stranded``: no flow, no motion known yet) and frames were skipped or
    dropped since the last one (``gap_frames`` nominal frames), so its box left where it was would
    teach its track no motion and the next detection would start another. Not twice in a row. Pure."""
    return bool(stranded) and gap_frames > 1.5 and not was_late


@dataclass(frozen=True, slots=True)
class Propagation:
    """One propagation step: the boxes carried forward and how well it went.

    ``detections``: the previous boxes moved into this frame, with ``data`` columns
    ``propagated`` (True), ``flow_px`` ((N, 2) in-box flow from the previous frame, NaN where it
    failed; the speed stage uses it instead of measuring it again) and ``extrapolated`` (True where
    the box was moved by its vehicle's last motion, or comes from a box clipped by the image
    border, now or since the last detection: no position to measure a speed from)."""

    detections: sv.Detections
    lost_share: float  # share of moving vehicles whose flow failed (moved by their last motion)
    # boxes whose flow failed and whose vehicle's own motion is not known yet (a track just
    # started): left where they were, wherever the vehicle went
    stranded: int = 0


class BoxPropagator:
    """Carries the previous frame's boxes into the current one (see module doc).

    ``remember(boxes, homography)`` after every frame with what the tracker put out (tracked boxes
    and pending ones, ``tracker_id`` -1: detections that started a track not yet confirmed);
    ``propagate(prev_gray, gray, ego)`` on a frame without detection.
    """

    def __init__(self, refiner: BoxFlowRefiner | None = None) -> None:
        self.refiner = refiner or BoxFlowRefiner()
        self.reset()

    def reset(self) -> None:
        self._prev: sv.Detections | None = None
        self._velocity: dict[int, np.ndarray] = {}  # track id -> own image motion per frame (px)

    def __len__(self) -> int:
        return 0 if self._prev is None else len(self._prev)

    def predicted_xyxy(self) -> np.ndarray | None:
        """The previous boxes moved by each vehicle's last own motion (camera motion not included):
        where to keep ego-motion corners away from before the propagation has run."""
        if self._prev is None or len(self._prev) == 0:
            return None
        shift = np.array([self._velocity.get(int(t), (0.0, 0.0)) for t in self._ids(self._prev)])
        return self._prev.xyxy + np.hstack([shift, shift])

    @staticmethod
    def _ids(dets: sv.Detections) -> np.ndarray:
        if dets.tracker_id is None:
            return np.full(len(dets), -1, dtype=int)
        return np.asarray(dets.tracker_id, dtype=int)

    def remember(
        self,
        boxes: sv.Detections,
        homography: np.ndarray | None,
        confirmed: dict[int, np.ndarray] | None = None,
    ) -> None:
        """This frame's output boxes (the next frame propagates them); ``homography`` is this
        frame's ego-motion (previous -> current), used to update each vehicle's own motion.
        ``confirmed``: tracks confirmed on this frame -> the pending box (previous frame) they
        started from (``Tracker.confirmed``), so a new vehicle's motion is known at once."""
        prev = self._prev
        if prev is not None and len(prev) and len(boxes) and homography is not None:
            prev_c = {int(t): c for t, c in zip(self._ids(prev), _centres(prev.xyxy), strict=True) if t > 0}
            for tid, box in (confirmed or {}).items():
                prev_c.setdefault(int(tid), _centres(np.asarray(box).reshape(1, 4))[0])
            ids = self._ids(boxes)
            known = [i for i, t in enumerate(ids) if int(t) in prev_c]
            if known:
                before = np.array([prev_c[int(ids[i])] for i in known])
                own = _centres(boxes.xyxy[known]) - apply_homography(homography, before)
                for i, v in zip(known, own, strict=True):
                    tid = int(ids[i])
                    old = self._velocity.get(tid)
                    self._velocity[tid] = (
                        v if old is None else VELOCITY_BLEND * v + (1 - VELOCITY_BLEND) * old
                    )
        live = {int(t) for t in self._ids(boxes) if t > 0}
        self._velocity = {t: v for t, v in self._velocity.items() if t in live}
        self._prev = boxes

    def propagate(self, prev_gray: np.ndarray, gray: np.ndarray, ego: EgoMotion) -> Propagation:
        prev = self._prev
        if prev is None or len(prev) == 0:
            empty = sv.Detections.empty()
            empty.data[PROPAGATED_KEY] = np.zeros(0, dtype=bool)
            empty.data[FLOW_KEY] = np.zeros((0, 2))
            empty.data[EXTRAPOLATED_KEY] = np.zeros(0, dtype=bool)
            return Propagation(empty, 0.0)
        h = np.asarray(ego.homography, dtype=np.float64)
        ids = self._ids(prev)
        flow = self.refiner.displacements(prev_gray, gray, prev.xyxy, h)
        centres = _centres(prev.xyxy)
        ground = apply_homography(h, centres)  # where the ground under each centre went
        own = np.array([self._velocity.get(int(t), (0.0, 0.0)) for t in ids], dtype=np.float64)
        ok = np.isfinite(flow).all(axis=1)
        new_c = np.where(ok[:, None], centres + np.nan_to_num(flow), ground + own)
        scale = np.sqrt(np.abs(np.linalg.det(jacobians(h, centres))))
        half = 0.5 * (prev.xyxy[:, 2:] - prev.xyxy[:, :2]) * scale[:, None]
        before = prev.data.get(EXTRAPOLATED_KEY)
        out = prev[np.arange(len(prev))]  # a copy with every data column
        out.xyxy = np.hstack([new_c - half, new_c + half]).astype(prev.xyxy.dtype)
        out.data[PROPAGATED_KEY] = np.ones(len(prev), dtype=bool)
        out.data[FLOW_KEY] = flow
        # A box clipped by the border keeps its clipped size while its vehicle comes into view:
        # its centre lags the vehicle's until a detection sees the whole vehicle, so no measure.
        clipped = touches_border(prev.xyxy, gray.shape[1], gray.shape[0])
        extrapolated = ~ok | clipped | (np.asarray(before, dtype=bool) if before is not None else False)
        out.data[EXTRAPOLATED_KEY] = extrapolated
        moving = np.hypot(own[:, 0], own[:, 1]) > MOVING_PX
        lost = float((moving & ~ok).sum() / moving.sum()) if moving.any() else 0.0
        unknown = np.array([int(t) not in self._velocity for t in ids], dtype=bool)
        return Propagation(out, lost, int((unknown & ~ok).sum()))


def _centres(xyxy: np.ndarray) -> np.ndarray:
    b = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    return 0.5 * (b[:, :2] + b[:, 2:])


class BorderWatch:
    """Is something new coming in along the image border?

    On a quarter-resolution grey image: the previous one warped by the camera motion, the absolute
    difference with the current one, thresholded and opened, inside a band ``border_frac`` of the
    shorter side wide along the four edges, minus the (grown) boxes of known vehicles and minus
    what the previous frame did not see. A changed blob of at least ``entry_area_frac`` of the
    band's area means a vehicle (or anything else) moved in: the next frame is detected. Lighting
    changes or parallax only cost a detection, never a missed vehicle.
    """

    SCALE = 0.25
    DIFF_THRESHOLD = 25
    BOX_GROW = 0.25  # known boxes grown by this share of their size on each side

    def __init__(self, border_frac: float, area_frac: float) -> None:
        self.border_frac = border_frac
        self.area_frac = area_frac
        self._prev: np.ndarray | None = None
        self._band: np.ndarray | None = None
        self.last_changed_px = 0

    def reset(self) -> None:
        self._prev = None
        self._band = None

    def _small(self, gray: np.ndarray) -> np.ndarray:
        h, w = gray.shape[:2]
        size = (max(8, round(w * self.SCALE)), max(8, round(h * self.SCALE)))
        return cv2.resize(gray, size, interpolation=cv2.INTER_AREA)

    def _band_mask(self, shape: tuple[int, int]) -> np.ndarray:
        if self._band is None or self._band.shape != shape:
            h, w = shape
            b = max(2, round(min(h, w) * self.border_frac))
            band = np.zeros(shape, dtype=np.uint8)
            band[:b, :] = band[-b:, :] = 1
            band[:, :b] = band[:, -b:] = 1
            self._band = band
        return self._band

    def update(
        self,
        gray: np.ndarray,
        homography: np.ndarray | None,
        boxes_xyxy: np.ndarray | None,
        compare: bool = True,
    ) -> bool:
        """Feed this frame; True when something entered since the previous one. The first frame,
        frames after :meth:`reset` and frames fed with ``compare=False`` (keyframes: the detector
        has just looked) only become the reference for the next one."""
        if self.border_frac <= 0:
            return False
        small = self._small(gray)
        prev, self._prev = self._prev, small
        if not compare or prev is None or prev.shape != small.shape:
            return False
        s = self.SCALE
        sh, sw = small.shape
        seen = np.ones_like(small)
        if homography is not None:
            scale = np.diag([s, s, 1.0])
            h_small = scale @ np.asarray(homography, dtype=np.float64) @ np.linalg.inv(scale)
            prev = cv2.warpPerspective(prev, h_small, (sw, sh), flags=cv2.INTER_LINEAR, borderValue=0)
            seen = cv2.warpPerspective(seen, h_small, (sw, sh), flags=cv2.INTER_NEAREST, borderValue=0)
            seen = cv2.erode(seen, np.ones((3, 3), np.uint8))
        changed = (cv2.absdiff(prev, small) > self.DIFF_THRESHOLD).astype(np.uint8)
        changed &= self._band_mask(small.shape) & seen
        if boxes_xyxy is not None and len(boxes_xyxy):
            b = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
            grow = np.hstack([-(b[:, 2:] - b[:, :2]), b[:, 2:] - b[:, :2]]) * self.BOX_GROW
            for x1, y1, x2, y2 in np.round((b + grow) * s).astype(int):
                changed[max(0, y1) : max(0, y2 + 1), max(0, x1) : max(0, x2 + 1)] = 0
        changed = cv2.morphologyEx(changed, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
        self.last_changed_px = int(changed.sum())
        if self.last_changed_px == 0:
            return False
        band_area = float(self._band_mask(small.shape).sum())
        _, _, stats, _ = cv2.connectedComponentsWithStats(changed, connectivity=8)
        return bool(len(stats) > 1 and stats[1:, cv2.CC_STAT_AREA].max() >= self.area_frac * band_area)


class KeyframeScheduler:
    """Per-stream state of the schedule: ``decide(backlog)`` before a frame, ``observe(...)`` after."""

    def __init__(self, cfg: KeyframeConfig) -> None:
        self.cfg = cfg
        self.border = BorderWatch(cfg.border_frac, cfg.entry_area_frac)
        self.reset()

    def reset(self) -> None:
        self.border.reset()
        self._since = 10**9  # the first frame is always detected
        self._tracks = 0
        self._lost = 0.0
        self._ego_valid = True
        self._ego_shift = 0.0
        self._entering = False

    def signals(self, backlog: int = 0) -> ScheduleSignals:
        return ScheduleSignals(
            frames_since_detect=self._since,
            tracks=self._tracks,
            lost_share=self._lost,
            ego_valid=self._ego_valid,
            ego_shift_px=self._ego_shift,
            entering=self._entering,
            backlog=backlog,
        )

    def decide(self, backlog: int = 0) -> str | None:
        return detect_reason(self.cfg, self.signals(backlog))

    def observe(
        self,
        *,
        detected: bool,
        gray: np.ndarray,
        ego: EgoMotion,
        boxes_xyxy: np.ndarray,
        lost_share: float = 0.0,
    ) -> None:
        """What this frame showed (``boxes_xyxy``: everything the next frame will propagate)."""
        self._since = 1 if detected else self._since + 1
        self._tracks = len(boxes_xyxy)
        self._lost = lost_share
        self._ego_valid = ego.valid
        self._ego_shift = float(ego.magnitude_px)
        if not self.cfg.enabled:
            return
        homography = ego.homography if ego.valid else None
        # a keyframe has just seen whatever came in: it only becomes the next frame's reference
        self._entering = self.border.update(gray, homography, boxes_xyxy, compare=not detected)


def carried_boxes(tracked: sv.Detections, pending: sv.Detections) -> sv.Detections:
    """What the next frame propagates: the tracked boxes and the pending ones (a track started,
    not yet confirmed), with their class, confidence and whether they are extrapolated."""
    parts = [d for d in (tracked, pending) if len(d)]
    if not parts:
        return sv.Detections.empty()
    xyxy = np.vstack([d.xyxy for d in parts])
    conf = np.concatenate(
        [d.confidence if d.confidence is not None else np.ones(len(d), np.float32) for d in parts]
    )
    class_id = np.concatenate(
        [d.class_id if d.class_id is not None else np.zeros(len(d), int) for d in parts]
    )
    out = sv.Detections(
        xyxy=xyxy,
        confidence=conf.astype(np.float32),
        class_id=class_id.astype(int),
        tracker_id=np.concatenate([np.asarray(d.tracker_id, dtype=int) for d in parts]),
    )
    out.data["class_name"] = _column(parts, "class_name", "vehicle", object)
    out.data[EXTRAPOLATED_KEY] = _column(parts, EXTRAPOLATED_KEY, False, bool)
    return out


def _column(parts: list[sv.Detections], key: str, default: object, dtype: type) -> np.ndarray:
    """One data column over several Detections, ``default`` where a part lacks it."""
    return np.concatenate(
        [
            np.asarray(d.data[key], dtype=dtype) if key in d.data else np.full(len(d), default, dtype)
            for d in parts
        ]
    )


__all__ = [
    "BorderWatch",
    "BoxPropagator",
    "KeyframeScheduler",
    "Propagation",
    "ScheduleSignals",
    "carried_boxes",
    "detect_reason",
    "late_keyframe",
]
