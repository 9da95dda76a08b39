"""Speeding rules: zone and global limits, minimum duration, one violation per track and zone.

:class:`ViolationDetector`, which follows each
track's speed over time: a track above its limit for ``min_duration_s`` is a candidate, and when it
leaves the zone its speed is measured over a base of its ground positions (:mod:`pipelines.ticket`)
and a :class:`~pipelines.types.Violation` emitted with its ticket speed and status. The pure
helpers (:func:`point_in_zone`, :func:`zone_for_point`, :func:`limit_for_point`, :func:`is_speeding`,
:func:`crop_with_margin`, ...) live in :mod:`pipelines.zones` and are re-exported here.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import supervision as sv

from pipelines import ticket
from pipelines.config import RulesConfig, ZoneConfig
from pipelines.height import reference_key, run_scale, scale_status
from pipelines.track_log import (
    SeenBox,
    TrackLog,
    TrackSample,
    base_sample,
    earlier_samples,
    longest_run,
    shown_sample,
    trace_of,
)
from pipelines.types import (
    PROPAGATED_KEY,
    Frame,
    ScaleInfo,
    SpeedEstimate,
    Violation,
)
from pipelines.zones import (
    GLOBAL_ZONE,
    bottom_centre,
    crop_with_margin,
    is_speeding,
    limit_for_point,
    point_in_zone,
    vehicle_position,
    zone_for_point,
    zone_of_box,
)

logger = logging.getLogger(__name__)

TRAIL_SAMPLES = 30  # recent ground positions kept per track (1 s at 30 fps)
TRAIL_VELOCITY_S = 0.5  # a track's ground velocity: least squares over its last half second
MIN_DIRECTION_SPEED_MPS = 1.0  # slower, a track has no direction of travel to match along
TICKET_HISTORY_S = 20.0  # a track's measured positions kept for its measuring base (the last ones)
SNAPSHOT_EVERY_S = 0.2  # a possible violation's snapshots along its track: one this often
SNAPSHOT_SHARE = 0.8  # ... taken while its per-frame speed is above this share of the limit


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


@dataclass(slots=True, eq=False)
class _Episode:
    """One continuous stretch of a track above the limit of one zone (per-frame speeds: it makes the
    track a candidate; the ticket speed is measured over a base, :mod:`pipelines.ticket`)."""

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
    """Turns a track's speed into speeding violations with a ticket speed.

    For each tracked vehicle with a speed estimate, the limit is that of the zone containing the
    box's bottom centre (first zone in config order), else the global limit (None: only zones
    count). A track whose per-frame speed is above its limit opens an episode; the episode goes on
    while further estimates stay above the limit of the same zone, and ends when the vehicle is seen
    below the limit, enters another zone, or has had no estimate above the limit for more than
    ``lost_after_s`` (not seen, or seen without a speed). An episode that lasted at least
    ``min_duration_s`` makes the track a candidate in that zone.

    A candidate is measured when it leaves the zone, is lost for ``lost_after_s``, has been one for
    ``TICKET_HISTORY_S``, or at :meth:`finish`: its speed over a measuring base of its trusted
    ground positions in the zone (:mod:`pipelines.ticket`). Measured at or below the limit, it is
    no violation (the per-frame speeds were noise: counted in ``n_cleared``); above, it is one,
    enforceable or not by the ticket rule (its ``status`` and ``status_reason``); without a base of
    the minimum length, a violation that is not enforceable, with its per-frame peak only.

    Only the first violation per (track, zone) is emitted, and none for a track that is another
    one's vehicle (:meth:`_same_vehicle`: the track broke in two).
    """

    def __init__(
        self,
        cfg: RulesConfig,
        *,
        lost_after_s: float = 1.0,
        scale_sigma_frac: float = 0.02,
    ) -> None:
        self.cfg = cfg
        self.lost_after_s = float(lost_after_s)
        self.scale_sigma_frac = float(scale_sigma_frac)  # the scale's relative sigma (SpeedConfig)
        self._open: dict[int, _Episode] = {}
        self._pending: dict[tuple[int, str], _Episode] = {}  # (track, zone) -> candidate to measure
        self._emitted: set[tuple[int, str]] = set()  # (track, zone) with a candidate or violation
        self._trails: dict[int, deque[tuple[float, float, float]]] = {}  # tid -> (t, x, y) on the ground
        self._logs: dict[int, TrackLog] = {}
        self._same: dict[int, int] = {}  # track -> the track whose vehicle it is
        # a violation's track -> the other tracks found to be its vehicle (kept while it is measured)
        self._parts: dict[int, set[int]] = {}
        self.n_emitted = 0
        self.n_cleared = 0  # candidates measured at or below the limit over their base

    def reset(self) -> None:
        self._open.clear()
        self._pending.clear()
        self._emitted.clear()
        self._trails.clear()
        self._logs.clear()
        self._same.clear()
        self._parts.clear()

    @property
    def open_track_ids(self) -> list[int]:
        return sorted(set(self._open) | {tid for tid, _ in self._pending})

    def _close(self, ep: _Episode) -> None:
        """An episode ended: the track becomes a candidate in its zone when it lasted long enough."""
        self._open.pop(ep.track_id, None)
        key = (ep.track_id, ep.zone)
        if ep.duration_s < self.cfg.min_duration_s - 1e-9:
            logger.debug(
                "track %d above %s km/h for %.2f s only; no violation",
                ep.track_id,
                ep.limit_kmh,
                ep.duration_s,
            )
            return
        if key in self._emitted:
            logger.debug("track %d already has a violation in zone %s", ep.track_id, ep.zone)
            return
        self._emitted.add(key)
        self._pending[key] = ep

    def _measure(self, ep: _Episode, held: str = "") -> Violation | None:
        """A candidate's violation over its measuring base (None: measured within the limit).
        ``held``: a reason it may not be enforceable whatever it measures (the limit changed)."""
        self._pending.pop((ep.track_id, ep.zone), None)
        measured_on, log, run = self._measured_run(ep)
        samples = [base_sample(s) for s in run]
        m = ticket.measure(samples, self.cfg, scale_sigma_frac=self.scale_sigma_frac)
        if m is not None and m.speed_kmh <= ep.limit_kmh:
            self.n_cleared += 1
            logger.info(
                "track %d: per-frame speeds above %g km/h in %s, but %.1f +- %.1f km/h over its %.2f s base: "
                "no violation",
                ep.track_id,
                ep.limit_kmh,
                ep.zone,
                m.speed_kmh,
                m.sigma_kmh,
                m.base.duration_s,
            )
            return None
        scale_frac = m.scale_frac if m is not None else ticket.base_frac(samples, self.scale_sigma_frac)
        scale = run_scale([s.scale for s in run], scale_frac)
        status, reason, tolerance = self._status(ep, m, run, scale)
        if held:
            status, reason = ticket.NOT_ENFORCEABLE, held
        shown = shown_sample(run, m.base if m is not None else None)
        base = None if m is None else m.base
        if base is not None and shown is not None and base.start_time_s <= shown.t <= base.end_time_s:
            base = dataclasses.replace(base, snapshot_frame=shown.frame, snapshot_time_s=shown.t)
        if base is not None and measured_on != ep.track_id:
            base = dataclasses.replace(base, track_id=measured_on)
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
            class_name=shown.class_name if shown is not None else ep.class_name,
            bbox_xyxy=shown.bbox if shown is not None else ep.peak_bbox,
            ground_xy_m=shown.ground if shown is not None else ep.peak_ground,
            latitude=ep.latitude,
            longitude=ep.longitude,
            snapshot=shown.snapshot if shown is not None else ep.peak_snapshot,
            ticket_speed_kmh=None if m is None else m.speed_kmh,
            ticket_sigma_kmh=None if m is None else m.sigma_kmh,
            tolerance_kmh=tolerance,
            confidence_k=None if m is None else m.k,
            base=base,
            status=status,
            status_reason=reason,
            scale=scale,
            trace=trace_of(log.samples if log is not None else (), run, base),
        )
        if shown is not None:
            lat, lon = vehicle_position(shown.telemetry, shown.ground)
            v = dataclasses.replace(v, latitude=lat, longitude=lon)
        logger.info(
            "violation: track %d (%s) in %s (limit %.0f): %s km/h over %s; %s%s",
            v.track_id,
            v.class_name,
            v.zone,
            v.speed_limit_kmh,
            "?" if m is None else f"{m.speed_kmh:.1f} +- {m.sigma_kmh:.1f}",
            "no base" if m is None else f"{m.base.duration_s:.2f} s / {m.base.distance_m:.1f} m",
            v.status,
            f" ({v.status_reason})" if v.status_reason else "",
        )
        return v

    def _measured_run(self, ep: _Episode) -> tuple[int, TrackLog | None, list[TrackSample]]:
        """(track, its log, the run) a candidate is measured over: the longest run in its zone of
        any of its vehicle's tracks (its own first on a tie). Where a vehicle's box split or the
        tracker restarted it, the violation's track may have seen it for a moment only (a box on a
        part of a van, sliding along it: 12 % slow over its one second) while another followed the
        whole van for four; the run is chosen by its length in time, never by what it measures."""

        def span(run: list[TrackSample]) -> float:
            return run[-1].t - run[0].t if run else -1.0

        best: tuple[int, TrackLog | None, list[TrackSample]] | None = None
        for tid in (ep.track_id, *sorted(self._parts.get(ep.track_id, ()))):
            log = self._logs.get(tid)
            run = longest_run(log.samples if log is not None else (), ep.zone)
            if best is None or span(run) > span(best[2]):
                best = (tid, log, run)
        assert best is not None
        if best[0] != ep.track_id:
            logger.info("track %d is measured on track %d, its vehicle's longer run", ep.track_id, best[0])
        return best

    def _status(
        self,
        ep: _Episode,
        m: ticket.TicketMeasurement | None,
        run: Sequence[TrackSample],
        scale: ScaleInfo | None,
    ) -> tuple[str, str, float | None]:
        """(status, reason, tolerance) of ``m`` (None: no base): the ticket rule's, not enforceable
        across a change of height reference; a scale too uncertain is named in the reason."""
        if m is None:
            samples = [base_sample(s) for s in run]
            return ticket.NOT_ENFORCEABLE, ticket.too_short_reason(samples, self.cfg), None
        d = ticket.decide(
            m, ep.limit_kmh, self.cfg.ticket_rule, ticket.Tolerance.of(self.cfg, self._zone(ep.zone))
        )
        refs = len({reference_key(s.scale.reference) for s in run if s.scale is not None})
        status, reason = scale_status(d.status, d.reason, scale, refs, self.cfg.enforceable_scale_sources, m)
        return status, reason, d.tolerance_kmh

    def _zone(self, name: str) -> ZoneConfig | None:
        return next((z for z in self.cfg.zones if z.name == name), None)

    def update(
        self,
        frame: Frame,
        detections: sv.Detections,
        speeds: dict[int, SpeedEstimate],
        ground_xy: np.ndarray | None = None,
        scale: ScaleInfo | None = None,
    ) -> list[Violation]:
        """Feed one frame (and its ``scale``: pipelines.height); return the violations measured in it."""
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
                seen = SeenBox.of(frame, detections, i, gxy, _column(detections, "gsd_m_per_px", i))
                self._logs.setdefault(tid, TrackLog()).seen.append(seen)
                est = speeds.get(tid)
                if est is None:
                    continue
                zl = limit_for_point(self.cfg, points[i])
                self._log(frame, est, zl, seen, scale)
                if self.cfg.require_trusted and not est.trusted:
                    continue  # an untrusted speed neither extends nor breaks an episode
                ep = self._open.get(tid)
                above = zl is not None and is_speeding(est.speed_kmh, zl[1])
                if ep is not None and (not above or zl is None or zl[0] != ep.zone):
                    self._close(ep)
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
                self._close(ep)
        for (tid, _), ep in list(self._pending.items()):
            if self._measurable(tid, ep, now):
                closed.append(self._measure(ep))
        self._forget_old(now)
        return sorted((v for v in closed if v is not None), key=lambda v: (v.track_id, v.start_time_s))

    def _measurable(self, tid: int, ep: _Episode, now: float) -> bool:
        """Whether a candidate's base is complete: the track left the zone, was lost, or has been a
        candidate for TICKET_HISTORY_S."""
        log = self._logs.get(tid)
        if log is None or not log.samples:
            return True
        last = log.samples[-1]
        return (
            last.zone != ep.zone
            or now - log.last_seen > self.lost_after_s + 1e-9
            or now - ep.start_t > TICKET_HISTORY_S
        )

    def _log(
        self,
        frame: Frame,
        est: SpeedEstimate,
        zl: tuple[str, float] | None,
        seen: SeenBox,
        scale: ScaleInfo | None = None,
    ) -> None:
        """Keep the track's measured ground position of this frame (its base is chosen from these),
        with a snapshot now and then while it may become a violation."""
        tid = est.track_id
        log = self._logs.setdefault(tid, TrackLog())
        log.last_seen = frame.timestamp_s
        if est.position_m is None or est.position_t is None:
            return
        if log.samples and est.position_t <= log.samples[-1].t:
            return  # no new position measured (carried, or a repeated frame)
        sample = TrackSample(
            t=float(est.position_t),
            frame=frame.number,
            x=float(est.position_m[0]),
            y=float(est.position_m[1]),
            segment=est.segment,
            trusted=bool(est.trusted),
            zone=None if zl is None else zl[0],
            bbox=seen.bbox,
            ground=seen.ground,
            telemetry=frame.telemetry,
            class_name=seen.class_name,
            scale_frac=est.scale_sigma_frac,
            scale_per_deg=est.scale_per_deg,
            point_frac=est.point_sigma_frac,
            scale=scale,
            speed_kmh=float(est.speed_kmh),
            sigma_kmh=float(est.sigma_kmh),
            gsd_m_per_px=seen.gsd_m_per_px,
        )
        if est.earlier and (not log.samples or log.samples[-1].segment != est.segment):
            # the positions its first estimate's window held: the base may begin at the first of them
            before = earlier_samples(est.earlier, log.seen, functools.partial(zone_of_box, self.cfg), sample)
            log.samples.extend(b for b in before if not log.samples or b.t > log.samples[-1].t)
        candidate = tid in self._open or (tid, sample.zone) in self._pending
        near = zl is not None and est.speed_kmh >= SNAPSHOT_SHARE * zl[1]
        if (candidate or near) and sample.t - log.last_snapshot >= SNAPSHOT_EVERY_S - 1e-9:
            sample.snapshot = crop_with_margin(frame.image, seen.bbox, self.cfg.snapshot_margin_px)
            log.last_snapshot = sample.t
        log.samples.append(sample)
        while log.samples and log.samples[0].t < sample.t - TICKET_HISTORY_S:
            log.samples.popleft()

    def _forget_old(self, now: float) -> None:
        """Drop the positions of tracks gone for longer than any rule looks back."""
        keep_s = max(self.lost_after_s, self.cfg.same_vehicle_gap_s)
        busy = set(self._open) | {tid for tid, _ in self._pending}
        for root in [r for r in self._parts if r not in busy]:
            del self._parts[root]
        busy |= {tid for parts in self._parts.values() for tid in parts}  # a busy track's vehicle's
        for tid, log in list(self._logs.items()):
            last = max(log.last_seen, log.seen[-1].t if log.seen else -math.inf)
            if tid not in busy and now - last > keep_s + 1e-9:
                del self._logs[tid]

    def _extend(
        self,
        ep: _Episode,
        frame: Frame,
        detections: sv.Detections,
        i: int,
        est: SpeedEstimate,
        gxy: np.ndarray | None,
    ) -> None:
        """Add detection ``i``'s above-limit estimate to ``ep`` (its per-frame peak: box, snapshot,
        position; shown when the violation has no measuring base)."""
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
            self._parts.setdefault(best, set()).add(tid)
            logger.info(
                "track %d is track %d's vehicle (%.1f m away): no second violation", tid, best, best_d
            )
        return best

    def _speeds_in(self, tid: int, zone: str) -> bool:
        """Whether track ``tid`` has a violation in ``zone``, emitted or under way."""
        ep = self._open.get(tid)
        return (tid, zone) in self._emitted or (ep is not None and ep.zone == zone)

    def finish(self) -> list[Violation]:
        """Close every open episode and measure every candidate (end of stream); return the
        resulting violations."""
        return self._measure_all()

    def _measure_all(self, held: str = "") -> list[Violation]:
        for ep in list(self._open.values()):
            self._close(ep)
        out = [self._measure(ep, held) for ep in list(self._pending.values())]
        return sorted((v for v in out if v is not None), key=lambda v: (v.track_id, v.start_time_s))

    def set_rules(self, cfg: RulesConfig) -> list[Violation]:
        """New limits and zones from the next frame on (an operator's change during a stream).

        Open episodes and candidates were measured against the old limits: they end here, under
        the old rules, and are returned like :meth:`finish`'s, none of them enforceable (the limit
        changed during the episode). A track still above a limit opens a new episode under the new
        rules at its next estimate; one that already has a violation in a zone gets no second one
        there.
        """
        closed = self._measure_all(held="the limits changed during the episode")
        self.cfg = cfg
        return closed


def _column(detections: sv.Detections, key: str, i: int) -> float:
    """Detection ``i``'s value of a float column of ``detections.data`` (NaN: no such column)."""
    values = detections.data.get(key) if detections.data else None
    return float(values[i]) if values is not None and i < len(values) else math.nan


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
