"""Per-frame ground model: which altitude, pitch and intrinsics hold for this frame.

Resolution order for each quantity: command-line/config override > the frame's telemetry >
an explicit, logged fallback. This is the one place an override is applied, live and offline
(the offline loader keeps the log's values as recorded). When the ground scale cannot be known
(no altitude, no camera), speeds are disabled and the reason is reported; a speed is never
computed from a guessed scale. In particular a fallback (the default pitch, the profile's focal
length) is never used for a frame whose telemetry lacks a value that the flight's telemetry has
given before: such a frame (telemetry lost, or refused as a jump or a NaN) gets no speed.

Where the scale check derives it (``scale_check.derive``), a stream without any altitude is
measured at the height its vehicles and lanes give (the ``vehicles`` source,
:meth:`GroundModel.set_derived`), and where no pitch is given either, at the pitch its cars give
(:meth:`GroundModel.set_fitted_pitch`): no speed until that height is known to ``derive_max_sigma``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

from pipelines.camera import UnknownCameraError, get_profile, intrinsics_for, lens_note, real_focal_from_35mm
from pipelines.config import CameraConfig, ConfigError, ScaleCheckConfig
from pipelines.geometry import GroundProjector
from pipelines.height import (
    DerivedHeight,
    HeightReference,
    ScaleInfo,
    ScaleModel,
    ScalePriors,
    centre_sigma_frac,
    height_above_road,
    pitch_sigma_on_road,
    with_pitch_observed,
)
from pipelines.lens import LensModel
from pipelines.pitch_fit import PitchFit
from pipelines.rangefinder import Rangefinder
from pipelines.terrain import TerrainHeights, TerrainView
from pipelines.types import CameraProfile, Frame, Telemetry

log = logging.getLogger(__name__)

# Steeper than this (closer to the horizon) the flat-ground model is too ill-conditioned to measure.
MIN_DEPRESSION_DEG = 15.0
# the vehicles' own scale: a new height the rulers give is taken when it differs by this much (log),
# a new pitch the cars give (no pitch known) when it differs by this much (deg)
DERIVED_STEP = 0.01
FITTED_PITCH_STEP = 0.5


@dataclass(frozen=True, slots=True)
class GroundStatus:
    ok: bool
    reason: str = ""
    assumption: str = ""  # a value the frame's geometry rests on that nothing measured


class GroundModel:
    """Turns a frame (telemetry) plus overrides into a :class:`GroundProjector`."""

    def __init__(
        self,
        cfg: CameraConfig,
        terrain: TerrainHeights | None = None,
        derive: ScaleCheckConfig | None = None,
        *,
        quiet: bool = False,
    ):
        """``quiet``: its fallbacks logged at debug level (a model that only sizes the detector's
        input: the speeds' own says what their scale rests on)."""
        self.cfg = cfg
        self.quiet = quiet
        # without an altitude: the scale check's settings for the vehicles' own scale (None: no speed)
        self.derive = derive if derive is not None and derive.enabled and derive.derive else None
        self._derived: DerivedHeight | None = None  # the height the rulers gave, in use
        self.derived_known = False  # ... known to derive_max_sigma: speeds are measured
        self._fitted_pitch: PitchFit | None = None  # the pitch the cars gave (no pitch known)
        self._traffic: tuple[float, float] | None = None  # the pitch check's word: error, sigma (deg)
        self.traffic_shift = (0.0, 0.0)  # what it moved the last frame's scale by: log height, pitch (deg)
        # what the scale's sources add to the drone's readings (height m, pitch deg), as of the last
        # frame measured over flat ground, and how their change since moved the ground (reinterpreted)
        self._added: tuple[float, float] | None = None
        self.reinterpreted: tuple[float, float] | None = None
        self.pitch_source = ""  # the last frame's: config, telemetry, fit or default
        self.terrain = terrain  # a terrain model of the site (pipelines.terrain), loaded by the builder
        self.priors = scale_priors(cfg)
        self.reference: HeightReference | None = reference_from_config(cfg)
        self.rangefinder = (
            # its height rests on the pitch against the road's plane: the gimbal's and the road's tilt
            Rangefinder(cfg.rangefinder, pitch_sigma_on_road(self.priors, "lrf"))
            if cfg.rangefinder.enabled
            else None
        )
        self._using: str | None = None  # whose scale the last frame used: own (the reference), terrain, lrf
        self.scale: ScaleInfo | None = None  # the scale of the last frame with a projector
        self._scale_model: ScaleModel | None = None
        self._profile: CameraProfile | None = None
        self._warned: set[str] = set()
        self._cache_key: tuple | None = None
        self._cache: GroundProjector | None = None
        self._optics: tuple[CameraProfile | None, tuple[LensModel | None, float]] | None = None
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
            log.log(logging.DEBUG if self.quiet else logging.WARNING, message, *args)

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

    def set_reference(self, reference: HeightReference | None) -> None:
        """Use ``reference`` (a measured base, a session's take-off height) from the next frame on;
        None: back to the configuration's."""
        before = self._pitch_bias()
        self.reference = reference if reference is not None else reference_from_config(self.cfg)
        self._traffic = None  # measured through the reference's pitch
        self._cache_key = None
        if self.rangefinder is not None and self._pitch_bias() != before:
            self.rangefinder.restart(
                "the gimbal's pitch bias changed (a measured base): laser readings taken again"
            )
        log.debug(  # the caller logs it with its context (the server: the session, who set it)
            "height reference: %s",
            self.reference.detail or self.reference.to_dict() if self.reference else "none",
        )

    @property
    def scale_model(self) -> ScaleModel | None:
        """The last frame's pitch sensitivity (:class:`ScaleModel`), built on first use."""
        if self._scale_model is None and self._cache is not None:
            p = self._cache
            self._scale_model = ScaleModel(p.intrinsics, p.altitude_m, p.pitch_deg)
        return self._scale_model

    def set_traffic_pitch(self, observed: tuple[float, float] | None) -> None:
        """The traffic's word on the pitch used (:meth:`pipelines.pitch_check.PitchCheck.observation`:
        its error and sigma, deg), weighed into every later frame's scale; None: none (yet)."""
        self._traffic = observed

    def _moved_by_traffic(self, height: float, pitch: float) -> tuple[float, float]:
        """The frame's (height, pitch) with the traffic's pitch weighed in
        (:func:`pipelines.height.with_pitch_observed`, setting :attr:`scale` and :attr:`traffic_shift`);
        as they were without one, for the vehicles' own scale, or where it would leave no height."""
        self.traffic_shift = (0.0, 0.0)
        scale = self.scale
        if self._traffic is None or scale is None or scale.source == "vehicles":
            return height, pitch
        moved = with_pitch_observed(scale, *self._traffic)
        if moved.height_m <= 1.0:
            return height, pitch
        self.scale = moved
        self.traffic_shift = (math.log(moved.height_m / scale.height_m), moved.pitch_deg - scale.pitch_deg)
        return moved.height_m, moved.pitch_deg

    def _reinterpret(self, added: tuple[float, float], height: float, flat: bool) -> None:
        """Keep what the sources add to the frame's altitude and pitch readings (not ``flat``: a terrain
        model's view, the vehicles' own scale, which starts its tracks again instead) and set
        :attr:`reinterpreted` where it changed since the last frame: (the ratio of the height now to
        the one the last frame's sources would give this reading, the pitch's change in deg). A
        reference taken or updated (the laser's, a base, a site value) or the traffic's pitch weighed
        in re-measures the ground, not the drone's flight: what was measured before is to be measured
        again (``SpeedEstimator.rescale``)."""
        before, self._added = self._added, (added if flat else None)
        if not flat or before is None or added == before:
            return
        dh, dp = added[0] - before[0], added[1] - before[1]
        if height - dh > 1.0:
            self.reinterpreted = (height / (height - dh), dp)

    def _pitch_bias(self) -> float:
        return self.reference.pitch_bias_deg if self.reference is not None else 0.0

    def _measured_pitch_sigma(self) -> float | None:
        """The pitch's sigma against the road a measured base found, where it knows the pitch better
        than the prior: the laser gives the height, the base the pitch (its bias is applied in :meth:`_pitch`)."""
        ref = self.reference
        prior = pitch_sigma_on_road(self.priors, "lrf")
        if ref is None or ref.pitch_sigma_deg is None or ref.pitch_sigma_deg >= prior:
            return None
        return ref.pitch_sigma_deg

    def _note_telemetry(self, tel: Telemetry | None) -> None:
        if tel is None:
            return
        if tel.altitude_m is not None:
            self._from_telemetry.add("altitude")
        if tel.gimbal_pitch_deg is not None:
            self._from_telemetry.add("pitch")
        if tel.focal_length_mm is not None or tel.focal_length_35mm is not None:
            self._from_telemetry.add("focal")

    def _pitch(self, tel: Telemetry | None) -> tuple[float | None, str]:
        """The frame's gimbal pitch (the override, the telemetry's or the logged default, plus a
        measured base's bias) and the assumption it rests on; None (``status`` says why) when it
        is lost or too shallow to measure."""
        cfg = self.cfg
        assumption = ""
        if cfg.pitch_deg is not None:
            pitch, self.pitch_source = cfg.pitch_deg, "config"
        elif tel is not None and tel.gimbal_pitch_deg is not None:
            pitch, self.pitch_source = tel.gimbal_pitch_deg, "telemetry"
        elif "pitch" in self._from_telemetry:
            self.status = GroundStatus(False, "no gimbal pitch in this frame's telemetry (lost or refused)")
            return None, ""
        elif (fit := self._fitted_pitch) is not None:
            pitch, self.pitch_source = fit.pitch_deg, "fit"
            assumption = f"pitch fitted from the vehicles: {fit.pitch_deg:.1f} +- {fit.sigma_deg:.1f} deg"
        else:
            self.pitch_source = "default"
            pitch = cfg.default_pitch_deg
            assumption = f"pitch assumed: {pitch:.1f} deg (none in telemetry, no --pitch)"
            self._warn_once(
                "default-pitch", "no gimbal pitch in telemetry or overrides: assuming %.1f deg", pitch
            )
        if self.reference is not None and self.reference.pitch_bias_deg:
            pitch += self.reference.pitch_bias_deg  # the gimbal's bias a measured base found
        if pitch > -MIN_DEPRESSION_DEG:
            self._warn_once(
                "shallow-pitch", "gimbal pitch %.1f deg is too close to the horizon: speeds disabled", pitch
            )
            self.status = GroundStatus(False, f"gimbal pitch {pitch:.1f} deg too shallow")
            return None, ""
        pitch = max(pitch, -90.0)
        return pitch, assumption

    def _scale_with(
        self, ref: HeightReference | None, reading: float, pitch: float, frame: Frame
    ) -> ScaleInfo:
        tel = frame.telemetry
        typed = self.cfg.altitude_m is not None or (tel is not None and tel.source == "operator")
        altitude, height_sigma, source = height_above_road(
            reading, frame.timestamp_s, ref, self.priors, source="operator" if typed else "flight"
        )
        pitch_sigma = ref.pitch_sigma_deg if ref is not None and ref.pitch_sigma_deg is not None else None
        cov = 0.0 if pitch_sigma is None else ref.height_pitch_corr * ref.sigma_m * pitch_sigma
        if pitch_sigma is None:
            pitch_sigma = pitch_sigma_on_road(self.priors, source)
        return ScaleInfo(
            source, altitude, height_sigma, pitch, pitch_sigma, reference=ref, height_pitch_cov=cov
        )

    def _choose_scale(
        self, reading: float, pitch: float, frame: Frame, terrain: HeightReference | None = None
    ) -> ScaleInfo:
        """The frame's scale: the reference's, the terrain model's or the laser's, whichever leaves
        the speed at the image's centre least uncertain; the one in use is kept unless another is
        better by a fifth (a change of reference makes a ticket's base unenforceable)."""
        options = {}
        if terrain is not None:
            options["terrain"] = self._scale_with(terrain, reading, pitch, frame)
        lrf_ref = (
            None
            if self.rangefinder is None
            else self.rangefinder.reference(frame.timestamp_s, self._measured_pitch_sigma())
        )
        if lrf_ref is not None:
            options["lrf"] = self._scale_with(lrf_ref, reading, pitch, frame)
        if self.reference is not None or not options:
            # the altitude over ground of unknown level never beats a source that knows the road's: its
            # sigma is a prior, relative to a height that is wrong by as much as the road's level (a road
            # 15 m above the take-off point at 30 m read 45 m "to 11 %", against the model's 30 m to 12 %)
            options["own"] = self._scale_with(self.reference, reading, pitch, frame)
        sigma = {name: centre_sigma_frac(scale) for name, scale in options.items()}
        best = min(sigma, key=sigma.__getitem__)
        current = self._using if self._using in options else None
        use = best if current is None or sigma[best] < 0.8 * sigma[current] else current
        if use != self._using and (self._using is not None or use != "own"):
            scale = options[use]
            log.info(
                "scale from %s: %.2f %% at the centre (was %s)",
                scale.reference.detail
                if scale.reference is not None and scale.reference.detail
                else scale.source,
                100 * sigma[use],
                ", ".join(f"{k} {100 * v:.2f} %" for k, v in sigma.items() if k != use) or "none other",
            )
        self._using = use
        return options[use]

    def _height_above_road(
        self, reading: float, pitch: float, frame: Frame, terrain: HeightReference | None = None
    ) -> float | None:
        """The camera's height above the road from the altitude ``reading`` and the height
        reference (:mod:`pipelines.height`; the laser rangefinder's where it is better), setting
        :attr:`scale`; None (``status`` says why) when it puts the camera under the road."""
        scale = self._choose_scale(reading, pitch, frame, terrain)
        if scale.height_m <= 1.0:
            self.status = GroundStatus(
                False,
                f"height above the road {scale.height_m:.1f} m: the height reference does not fit this flight",
            )
            return None
        self.scale = scale
        return scale.height_m

    def projector(self, frame: Frame, *, laser_spot: tuple | None = None) -> GroundProjector | None:
        """The frame's image->ground mapping, or None (with :attr:`status` saying why).
        ``laser_spot``: (the frame's road mask or None, the vehicles' boxes): the frame's laser range
        (pipelines.rangefinder) is weighed against them, through the frame's altitude reading and
        the pitch it is measured with, before its scale is chosen; None: not taken."""
        tel = frame.telemetry
        cfg = self.cfg
        self._note_telemetry(tel)
        self.scale, self.reinterpreted = None, None
        altitude = cfg.altitude_m if cfg.altitude_m is not None else (tel.altitude_m if tel else None)
        if altitude is None and "altitude" in self._from_telemetry:
            self.status = GroundStatus(False, "no altitude in this frame's telemetry (lost or refused)")
            return None
        vehicles = altitude is None and self.derive is not None
        if vehicles:
            altitude = self._derived.height_m if self._derived is not None else self.derive.derive_start_m
        elif altitude is None:
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

        pitch, assumption = self._pitch(tel)
        if pitch is None:
            return None
        reading, gimbal = altitude, pitch - self._pitch_bias()  # what the drone reads
        if laser_spot is not None and self.rangefinder is not None and not assumption and not vehicles:
            self.rangefinder.observe(frame, altitude, pitch, *laser_spot)

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

        terrain, view = (None, None) if vehicles else self._terrain(frame, altitude, pitch, assumption)
        if vehicles:
            assumption = self._vehicle_scale(altitude, pitch, assumption)
        elif (altitude := self._height_above_road(altitude, pitch, frame, terrain)) is None:
            return None
        if view is None:  # a terrain model's view is cast through the pitch before it: not moved
            altitude, pitch = self._moved_by_traffic(altitude, pitch)
        self._reinterpret((altitude - reading, pitch - gimbal), altitude, flat=not vehicles and view is None)
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
            lens, readout_ms = self.optics(profile)
            self._cache = GroundProjector.create(intr, altitude, pitch, lens, readout_ms / 1e3)
            self._cache_key = key
            self._scale_model = None
        self.status = GroundStatus(
            True,
            f"{profile.name}, altitude {altitude:.1f} m above the road ({self.scale.source if self.scale else '?'}), pitch {pitch:.1f} deg",
            assumption,
        )
        return self._cache if view is None else dataclasses.replace(self._cache, terrain=view)

    def _vehicle_scale(self, height: float, pitch: float, assumption: str) -> str:
        """The frame's scale from the vehicles (no altitude): the height their rulers gave, else the
        starting height measured at; returns the frame's assumption (no speed while it is not known)."""
        d = self._derived
        pitch_sigma = pitch_sigma_on_road(self.priors, "vehicles")
        if self.pitch_source == "fit" and self._fitted_pitch is not None:
            pitch_sigma = math.hypot(self._fitted_pitch.sigma_deg, self.priors.ground_tilt_sigma_deg)
        self.scale = ScaleInfo(
            "vehicles", height, height * (d.sigma_frac if d is not None else 1.0), pitch, pitch_sigma
        )
        if self.derived_known:
            return assumption
        known = "" if d is None else f" (now +-{100 * d.sigma_frac:.0f} % from {d.n} vehicles)"
        return (
            f"measuring the scale from the vehicles (no altitude): no speed until it is known to "
            f"{100 * self.derive.derive_max_sigma:.0f} %{known}" + (f"; {assumption}" if assumption else "")
        )

    def set_derived(self, height: DerivedHeight | None) -> bool:
        """The height the scale check's rulers give now (no altitude: the ``vehicles`` source; None:
        none yet), taken from the next frame on where it differs from the one in use by
        ``DERIVED_STEP``; once it is known to ``derive_max_sigma`` speeds are measured and a later
        None keeps the last. Returns True on the frame it first becomes known: the speeds measured
        at the starting height are to be let go."""
        if self.derive is None or height is None:
            return False
        now = self._derived
        if now is None or abs(math.log(height.height_m / now.height_m)) >= DERIVED_STEP:
            self._derived = height
        else:  # the same height: its sigma and count now
            self._derived = dataclasses.replace(height, height_m=now.height_m)
        if self.derived_known or height.sigma_frac > self.derive.derive_max_sigma:
            return False
        self._derived = height
        self.derived_known = True
        log.info(
            "scale from the vehicles: %.1f m above the road +- %.1f %% (%d vehicles, %s)",
            height.height_m,
            100 * height.sigma_frac,
            height.n,
            height.rulers,
        )
        return True

    @property
    def pitch_known(self) -> bool:
        """The last frame's pitch was given (configured, or in its telemetry), not assumed or fitted."""
        return self.pitch_source in ("config", "telemetry")

    def set_fitted_pitch(self, fit: PitchFit | None) -> bool:
        """The pitch the cars give where no pitch is known (:mod:`pipelines.pitch_fit`), used from the
        next frame on where it moves the pitch in use by more than ``FITTED_PITCH_STEP`` and half its
        sigma: the vehicles' height, which rests on it, is then measured again (no speed until it is
        known). Returns True then."""
        if fit is None or self.derive is None or self.pitch_known:
            return False
        now = self._fitted_pitch
        in_use = now.pitch_deg if now is not None else self.cfg.default_pitch_deg
        if abs(fit.pitch_deg - in_use) <= max(FITTED_PITCH_STEP, fit.sigma_deg / 2):
            self._fitted_pitch = dataclasses.replace(fit, pitch_deg=in_use)  # its sigma, its count now
            return False
        self._fitted_pitch = fit
        self._derived, self.derived_known = None, False
        log.info(
            "pitch fitted from the vehicles: %.1f +- %.1f deg (%d vehicles)",
            fit.pitch_deg,
            fit.sigma_deg,
            fit.n,
        )
        return True

    @property
    def derived(self) -> DerivedHeight | None:
        """The height the vehicles gave, in use (no altitude); None: none yet, or an altitude."""
        return self._derived

    @property
    def probing(self) -> bool:
        """The last frame was measured at a height the vehicles have not given yet: no speed."""
        return self.scale is not None and self.scale.source == "vehicles" and not self.derived_known

    def _terrain(
        self, frame: Frame, reading: float, pitch: float, assumption: str
    ) -> tuple[HeightReference | None, TerrainView | None]:
        """The terrain model's reference and view for this frame (None, None without one: why is
        logged once per reason). Not where the pitch is an assumption (the rays would be guessed)."""
        if self.terrain is None or assumption:
            return None, None
        ref, view, why = self.terrain.for_frame(frame.telemetry, reading, pitch, frame.timestamp_s)
        if ref is None:
            self._warn_once(f"terrain: {why}", "terrain model not used from frame %d: %s", frame.number, why)
        return ref, view

    def optics(self, profile: CameraProfile | None = None) -> tuple[LensModel | None, float]:
        """The video's lens (None: a pinhole) and the sensor's readout (ms; 0: a global shutter) the
        frames are measured with: the configuration's, else the camera profile's, else none. Resolved
        once per profile (the configuration is frozen), not at every frame's new projector."""
        profile = profile or self._profile
        if self._optics is None or self._optics[0] is not profile:
            self._optics = (profile, self._resolve_optics(profile))
        return self._optics[1]

    def _resolve_optics(self, profile: CameraProfile | None) -> tuple[LensModel | None, float]:
        lens = None
        if self.cfg.lens is not None:
            lens = self.cfg.lens.model()
        elif profile is not None and profile.distortion is not None:
            lens = LensModel(*profile.distortion, source=f"profile {profile.name}: {lens_note(profile)}")
        readout = self.cfg.readout_ms
        if readout is None:
            readout = profile.readout_ms if profile is not None and profile.readout_ms is not None else 0.0
        return (None if lens is None or lens.identity else lens), float(readout)

    def optics_summary(self) -> dict[str, object]:
        """What the frames' points were corrected for (summary.json, a live session's info)."""
        lens, readout_ms = self.optics()
        profile = self._profile
        return {
            "lens": None if lens is None else lens.describe(),
            "readout_ms": readout_ms,
            "profile_note": None if profile is None else lens_note(profile),
        }


def scale_priors(cfg: CameraConfig) -> ScalePriors:
    return ScalePriors(
        unknown_ground_sigma_m=cfg.unknown_ground_sigma_m,
        takeoff_above_road_sigma_m=cfg.takeoff_above_road_sigma_m,
        baro_sigma_m=cfg.baro_sigma_m,
        baro_drift_m_per_min=cfg.baro_drift_m_per_min,
        pitch_sigma_deg=cfg.pitch_sigma_deg,
        ground_tilt_sigma_deg=cfg.ground_tilt_sigma_deg,
    )


def reference_from_config(cfg: CameraConfig) -> HeightReference | None:
    """The configuration's height reference: a measured base's, else the site's take-off height
    above the road, else None (the road's level unknown)."""
    if cfg.height_reference is not None:
        return HeightReference(**cfg.height_reference.model_dump())
    if cfg.takeoff_above_road_m is not None:
        return HeightReference(
            source="site",
            takeoff_above_road_m=cfg.takeoff_above_road_m,
            sigma_m=cfg.takeoff_above_road_sigma_m,
            detail=f"take-off {cfg.takeoff_above_road_m:+.2f} m above the road (site value)",
        )
    return None
