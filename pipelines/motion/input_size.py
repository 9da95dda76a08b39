"""Detector input size chosen from the ground sampling distance (``detector.imgsz: auto``).

A car must span enough pixels *at the network input* to be found: at 40 m a 1920 px frame shows
a 4.5 m car over ~100 px and 640 is plenty; at 150 m it spans ~27 px of the frame, ~9 px at 640.
The engine knows every frame's ground sampling distance (altitude, gimbal pitch, intrinsics), so
the input size is the smallest step of a ladder (640, 800, ... 1280) at which a vehicle of
:data:`VEHICLE_LENGTH_M` spans ``target_px`` pixels, measured where the view is farthest that
still matters (an oblique frame's GSD grows towards the horizon; the probe sits a third of the
way down the frame). Never above the frame's own size (upsampling adds no detail).

Without a GSD (no telemetry: a recorded video, an RTMP stream with no MQTT) a stream measures the
cars themselves (``from_vehicles``): frames run at ``fallback`` until it has seen ``min_vehicles``
cars and vans, then one frame every ``reprobe_s`` (by frame timestamps) runs at ``fallback`` again
to keep the measure current; the ``vehicle_quantile`` (a tenth) of their box lengths stands for
the far car, in place of ``4.5 m / GSD``: on the altitude-band flights (telemetry known) it chose the
GSD's size on 6 of 8 and one step larger on 2; the lower quartile chose 640 on UAVDT M1303, where
960 tracks better (HOTA 0.452 against 0.400). Only boxes found at the fallback size count, so the
measure is not biased by what a smaller input misses. Still images have no second frame: they run
at ``fallback`` (capped at the image's size).
The size changes only after ``hold_frames`` consecutive frames want the same other size, so a
GSD jittering across a step boundary does not reshape the network on every frame.

The functions are pure; :class:`InputSizeChooser` keeps the hysteresis state of one stream and
:class:`VehicleSizeProbe` the measured cars of one stream without a GSD.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, deque
from typing import Protocol

import numpy as np
import supervision as sv

from pipelines.config import AutoSizeConfig
from pipelines.geometry import GroundProjector
from pipelines.ground import GroundModel
from pipelines.types import Frame

log = logging.getLogger(__name__)

VEHICLE_LENGTH_M = 4.5  # a typical car
CAR_CLASSES = ("car", "van")  # the classes about VEHICLE_LENGTH_M long (not bus, truck, motorcycle)
STRIDE = 32


def round_up_to_stride(px: float, stride: int = STRIDE) -> int:
    return int(math.ceil(px / stride) * stride)


def size_cap(long_side_px: int, cfg: AutoSizeConfig) -> int:
    """Largest input size worth using for a frame: its own long side (on the stride), at most ``max``."""
    return max(min(cfg.ladder), min(max(cfg.ladder), round_up_to_stride(long_side_px)))


def size_for_gsd(gsd_m_per_px: float | None, long_side_px: int, cfg: AutoSizeConfig) -> int:
    """Smallest ladder size at which a :data:`VEHICLE_LENGTH_M` vehicle spans ``cfg.target_px``
    input pixels; ``cfg.fallback`` when the GSD is unknown; never above :func:`size_cap`."""
    if gsd_m_per_px is None or not math.isfinite(gsd_m_per_px) or gsd_m_per_px <= 0:
        return fallback_size(long_side_px, cfg)
    return size_for_vehicle_px(VEHICLE_LENGTH_M / gsd_m_per_px, long_side_px, cfg)


def fallback_size(long_side_px: int, cfg: AutoSizeConfig) -> int:
    """``cfg.fallback``, never above :func:`size_cap`."""
    return min(cfg.fallback, size_cap(long_side_px, cfg))


def size_for_vehicle_px(vehicle_px: float, long_side_px: int, cfg: AutoSizeConfig) -> int:
    """Smallest ladder size at which a vehicle ``vehicle_px`` long in the frame spans
    ``cfg.target_px`` input pixels; never above :func:`size_cap`."""
    cap = size_cap(long_side_px, cfg)
    needed = cfg.target_px * long_side_px / vehicle_px  # input size giving target_px
    for step in sorted(cfg.ladder):
        if step >= needed or step >= cap:
            return min(step, cap)
    return cap


def probe_gsd(projector: GroundProjector | None, width: int, height: int, probe_row: float) -> float | None:
    """Metres per pixel at the frame's probe point (centre column, ``probe_row`` of the height from
    the top); the centre when the probe is at or above the horizon; None without geometry."""
    if projector is None:
        return None
    for v in (probe_row * height, height / 2):
        g = float(projector.gsd_at(np.array([[width / 2, v]]))[0])
        if math.isfinite(g) and g > 0:
            return g
    return None


def vehicle_lengths(detections: sv.Detections) -> np.ndarray:
    """Box long sides (frame px) of the car-sized detections (:data:`CAR_CLASSES`; every box
    when the detections carry no class names)."""
    if len(detections) == 0:
        return np.empty(0)
    wh = detections.xyxy[:, 2:4] - detections.xyxy[:, 0:2]
    lengths = wh.max(axis=1)
    names = detections.data.get("class_name")
    if names is not None and len(names) == len(detections):
        lengths = lengths[np.isin(names, CAR_CLASSES)]
    return lengths[np.isfinite(lengths) & (lengths > 0)]


class VehicleSizeProbe:
    """The apparent length of a car in one stream with no GSD (see the module doc): box lengths
    of the frames run at the fallback size, forgotten after ``cfg.vehicle_memory_s``."""

    def __init__(self, cfg: AutoSizeConfig) -> None:
        self.cfg = cfg
        self._probes: deque[tuple[float, np.ndarray]] = deque()

    def _forget(self, t: float) -> None:
        if self._probes and t < self._probes[-1][0]:
            self._probes.clear()  # time went back: a new stream or a seek
        while self._probes and t - self._probes[0][0] > self.cfg.vehicle_memory_s:
            self._probes.popleft()

    def due(self, t: float) -> bool:
        """Whether the frame at ``t`` must run at the fallback size: no measure yet, or the
        last probe is ``reprobe_s`` old."""
        self._forget(t)
        if not self._probes or self._pooled().size < self.cfg.min_vehicles:
            return True
        return t - self._probes[-1][0] >= self.cfg.reprobe_s

    def add(self, t: float, detections: sv.Detections) -> None:
        """Detections of a frame run at the fallback size."""
        self._forget(t)
        self._probes.append((t, vehicle_lengths(detections)))

    def _pooled(self) -> np.ndarray:
        return np.concatenate([lengths for _, lengths in self._probes]) if self._probes else np.empty(0)

    def length_px(self) -> float | None:
        """The far car's length in frame px (the ``vehicle_quantile`` of the measured ones);
        None with fewer than ``min_vehicles`` measured."""
        pooled = self._pooled()
        if pooled.size < self.cfg.min_vehicles:
            return None
        return float(np.quantile(pooled, self.cfg.vehicle_quantile))

    @property
    def measured(self) -> int:
        return int(self._pooled().size)


class InputSizeChooser:
    """One stream's detector input size, with hysteresis (see the module doc)."""

    def __init__(self, cfg: AutoSizeConfig) -> None:
        self.cfg = cfg
        self.current: int | None = None
        self._wanted: int | None = None
        self._count = 0

    def choose(self, gsd_m_per_px: float | None, long_side_px: int) -> int:
        wanted = size_for_gsd(gsd_m_per_px, long_side_px, self.cfg)
        return self.choose_size(
            wanted,
            f"GSD {gsd_m_per_px * 100:.1f} cm/px" if gsd_m_per_px else "no GSD: fallback",
            long_side_px,
        )

    def choose_size(self, wanted: int, why: str, long_side_px: int) -> int:
        """Take ``wanted`` (chosen for the reason ``why``) at once on the first frame, else once
        ``hold_frames`` consecutive frames want it."""
        if self.current is None:
            self._switch(wanted, why, long_side_px)
        elif wanted == self.current:
            self._wanted, self._count = None, 0
        else:
            if wanted != self._wanted:
                self._wanted, self._count = wanted, 0
            self._count += 1
            if self._count >= self.cfg.hold_frames:
                self._switch(wanted, why, long_side_px)
        return self.current  # type: ignore[return-value]

    def _switch(self, size: int, why: str, long_side: int) -> None:
        log.info(
            "detector input size %d (%s, frame long side %d px, target %.0f px per %.1f m vehicle)",
            size,
            why,
            long_side,
            self.cfg.target_px,
            VEHICLE_LENGTH_M,
        )
        self.current, self._wanted, self._count = size, None, 0


class SizedDetector(Protocol):
    """A detector that runs at a size given per frame (``YoloDetector``)."""

    def detect_at(self, frame: Frame, imgsz: int) -> sv.Detections: ...


class AutoSizedDetector:
    """``Detector`` running ``inner`` at the input size each frame's GSD asks for; without a GSD,
    the size the cars it measures at the fallback size ask for (:class:`VehicleSizeProbe`).

    The GSD comes from the frame's telemetry through its own :class:`GroundModel` (the same camera
    config as the pipeline's), so the detector stage still needs nothing but the frame.
    """

    def __init__(self, inner: SizedDetector, ground: GroundModel, cfg: AutoSizeConfig) -> None:
        self.inner = inner
        self.ground = ground
        self.chooser = InputSizeChooser(cfg)
        self.vehicles = VehicleSizeProbe(cfg)
        self.frames_at: Counter[int] = Counter()  # frames run at each input size
        self._last: int | None = None

    @property
    def imgsz(self) -> int | None:
        """The input size in use (None before the first frame)."""
        return self.chooser.current or self._last

    def detect(self, frame: Frame) -> sv.Detections:
        cfg = self.chooser.cfg
        long_side = max(frame.width, frame.height)
        gsd = probe_gsd(self.ground.projector(frame), frame.width, frame.height, cfg.probe_row)
        if gsd is not None or not cfg.from_vehicles:
            return self._run(frame, self.chooser.choose(gsd, long_side))
        t = frame.timestamp_s
        if not self.vehicles.due(t):
            return self._run(frame, self._choose_from_vehicles(long_side))
        probe = fallback_size(long_side, cfg)
        if self._last is None:
            log.info("detector input size %d while the cars are measured (no GSD)", probe)
        detections = self._run(frame, probe)
        self.vehicles.add(t, detections)
        self._choose_from_vehicles(long_side)
        return detections

    def _choose_from_vehicles(self, long_side: int) -> int:
        cfg = self.chooser.cfg
        length = self.vehicles.length_px()
        if length is None:
            if self.chooser.current is None:  # still measuring: no decision yet (the first is at once)
                return fallback_size(long_side, cfg)
            why = f"no GSD, {self.vehicles.measured} of {cfg.min_vehicles} cars measured: fallback"
            return self.chooser.choose_size(fallback_size(long_side, cfg), why, long_side)
        why = (
            f"no GSD: cars {length:.0f} px long at the {cfg.vehicle_quantile:.0%} quantile "
            f"of {self.vehicles.measured} seen at {fallback_size(long_side, cfg)}"
        )
        return self.chooser.choose_size(size_for_vehicle_px(length, long_side, cfg), why, long_side)

    def _run(self, frame: Frame, size: int) -> sv.Detections:
        self._last = size
        self.frames_at[size] += 1
        return self.inner.detect_at(frame, size)


__all__ = [
    "CAR_CLASSES",
    "VEHICLE_LENGTH_M",
    "AutoSizedDetector",
    "InputSizeChooser",
    "VehicleSizeProbe",
    "fallback_size",
    "probe_gsd",
    "round_up_to_stride",
    "size_cap",
    "size_for_gsd",
    "size_for_vehicle_px",
    "vehicle_lengths",
]
