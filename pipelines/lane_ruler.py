"""The lanes as a ruler: the distance between a road's painted lane lines, measured on the ground
through the frame's telemetry, against the lane width the site's roads are built to.

Lane lines are thin, bright and straight: a white top-hat of the grey image inside the road mask
(vehicles' boxes left out) finds their pixels, a probabilistic Hough transform their segments, and
the telemetry's projection puts every segment on the ground. Two segments that run parallel there
(within ``MAX_ANGLE_DEG``) and side by side along the road (their extents overlap or nearly) give a
perpendicular distance. The frame's lane width is the densest distance between ``lo`` and ``hi``
metres (a kernel density mode refined by the weighted median near it): a road's lines repeat at one
lane width, and the other distances (a double centre line, two lanes, a kerb) fall elsewhere.

The distance is between the lines' centres, so the line's blur and the detector's box margin, which
decide the cars' sizes, do not enter it: a pixel added to both sides of a line moves neither centre.

Pure functions over arrays; :class:`pipelines.scale_session.ScaleCheck` keeps the session's frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from pipelines.config import ScaleCheckConfig
from pipelines.geometry import GroundProjector
from pipelines.scale_check import weighted_median

MAX_ANGLE_DEG = 3.0  # two segments this close in direction on the ground are one road's lines
MAX_ALONG_GAP_M = 1.0  # and side by side: overlapping along it, or nearly
CROWD_M = (0.45, 1.5)  # a neighbour this far beside a mark makes it part of a pattern (pair_distances)
LINE_WIDTH_M = 0.15  # a lane line's painted width (0.10-0.20 m in most countries)
BANDWIDTH_M = 0.10  # the density's kernel
WINDOW_M = 0.35  # the pairs either side of its mode that the width is the median of
HALF_SHARE = 0.3  # lines at half the densest distance with this share of its pairs' weight: two lanes
MIN_SEGMENT_PX = 12  # Hough segments shorter than this are noise
MAX_SEGMENTS = 800  # segments a frame keeps
FINE_PX = 2.5  # lines wider than this (px) mid-frame are searched for on a frame shrunk to this width


@dataclass(frozen=True, slots=True)
class LaneMeasure:
    """One frame's lane width through the telemetry (m; NaN: none found), the ground length of line
    pairs behind it (m) and how many pairs."""

    width_m: float
    support_m: float = 0.0
    pairs: int = 0

    @property
    def found(self) -> bool:
        return math.isfinite(self.width_m)


NONE = LaneMeasure(math.nan)


def marking_mask(
    gray: np.ndarray, road_mask: np.ndarray, boxes_xyxy: np.ndarray, line_px: float
) -> tuple[np.ndarray, np.ndarray]:
    """Pixels of painted lines (H, W bool): brighter than the asphalt around them by far more than
    its texture, narrower than ``3 x line_px`` (a white top-hat), inside the road mask (eroded by a
    line's width: the kerb's edge is not a line) and outside the vehicles' boxes (grown by 15 %);
    and the top-hat itself (H, W uint8: how much brighter than the asphalt around)."""
    k = int(np.clip(round(3 * line_px + 3), 5, 41)) | 1
    hat = cv2.morphologyEx(gray, cv2.MORPH_TOPHAT, cv2.getStructuringElement(cv2.MORPH_RECT, (k, k)))
    road = road_mask.astype(np.uint8)
    e = max(1, round(line_px))
    road = cv2.erode(road, cv2.getStructuringElement(cv2.MORPH_RECT, (2 * e + 1, 2 * e + 1)))
    h, w = road.shape
    for x1, y1, x2, y2 in np.asarray(boxes_xyxy, dtype=float).reshape(-1, 4):
        gx, gy = 0.15 * (x2 - x1), 0.15 * (y2 - y1)
        road[
            max(0, int(y1 - gy)) : min(h, int(y2 + gy) + 1), max(0, int(x1 - gx)) : min(w, int(x2 + gx) + 1)
        ] = 0
    inside = hat[road > 0]
    if inside.size < 100:
        return np.zeros_like(road, dtype=bool), hat
    med = float(np.median(inside))
    mad = float(np.median(np.abs(inside - med))) * 1.4826
    thr = max(med + 6.0 * mad, 12.0)
    return (hat > thr) & (road > 0), hat


def centre_segments(hat: np.ndarray, segs: np.ndarray, radius: float) -> np.ndarray:
    """Each segment (N, 4) moved across itself onto its line's centre: the top-hat's centroid
    across the segment within ``radius`` px, at five points along it (the Hough transform puts a
    segment anywhere within a line a few pixels wide; a pixel is 2-3 % of a lane)."""
    if not len(segs):
        return segs
    p0, p1 = segs[:, :2], segs[:, 2:]
    d = p1 - p0
    d /= np.maximum(np.hypot(d[:, 0], d[:, 1]), 1e-9)[:, None]
    n = np.column_stack([-d[:, 1], d[:, 0]])
    along = np.linspace(0.1, 0.9, 5)
    r = max(2, int(math.ceil(radius)))
    across = np.arange(-r, r + 1, dtype=float)
    pts = p0[:, None, None, :] + along[None, :, None, None] * (p1 - p0)[:, None, None, :]
    pts = pts + across[None, None, :, None] * n[:, None, None, :]  # (N, 5, 2r+1, 2)
    v = cv2.remap(
        hat.astype(np.float32),
        pts[..., 0].reshape(-1, len(across)).astype(np.float32),  # rows: remap's maps stay under 32767
        pts[..., 1].reshape(-1, len(across)).astype(np.float32),
        cv2.INTER_LINEAR,
        borderValue=0.0,
    ).reshape(pts.shape[:3])
    v = np.clip(v - v.min(axis=2, keepdims=True), 0.0, None)  # the asphalt's level across it
    total = v.sum(axis=(1, 2))
    shift = np.where(total > 0, (v * across).sum(axis=(1, 2)) / np.maximum(total, 1e-9), 0.0)
    shift = np.clip(shift, -r, r)[:, None]
    return np.column_stack([p0 + shift * n, p1 + shift * n])


def segments(mask: np.ndarray, min_px: int = MIN_SEGMENT_PX) -> np.ndarray:
    """The mask's straight segments (N, 4: x1, y1, x2, y2 pixels), probabilistic Hough: at most
    ``MAX_SEGMENTS`` (the pairs' cost grows with their square)."""
    found = cv2.HoughLinesP(
        mask.astype(np.uint8) * 255,
        1,
        np.pi / 360,
        threshold=max(8, min_px),
        minLineLength=min_px,
        maxLineGap=3,
    )
    if found is None:
        return np.zeros((0, 4))
    segs = found.reshape(-1, 4).astype(float)
    if len(segs) > MAX_SEGMENTS:  # an even share of them (the longest would be the solid lines')
        segs = segs[np.linspace(0, len(segs) - 1, MAX_SEGMENTS).round().astype(int)]
    return segs


def parallel_pairs(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (i, j) of unit directions (N, 2) within ``MAX_ANGLE_DEG`` of each other (lines,
    so 179 deg is 1 deg off), each once: sorted by angle, each direction paired with those just
    after it (the cost is the pairs', not the N squared of all of them)."""
    n = len(u)
    theta = np.mod(np.arctan2(u[:, 1], u[:, 0]), np.pi)
    order = np.argsort(theta, kind="stable")
    th = theta[order]
    ends = np.searchsorted(np.concatenate([th, th + np.pi]), th + math.radians(MAX_ANGLE_DEG), side="right")
    starts = np.arange(1, n + 1)
    counts = np.clip(ends - starts, 0, n - 1)
    first = np.repeat(np.arange(n), counts)
    step = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    second = (np.repeat(starts, counts) + step) % n
    return order[first], order[second]


def pair_distances(ground: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Perpendicular distances (m) between ground segments (N, 2, 2) that run parallel within
    ``MAX_ANGLE_DEG`` and side by side along the road, and each pair's weight (the shorter one's
    length, m); segments with a parallel neighbour ``CROWD_M`` beside them (zebra stripes, gratings,
    rails) are left out."""
    p0, p1 = ground[:, 0], ground[:, 1]
    vec = p1 - p0
    length = np.hypot(vec[:, 0], vec[:, 1])
    ok = np.isfinite(length) & (length > 0)
    p0, p1, vec, length = p0[ok], p1[ok], vec[ok], length[ok]
    if len(length) < 2:
        return np.zeros(0), np.zeros(0)
    u = vec / length[:, None]
    u[u[:, 0] < 0] *= -1  # undirected: one half-plane
    i, j = parallel_pairs(u)
    d = u[i] + np.sign(np.sum(u[i] * u[j], axis=1))[:, None] * u[j]
    d /= np.hypot(d[:, 0], d[:, 1])[:, None]  # the pair's mean direction
    n = np.column_stack([-d[:, 1], d[:, 0]])
    a = np.sort(np.column_stack([np.sum(d * p0[i], 1), np.sum(d * p1[i], 1)]), axis=1)
    b = np.sort(np.column_stack([np.sum(d * p0[j], 1), np.sum(d * p1[j], 1)]), axis=1)
    lo, hi = np.maximum(a[:, 0], b[:, 0]), np.minimum(a[:, 1], b[:, 1])
    gap = lo - hi  # < 0: they overlap
    # each line's point at the middle of the overlap (or of the gap): a segment's direction error
    # then moves the distance by its slope times at most half the overlap, not by the pair's offset
    c = (lo + hi) / 2

    def at(k: np.ndarray) -> np.ndarray:
        return p0[k] + u[k] * ((c - np.sum(d * p0[k], 1)) / np.sum(d * u[k], 1))[:, None]

    dist = np.abs(np.sum(n * (at(j) - at(i)), axis=1))
    near = gap < MAX_ALONG_GAP_M
    i, j, dist = i[near], j[near], dist[near]
    # a mark with a parallel neighbour 0.45-1.5 m beside it is one of a pattern, not a lane line:
    # zebra stripes (1.0-1.2 m apart), gratings, steps, tram rails (1.435 m); a double line is closer
    patterned = (dist > CROWD_M[0]) & (dist < CROWD_M[1])
    crowded = np.bincount(np.concatenate([i[patterned], j[patterned]]), minlength=len(u)) > 0
    keep = ~(crowded[i] | crowded[j])
    return dist[keep], np.minimum(length[i], length[j])[keep]


def lane_width(dist: np.ndarray, weight: np.ndarray, lo: float, hi: float) -> LaneMeasure:
    """The densest distance in [lo, hi] (m): the mode of a kernel density over the pairs' distances
    (``BANDWIDTH_M``), refined by the weighted median of those within ``WINDOW_M`` of it. A double
    centre line puts its pairs a line spacing either side of the lane width (0.3 m apart it reads
    w - 0.3 on one side and w + 0.3 on the other; blurred into one line, w -+ 0.15): the window holds
    both sides, and their median is the width. Two lanes' width in the range (a scale too small by
    more than the range allows) is found out by the lines at half of it (at least ``HALF_SHARE`` of
    its pairs): the width is that half, outside the range or not."""
    sel = (dist >= lo - WINDOW_M) & (dist <= hi + WINDOW_M)
    if sel.sum() < 2:
        return NONE
    grid = np.arange(lo, hi + 1e-9, BANDWIDTH_M / 4)
    dens = np.exp(-0.5 * ((grid[:, None] - dist[sel][None, :]) / BANDWIDTH_M) ** 2) @ weight[sel]
    mode = float(grid[int(np.argmax(dens))])
    near = np.abs(dist - mode) <= WINDOW_M
    if near.sum() < 2:
        return NONE
    half = np.abs(dist - mode / 2) <= WINDOW_M / 2
    if half.sum() >= 2 and weight[half].sum() >= HALF_SHARE * weight[near].sum():
        near = half
    d, w = dist[near], weight[near]
    return LaneMeasure(weighted_median(d, w), float(w.sum()), int(near.sum()))


def lane_search(cfg: ScaleCheckConfig) -> tuple[float, float]:
    """The distances (m) searched for the lane width: the site's width x 0.7 to x 1.4 (a scale
    that far off is the cars' to find; a double line's 0.3 m and two lanes' width fall outside)."""
    return 0.7 * cfg.lane_width_m, 1.4 * cfg.lane_width_m


def measure_frame(
    gray: np.ndarray,
    road_mask: np.ndarray,
    boxes_xyxy: np.ndarray,
    proj: GroundProjector,
    lo: float,
    hi: float,
) -> LaneMeasure:
    """One frame's lane width on the ground through ``proj`` (the telemetry's projection), lines
    searched inside ``road_mask`` outside ``boxes_xyxy``. Where lines are wider than ``FINE_PX``
    (low flights) the search runs on the frame shrunk to that width: the Hough transform's cost grows
    with a line's pixels, and its centre is found to a fraction of the shrunk pixel all the same."""
    h, w = gray.shape[:2]
    near_gsd, centre_gsd = (float(g) for g in proj.gsd_at(np.array([[w / 2, h - 1], [w / 2, h / 2]])))
    if not (math.isfinite(near_gsd) and near_gsd > 0):
        return NONE
    line_px = LINE_WIDTH_M / near_gsd
    f = max(1, int(LINE_WIDTH_M / centre_gsd // FINE_PX)) if math.isfinite(centre_gsd) else 1
    boxes = np.asarray(boxes_xyxy, dtype=float).reshape(-1, 4) / f
    if f > 1:
        size = (w // f, h // f)
        gray = cv2.resize(gray, size, interpolation=cv2.INTER_AREA)
        road_mask = cv2.resize(road_mask.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST)
        line_px /= f
    x, y, cw, ch = cv2.boundingRect(road_mask.astype(np.uint8))  # the road's part of the frame only
    if cw * ch == 0:
        return NONE
    crop = (slice(y, y + ch), slice(x, x + cw))
    boxes -= [x, y, x, y]
    mask, hat = marking_mask(gray[crop], road_mask[crop], boxes, line_px)
    segs = segments(mask)
    if len(segs) < 2:
        return NONE
    segs = centre_segments(hat, segs, line_px + 1.5) + [x, y, x, y]
    if f > 1:  # a shrunk pixel i covers the frame's f i .. f i + f - 1
        segs = segs * f + (f - 1) / 2
    ground = proj.to_ground(segs.reshape(-1, 2)).reshape(-1, 2, 2)
    dist, weight = pair_distances(ground)
    return lane_width(dist, weight, lo, hi)


__all__ = [
    "NONE",
    "LaneMeasure",
    "centre_segments",
    "lane_search",
    "lane_width",
    "marking_mask",
    "measure_frame",
    "pair_distances",
    "parallel_pairs",
    "segments",
]
