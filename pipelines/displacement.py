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
   difference is the ground displacement in metres. Through a distorting lens or a rolling shutter
   both are first taken to the sensor's ideal image, and the previous one carried by the camera's
   motion there (:mod:`pipelines.motion.sensor_motion`); a point above the road gets back the
   parallax of the camera's own step (:mod:`pipelines.vehicle_height`).

Boxes clipped by the image border (:func:`touches_border`) grow or shrink as their vehicle enters
or leaves, so their anchor moves slower than the vehicle. Such a box (clipped now, or when last
measured) is measured by an edge the border cuts in neither frame instead (:func:`edge_point`):
the step is how far that edge moved, taken at the edge itself, and the box's own anchor is what
is remembered for the next step - so nothing is offset once the box is whole again. A vehicle is
thus measured from when it is partly in view until it is partly out, instead of only while
wholly in view: low over the road, where a vehicle crosses the frame in 2 s, that is a quarter of
its time in view. A box cut on both sides of an axis, or one whose visible part is shorter than
half its width (a sliver, whose far edge is uncertain), is not measured (:func:`measurable_clipped`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import supervision as sv

from pipelines.geometry import GroundProjector, apply_homography
from pipelines.motion.flow import BoxFlowRefiner
from pipelines.motion.sensor_motion import IdealMotion, IdealView
from pipelines.types import EgoMotion, Frame, SpeedEstimate

# A box edge this close to the image border is taken as cut by it: at least BORDER_MARGIN_PX, and
# BORDER_MARGIN_FRAC of the image's shorter side (6.5 px at 1080p). A detector's box for a vehicle
# half out of view ends a few pixels inside the border, not on it - its input is the frame shrunk
# 2-4x, so a pixel there is several here: with 2 px such boxes (4-6 px in) passed for whole ones,
# their centres moved slower than their vehicles, and each vehicle entering the frame got a speed
# 5-8 km/h low in its first second (speed grid, 30 m nadir drifting, shipped detector: speed MAE
# 0.82 -> 0.39 km/h, p95 3.34 -> 1.02 with 6 px).
BORDER_MARGIN_PX = 2.0
BORDER_MARGIN_FRAC = 0.006
# A clipped box is measured when its visible length along each cut axis is at least this share of
# its extent along the other axis (a sliver's far edge is where a detector is least sure).
MIN_CLIPPED_ASPECT = 0.5
# Complementary filter of in-box flow and box anchor: the weight of flow, and the disagreement
# (share of the box size) beyond which flow is taken to have failed.
FLOW_WEIGHT = 0.8
FLOW_GATE = 0.25


def border_margin(width: int, height: int) -> float:
    """How close (px) to the border of a ``width`` x ``height`` image a box edge counts as cut by it."""
    return max(BORDER_MARGIN_PX, BORDER_MARGIN_FRAC * min(width, height))


def clipped_edges(xyxy: np.ndarray, width: int, height: int, margin_px: float | None = None) -> np.ndarray:
    """(N, 4) bool: which of each box's edges (x1, y1, x2, y2) the image border cuts (within
    ``margin_px`` of it; None: :func:`border_margin`)."""
    xyxy = np.asarray(xyxy, dtype=float).reshape(-1, 4)
    margin_px = border_margin(width, height) if margin_px is None else margin_px
    return np.column_stack(
        [
            xyxy[:, 0] <= margin_px,
            xyxy[:, 1] <= margin_px,
            xyxy[:, 2] >= width - margin_px,
            xyxy[:, 3] >= height - margin_px,
        ]
    )


def touches_border(xyxy: np.ndarray, width: int, height: int, margin_px: float | None = None) -> np.ndarray:
    """True for boxes within ``margin_px`` of the image border (any edge cut: :func:`clipped_edges`)."""
    return clipped_edges(xyxy, width, height, margin_px).any(axis=1)


def measurable_clipped(xyxy: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """Whether each box can be measured despite its cut edges (``cut``: :func:`clipped_edges`):
    no axis cut on both sides, and along each cut axis at least ``MIN_CLIPPED_ASPECT`` of the
    box's extent along the other."""
    xyxy = np.asarray(xyxy, dtype=float).reshape(-1, 4)
    cut = np.asarray(cut, dtype=bool).reshape(-1, 4)
    w, h = xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]
    cut_x, cut_y = cut[:, 0] | cut[:, 2], cut[:, 1] | cut[:, 3]
    return (
        ~(cut[:, 0] & cut[:, 2])
        & ~(cut[:, 1] & cut[:, 3])
        & (~cut_x | (w >= MIN_CLIPPED_ASPECT * h))
        & (~cut_y | (h >= MIN_CLIPPED_ASPECT * w))
    )


def anchor_edges(anchor: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The box edges (indices into xyxy) the anchor's x and its y depend on."""
    return (0, 2), ((3,) if anchor == "bottom" else (1, 3))


def edge_point(
    box: np.ndarray, anchor_px: np.ndarray, cut: np.ndarray, anchor: str = "center"
) -> np.ndarray | None:
    """The point a clipped box is measured at: its anchor, with each coordinate that depends on a
    ``cut`` edge (4 bools, x1 y1 x2 y2: cut now or in the other frame of the step) replaced by an
    uncut edge of that axis. None when an axis it needs has both edges cut."""
    out = np.array(anchor_px, dtype=np.float64)
    for axis, deps in enumerate(anchor_edges(anchor)):
        if not any(cut[e] for e in deps):
            continue
        free = [e for e in (axis, axis + 2) if not cut[e]]
        if not free:
            return None
        out[axis] = box[free[0]]
    return out


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
    view: IdealView | None = None  # that frame's pixels -> its ideal image (None: they are)
    cum_ideal: np.ndarray | None = None  # reference -> that frame, static ground, ideal image

    @property
    def has_ideal(self) -> bool:
        """That frame's sensor was known: the track's point can be taken to its ideal image."""
        return self.view is not None and self.cum_ideal is not None


class GroundDisplacement:
    """Per-stream memory of where each track was last measured, and the camera's accumulated motion.

    Per frame: :meth:`advance` with the frame's ego-motion, :meth:`measure` the measurable tracks,
    :meth:`remember` where they are now, :meth:`expire` tracks gone for too long.
    """

    def __init__(
        self,
        anchor: str = "center",
        refiner: BoxFlowRefiner | None = None,
        ideal: IdealMotion | None = None,
    ) -> None:
        self.anchor = anchor
        self.refiner = refiner
        # the camera's motion in the sensor's ideal image, for steps through a lens or a rolling
        # shutter (pipelines.motion.sensor_motion)
        self.ideal = ideal if ideal is not None else IdealMotion()
        self._view: IdealView | None = None  # this frame's
        self._cum_h = np.eye(3)  # reference frame -> current frame, static ground
        self._tracks: dict[int, _TrackMemory] = {}
        self._prev_gray: np.ndarray | None = None
        self._prev_index = -1
        # (N, 2) the camera's step over the ground behind each of the last measure's displacements
        # (m, this frame's ground; NaN: not known or no point heights given): a raised point's
        # sigma under a moving camera (pipelines.vehicle_height.moving_camera_factor)
        self.camera_steps = np.zeros((0, 2))

    def __len__(self) -> int:
        return len(self._tracks)

    def anchors(self, xyxy: np.ndarray) -> np.ndarray:
        return box_anchors(xyxy, self.anchor)

    def advance(self, ego: EgoMotion, timestamp_s: float | None = None) -> None:
        """Accumulate this frame's camera motion (previous -> current frame; ``timestamp_s``: the
        frame's, for the rolling shutter's share of it)."""
        self._cum_h = ego.homography @ self._cum_h
        self._cum_h /= self._cum_h[2, 2]
        self.ideal.advance(ego, timestamp_s)
        self._view = None

    def measure(
        self,
        gray: np.ndarray,
        ids: np.ndarray,
        xyxy: np.ndarray,
        ego: EgoMotion,
        proj: GroundProjector | None,
        flow: np.ndarray | None = None,
        point_heights: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each track's position now (pixels, (N, 2)) and ground displacement (metres, (N, 2)) since it
        was last measured; NaN displacement = unknown (a new track, no ground scale, or a clipped
        box that cannot be measured: :func:`measurable_clipped`, :func:`edge_point`).
        ``flow``: (N, 2) in-box flow of each box from the previous frame, already measured (the
        keyframe propagation's, from the same boxes), used instead of measuring it again.
        ``point_heights``: (N,) how far above the road each vehicle's measured point is (m,
        :mod:`pipelines.vehicle_height`); None: on it."""
        ids = np.asarray(ids, dtype=int).reshape(-1)
        xyxy = np.asarray(xyxy, dtype=float).reshape(-1, 4)
        height, width = gray.shape[:2]
        anchors = self.anchors(xyxy)
        positions = anchors.copy()
        disp = np.full((len(ids), 2), np.nan)
        self.camera_steps = np.full((len(ids), 2), np.nan)
        cut_now = clipped_edges(xyxy, width, height)
        usable = measurable_clipped(xyxy, cut_now)
        whole: list[int] = []  # uncut in both frames: box anchor and in-box flow
        edges: list[tuple[int, np.ndarray, np.ndarray]] = []  # (row, point now, point then)
        for i, tid in enumerate(ids):
            memory = self._tracks.get(int(tid))
            if memory is None or not usable[i]:
                continue
            cut = cut_now[i] | clipped_edges(memory.box, width, height)[0]
            if not any(cut[e] for deps in anchor_edges(self.anchor) for e in deps):
                whole.append(i)
                continue
            now = edge_point(xyxy[i], anchors[i], cut, self.anchor)
            then = edge_point(memory.box, self.anchors(memory.box[None])[0], cut, self.anchor)
            if now is not None and then is not None:
                edges.append((i, now, then))
        if whole:
            memories = [self._tracks[ids[i]] for i in whole]
            prev_pos = np.array([m.anchor_px for m in memories])
            if self.refiner is not None and self._prev_gray is not None:
                rows = [r for r, m in enumerate(memories) if m.frame_index == self._prev_index]
                if rows:
                    if flow is not None:
                        moved = np.asarray(flow, dtype=np.float64).reshape(-1, 2)[[whole[r] for r in rows]]
                    else:
                        prev_boxes = np.array([memories[r].box for r in rows])
                        moved = self.refiner.displacements(self._prev_gray, gray, prev_boxes, ego.homography)
                    for r, d in zip(rows, moved, strict=True):
                        i = whole[r]
                        box = xyxy[i]
                        blended = blend_flow(
                            prev_pos[r] + d, anchors[i], max(box[2] - box[0], box[3] - box[1])
                        )
                        if blended is not None:
                            positions[i] = blended
        if proj is None:
            return positions, disp
        self._view = self.ideal.use(proj)
        if whole:
            then = [(self._tracks[ids[i]], self._tracks[ids[i]].anchor_px) for i in whole]
            disp[whole], self.camera_steps[whole] = self._steps(
                proj, positions[whole], then, _rows(point_heights, whole)
            )
        if edges:
            rows = [i for i, _, _ in edges]
            then = [(self._tracks[ids[i]], p) for i, _, p in edges]
            now = np.array([e[1] for e in edges])
            disp[rows], self.camera_steps[rows] = self._steps(proj, now, then, _rows(point_heights, rows))
        return positions, disp

    def _steps(
        self,
        proj: GroundProjector,
        now_px: np.ndarray,
        then: list[tuple[_TrackMemory, np.ndarray]],
        heights: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Ground steps from points of the frames the tracks were last measured in (``then``: the
        memory, the point there) to pixels now: in the sensor's ideal image where it has one; and
        the camera's steps over the ground meanwhile (NaN without ``heights``)."""
        view = self._view
        camera = None if heights is None else self._camera_steps(proj, [m for m, _ in then])
        if view is None:  # a pinhole, global shutter: the pixels are the ideal image
            static_now = np.array([self._carry(m, p) for m, p in then])
            steps = proj.ground_step(now_px, static_now, heights, camera_step_m=camera)
        else:
            steps = proj.ground_step(
                view.points(now_px), self._carry_ideal(then, view), heights, True, camera
            )
        return steps, np.full((len(then), 2), np.nan) if camera is None else camera

    def _camera_steps(self, proj: GroundProjector, memories: list[_TrackMemory]) -> np.ndarray:
        """(N, 2) how far the camera moved over the ground since each track was last measured, in
        this frame's ground coordinates (the camera is above their origin): the ground point below
        it then (its nadir pixel, carried) is ``-step`` now. The nadir pixel is this frame's (a
        gimbal holds its pitch over the frames of a step). NaN where the nadir is not in reach."""
        nadir = proj.nadir_px()
        if not memories or not np.all(np.isfinite(nadir)):
            return np.full((len(memories), 2), np.nan)
        ideal = [self._view is not None and m.has_ideal for m in memories]
        then = np.array([m.cum_ideal if i else m.cum_h for m, i in zip(memories, ideal, strict=True)])
        now = np.where(np.array(ideal)[:, None, None], self.ideal.cum, self._cum_h)
        p = now @ np.linalg.solve(then, np.broadcast_to([*nadir, 1.0], (len(memories), 3))[..., None])
        with np.errstate(divide="ignore", invalid="ignore"):
            carried = p[:, :2, 0] / p[:, 2:, 0]
        return -proj.to_ground(carried, ideal=True)

    def _carry_ideal(self, then: list[tuple[_TrackMemory, np.ndarray]], view: IdealView) -> np.ndarray:
        """(N, 2) where the static ground under each pixel of the frame a track was last measured in
        lies now, in this frame's ideal image; a frame's points at once. A track measured before the
        sensor was known: its pixels carried, then taken to the ideal image as this frame's."""
        out = np.empty((len(then), 2))
        frames: dict[int, list[int]] = {}
        for i, (m, _) in enumerate(then):
            frames.setdefault(m.frame_index if m.has_ideal else -1, []).append(i)
        for index, rows in frames.items():
            m = then[rows[0]][0]
            if index < 0:
                out[rows] = view.points(np.array([self._carry(then[i][0], then[i][1]) for i in rows]))
                continue
            pts = np.array([then[i][1] for i in rows], dtype=np.float64).reshape(-1, 2)
            out[rows] = apply_homography(self.ideal.cum @ np.linalg.inv(m.cum_ideal), m.view.points(pts))
        return out

    def _carry(self, memory: _TrackMemory, point_px: np.ndarray) -> np.ndarray:
        """Where the static ground under a pixel of the frame a track was last measured in lies now."""
        p = (self._cum_h @ np.linalg.inv(memory.cum_h)) @ np.array([*point_px, 1.0])
        return p[:2] / p[2]

    def carried_anchor(self, track_id: int) -> np.ndarray | None:
        """Where the static ground under a track's anchor, when last measured, lies in the current
        frame (pixels; None for a track not held): where a vehicle that stopped there would be."""
        memory = self._tracks.get(int(track_id))
        return None if memory is None else self._carry(memory, memory.anchor_px)

    def remember(self, frame_index: int, ids: np.ndarray, positions: np.ndarray, xyxy: np.ndarray) -> None:
        """Where each measured track is now."""
        view = self._view
        cum_ideal = None if view is None else self.ideal.cum.copy()
        for tid, pos, box in zip(np.asarray(ids, dtype=int), positions, np.asarray(xyxy), strict=True):
            self._tracks[int(tid)] = _TrackMemory(
                frame_index, pos, self._cum_h.copy(), box.copy(), view, cum_ideal
            )

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
        self.ideal.reset()
        self._view = None
        self._tracks.clear()
        self._prev_gray = None
        self._prev_index = -1


def _rows(values: np.ndarray | None, rows: list[int]) -> np.ndarray | None:
    return None if values is None else np.asarray(values, dtype=np.float64).reshape(-1)[rows]


def ground_sizes(xyxy: np.ndarray, proj: GroundProjector, frame: Frame) -> np.ndarray:
    """Each box's size on the ground (m): sqrt of its area in pixels times the GSD at its centre
    (a vehicle nearing an oblique camera grows in pixels, not in metres, so only a partial or
    merged box changes it); NaN for a box cut by the image border (its visible part's size)."""
    if not len(xyxy):
        return np.zeros(0)
    w, h = xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]
    sizes = np.sqrt(np.clip(w * h, 0, None)) * proj.gsd_at(box_anchors(xyxy))
    return np.where(touches_border(xyxy, frame.width, frame.height), np.nan, sizes)


def centre_gsd(proj: GroundProjector | None, frame: Frame) -> float | None:
    """The ground size of a pixel at the image centre (None without a ground projection)."""
    if proj is None:
        return None
    return float(proj.gsd_at(np.array([[frame.width / 2, frame.height / 2]]))[0])


def speed_columns(
    tracked: sv.Detections,
    ids: np.ndarray,
    speeds: dict[int, SpeedEstimate],
    proj: GroundProjector | None,
    anchors: np.ndarray,
) -> np.ndarray:
    """Set each track's speed, its sigma, its scale's share and whether it is trusted (NaN, NaN,
    NaN, False without one), its ground position and its pixel's ground size at ``anchors`` (the
    points its speed is measured at; NaN without a ground projection ``proj``) as columns of
    ``tracked.data``; returns the ground positions (N, 2)."""
    n = len(tracked)
    for name, field, empty in (
        ("speed_kmh", "speed_kmh", np.nan),
        ("speed_sigma_kmh", "sigma_kmh", np.nan),
        ("speed_scale_frac", "scale_sigma_frac", np.nan),
    ):
        tracked.data[name] = np.array(
            [getattr(speeds[t], field) if t in speeds else empty for t in ids], float
        )
    tracked.data["speed_trusted"] = np.array([speeds[t].trusted if t in speeds else False for t in ids], bool)
    ground_xy = proj.to_ground(anchors) if proj is not None else np.full((n, 2), np.nan)
    tracked.data["ground_xy_m"] = ground_xy
    tracked.data["gsd_m_per_px"] = proj.gsd_at(anchors) if proj is not None else np.full(n, np.nan)
    return ground_xy


__all__ = [
    "speed_columns",
    "BORDER_MARGIN_FRAC",
    "BORDER_MARGIN_PX",
    "FLOW_GATE",
    "FLOW_WEIGHT",
    "GroundDisplacement",
    "MIN_CLIPPED_ASPECT",
    "anchor_edges",
    "blend_flow",
    "border_margin",
    "box_anchors",
    "centre_gsd",
    "clipped_edges",
    "edge_point",
    "ground_sizes",
    "measurable_clipped",
    "touches_border",
]
