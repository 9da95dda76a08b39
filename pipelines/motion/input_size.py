"""Detector input size chosen from the ground sampling distance (``detector.imgsz: auto``).

A car must span enough pixels *at the network input* to be found: at 40 m a 1920 px frame shows
a 4.5 m car over ~100 px and 640 is plenty; at 150 m it spans ~27 px of the frame, ~9 px at 640.
The engine knows every frame's ground sampling distance (altitude, gimbal pitch, intrinsics), so
the input size is the smallest step of a ladder (640, 800, ... 1280) at which a vehicle of
:data:`VEHICLE_LENGTH_M` spans ``target_px`` pixels, measured where the view is farthest that
still matters (an oblique frame's GSD grows towards the horizon; the probe sits a third of the
way down the frame). Never above the frame's own size (upsampling adds no detail).

Without a GSD (no telemetry, still images) the size is ``fallback`` (capped at the frame's size).
The size changes only after ``hold_frames`` consecutive frames want the same other size, so a
GSD jittering across a step boundary does not reshape the network on every frame.

The functions are pure; :class:`InputSizeChooser` keeps the hysteresis state of one stream.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from typing import Protocol

import numpy as np
import supervision as sv

from pipelines.config import AutoSizeConfig
from pipelines.geometry import GroundProjector
from pipelines.ground import GroundModel
from pipelines.types import Frame

log = logging.getLogger(__name__)

VEHICLE_LENGTH_M = 4.5  # a typical car
STRIDE = 32


def round_up_to_stride(px: float, stride: int = STRIDE) -> int:
    return int(math.ceil(px / stride) * stride)


def size_cap(long_side_px: int, cfg: AutoSizeConfig) -> int:
    """Largest input size worth using for a frame: its own long side (on the stride), at most ``max``."""
    return max(min(cfg.ladder), min(max(cfg.ladder), round_up_to_stride(long_side_px)))


def size_for_gsd(gsd_m_per_px: float | None, long_side_px: int, cfg: AutoSizeConfig) -> int:
    """Smallest ladder size at which a :data:`VEHICLE_LENGTH_M` vehicle spans ``cfg.target_px``
    input pixels; ``cfg.fallback`` when the GSD is unknown; never above :func:`size_cap`."""
    cap = size_cap(long_side_px, cfg)
    if gsd_m_per_px is None or not math.isfinite(gsd_m_per_px) or gsd_m_per_px <= 0:
        return min(cfg.fallback, cap)
    vehicle_px = VEHICLE_LENGTH_M / gsd_m_per_px  # in the frame
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


class InputSizeChooser:
    """One stream's detector input size, with hysteresis (see the module doc)."""

    def __init__(self, cfg: AutoSizeConfig) -> None:
        self.cfg = cfg
        self.current: int | None = None
        self._wanted: int | None = None
        self._count = 0

    def choose(self, gsd_m_per_px: float | None, long_side_px: int) -> int:
        wanted = size_for_gsd(gsd_m_per_px, long_side_px, self.cfg)
        if self.current is None:
            self._switch(wanted, gsd_m_per_px, long_side_px)
        elif wanted == self.current:
            self._wanted, self._count = None, 0
        else:
            if wanted != self._wanted:
                self._wanted, self._count = wanted, 0
            self._count += 1
            if self._count >= self.cfg.hold_frames:
                self._switch(wanted, gsd_m_per_px, long_side_px)
        return self.current  # type: ignore[return-value]

    def _switch(self, size: int, gsd: float | None, long_side: int) -> None:
        log.info(
            "detector input size %d (%s, frame long side %d px, target %.0f px per %.1f m vehicle)",
            size,
            f"GSD {gsd * 100:.1f} cm/px" if gsd else "no GSD: fallback",
            long_side,
            self.cfg.target_px,
            VEHICLE_LENGTH_M,
        )
        self.current, self._wanted, self._count = size, None, 0


class SizedDetector(Protocol):
    """A detector that runs at a size given per frame (``YoloDetector``)."""

    def detect_at(self, frame: Frame, imgsz: int) -> sv.Detections: ...


class AutoSizedDetector:
    """``Detector`` running ``inner`` at the input size each frame's GSD asks for.

    The GSD comes from the frame's telemetry through its own :class:`GroundModel` (the same camera
    config as the pipeline's), so the detector stage still needs nothing but the frame.
    """

    def __init__(self, inner: SizedDetector, ground: GroundModel, cfg: AutoSizeConfig) -> None:
        self.inner = inner
        self.ground = ground
        self.chooser = InputSizeChooser(cfg)
        self.frames_at: Counter[int] = Counter()  # frames run at each input size

    @property
    def imgsz(self) -> int | None:
        """The input size in use (None before the first frame)."""
        return self.chooser.current

    def detect(self, frame: Frame) -> sv.Detections:
        gsd = probe_gsd(self.ground.projector(frame), frame.width, frame.height, self.chooser.cfg.probe_row)
        size = self.chooser.choose(gsd, max(frame.width, frame.height))
        self.frames_at[size] += 1
        return self.inner.detect_at(frame, size)


__all__ = [
    "VEHICLE_LENGTH_M",
    "AutoSizedDetector",
    "InputSizeChooser",
    "probe_gsd",
    "round_up_to_stride",
    "size_cap",
    "size_for_gsd",
]
