"""Per-frame ground model: which altitude, pitch and intrinsics hold for this frame.

Resolution order for each quantity: command-line/config override > the frame's telemetry >
an explicit, logged fallback. This is the one place an override is applied, live and offline
(the offline loader keeps the log's values as recorded). When the ground scale cannot be known
(no altitude, no camera), speeds are disabled and the reason is reported; a speed is never
computed from a guessed scale. In particular a fallback (the default pitch, the profile's focal
length) is never used for a frame whose telemetry lacks a value that the flight's telemetry has
given before: such a frame (telemetry lost, or refused as a jump or a NaN) gets no speed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pipelines.camera import UnknownCameraError, get_profile, intrinsics_for, real_focal_from_35mm
from pipelines.config import CameraConfig, ConfigError
from pipelines.geometry import GroundProjector
from pipelines.types import CameraProfile, Frame, Telemetry

log = logging.getLogger(__name__)

# Steeper than this (closer to the horizon) the flat-ground model is too ill-conditioned to measure.
MIN_DEPRESSION_DEG = 15.0


@dataclass(frozen=True, slots=True)
class GroundStatus:
    ok: bool
    reason: str = ""
    assumption: str = ""  # a value the frame's geometry rests on that nothing measured


class GroundModel:
    """Turns a frame (telemetry) plus overrides into a :class:`GroundProjector`."""

    def __init__(self, cfg: CameraConfig):
        self.cfg = cfg
        self._profile: CameraProfile | None = None
        self._warned: set[str] = set()
        self._cache_key: tuple | None = None
        self._cache: GroundProjector | None = None
        self._from_telemetry: set[str] = set()  # quantities the flight's telemetry has given
        self.status = GroundStatus(False, "no frame seen yet")
        if cfg.name:
            try:
                self._profile = get_profile(cfg.name)
            except UnknownCameraError as exc:
                raise ConfigError(str(exc)) from exc

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)

    def _profile_for(self, frame: Frame) -> CameraProfile | None:
        if self._profile is not None:
            return self._profile
        tel = frame.telemetry
        if tel is not None and tel.camera:
            try:
                self._profile = get_profile(tel.camera)
                log.info("camera profile %s (from telemetry %r)", self._profile.name, tel.camera)
            except UnknownCameraError:
                self._warn_once("camera-unknown", "telemetry names an unknown camera %r", tel.camera)
        return self._profile

    def _note_telemetry(self, tel: Telemetry | None) -> None:
        if tel is None:
            return
        if tel.altitude_m is not None:
            self._from_telemetry.add("altitude")
        if tel.gimbal_pitch_deg is not None:
            self._from_telemetry.add("pitch")
        if tel.focal_length_mm is not None or tel.focal_length_35mm is not None:
            self._from_telemetry.add("focal")

    def projector(self, frame: Frame) -> GroundProjector | None:
        """The frame's image->ground mapping, or None (with :attr:`status` saying why)."""
        tel = frame.telemetry
        cfg = self.cfg
        self._note_telemetry(tel)
        altitude = cfg.altitude_m if cfg.altitude_m is not None else (tel.altitude_m if tel else None)
        if altitude is None and "altitude" in self._from_telemetry:
            self.status = GroundStatus(False, "no altitude in this frame's telemetry (lost or refused)")
            return None
        if altitude is None:
            self._warn_once(
                "no-altitude",
                "no altitude for frame %d (no --altitude and no rel_alt in telemetry): speeds are disabled",
                frame.index,
            )
            self.status = GroundStatus(False, "no altitude: pass --altitude or telemetry with rel_alt")
            return None
        profile = self._profile_for(frame)
        if profile is None:
            self._warn_once("no-camera", "no camera profile (pass --camera NAME): speeds are disabled")
            self.status = GroundStatus(False, "no camera profile: pass --camera")
            return None

        assumption = ""
        if cfg.pitch_deg is not None:
            pitch = cfg.pitch_deg
        elif tel is not None and tel.gimbal_pitch_deg is not None:
            pitch = tel.gimbal_pitch_deg
        elif "pitch" in self._from_telemetry:
            self.status = GroundStatus(False, "no gimbal pitch in this frame's telemetry (lost or refused)")
            return None
        else:
            pitch = cfg.default_pitch_deg
            assumption = f"pitch assumed: {pitch:.1f} deg (none in telemetry, no --pitch)"
            self._warn_once(
                "default-pitch", "no gimbal pitch in telemetry or overrides: assuming %.1f deg", pitch
            )
        if pitch > -MIN_DEPRESSION_DEG:
            self._warn_once(
                "shallow-pitch", "gimbal pitch %.1f deg is too close to the horizon: speeds disabled", pitch
            )
            self.status = GroundStatus(False, f"gimbal pitch {pitch:.1f} deg too shallow")
            return None
        pitch = max(pitch, -90.0)

        if cfg.focal_length_mm is not None:
            focal = cfg.focal_length_mm
        elif tel is not None and tel.focal_length_mm is not None:
            focal = tel.focal_length_mm
        elif tel is not None and tel.focal_length_35mm is not None:
            focal = real_focal_from_35mm(tel.focal_length_35mm, profile)
        elif "focal" in self._from_telemetry:
            self.status = GroundStatus(False, "no focal length in this frame's telemetry (lost or refused)")
            return None
        else:
            focal = profile.focal_length_mm
        zoom = tel.digital_zoom if tel is not None else 1.0

        key = (
            round(altitude, 3),
            round(pitch, 3),
            round(focal, 4),
            round(zoom, 4),
            frame.width,
            frame.height,
        )
        if key != self._cache_key:
            intr = intrinsics_for(
                profile, frame.width, frame.height, focal_length_mm=focal, digital_zoom=zoom
            )
            self._cache = GroundProjector.create(intr, altitude, pitch)
            self._cache_key = key
        self.status = GroundStatus(
            True, f"{profile.name}, altitude {altitude:.1f} m, pitch {pitch:.1f} deg", assumption
        )
        return self._cache
