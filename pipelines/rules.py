"""Speeding rules: zone and global limits, minimum duration, one violation per track and zone.

Pure helpers (:func:`point_in_zone`, :func:`zone_for_point`, :func:`limit_for_point`,
:func:`is_speeding`, :func:`crop_with_margin`) and :class:`ViolationDetector`, which follows each
track's speed over time and emits a :class:`~pipelines.types.Violation` when a speeding episode
that lasted at least ``min_duration_s`` ends.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np
import supervision as sv

from pipelines.config import RulesConfig, ZoneConfig
from pipelines.geometry import geolocate
from pipelines.types import PROPAGATED_KEY, Frame, SpeedEstimate, Telemetry, Violation

logger = logging.getLogger(__name__)

GLOBAL_ZONE = "global"
TRAIL_SAMPLES = 30  # recent ground positions kept per track (1 s at 30 fps)
TRAIL_VELOCITY_S = 0.5  # a track's ground velocity: least squares over its last half second
MIN_DIRECTION_SPEED_MPS = 1.0  # slower, a track has no direction of travel to match along


def trail_velocity(
    trail: Sequence[tuple[float, float, float]], span_s: float = TRAIL_VELOCITY_S
) -> np.ndarray | None:
    """(vx, vy) in m/s: least-squares slope of the (t, x, y) samples of the last ``span_s`` before the
    newest; None with fewer than 3 of them or under a tenth of a second."""
    a = np.asarray(trail, dtype=np.float64).reshape(-1, 3)
    a = a[a[:, 0] >= a[-1, 0] - span_s] if len(a) else a
    if len(a) < 3 or a[-1, 0] - a[0, 0] < 0.1:
        return None
    t = a[:, 0] - a[:, 0].mean()
    return (t @ (a[:, 1:] - a[:, 1:].mean(axis=0))) / float(t @ t)


def point_in_zone(
    polygon: Sequence[tuple[float, float]] | np.ndarray, xy: tuple[float, float] | np.ndarray
) -> bool:
    """True when ``xy`` (image pixels) lies inside or on the edge of ``polygon``."""
    contour = np.asarray(polygon, dtype=np.float32).reshape(-1, 1, 2)
    if len(contour) < 3:
        return False
    x, y = (float(v) for v in np.asarray(xy, dtype=np.float64).reshape(2))
    if not (math.isfinite(x) and math.isfinite(y)):
        return False
    return cv2.pointPolygonTest(contour, (x, y), False) >= 0


def zone_for_point(zones: Sequence[ZoneConfig], xy: tuple[float, float] | np.ndarray) -> ZoneConfig | None:
    """The first zone (config order = priority) containing ``xy``, or None."""
    for zone in zones:
        if point_in_zone(zone.polygon, xy):
            return zone
    return None


def limit_for_point(cfg: RulesConfig, xy: tuple[float, float] | np.ndarray) -> tuple[str, float] | None:
    """(zone name, limit km/h) at ``xy``: its zone's limit, else the global one, else None."""
    zone = zone_for_point(cfg.zones, xy)
    if zone is not None:
        return zone.name, zone.speed_limit_kmh
    if cfg.speed_limit_kmh is not None:
        return GLOBAL_ZONE, cfg.speed_limit_kmh
    return None


def is_speeding(
    speed_kmh: float,
    sigma_kmh: float,
    limit_kmh: float,
    tolerance_kmh: float = 0.0,
    use_lower_bound: bool = False,
) -> bool:
    """True when the speed (or speed - 1 sigma with ``use_lower_bound``) is above limit + tolerance.

    Unknown speeds (NaN) never count; an infinite sigma never counts with ``use_lower_bound``.
    """
    value = speed_kmh - sigma_kmh if use_lower_bound else speed_kmh
    if not math.isfinite(value):
        return False
    return value > limit_kmh + tolerance_kmh


def vehicle_position(
    tel: Telemetry | None, ground_xy_m: tuple[float, float] | None
) -> tuple[float | None, float | None]:
    """The vehicle's latitude/longitude: the drone's GPS moved by the vehicle's ground offset along
    the camera heading. (None, None) unless GPS, gimbal yaw and the ground offset are all known:
    the drone's own position is not the vehicle's (the offset reaches hundreds of metres obliquely)."""
    if (
        tel is None
        or ground_xy_m is None
        or tel.latitude is None
        or tel.longitude is None
        or tel.gimbal_yaw_deg is None
    ):
        return None, None
    return geolocate(tel.latitude, tel.longitude, tel.gimbal_yaw_deg, ground_xy_m)


def crop_with_margin(
    image: np.ndarray, xyxy: Sequence[float] | np.ndarray, margin_px: int
) -> np.ndarray | None:
    """Copy of ``image`` around the box grown by ``margin_px`` (clipped); None when empty."""
    h, w = image.shape[:2]
    x0, y0, x1, y1 = (float(v) for v in np.asarray(xyxy, dtype=np.float64).reshape(4))
    if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
        return None
    xa = int(np.clip(math.floor(x0) - margin_px, 0, w))
    ya = int(np.clip(math.floor(y0) - margin_px, 0, h))
    xb = int(np.clip(math.ceil(x1) + margin_px, 0, w))
    yb = int(np.clip(math.ceil(y1) + margin_px, 0, h))
    if xb <= xa or yb <= ya:
        return None
    return image[ya:yb, xa:xb].copy()


def bottom_centre(xyxy: np.ndarray) -> np.ndarray:
    """(N, 2) bottom-centre points of (N, 4) boxes (the ground contact of a vehicle)."""
    b = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    return np.column_stack([(b[:, 0] + b[:, 2]) / 2.0, b[:, 3]])


@dataclass(slots=True, eq=False)
class _Episode:
    """One continuous stretch of a track above the limit of one zone."""

    track_id: int
    zone: str
    limit_kmh: float
    start_frame: int
    start_t: float
    end_frame: int
    end_t: float
    times: list[float] = field(default_factory=list)
    speeds: list[float] = field(default_factory=list)
    peak_kmh: float = -math.inf
    peak_sigma: float = 0.0
    peak_bbox: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    peak_ground: tuple[float, float] | None = None
    peak_snapshot: np.ndarray | None = None
    class_name: str = "vehicle"
    latitude: float | None = None
    longitude: float | None = None

    @property
    def duration_s(self) -> float:
        return self.end_t - self.start_t

    def mean_kmh(self) -> float:
        """Time-weighted (trapezoidal) mean speed; the plain mean when the episode has no duration."""
        t = np.asarray(self.times)
        v = np.asarray(self.speeds)
        span = float(t[-1] - t[0]) if len(t) else 0.0
        if span <= 0:
            return float(v.mean())
        return float(np.sum((v[1:] + v[:-1]) * np.diff(t)) / (2.0 * span))


class ViolationDetector:
    """Turns per-frame speeds into speeding violations.

    For each tracked vehicle with a speed estimate, the limit is that of the zone containing the
    box's bottom centre (first zone in config order), else the global limit (None: only zones
    count). A track above its limit (see :func:`is_speeding`) opens an episode; the episode goes on
    while further estimates stay above the limit of the same zone, and ends when the vehicle is seen
    below the limit, enters another zone, or has had no estimate above the limit for more than
    ``lost_after_s`` (not seen, or seen without a speed). An episode that lasted at least
    ``min_duration_s`` (between its first and last above-limit timestamps) becomes a Violation when
    it ends or at :meth:`finish`. Only the first violation per (track, zone) is emitted, and none
    for a track that is another one's vehicle (:meth:`_same_vehicle`: the track broke in two).
    """

    def __init__(self, cfg: RulesConfig, *, lost_after_s: float = 1.0) -> None:
        self.cfg = cfg
        self.lost_after_s = float(lost_after_s)
        self._open: dict[int, _Episode] = {}
        self._emitted: set[tuple[int, str]] = set()
        self._trails: dict[int, deque[tuple[float, float, float]]] = {}  # tid -> (t, x, y) on the ground
        self._same: dict[int, int] = {}  # track -> the track whose vehicle it is
        self.n_emitted = 0

    def reset(self) -> None:
        self._open.clear()
        self._emitted.clear()
        self._trails.clear()
        self._same.clear()

    @property
    def open_track_ids(self) -> list[int]:
        return sorted(self._open)

    def _close(self, ep: _Episode) -> Violation | None:
        self._open.pop(ep.track_id, None)
        key = (ep.track_id, ep.zone)
        if ep.duration_s < self.cfg.min_duration_s - 1e-9:
            logger.debug(
                "track %d above %s km/h for %.2f s only; no violation",
                ep.track_id,
                ep.limit_kmh,
                ep.duration_s,
            )
            return None
        if key in self._emitted:
            logger.debug("track %d already has a violation in zone %s", ep.track_id, ep.zone)
            return None
        self._emitted.add(key)
        self.n_emitted += 1
        v = Violation(
            track_id=ep.track_id,
            zone=ep.zone,
            speed_limit_kmh=ep.limit_kmh,
            peak_speed_kmh=ep.peak_kmh,
            mean_speed_kmh=ep.mean_kmh(),
            sigma_kmh=ep.peak_sigma,
            start_frame=ep.start_frame,
            end_frame=ep.end_frame,
            start_time_s=ep.start_t,
            end_time_s=ep.end_t,
            class_name=ep.class_name,
            bbox_xyxy=ep.peak_bbox,
            ground_xy_m=ep.peak_ground,
            latitude=ep.latitude,
            longitude=ep.longitude,
            snapshot=ep.peak_snapshot,
        )
        logger.info(
            "violation: track %d (%s) %.1f km/h peak in %s (limit %.0f) for %.2f s",
            v.track_id,
            v.class_name,
            v.peak_speed_kmh,
            v.zone,
            v.speed_limit_kmh,
            v.duration_s,
        )
        return v

    def update(
        self,
        frame: Frame,
        detections: sv.Detections,
        speeds: dict[int, SpeedEstimate],
        ground_xy: np.ndarray | None = None,
    ) -> list[Violation]:
        """Feed one frame; return the violations that ended during it."""
        now = frame.timestamp_s
        closed: list[Violation | None] = []
        extended: set[int] = set()
        n = len(detections)
        ids = detections.tracker_id
        if n and ids is not None:
            points = bottom_centre(detections.xyxy)
            propagated = detections.data.get(PROPAGATED_KEY) if detections.data else None
            gxy = None if ground_xy is None else np.asarray(ground_xy, dtype=np.float64).reshape(-1, 2)
            here = {int(t) for t in ids}
            self._remember(now, ids, speeds, gxy)
            for i in range(n):
                tid = int(ids[i])
                est = speeds.get(tid)
                if est is None or (self.cfg.require_trusted and not est.trusted):
                    continue  # unknown or untrusted speed: neither extends nor breaks an episode
                zl = limit_for_point(self.cfg, points[i])
                ep = self._open.get(tid)
                above = zl is not None and is_speeding(
                    est.speed_kmh, est.sigma_kmh, zl[1], self.cfg.tolerance_kmh, self.cfg.use_lower_bound
                )
                if ep is not None and (not above or zl is None or zl[0] != ep.zone):
                    closed.append(self._close(ep))
                    ep = None
                if not above:
                    continue
                assert zl is not None
                if ep is None:
                    if (tid, zl[0]) in self._emitted:
                        continue  # one violation per track and zone
                    if propagated is not None and propagated[i]:
                        continue  # a box carried by optical flow extends an episode, never opens one
                    same = self._same_vehicle(
                        tid, zl[0], now, gxy[i] if gxy is not None and i < len(gxy) else None
                    )
                    if same is not None:  # another track of this vehicle already speeds here
                        other = self._open.get(same)
                        if other is not None and other.zone == zl[0] and same not in here:
                            self._extend(other, frame, detections, i, est, gxy)  # it carries on
                            extended.add(same)
                        continue
                    ep = _Episode(tid, zl[0], zl[1], frame.number, now, frame.number, now)
                    self._open[tid] = ep
                extended.add(tid)
                self._extend(ep, frame, detections, i, est, gxy)
        elif n and ids is None:
            logger.debug("frame %d: detections without tracker ids; rules skipped", frame.index)
        for tid, ep in list(self._open.items()):
            if tid not in extended and now - ep.end_t > self.lost_after_s + 1e-9:
                closed.append(self._close(ep))
        return sorted((v for v in closed if v is not None), key=lambda v: (v.track_id, v.start_time_s))

    def _extend(
        self,
        ep: _Episode,
        frame: Frame,
        detections: sv.Detections,
        i: int,
        est: SpeedEstimate,
        gxy: np.ndarray | None,
    ) -> None:
        """Add detection ``i``'s above-limit estimate to ``ep`` (its peak: box, snapshot, position)."""
        now = frame.timestamp_s
        ep.end_frame, ep.end_t = frame.number, now
        ep.times.append(now)
        ep.speeds.append(est.speed_kmh)
        if est.speed_kmh <= ep.peak_kmh:
            return
        box = detections.xyxy[i]
        names = detections.data.get("class_name") if detections.data else None
        ep.peak_kmh = est.speed_kmh
        ep.peak_sigma = est.sigma_kmh
        ep.peak_bbox = (float(box[0]), float(box[1]), float(box[2]), float(box[3]))
        ep.peak_snapshot = crop_with_margin(frame.image, box, self.cfg.snapshot_margin_px)
        if names is not None:
            ep.class_name = str(names[i])
        ep.peak_ground = None
        if gxy is not None and i < len(gxy) and np.all(np.isfinite(gxy[i])):
            ep.peak_ground = (float(gxy[i, 0]), float(gxy[i, 1]))
        ep.latitude, ep.longitude = vehicle_position(frame.telemetry, ep.peak_ground)

    def _remember(
        self, now: float, ids: np.ndarray, speeds: dict[int, SpeedEstimate], gxy: np.ndarray | None
    ) -> None:
        """Keep the recent ground positions of tracks with a speed (for :meth:`_same_vehicle`)."""
        if gxy is not None:
            for i, t in enumerate(ids[: len(gxy)]):
                tid = int(t)
                if tid in speeds and np.all(np.isfinite(gxy[i])):
                    trail = self._trails.setdefault(tid, deque(maxlen=TRAIL_SAMPLES))
                    trail.append((now, float(gxy[i, 0]), float(gxy[i, 1])))
        keep_s = max(self.lost_after_s, self.cfg.same_vehicle_gap_s)
        for tid, trail in list(self._trails.items()):
            if now - trail[-1][0] > keep_s + 1e-9:
                del self._trails[tid]
                self._same.pop(tid, None)

    def _same_vehicle(self, tid: int, zone: str, now: float, xy: np.ndarray | None) -> int | None:
        """The track whose violation (open or emitted, in ``zone``) is this track's vehicle, if any.

        A vehicle's track can break in two: its box splits (the front of a bus), a second box lands
        on it, or the tracker loses it and starts a new track. The new track would report the same
        vehicle again. It is the same vehicle when its ground position lies where the other track,
        seen within ``same_vehicle_gap_s``, is now by its recent ground velocity: within
        ``same_vehicle_along_m`` along its direction of travel and ``same_vehicle_across_m`` across
        it (lanes are ~3.5 m apart, so a vehicle in the next lane never matches). Ground positions
        are the camera's (relative to the drone), and so are the velocities: a drone flying
        steadily cancels out over such short gaps (a turning one less so). None without ground
        positions (they come with the altitude the speeds need).
        """
        if tid in self._same:  # known: that vehicle, in a zone where it already speeds (else a new zone)
            root = self._same[tid]
            return root if self._speeds_in(root, zone) else None
        along_max, across_max = self.cfg.same_vehicle_along_m, self.cfg.same_vehicle_across_m
        if xy is None or not np.all(np.isfinite(xy)) or along_max <= 0:
            return None
        best, best_d = None, math.inf
        for other, trail in self._trails.items():
            root = self._same.get(other, other)  # a track already known as another's vehicle stands for it
            if root == tid or now - trail[-1][0] > self.cfg.same_vehicle_gap_s + 1e-9:
                continue
            if not self._speeds_in(root, zone):
                continue
            v = trail_velocity(trail)
            if v is None:
                continue
            speed = float(np.hypot(*v))
            if speed < MIN_DIRECTION_SPEED_MPS:
                continue
            u = v / speed
            d = np.asarray(xy, dtype=np.float64) - (np.asarray(trail[-1][1:]) + v * (now - trail[-1][0]))
            along, across = abs(float(d @ u)), abs(float(d[0] * u[1] - d[1] * u[0]))
            if along <= along_max and across <= across_max and along + across < best_d:
                best, best_d = root, along + across
        if best is not None:
            self._same[tid] = best
            logger.info(
                "track %d is track %d's vehicle (%.1f m away): no second violation", tid, best, best_d
            )
        return best

    def _speeds_in(self, tid: int, zone: str) -> bool:
        """Whether track ``tid`` has a violation in ``zone``, emitted or under way."""
        ep = self._open.get(tid)
        return (tid, zone) in self._emitted or (ep is not None and ep.zone == zone)

    def finish(self) -> list[Violation]:
        """Close every open episode (end of stream); return the resulting violations."""
        out = [self._close(ep) for ep in list(self._open.values())]
        return sorted((v for v in out if v is not None), key=lambda v: (v.track_id, v.start_time_s))

    def set_rules(self, cfg: RulesConfig) -> list[Violation]:
        """New limits and zones from the next frame on (an operator's change during a stream).

        Open episodes were measured against the old limits: they end here, under the old rules
        (a violation when they lasted long enough), and are returned like :meth:`finish`'s. A track
        still above a limit opens a new episode under the new rules at its next estimate; one that
        already has a violation in a zone gets no second one there.
        """
        closed = self.finish()
        self.cfg = cfg
        return closed


__all__ = [
    "GLOBAL_ZONE",
    "ViolationDetector",
    "bottom_centre",
    "crop_with_margin",
    "vehicle_position",
    "is_speeding",
    "limit_for_point",
    "point_in_zone",
    "zone_for_point",
]
