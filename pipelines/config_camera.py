"""The camera's configuration sections (pydantic: config is an edge of the engine): the profile
and overrides, the height above the road (a site value, a measured base, the laser rangefinder, a
terrain model), the lens and the shutter. Re-exported by :mod:`pipelines.config`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from pipelines.lens import LensModel


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HeightReferenceConfig(_Section):
    """A measured base's solution (``airpatrol calibrate`` prints it): pipelines.height.HeightReference."""

    source: Literal["measured_base", "site"] = "measured_base"
    takeoff_above_road_m: float = Field(ge=-500, le=500)
    sigma_m: float = Field(gt=0, le=100)
    pitch_bias_deg: float = Field(0.0, ge=-15, le=15)
    pitch_sigma_deg: float | None = Field(None, ge=0, le=15)
    height_pitch_corr: float = Field(0.0, ge=-1, le=1)
    at_time_s: float | None = None
    set_by: str = ""
    set_at: str = ""
    detail: str = ""
    provisional: Literal[False] = False  # only the laser's first readings are (HeightReference.to_dict)


class RangefinderConfig(_Section):
    """The laser rangefinder of DJI enterprise payloads (H20/H30/M30 series; pipelines.rangefinder):
    the slant range to the image's centre gives the camera's height above the road there. The
    defaults are DJI's stated accuracy for the H20 and H30, +-(0.2 m + 0.15 % of the range)."""

    enabled: bool = True
    sigma_m: float = Field(0.2, gt=0, le=10)
    sigma_frac: float = Field(0.0015, ge=0, le=0.1)
    # readings pooled into one reference (newest first), at least min_readings; the reference is
    # dropped (the other sources again) when no reading has come for max_age_s. provisional: the
    # readings before min_readings (agreeing) make a provisional reference, its sigma widened by the
    # barometer's scatter between readings, that speeds use but no ticket rests on (the OSD's 0.5 Hz
    # takes min_readings 3 four seconds or more: a short pass would otherwise have no laser at all)
    window_s: float = Field(60.0, gt=0, le=3600)
    min_readings: int = Field(3, ge=1, le=1000)
    provisional: bool = True
    max_age_s: float = Field(20.0, gt=0, le=3600)
    # the laser's point: a disc of this share of the frame's width around the centre, which must lie
    # on the road mask (road_share of it) and under no vehicle's box
    spot_frac: float = Field(0.01, gt=0, le=0.2)
    road_share: float = Field(0.9, gt=0, le=1)


class LensConfig(_Section):
    """The video's lens distortion (pipelines.lens): OpenCV's coefficients in the frame's normalised
    coordinates, or DJI's ``drone-dji:DewarpData`` of a still from the same camera (its
    coefficients; a video that is a scaled crop of the full sensor width shares them)."""

    k1: float = Field(0.0, ge=-5, le=5)
    k2: float = Field(0.0, ge=-5, le=5)
    p1: float = Field(0.0, ge=-5, le=5)
    p2: float = Field(0.0, ge=-5, le=5)
    k3: float = Field(0.0, ge=-5, le=5)
    dewarp_data: str | None = None
    source: str = ""  # where the figures come from (shown with every speed's scale)

    @model_validator(mode="after")
    def _one_source(self) -> LensConfig:
        if self.dewarp_data is not None:
            if any((self.k1, self.k2, self.p1, self.p2, self.k3)):
                raise ValueError("give the coefficients (k1..k3, p1, p2) or dewarp_data, not both")
            from pipelines.lens import LensError, lens_from_dewarp_data

            try:
                lens_from_dewarp_data(self.dewarp_data)
            except LensError as exc:
                raise ValueError(str(exc)) from None
        return self

    def model(self) -> LensModel:
        from pipelines.lens import LensModel, lens_from_dewarp_data

        if self.dewarp_data is not None:
            return lens_from_dewarp_data(self.dewarp_data, self.source or "DJI DewarpData (configuration)")
        return LensModel(self.k1, self.k2, self.p1, self.p2, self.k3, self.source or "configuration")


class TerrainConfig(_Section):
    """A terrain model of the site (pipelines.terrain): a DEM GeoTIFF of bare earth (a DTM: a surface
    model's roofs and trees are not the road), which each viewing ray meets. The camera's elevation
    comes from the take-off point's elevation on the model plus the altitude reading (``takeoff``:
    its latitude, longitude), else from the drone's absolute altitude in ``altitude_datum`` (DJI's
    SRT ``abs_alt``: above mean sea level, EGM96; Cloud API OSD ``height``: the ellipsoid's)."""

    dem: Path
    # the model's vertical datum: its CRS's (a compound CRS with EGM96 / EGM2008 height, or a 3D
    # geographic one: the ellipsoid), else stated here
    dem_datum: Literal["crs", "egm96", "egm2008", "ellipsoid"] = "crs"
    altitude_datum: Literal["egm96", "egm2008", "ellipsoid"] = "egm96"
    takeoff: tuple[float, float] | None = None
    # one sigma: the model's vertical accuracy at the road (Copernicus GLO-30 about 2 m, airborne
    # lidar 0.1-0.2 m) and the drone's absolute altitude (GNSS about 3 m; RTK 0.1 m)
    sigma_m: float = Field(2.0, gt=0, le=50)
    altitude_sigma_m: float = Field(3.0, gt=0, le=50)
    # the model smoothed by a Gaussian of this sigma (m) before use: a model's cell-to-cell noise is
    # not relief, and a vehicle crossing it would read its slope as motion; None: one cell; 0: none
    smooth_m: float | None = Field(None, ge=0, le=500)

    @field_validator("takeoff")
    @classmethod
    def _on_earth(cls, v: tuple[float, float] | None) -> tuple[float, float] | None:
        if v is not None and not (-90 <= v[0] <= 90 and -180 <= v[1] <= 180):
            raise ValueError(f"take-off point {v}: latitude, longitude in degrees")
        return v


class CameraConfig(_Section):
    name: str | None = None  # camera profile name (see pipelines.camera); telemetry may give it
    altitude_m: float | None = Field(None, gt=0.5, le=1500)  # overrides telemetry (metres above ground)
    pitch_deg: float | None = Field(None, ge=-90, le=0)  # overrides telemetry; -90 = nadir
    focal_length_mm: float | None = Field(None, gt=0, le=1000)  # real focal length override
    default_pitch_deg: float = Field(
        -90.0, ge=-90, le=0
    )  # used (and logged) when neither telemetry nor override has one
    # The camera's height above the road (pipelines.height): the drone's altitude is above its
    # take-off point. takeoff_above_road_m: that point's height above the road for this site or
    # session (+ above the road, - below it; 0: the pilot took off on the road), known to
    # takeoff_above_road_sigma_m; height_reference: a measured base's (airpatrol calibrate, the
    # console) instead. Neither: the road's level is unknown, unknown_ground_sigma_m.
    takeoff_above_road_m: float | None = Field(None, ge=-500, le=500)
    takeoff_above_road_sigma_m: float = Field(0.5, gt=0, le=100)
    height_reference: HeightReferenceConfig | None = None
    unknown_ground_sigma_m: float = Field(5.0, gt=0, le=100)
    # the barometer's error since take-off, and its drift after a measured base (m per minute)
    baro_sigma_m: float = Field(1.0, ge=0, le=50)
    baro_drift_m_per_min: float = Field(0.06, ge=0, le=10)
    # the gimbal's reported pitch (one sigma, degrees); a base with lines in two directions measures it
    pitch_sigma_deg: float = Field(1.0, ge=0, le=15)
    # the road's unknown tilt against the horizontal (one sigma, degrees; 1 deg is a 1.75 % grade): to
    # the camera a grade along the view is a pitch error (issue 39's graded flights), added to the
    # gimbal's for every source that does not know the road's plane (the altitude, a site value, the
    # laser); a base that solved the pitch measured it against the road, a terrain model lifts every
    # point onto it. 0: the site's roads are level
    ground_tilt_sigma_deg: float = Field(1.0, ge=0, le=15)
    rangefinder: RangefinderConfig = RangefinderConfig()
    # the video's lens and the sensor's rolling-shutter readout (pipelines.lens); None: the camera
    # profile's, where it has them (pipelines.camera), else not corrected
    lens: LensConfig | None = None
    readout_ms: float | None = Field(None, ge=0, le=100)
    terrain: TerrainConfig | None = None  # a terrain model of the site (pipelines.terrain)

    @field_validator("name")
    @classmethod
    def _known_camera(cls, v: str | None) -> str | None:
        if v is not None:
            from pipelines.camera import get_profile  # raises with the list of known profiles

            get_profile(v)
        return v
