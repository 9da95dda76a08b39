"""The laser rangefinder of DJI enterprise payloads: the camera's height above the road from the
slant range to the point at the image's centre.

Zenmuse H20/H30 and the M30 series carry a laser co-aligned with the camera; DJI Cloud API OSD
reports its range (``measure_target_distance``, while ``measure_target_error_state`` is 0, NORMAL),
the engine's ``Telemetry.lrf_range_m``. Over flat ground the point at the image's centre lies
``R sin(depression)`` below the camera, so each reading says how far the take-off point (which the
altitude reading counts from) is above the road: ``R sin(depression) - altitude reading``. That is
what a :class:`~pipelines.height.HeightReference` carries (source ``lrf``), so the barometer's drift
since the reading is accounted as for a measured base.

A reading is used only where its point is the road's: the disc of the laser's spot around the
centre on the road mask (a roof, a tree or a verge would give another height) and under no
vehicle's box (a car's roof is 1.5 m above the road). No road mask: no check, no use.

:class:`Rangefinder` pools the readings of the last ``window_s`` (each counted once, however many
frames carry it): their median, those within 3 sigma of it (the reading's own or the readings'
spread, up to a third of a metre), weighted by their sigma, inflated by their chi-square where they scatter more than that
says. A reading's sigma is DJI's accuracy, ``sigma_m + sigma_frac R``, through the depression; the
pitch's error moves every reading alike (``dh = -R cos(pitch) dpitch``), so it does not average out:
it is added whole, and its covariance with the pitch (the pitch error that also stretches the ground
mapping) rides on the reference's ``height_pitch_corr``, as for a measured base. The pitch is the one
against the road's plane (the gimbal's error and the road's tilt along the view,
:func:`pipelines.height.pitch_sigma_on_road`): over a road tilted by ``t`` the geometry is that of a
level road at the distance ``R sin(pitch + t)`` seen at ``pitch + t``, so the height the laser gives
the ground mapping errs with the tilt as with the gimbal (a measured base's pitch sigma, where one
solved it, replaces that prior). No reading for ``max_age_s``: no reference (the other sources
again). Until ``min_readings`` have come, the readings that agree make a provisional reference
(``provisional``: the OSD's 0.5 Hz takes three readings four seconds or more, a short pass's whole
time in view): its sigma widened by the barometer's scatter between readings, which one reading
cannot show; speeds use it, no ticket rests on it, and one whose base spans it and the confirmed
reference is two references.

Pure: numpy and the engine's types.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from pipelines.config import RangefinderConfig
from pipelines.types import Frame, HeightReference

log = logging.getLogger(__name__)

MAX_SPREAD_M = 1.0 / 3.0  # the most scatter between readings taken as the barometer's
MIN_DEPRESSION_DEG = 15.0  # shallower, the flat-ground model is too ill-conditioned (pipelines.ground)


@dataclass(frozen=True, slots=True)
class LrfReading:
    """One reading: its stream time, the take-off point's height above the road it implies, that
    value's random sigma (the range's), and how it moves per degree the pitch used is off (m/deg)."""

    time_s: float
    offset_m: float
    sigma_m: float
    m_per_pitch_deg: float


def lrf_reading(
    range_m: float, pitch_deg: float, altitude_m: float, time_s: float, sigma_m: float, sigma_frac: float
) -> LrfReading:
    """The reading of a slant range ``range_m`` along a gimbal pitch ``pitch_deg`` (-90 nadir) with
    the drone's altitude reading ``altitude_m``; ValueError with one line when it cannot be one."""
    if not (math.isfinite(range_m) and range_m > 0):
        raise ValueError(f"laser range {range_m} is not a positive distance")
    if not (math.isfinite(pitch_deg) and -90.0 <= pitch_deg <= -MIN_DEPRESSION_DEG):
        raise ValueError(f"gimbal pitch {pitch_deg:.1f} deg: the laser's point is too far for a height")
    pitch = math.radians(pitch_deg)
    height = -range_m * math.sin(pitch)
    return LrfReading(
        time_s=float(time_s),
        offset_m=height - float(altitude_m),
        sigma_m=(sigma_m + sigma_frac * range_m) * -math.sin(pitch),
        m_per_pitch_deg=-range_m * math.cos(pitch) * math.pi / 180.0,
    )


def spot_refusal(
    width: int,
    height: int,
    mask: np.ndarray | None,
    boxes_xyxy: np.ndarray | None,
    spot_frac: float,
    road_share: float,
) -> str | None:
    """Why the laser's point (the centre of a ``width`` x ``height`` frame) is not the road's, or
    None when it is: no road mask, less than ``road_share`` of its spot on the mask, a box on it."""
    if mask is None:
        return "no road mask: the laser's point cannot be checked to lie on the road"
    cu, cv = width / 2.0, height / 2.0
    if boxes_xyxy is not None and len(boxes_xyxy):
        b = np.asarray(boxes_xyxy, dtype=np.float64).reshape(-1, 4)
        if np.any((b[:, 0] <= cu) & (cu <= b[:, 2]) & (b[:, 1] <= cv) & (cv <= b[:, 3])):
            return "a vehicle is under the laser's point"
    m = np.asarray(mask, dtype=bool)
    sx, sy = m.shape[1] / width, m.shape[0] / height
    r = max(spot_frac * width, 1.0)
    u0, u1 = int(math.floor((cu - r) * sx)), int(math.ceil((cu + r) * sx))
    v0, v1 = int(math.floor((cv - r) * sy)), int(math.ceil((cv + r) * sy))
    uu, vv = np.meshgrid(
        np.arange(max(u0, 0), min(u1, m.shape[1])), np.arange(max(v0, 0), min(v1, m.shape[0]))
    )
    inside = ((uu + 0.5) / sx - cu) ** 2 + ((vv + 0.5) / sy - cv) ** 2 <= r * r
    share = float(m[vv[inside], uu[inside]].mean()) if inside.any() else float(m[int(cv * sy), int(cu * sx)])
    if share < road_share:
        return f"the laser's point is off the road ({share:.0%} of its spot on the road mask)"
    return None


def pool(
    readings: list[LrfReading], pitch_sigma_deg: float, needed: int = 1
) -> tuple[HeightReference | None, str]:
    """The reference the ``readings`` make (None and why when they do not agree); on fewer than
    ``needed`` readings a provisional one (speeds use it, no ticket rests on it:
    pipelines.height.scale_status), its sigma widened by the most scatter between readings taken as
    the barometer's (one reading cannot show its own)."""
    if not readings:
        return None, "no readings"
    offsets = np.array([r.offset_m for r in readings])
    sigmas = np.array([max(r.sigma_m, 1e-3) for r in readings])
    median = float(np.median(offsets))
    spread = 1.4826 * float(np.median(np.abs(offsets - median)))
    # within 3 sigma of the median: a reading's own, or the readings' spread (the barometer's noise
    # between them) up to a third of a metre - a roof or a kerb is more
    keep = np.abs(offsets - median) <= 3.0 * np.maximum(sigmas, min(spread, MAX_SPREAD_M))
    if 2 * int(keep.sum()) <= len(readings):
        return (
            None,
            f"the readings disagree: {int(keep.sum())} of {len(readings)} within 3 sigma of their median",
        )
    w = 1.0 / sigmas[keep] ** 2
    o = offsets[keep]
    mean = float(np.sum(w * o) / np.sum(w))
    se = 1.0 / math.sqrt(float(np.sum(w)))
    n = int(keep.sum())
    if n > 1:
        se *= max(1.0, math.sqrt(float(np.sum(w * (o - mean) ** 2)) / (n - 1)))
    per_deg = float(np.mean([r.m_per_pitch_deg for r, k in zip(readings, keep, strict=True) if k]))
    systematic = abs(per_deg) * pitch_sigma_deg
    sigma = max(math.hypot(se, systematic), 1e-3)
    short = len(readings) < needed
    if short:
        sigma = math.hypot(sigma, MAX_SPREAD_M)
    times = np.array([r.time_s for r, k in zip(readings, keep, strict=True) if k])
    corr = per_deg * pitch_sigma_deg / sigma if pitch_sigma_deg > 0 else 0.0
    span = float(times.max() - times.min())
    reference = HeightReference(
        source="lrf",
        takeoff_above_road_m=mean,
        sigma_m=sigma,
        pitch_sigma_deg=pitch_sigma_deg,
        at_time_s=float(np.mean(times)),
        detail=(
            f"laser rangefinder{f', provisional ({len(readings)} of {needed} readings)' if short else ''}: "
            f"{n} reading(s) over {span:.0f} s, take-off {mean:+.2f} +- {sigma:.2f} m above the road"
        ),
        height_pitch_corr=max(-1.0, min(1.0, corr)),
        provisional=short,
    )
    return reference, ""


class Rangefinder:
    """A stream's laser readings and the reference they make (``observe`` each frame, then
    ``reference``)."""

    def __init__(self, cfg: RangefinderConfig, pitch_sigma_deg: float) -> None:
        self.cfg = cfg
        self.pitch_sigma_deg = pitch_sigma_deg
        self.readings: deque[LrfReading] = deque()
        self.refused: dict[str, int] = {}  # why readings were not used, and how often
        self.taken = 0  # readings used
        self.status = "no laser range in the telemetry"
        self._last_key: tuple | None = None
        # the last pool's reference, by (readings taken, readings held, the pitch's sigma): readings
        # are added at the back and dropped at the front, so the two counts name the pool
        self._cached: tuple[tuple[int, int, float], HeightReference | None] | None = None

    def observe(
        self,
        frame: Frame,
        altitude_m: float | None,
        pitch_deg: float | None,
        mask: np.ndarray | None,
        boxes_xyxy: np.ndarray | None,
    ) -> None:
        """Take ``frame``'s laser reading, once per telemetry sample, where its point is the road's."""
        tel = frame.telemetry
        if tel is None or tel.lrf_range_m is None or altitude_m is None or pitch_deg is None:
            return
        key = (tel.timestamp_s if tel.lrf_time_s is None else tel.lrf_time_s, tel.lrf_range_m)
        if key == self._last_key:
            return
        self._last_key = key
        why = spot_refusal(
            frame.width, frame.height, mask, boxes_xyxy, self.cfg.spot_frac, self.cfg.road_share
        )
        if why is None:
            try:
                reading = lrf_reading(
                    tel.lrf_range_m,
                    pitch_deg,
                    altitude_m,
                    frame.timestamp_s,
                    self.cfg.sigma_m,
                    self.cfg.sigma_frac,
                )
            except ValueError as exc:
                why = str(exc)
        if why is not None:
            if why not in self.refused:
                log.info("laser range not used: %s", why)
            self.refused[why] = self.refused.get(why, 0) + 1
            self.status = why
            return
        self.readings.append(reading)
        self.taken += 1

    def summary(self) -> dict | None:
        """The readings so far: how many were used, why the others were not, the status now; None
        when the stream has had none (no laser, or not switched on)."""
        if not (self.taken or self.refused):
            return None
        return {"used": self.taken, "refused": dict(self.refused), "status": self.status}

    def restart(self, why: str) -> None:
        """Drop the readings held (taken with a pitch that no longer holds): the next ones make the
        reference again."""
        if self.readings:
            log.info("laser readings dropped: %s", why)
        self.readings.clear()
        self._cached = None
        self.status = why

    def reference(self, now_s: float, pitch_sigma_deg: float | None = None) -> HeightReference | None:
        """The reference of the readings of the last ``window_s`` (None: too few, too old, or they
        disagree: :attr:`status` says which). ``pitch_sigma_deg``: how well the gimbal's pitch is
        known now (a measured base's, where it measured the pitch), instead of the prior's."""
        cfg = self.cfg
        while self.readings and now_s - self.readings[0].time_s > cfg.window_s:
            self.readings.popleft()
        if not self.readings:
            return None
        if now_s - self.readings[-1].time_s > cfg.max_age_s:
            self.status = f"no usable laser reading for {now_s - self.readings[-1].time_s:.0f} s"
            return None
        if len(self.readings) < cfg.min_readings and not cfg.provisional:
            self.status = f"{len(self.readings)} of {cfg.min_readings} laser readings needed"
            return None
        pitch_sigma = self.pitch_sigma_deg if pitch_sigma_deg is None else pitch_sigma_deg
        key = (self.taken, len(self.readings), pitch_sigma)
        if self._cached is None or self._cached[0] != key:
            ref, why = pool(list(self.readings), pitch_sigma, cfg.min_readings)
            self._cached = (key, ref)
            if ref is None:
                self.status = why
        ref = self._cached[1]
        if ref is not None:
            self.status = ref.detail
        return ref


__all__ = ["LrfReading", "Rangefinder", "lrf_reading", "pool", "spot_refusal"]
