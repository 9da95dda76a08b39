"""Camera ego-motion between consecutive frames from background corners.

Sparse pyramidal Lucas-Kanade on corners of the (static) background, on a downscaled grey frame:

1. corners (``goodFeaturesToTrack``) are detected with a mask that leaves out vehicle boxes and a
   thin image border; they are re-detected every ``refresh_every`` frames or when too few survive,
   otherwise the surviving inliers are tracked on (cheap, and long-lived points are the stable ones);
2. each corner is tracked previous -> current and back; points whose round trip misses by more than
   ``FB_MAX_PX`` or that land inside a current vehicle box are dropped. The previous frame's
   homography seeds both passes (drones pan smoothly), and the pyramid depth follows the working
   scale so that a further ``MAX_MOTION_PX`` per frame is still caught;
3. a RANSAC homography (``cv2.findHomography``) is fitted; with too few inliers the estimator falls
   back to a RANSAC similarity (``cv2.estimateAffinePartial2D``) and then to identity, both marked
   ``valid=False``.

The homography maps previous-frame pixels onto current-frame pixels of the full-resolution image:
``H_full = S^-1 H_small S`` where ``S`` is the exact pixel-centre-aligned resize map.

Design after norfair's ``MotionEstimator`` (corner tracking + homography getter), re-written for a
single-step prev->current model with vehicle masking, forward-backward checking and explicit
fallbacks.
"""

from __future__ import annotations

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
# A homography is accepted only if it stays close to a plausible frame-to-frame camera motion.
MAX_SCALE_CHANGE = 1.5
MAX_PERSPECTIVE = 2e-3  # |h31|, |h32| in full-res px^-1 after normalising h33 = 1


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
        self.reset()

    def reset(self) -> None:
        """Forget the previous frame (next :meth:`update` returns identity)."""
        self._prev: np.ndarray | None = None
        self._prev_pts: np.ndarray | None = None  # (N, 1, 2) float32, working coordinates
        self._full_shape: tuple[int, int] | None = None
        self._since_refresh = 0
        self._last_h: np.ndarray | None = None  # last valid estimate, working coords: motion prior

    # --------------------------------------------------------------------------------------
    def _to_working(self, gray: np.ndarray) -> tuple[np.ndarray, float, float]:
        if gray.ndim == 3:
            gray = cv2.cvtColor(gray, cv2.COLOR_BGR2GRAY)
        if gray.dtype != np.uint8:
            gray = cv2.normalize(gray, None, 0, 255, cv2.NORM_MINMAX).astype(np.uint8)
        h, w = gray.shape
        s = float(self.cfg.scale)
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
        min_dist = max(4.0, min(h, w) / 45.0)
        pts = cv2.goodFeaturesToTrack(
            small,
            maxCorners=self.cfg.max_features,
            qualityLevel=0.01,
            minDistance=min_dist,
            mask=mask,
            blockSize=5,
        )
        return None if pts is None else pts.astype(np.float32)

    # --------------------------------------------------------------------------------------
    def update(self, gray: np.ndarray, exclude_xyxy: np.ndarray | None = None) -> EgoMotion:
        """Camera motion from the previous frame to ``gray`` (H x W uint8; BGR is converted).

        ``exclude_xyxy``: (N, 4) boxes of moving things (vehicles) in this frame, in full-resolution
        pixels; no background corners are taken from them.
        """
        small, sx, sy = self._to_working(gray)
        full_shape = gray.shape[:2]
        if self._prev is None or self._prev.shape != small.shape or self._full_shape != full_shape:
            self._last_h = None
            self._store(small, self._detect(small, exclude_xyxy, sx, sy), full_shape)
            return EgoMotion.identity()

        prev_pts = self._prev_pts
        if prev_pts is None or len(prev_pts) < self._min_points():
            prev_pts = self._detect(self._prev, None, sx, sy)  # prev boxes unknown here: rely on RANSAC
        if prev_pts is None or len(prev_pts) < 4:
            log.debug("ego-motion: no trackable corners in the previous frame; identity")
            self._last_h = None
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
        return ego

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
        d = (p1[inl] - p0[inl]) / np.array([sx, sy])
        mag = float(np.median(np.linalg.norm(d, axis=1))) if len(d) else 0.0
        return EgoMotion(h_full, float(inl.mean()), len(p0), mag, valid)
