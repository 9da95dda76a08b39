"""Camera ego-motion between consecutive frames from background corners.

Sparse pyramidal Lucas-Kanade on corners of the (static) background, on a downscaled grey frame:

1. corners are detected with a mask that leaves out vehicle boxes and a thin image border:
   ``"global"`` is ``goodFeaturesToTrack`` over the frame (quality relative to its strongest corner,
   which on a road is a lane marking: plain ground then gives almost nothing); ``"grid"``
   (:func:`grid_corners`) the strongest minimum-eigenvalue peaks of each cell of a grid, with a
   quality threshold relative to the cell; ``"fill"`` (the default) the global corners plus grid
   corners in the cells they leave empty (:func:`fill_empty_cells`), so that plain ground (asphalt
   and grass seen from low altitude) still gives points over the whole frame while textured ground
   keeps its strong corners on and along the road. Edge-like corners are dropped
   (:func:`corner_ratios` below ``min_corner_ratio``): a point on a lane line or a kerb is pinned
   across the line only, so LK leaves its motion along the line where the seed put it. They are
   re-detected every
   ``refresh_every`` frames or when too few survive, otherwise the surviving inliers are tracked on
   (cheap, and long-lived points are the stable ones);
2. each corner is tracked previous -> current and back; points whose round trip misses by more than
   ``FB_MAX_PX`` or that land inside a current vehicle box are dropped. The previous frame's
   homography seeds both passes (drones pan smoothly), and the pyramid depth follows the working
   scale so that a further ``MAX_MOTION_PX`` per frame is still caught;
3. a RANSAC homography (``cv2.findHomography``) is fitted; with too few inliers the estimator falls
   back to a RANSAC similarity (``cv2.estimateAffinePartial2D``) and then to identity, both marked
   ``valid=False``.

4. the frame-to-frame motion is smoothed (:class:`MotionSmoother`, ``smooth_window`` frames): a
   drone moves smoothly, while each estimate carries the H.264 codec's quarter-pixel motion
   quantisation and LK noise (a few hundredths of a pixel). The motion is followed as the
   displacement of four reference points; a causal straight-line trend fitted over the last frames
   gives the current motion (no lag under constant acceleration), and a measurement further than
   ``smooth_gate_px`` from the trend's prediction (a pan starting or stopping) restarts the trend
   from it. Fallback estimates are never smoothed and restart it too.

The homography maps previous-frame pixels onto current-frame pixels of the full-resolution image:
``H_full = S^-1 H_small S`` where ``S`` is the exact pixel-centre-aligned resize map.

Design after norfair's ``MotionEstimator`` (corner tracking + homography getter), re-written for a
single-step prev->current model with vehicle masking, forward-backward checking and explicit
fallbacks.
"""

from __future__ import annotations

import dataclasses
import logging

import cv2
import numpy as np

from pipelines.config import EgoMotionConfig
from pipelines.types import EgoMotion

log = logging.getLogger(__name__)

FB_MAX_PX = 0.7  # max forward-backward round-trip error, in working (downscaled) pixels
LK_WIN = 13
MAX_MOTION_PX = 100.0  # camera motion (full-res px/frame, beyond the previous frame's) LK must catch
LK_CRITERIA = (cv2.TERM_CRITERIA_EPS | cv2.TERM_CRITERIA_COUNT, 20, 0.03)
BOX_MARGIN_PX = 4.0  # grow exclusion boxes by this (full-resolution px)
BORDER_PX = 6  # no corners this close to the image border (working px)
GRID_NMS_RADIUS = 5  # grid corners: local maxima at least this far apart (working px)
GRID_CELL_QUALITY = 0.05  # ... at least this share of their cell's strongest corner
GRID_MIN_QUALITY = 1e-3  # ... and of the frame's strongest corner
# A homography is accepted only if it stays close to a plausible frame-to-frame camera motion.
MAX_SCALE_CHANGE = 1.5
MAX_PERSPECTIVE = 2e-3  # |h31|, |h32| in full-res px^-1 after normalising h33 = 1


def working_scale(cfg: EgoMotionConfig, width: int) -> float:
    """The downscale ego-motion works at: ``cfg.scale``, lowered so that the working image is at
    most ``cfg.max_width`` pixels wide (1080p: 1/3 instead of 1/2, 2.4x cheaper)."""
    s = float(cfg.scale)
    if cfg.max_width is not None and width * s > cfg.max_width:
        s = cfg.max_width / width
    return s


def scale_matrix(sx: float, sy: float) -> np.ndarray:
    """Full-resolution pixel -> resized pixel (pixel-centre aligned, as cv2.resize samples)."""
    return np.array([[sx, 0.0, 0.5 * sx - 0.5], [0.0, sy, 0.5 * sy - 0.5], [0.0, 0.0, 1.0]])


def rescale_homography(h_small: np.ndarray, sx: float, sy: float) -> np.ndarray:
    """``S^-1 H S``: a homography found on the resized image, expressed in full-resolution pixels."""
    s = scale_matrix(sx, sy)
    h = np.linalg.inv(s) @ h_small @ s
    return h / h[2, 2]


def apply_homography_points(h: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Map (N, 2) points through a 3x3 homography."""
    pts = np.asarray(pts, dtype=np.float64).reshape(-1, 2)
    hom = np.hstack([pts, np.ones((len(pts), 1))]) @ h.T
    return hom[:, :2] / hom[:, 2:3]


def plausible_homography(h: np.ndarray) -> bool:
    """A frame-to-frame camera homography: finite, orientation-preserving, mild scale/perspective."""
    if not np.all(np.isfinite(h)) or abs(h[2, 2]) < 1e-12:
        return False
    h = h / h[2, 2]
    det = float(np.linalg.det(h[:2, :2]))
    if det <= 0:
        return False
    s = np.sqrt(det)
    return bool(1.0 / MAX_SCALE_CHANGE < s < MAX_SCALE_CHANGE and np.all(np.abs(h[2, :2]) < MAX_PERSPECTIVE))


def grid_cells(xs: np.ndarray, ys: np.ndarray, shape: tuple[int, int], cols: int) -> tuple[np.ndarray, int]:
    """(cell index of each point, number of cells) of a grid ``cols`` wide over an image of
    ``shape`` (rows from the aspect ratio); points on or past an edge go to the edge cell."""
    h, w = shape
    rows = max(1, round(cols * h / w))
    cx = np.clip((np.asarray(xs) * cols // w).astype(int), 0, cols - 1)
    cy = np.clip((np.asarray(ys) * rows // h).astype(int), 0, rows - 1)
    return cy * cols + cx, cols * rows


def grid_corners(
    img: np.ndarray,
    mask: np.ndarray | None,
    max_corners: int,
    cols: int = 16,
    nms_radius: int = GRID_NMS_RADIUS,
    cell_quality: float = GRID_CELL_QUALITY,
    min_quality: float = GRID_MIN_QUALITY,
    block: int = 5,
    min_ratio: float = 0.0,
) -> np.ndarray | None:
    """Corners spread over a grid: (N, 1, 2) float32 working pixels, or None.

    The minimum eigenvalue of the gradient structure tensor (``cornerMinEigenVal``, as
    ``goodFeaturesToTrack`` uses) is computed once; its local maxima (``nms_radius`` apart) are
    grouped into ``cols`` x ``rows`` cells (rows from the aspect ratio) and each cell keeps its
    strongest ``ceil(max_corners / cells)`` peaks at or above ``cell_quality`` times the cell's best,
    ``max_corners`` in all (every cell's strongest first). ``min_quality`` times the frame's best is
    the floor (flat noise gives no corners). Peaks whose :func:`corner_ratios` is under
    ``min_ratio`` (edges) are left out before the cells choose.
    """
    eig = cv2.cornerMinEigenVal(img, block, 3)
    if mask is not None:
        eig[mask == 0] = 0
    peak = float(eig.max())
    if peak <= 0:
        return None
    k = 2 * nms_radius + 1
    local_max = eig >= cv2.dilate(eig, cv2.getStructuringElement(cv2.MORPH_RECT, (k, k)))
    ys, xs = np.nonzero(local_max & (eig > min_quality * peak))
    if min_ratio > 0 and len(ys):
        corner = corner_ratios(img, np.column_stack([xs, ys]), block) >= min_ratio
        ys, xs = ys[corner], xs[corner]
    if len(ys) == 0:
        return None
    v = eig[ys, xs]
    cell, n_cells = grid_cells(xs, ys, img.shape, cols)
    order = np.lexsort((-v, cell))  # by cell, strongest first
    cell, v, ys, xs = cell[order], v[order], ys[order], xs[order]
    first = np.searchsorted(cell, cell, side="left")  # index of each cell's strongest peak
    rank = np.arange(len(cell)) - first
    per_cell = int(np.ceil(max_corners / n_cells))
    keep = np.nonzero((rank < per_cell) & (v >= cell_quality * v[first]))[0]
    if len(keep) == 0:
        return None
    if len(keep) > max_corners:  # at most max_corners: every cell's best first, then the seconds...
        keep = keep[np.lexsort((-v[keep], rank[keep]))[:max_corners]]
    return np.column_stack([xs[keep], ys[keep]]).astype(np.float32).reshape(-1, 1, 2)


def corner_ratios(img: np.ndarray, pts: np.ndarray, block: int = 5) -> np.ndarray:
    """(N,) ``lambda_min / lambda_max`` of the gradient structure tensor summed over a ``block`` x
    ``block`` window at each of the (N, 1, 2) or (N, 2) points (nearest pixel): 1 where the texture
    varies alike in every direction (a corner), 0 on a straight edge, where the motion along the
    edge cannot be measured (the aperture problem); 0 for a flat window. Central differences on a
    gathered patch per point: no full-image pass."""
    p = np.rint(np.asarray(pts, dtype=np.float64).reshape(-1, 2)).astype(int)
    if len(p) == 0:
        return np.zeros(0)
    h, w = img.shape[:2]
    r = block // 2 + 1  # one more pixel each side for the differences
    cx = np.clip(p[:, 0], r, w - 1 - r)
    cy = np.clip(p[:, 1], r, h - 1 - r)
    off = np.arange(-r, r + 1)
    patch = img[(cy[:, None] + off)[:, :, None], (cx[:, None] + off)[:, None, :]].astype(np.float32)
    gx = patch[:, 1:-1, 2:] - patch[:, 1:-1, :-2]
    gy = patch[:, 2:, 1:-1] - patch[:, :-2, 1:-1]
    a = (gx * gx).sum(axis=(1, 2), dtype=np.float64)
    b = (gx * gy).sum(axis=(1, 2), dtype=np.float64)
    c = (gy * gy).sum(axis=(1, 2), dtype=np.float64)
    half_trace = 0.5 * (a + c)
    root = np.sqrt(np.maximum(0.25 * (a - c) ** 2 + b * b, 0.0))
    big = half_trace + root
    return np.divide(half_trace - root, big, out=np.zeros_like(big), where=big > 0)


def drop_edges(img: np.ndarray, pts: np.ndarray | None, min_ratio: float) -> np.ndarray | None:
    """The (N, 1, 2) corners of ``pts`` whose :func:`corner_ratios` is at least ``min_ratio``
    (``pts`` itself when ``min_ratio`` is 0), or None when none is."""
    if pts is None or len(pts) == 0 or min_ratio <= 0:
        return pts
    kept = pts[corner_ratios(img, pts) >= min_ratio]
    return kept if len(kept) else None


def fill_empty_cells(
    pts: np.ndarray | None, extra: np.ndarray | None, shape: tuple[int, int], cols: int
) -> np.ndarray | None:
    """``pts`` plus the ``extra`` corners that fall in grid cells (``cols`` wide, rows from the
    aspect ratio) where ``pts`` has none: (N, 1, 2) float32, or None."""
    if extra is None or len(extra) == 0:
        return pts
    if pts is None or len(pts) == 0:
        return extra

    p, e = pts.reshape(-1, 2), extra.reshape(-1, 2)
    taken_cells, n_cells = grid_cells(p[:, 0], p[:, 1], shape, cols)
    extra_cells, _ = grid_cells(e[:, 0], e[:, 1], shape, cols)
    taken = np.zeros(n_cells, dtype=bool)
    taken[taken_cells] = True
    add = extra[~taken[extra_cells]]
    return np.concatenate([pts, add.reshape(-1, 1, 2)]).astype(np.float32)


def reference_points(width: int, height: int) -> np.ndarray:
    """(4, 2) full-resolution points whose displacements stand for a homography (quarter points)."""
    return np.array(
        [[0.25 * width, 0.25 * height], [0.75 * width, 0.25 * height], [0.75 * width, 0.75 * height],
         [0.25 * width, 0.75 * height]]
    )  # fmt: skip


def homography_from_displacements(ref: np.ndarray, disp: np.ndarray) -> np.ndarray:
    """The homography (``h33 = 1``) moving the 4 ``ref`` points by ``disp`` (4, 2): the exact
    4-point solve in float64 (``cv2.getPerspectiveTransform`` works in float32)."""
    src = np.asarray(ref, dtype=np.float64)
    dst = src + np.asarray(disp, dtype=np.float64).reshape(4, 2)
    a = np.zeros((8, 8))
    b = dst.reshape(-1)
    for i, ((x, y), (u, v)) in enumerate(zip(src, dst, strict=True)):
        a[2 * i] = [x, y, 1.0, 0.0, 0.0, 0.0, -u * x, -u * y]
        a[2 * i + 1] = [0.0, 0.0, 0.0, x, y, 1.0, -v * x, -v * y]
    return np.append(np.linalg.solve(a, b), 1.0).reshape(3, 3)


def trend(history: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Straight-line least-squares fit over the rows of ``history`` (T, D), oldest first:
    (value fitted at the last row, value predicted one row later). T = 1: that row, twice; T = 2:
    the last row and its extrapolation."""
    n = len(history)
    if n == 1:
        return history[0], history[0]
    t = np.arange(n, dtype=np.float64)
    t_mean = t.mean()
    y_mean = history.mean(axis=0)
    slope = ((t - t_mean)[:, None] * (history - y_mean)).sum(axis=0) / ((t - t_mean) ** 2).sum()
    last = y_mean + slope * (n - 1 - t_mean)
    return last, last + slope


class MotionSmoother:
    """Causal, gated trend of the frame-to-frame motion (see the module docstring, step 4).

    :meth:`smooth` takes each raw prev -> current homography (full-resolution pixels) and returns
    the smoothed one; :meth:`reset` forgets the trend (a fallback, a new stream).
    """

    def __init__(self, window: int, gate_px: float) -> None:
        self.window = window
        self.gate_px = gate_px
        self.reset()

    def reset(self) -> None:
        self._history: list[np.ndarray] = []  # (8,) reference-point displacements, oldest first
        self._ref: np.ndarray | None = None

    def smooth(self, h: np.ndarray, width: int, height: int) -> np.ndarray:
        if self.window <= 1:
            return h
        ref = reference_points(width, height)
        if self._ref is None or not np.array_equal(ref, self._ref):
            self.reset()
            self._ref = ref
        disp = (apply_homography_points(h, ref) - ref).reshape(-1)
        if not np.all(np.isfinite(disp)):
            self.reset()
            return h
        if len(self._history) >= 2:
            _, predicted = trend(np.array(self._history))
            if np.max(np.abs(disp - predicted)) > self.gate_px:
                log.debug("ego-motion: motion changed beyond the trend; smoothing restarts")
                self._history = []
        self._history = [*self._history[-(self.window - 1) :], disp]
        if len(self._history) < 3:  # no trend yet: a line through two points is the raw motion
            return h
        fitted, _ = trend(np.array(self._history))
        return homography_from_displacements(ref, fitted.reshape(4, 2))


def exclusion_mask(
    shape: tuple[int, int], boxes_xyxy: np.ndarray | None, scale: tuple[float, float], border: int = BORDER_PX
) -> np.ndarray:
    """uint8 mask (255 = corners allowed) of the working image with boxes and border cleared."""
    h, w = shape
    mask = np.zeros((h, w), dtype=np.uint8)
    mask[border : h - border, border : w - border] = 255
    if boxes_xyxy is not None and len(boxes_xyxy):
        sx, sy = scale
        b = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
        x1 = np.floor((b[:, 0] - BOX_MARGIN_PX) * sx).astype(int).clip(0, w)
        y1 = np.floor((b[:, 1] - BOX_MARGIN_PX) * sy).astype(int).clip(0, h)
        x2 = np.ceil((b[:, 2] + BOX_MARGIN_PX) * sx).astype(int).clip(0, w)
        y2 = np.ceil((b[:, 3] + BOX_MARGIN_PX) * sy).astype(int).clip(0, h)
        for a, c, e, f in zip(x1, y1, x2, y2, strict=True):
            mask[c:f, a:e] = 0
    return mask


def points_in_boxes(pts: np.ndarray, boxes_xyxy: np.ndarray | None, margin: float = 0.0) -> np.ndarray:
    """(N,) bool: which (N, 2) points fall inside any of the boxes (grown by ``margin``)."""
    if boxes_xyxy is None or len(boxes_xyxy) == 0 or len(pts) == 0:
        return np.zeros(len(pts), dtype=bool)
    b = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
    x = pts[:, 0:1]
    y = pts[:, 1:2]
    inside = (
        (x >= b[:, 0] - margin) & (x <= b[:, 2] + margin) & (y >= b[:, 1] - margin) & (y <= b[:, 3] + margin)
    )
    return inside.any(axis=1)


class EgoMotionEstimator:
    """Stateful prev->current camera homography estimator (see module docstring)."""

    def __init__(self, cfg: EgoMotionConfig | None = None) -> None:
        self.cfg = cfg or EgoMotionConfig()
        self._smoother = MotionSmoother(self.cfg.smooth_window, self.cfg.smooth_gate_px)
        self.reset()

    def set_max_width(self, max_width: int | None) -> None:
        """Work at most ``max_width`` pixels wide from the next frame on (None: the configured
        scale alone): a live stream's effort rung (:mod:`pipelines.effort`). The previous frame's
        working image, corners and motion prior are carried to the new scale, so no frame's motion
        is lost. Safe from another thread: it is applied by the next :meth:`update`."""
        self._pending_width = (max_width,)

    def _apply_width(self, max_width: int | None) -> None:
        if max_width == self.cfg.max_width:
            return
        self.cfg = self.cfg.model_copy(update={"max_width": max_width})
        if self._prev is None or self._full_shape is None:
            return
        h, w = self._full_shape
        s = working_scale(self.cfg, w)
        ws, hs = (w, h) if s >= 0.999 else (max(16, round(w * s)), max(16, round(h * s)))
        fx, fy = ws / self._prev.shape[1], hs / self._prev.shape[0]
        self._prev = cv2.resize(self._prev, (ws, hs), interpolation=cv2.INTER_AREA)
        if self._prev_pts is not None:
            f = np.array([fx, fy], np.float32)
            self._prev_pts = ((self._prev_pts + 0.5) * f - 0.5).astype(np.float32)  # as scale_matrix maps
        if self._last_h is not None:
            g = scale_matrix(fx, fy)
            self._last_h = g @ self._last_h @ np.linalg.inv(g)

    def reset(self) -> None:
        """Forget the previous frame (next :meth:`update` returns identity)."""
        self._pending_width: tuple[int | None] | None = None
        self._prev: np.ndarray | None = None
        self._prev_pts: np.ndarray | None = None  # (N, 1, 2) float32, working coordinates
        self._full_shape: tuple[int, int] | None = None
        self._since_refresh = 0
        self._last_h: np.ndarray | None = None  # last valid estimate, working coords: motion prior
        self._smoother.reset()

    # --------------------------------------------------------------------------------------
    def _to_working(self, gray: np.ndarray) -> tuple[np.ndarray, float, float]:
        if gray.ndim == 3:
            gray = cv2.cvtColor(gray, cv2.COLOR_BGR2GRAY)
        if gray.dtype != np.uint8:
            gray = cv2.normalize(gray, None, 0, 255, cv2.NORM_MINMAX).astype(np.uint8)
        h, w = gray.shape
        s = working_scale(self.cfg, w)
        if s >= 0.999:
            return gray, 1.0, 1.0
        ws, hs = max(16, round(w * s)), max(16, round(h * s))
        small = cv2.resize(gray, (ws, hs), interpolation=cv2.INTER_AREA)
        return small, ws / w, hs / h

    def _min_points(self) -> int:
        return max(3 * self.cfg.min_inliers, self.cfg.max_features // 4)

    def _detect(self, small: np.ndarray, boxes: np.ndarray | None, sx: float, sy: float) -> np.ndarray | None:
        h, w = small.shape
        mask = exclusion_mask((h, w), boxes, (sx, sy))
        ratio = self.cfg.min_corner_ratio
        if self.cfg.corners == "grid":
            return grid_corners(small, mask, self.cfg.max_features, cols=self.cfg.grid_cols, min_ratio=ratio)
        min_dist = max(4.0, min(h, w) / 45.0)
        pts = cv2.goodFeaturesToTrack(
            small,
            maxCorners=self.cfg.max_features,
            qualityLevel=0.01,
            minDistance=min_dist,
            mask=mask,
            blockSize=5,
        )
        pts = drop_edges(small, None if pts is None else pts.astype(np.float32), ratio)
        if self.cfg.corners == "fill":
            extra = grid_corners(small, mask, self.cfg.max_features, cols=self.cfg.grid_cols, min_ratio=ratio)
            pts = fill_empty_cells(pts, extra, (h, w), self.cfg.grid_cols)
        return pts

    # --------------------------------------------------------------------------------------
    def update(self, gray: np.ndarray, exclude_xyxy: np.ndarray | None = None) -> EgoMotion:
        """Camera motion from the previous frame to ``gray`` (H x W uint8; BGR is converted).

        ``exclude_xyxy``: (N, 4) boxes of moving things (vehicles) in this frame, in full-resolution
        pixels; no background corners are taken from them.
        """
        if self._pending_width is not None:
            (width,), self._pending_width = self._pending_width, None
            self._apply_width(width)
        small, sx, sy = self._to_working(gray)
        full_shape = gray.shape[:2]
        if self._prev is None or self._prev.shape != small.shape or self._full_shape != full_shape:
            self._last_h = None
            self._smoother.reset()
            self._store(small, self._detect(small, exclude_xyxy, sx, sy), full_shape)
            return EgoMotion.identity()

        prev_pts = self._prev_pts
        if prev_pts is None or len(prev_pts) < self._min_points():
            prev_pts = self._detect(self._prev, None, sx, sy)  # prev boxes unknown here: rely on RANSAC
        if prev_pts is None or len(prev_pts) < 4:
            log.debug("ego-motion: no trackable corners in the previous frame; identity")
            self._last_h = None
            self._smoother.reset()
            self._store(small, self._detect(small, exclude_xyxy, sx, sy), full_shape)
            return EgoMotion(np.eye(3), 0.0, 0, 0.0, False)

        p0, p1 = self._track(self._prev, small, prev_pts, self._last_h, self._levels(sx))
        if len(p0):
            in_box = points_in_boxes(p1 / np.array([sx, sy]), exclude_xyxy, BOX_MARGIN_PX)
            p0, p1 = p0[~in_box], p1[~in_box]
        ego, inliers = self._fit(p0, p1, sx, sy)

        self._since_refresh += 1
        survivors = p1[inliers].reshape(-1, 1, 2).astype(np.float32) if inliers is not None else None
        if (
            survivors is None
            or len(survivors) < self._min_points()
            or self._since_refresh >= self.cfg.refresh_every
        ):
            survivors = self._detect(small, exclude_xyxy, sx, sy)
            self._since_refresh = 0
        self._store(small, survivors, full_shape, keep_counter=True)
        if not ego.valid:
            self._smoother.reset()
            return ego
        smoothed = self._smoother.smooth(ego.homography, full_shape[1], full_shape[0])
        return dataclasses.replace(ego, homography=smoothed)

    def _store(
        self,
        small: np.ndarray,
        pts: np.ndarray | None,
        full_shape: tuple[int, int],
        keep_counter: bool = False,
    ) -> None:
        self._prev = small
        self._prev_pts = pts
        self._full_shape = full_shape
        if not keep_counter:
            self._since_refresh = 0

    @staticmethod
    def _levels(scale: float) -> int:
        """Pyramid levels so that LK catches MAX_MOTION_PX at this working scale."""
        need = MAX_MOTION_PX * scale / (LK_WIN // 2)
        return int(np.clip(np.ceil(np.log2(max(need, 1.0))), 1, 5))

    @staticmethod
    def _track(
        prev: np.ndarray, cur: np.ndarray, pts: np.ndarray, prior: np.ndarray | None, levels: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Forward-backward-consistent (p_prev, p_cur) pairs, each (M, 2) float64, working px.

        ``prior`` (the previous frame's homography) seeds both directions: drones pan smoothly,
        so LK only has to find the change. The backward pass is seeded by the prior too, never
        by the forward answer, so the round-trip check stays an independent test.
        """
        lk = {"winSize": (LK_WIN, LK_WIN), "maxLevel": levels, "criteria": LK_CRITERIA}
        if prior is None:
            nxt, st, _ = cv2.calcOpticalFlowPyrLK(prev, cur, pts, None, **lk)
            back, st_b, _ = cv2.calcOpticalFlowPyrLK(cur, prev, nxt, None, **lk)
        else:
            fwd0 = apply_homography_points(prior, pts.reshape(-1, 2)).astype(np.float32).reshape(-1, 1, 2)
            nxt, st, _ = cv2.calcOpticalFlowPyrLK(
                prev, cur, pts, fwd0, flags=cv2.OPTFLOW_USE_INITIAL_FLOW, **lk
            )
            bwd0 = apply_homography_points(np.linalg.inv(prior), nxt.reshape(-1, 2))
            bwd0 = bwd0.astype(np.float32).reshape(-1, 1, 2)
            back, st_b, _ = cv2.calcOpticalFlowPyrLK(
                cur, prev, nxt, bwd0, flags=cv2.OPTFLOW_USE_INITIAL_FLOW, **lk
            )
        fb = np.linalg.norm((back - pts).reshape(-1, 2), axis=1)
        h, w = cur.shape
        n = nxt.reshape(-1, 2)
        ok = (
            (st.reshape(-1) == 1)
            & (st_b.reshape(-1) == 1)
            & (fb < FB_MAX_PX)
            & (n[:, 0] >= 0)
            & (n[:, 1] >= 0)
            & (n[:, 0] <= w - 1)
            & (n[:, 1] <= h - 1)
        )
        return pts.reshape(-1, 2)[ok].astype(np.float64), n[ok].astype(np.float64)

    def _fit(
        self, p0: np.ndarray, p1: np.ndarray, sx: float, sy: float
    ) -> tuple[EgoMotion, np.ndarray | None]:
        n = len(p0)
        thr = float(self.cfg.ransac_reproj_px) * 0.5 * (sx + sy)
        if n >= max(4, self.cfg.min_inliers):
            h, mask = cv2.findHomography(p0, p1, cv2.RANSAC, thr, maxIters=2000, confidence=0.995)
            if h is not None and mask is not None:
                inl = mask.reshape(-1).astype(bool)
                h_full = rescale_homography(h, sx, sy)
                if int(inl.sum()) >= self.cfg.min_inliers and plausible_homography(h_full):
                    self._last_h = h / h[2, 2]
                    return self._result(h_full, p0, p1, inl, sx, sy, valid=True), inl
                log.debug("ego-motion: homography rejected (%d/%d inliers)", int(inl.sum()), n)
        if n >= 3:
            a, mask = cv2.estimateAffinePartial2D(p0, p1, method=cv2.RANSAC, ransacReprojThreshold=thr)
            if a is not None and mask is not None:
                inl = mask.reshape(-1).astype(bool)
                h_full = rescale_homography(np.vstack([a, [0.0, 0.0, 1.0]]), sx, sy)
                if int(inl.sum()) >= 3 and plausible_homography(h_full):
                    self._last_h = None  # a fallback is no prior for the next frame
                    log.debug(
                        "ego-motion: %d points, %d similarity inliers; similarity fallback", n, inl.sum()
                    )
                    return self._result(h_full, p0, p1, inl, sx, sy, valid=False), inl
        self._last_h = None
        log.debug("ego-motion: %d tracked background points; identity fallback", n)
        return EgoMotion(np.eye(3), 0.0, n, 0.0, False), None

    @staticmethod
    def _result(
        h_full: np.ndarray, p0: np.ndarray, p1: np.ndarray, inl: np.ndarray, sx: float, sy: float, valid: bool
    ) -> EgoMotion:
        scale = np.array([sx, sy])
        d = (p1[inl] - p0[inl]) / scale
        mag = float(np.median(np.linalg.norm(d, axis=1))) if len(d) else 0.0
        to_full = np.linalg.inv(scale_matrix(sx, sy))  # the resize map, undone
        pairs = np.hstack(
            [apply_homography_points(to_full, p0[inl]), apply_homography_points(to_full, p1[inl])]
        )
        return EgoMotion(h_full, float(inl.mean()), len(p0), mag, valid, pairs)
