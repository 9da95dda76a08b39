"""Ground displacement of tracked vehicles: how far each moved on the ground since last measured.

This is where pixel motion becomes metres, one frame at a time, before :mod:`pipelines.speed`
turns metres into km/h. For each tracked vehicle seen before:

1. Its anchor (box centre; bottom centre for oblique views, ``speed.anchor``) where it was last
   measured is mapped through the accumulated ego-motion homography to where that piece of static
   ground lies now (``static_now``). The camera's own motion is thereby removed.
2. Its position now is its current anchor, refined by a complementary filter for tracks seen in
   the previous frame: ``position = w * (previous position + in-box flow) + (1 - w) * anchor`` with
   ``w = FLOW_WEIGHT``, unless flow and anchor disagree by more than ``FLOW_GATE`` of the box size
   (flow failed: the anchor alone is used). Flow carries the frame-to-frame motion (precise, but
   possibly biased by the aperture problem); the box anchors the position (unbiased, but jittery).
   A constant flow bias then only offsets the position by a constant, which no speed fit sees, and
   box jitter is smoothed instead of accumulating.
3. Both points go through this frame's :class:`~pipelines.geometry.GroundProjector`; their
   difference is the ground displacement in metres.

Boxes touching the image border are not measured (:func:`touches_border`): a clipped box grows or
shrinks as its vehicle enters or leaves, so it moves slower than the vehicle.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipelines.geometry import GroundProjector
from pipelines.motion.flow import BoxFlowRefiner
from pipelines.types import EgoMotion

BORDER_MARGIN_PX = 2.0
# Complementary filter of in-box flow and box anchor: the weight of flow, and the disagreement
# (share of the box size) beyond which flow is taken to have failed.
FLOW_WEIGHT = 0.8
FLOW_GATE = 0.25


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


def box_anchors(xyxy: np.ndarray, anchor: str = "center") -> np.ndarray:
    """(N, 2) anchor pixel of each box: its centre, or its bottom centre for ``anchor="bottom"``."""
    xyxy = np.asarray(xyxy, dtype=float).reshape(-1, 4)
    x = (xyxy[:, 0] + xyxy[:, 2]) / 2.0
    y = xyxy[:, 3] if anchor == "bottom" else (xyxy[:, 1] + xyxy[:, 3]) / 2.0
    return np.column_stack([x, y])


def blend_flow(
    predicted: np.ndarray, anchor: np.ndarray, box_size_px: float, weight: float = FLOW_WEIGHT
) -> np.ndarray | None:
    """The complementary filter of one track: ``weight * predicted + (1 - weight) * anchor``, or
    None when flow failed (non-finite, or farther than ``FLOW_GATE`` of the box size from the anchor)."""
    if not np.all(np.isfinite(predicted)) or np.linalg.norm(predicted - anchor) >= FLOW_GATE * box_size_px:
        return None
    return weight * predicted + (1.0 - weight) * anchor


@dataclass(slots=True)
class _TrackMemory:
    """Where a track was last measured."""

    frame_index: int
    anchor_px: np.ndarray  # (2,) pixel in that frame
    cum_h: np.ndarray  # reference -> that frame, static ground
    box: np.ndarray  # (4,) xyxy in that frame


class GroundDisplacement:
    """Per-stream memory of where each track was last measured, and the camera's accumulated motion.

    Per frame: :meth:`advance` with the frame's ego-motion, :meth:`measure` the measurable tracks,
    :meth:`remember` where they are now, :meth:`expire` tracks gone for too long.
    """

    def __init__(self, anchor: str = "center", refiner: BoxFlowRefiner | None = None) -> None:
        self.anchor = anchor
        self.refiner = refiner
        self._cum_h = np.eye(3)  # reference frame -> current frame, static ground
        self._tracks: dict[int, _TrackMemory] = {}
        self._prev_gray: np.ndarray | None = None
        self._prev_index = -1

    def __len__(self) -> int:
        return len(self._tracks)

    def anchors(self, xyxy: np.ndarray) -> np.ndarray:
        return box_anchors(xyxy, self.anchor)

    def advance(self, ego: EgoMotion) -> None:
        """Accumulate this frame's camera motion (previous -> current frame)."""
        self._cum_h = ego.homography @ self._cum_h
        self._cum_h /= self._cum_h[2, 2]

    def measure(
        self,
        gray: np.ndarray,
        ids: np.ndarray,
        xyxy: np.ndarray,
        ego: EgoMotion,
        proj: GroundProjector | None,
        flow: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each track's position now (pixels, (N, 2)) and ground displacement (metres, (N, 2)) since it
        was last measured; NaN displacement = unknown (a new track, or no ground scale).
        ``flow``: (N, 2) in-box flow of each box from the previous frame, already measured (the
        keyframe propagation's, from the same boxes), used instead of measuring it again."""
        ids = np.asarray(ids, dtype=int).reshape(-1)
        xyxy = np.asarray(xyxy, dtype=float).reshape(-1, 4)
        anchors = self.anchors(xyxy)
        positions = anchors.copy()
        disp = np.full((len(ids), 2), np.nan)
        known = [i for i, tid in enumerate(ids) if tid in self._tracks]
        if not known:
            return positions, disp
        memories = [self._tracks[ids[i]] for i in known]
        prev_pos = np.array([m.anchor_px for m in memories])
        static_now = np.array([self._static_now(m) for m in memories])
        if self.refiner is not None and self._prev_gray is not None:
            rows = [r for r, m in enumerate(memories) if m.frame_index == self._prev_index]
            if rows:
                if flow is not None:
                    moved = np.asarray(flow, dtype=np.float64).reshape(-1, 2)[[known[r] for r in rows]]
                else:
                    prev_boxes = np.array([memories[r].box for r in rows])
                    moved = self.refiner.displacements(self._prev_gray, gray, prev_boxes, ego.homography)
                for r, d in zip(rows, moved, strict=True):
                    i = known[r]
                    box = xyxy[i]
                    blended = blend_flow(prev_pos[r] + d, anchors[i], max(box[2] - box[0], box[3] - box[1]))
                    if blended is not None:
                        positions[i] = blended
        if proj is not None:
            disp[known] = proj.to_ground(positions[known]) - proj.to_ground(static_now)
        return positions, disp

    def _static_now(self, memory: _TrackMemory) -> np.ndarray:
        """Where the static ground under a remembered position lies in the current frame."""
        p = (self._cum_h @ np.linalg.inv(memory.cum_h)) @ np.array([*memory.anchor_px, 1.0])
        return p[:2] / p[2]

    def remember(self, frame_index: int, ids: np.ndarray, positions: np.ndarray, xyxy: np.ndarray) -> None:
        """Where each measured track is now (a clipped box keeps its last full view)."""
        for tid, pos, box in zip(np.asarray(ids, dtype=int), positions, np.asarray(xyxy), strict=True):
            self._tracks[int(tid)] = _TrackMemory(frame_index, pos, self._cum_h.copy(), box.copy())

    def end_frame(self, frame_index: int, gray: np.ndarray) -> None:
        """The frame is done: its image is the next frame's flow reference."""
        self._prev_gray = gray
        self._prev_index = frame_index

    def expire(self, frame_index: int, horizon_frames: int) -> list[int]:
        """Forget tracks last measured more than ``horizon_frames`` ago; returns their ids."""
        gone = [t for t, m in self._tracks.items() if frame_index - m.frame_index > horizon_frames]
        for tid in gone:
            del self._tracks[tid]
        return gone

    def reset(self) -> None:
        self._cum_h = np.eye(3)
        self._tracks.clear()
        self._prev_gray = None
        self._prev_index = -1


__all__ = [
    "BORDER_MARGIN_PX",
    "FLOW_GATE",
    "FLOW_WEIGHT",
    "GroundDisplacement",
    "blend_flow",
    "box_anchors",
    "touches_border",
]
