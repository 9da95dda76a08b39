"""The camera's height above the road from a terrain model: each viewing ray meets the terrain, not
a flat plane at the take-off level.

A drone's altitude reading counts from its take-off point; over a road that lies above or below that
point, or ground that rises across the view, every speed is off by the height difference over the
height (issue 39). Where the user supplies a terrain model of the site (a DEM GeoTIFF of bare
earth, :mod:`pipelines.terrain_io`), the camera's elevation is known from the drone's position and
either its absolute altitude (converted into the model's vertical datum) or its take-off point's
elevation on the model plus the barometric reading; each ray through the image then meets the
terrain where the terrain's elevation equals the ray's (:func:`ray_heights`, a fixed-point solve).

Two things come of it per frame (:class:`TerrainHeights`):

* a height reference (source ``terrain``): the camera's height above the terrain where the image's
  centre ray meets it, as the take-off point's height above the road (what every reference carries),
  with its sigma (the model's vertical accuracy and the absolute altitude's, or the model's at the
  take-off point and at the road with the barometer's since take-off);
* a :class:`TerrainView` that the frame's ground projector lifts every point through: a vehicle on
  ground 3 m above the centre's is measured at its own height (its ground offsets scale by its
  height over the centre's), so a road climbing across the view is measured as it lies.

Pure: numpy and the engine's types; the elevations come from a callable (the loaded model's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pipelines.geometry import offsets_to_latlon
from pipelines.types import HeightReference, Telemetry

# elevation(lat, lon) -> heights (m, in the camera elevation's datum); NaN off the model or on no data
Elevation = Callable[[np.ndarray, np.ndarray], np.ndarray]
# place(ground offsets (N, 2) from the point below the drone) -> the two coordinates elevation takes
Place = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
# local(lat, lon, heading) -> (place, elevation) for one frame: a model's fast path (its grid's
# coordinates straight from the ground offsets, pipelines.terrain_io.Dem.local)
Local = Callable[[float, float, float], tuple[Place, Elevation]]

MAX_ITERATIONS = 30
TOLERANCE_M = 0.005


def ray_heights(
    per_metre: np.ndarray,
    camera_elevation_m: float,
    place: Place,
    elevation: Elevation,
    start_m: float,
) -> np.ndarray:
    """(N,) the camera's height above the terrain where each ray meets it: a ray is given by its
    ground offset per metre of height below the camera ``per_metre`` (N, 2); ``place`` turns ground
    offsets (m) into the coordinates ``elevation`` takes (lat, lon, or a model's grid). Solved by fixed point (h = camera - terrain(h x per_metre)) from
    ``start_m``: it converges wherever the terrain along the ray is less steep than the ray (a road's
    grade under any ray steeper than 6 deg); NaN where it does not, or the ray leaves the model."""
    d = np.asarray(per_metre, dtype=np.float64).reshape(-1, 2)
    h = np.full(len(d), float(start_m))
    done = np.zeros(len(d), dtype=bool)
    for _ in range(MAX_ITERATIONS):
        todo = ~done & np.isfinite(h)
        if not todo.any():
            break
        lat, lon = place(d[todo] * h[todo, None])
        new = camera_elevation_m - np.asarray(elevation(lat, lon), dtype=np.float64)
        new[~(new > 0.5)] = np.nan  # the camera at or under the terrain there: no ray meets it
        step = np.abs(new - h[todo])
        h[todo] = new
        idx = np.flatnonzero(todo)
        done[idx[step < TOLERANCE_M]] = True
    h[~done] = np.nan
    return h


def latlon_place(lat_deg: float, lon_deg: float, heading_deg: float) -> Place:
    """``place`` of ground offsets from the point below a drone at ``lat_deg``, ``lon_deg`` whose camera
    looks along ``heading_deg``: their latitudes and longitudes."""
    return lambda xy: offsets_to_latlon(lat_deg, lon_deg, heading_deg, xy)


@dataclass(frozen=True, slots=True, eq=False)
class TerrainView:
    """One frame's terrain under the camera: the camera's elevation (in the model's datum), the height
    above the terrain at the image's centre that the flat projection is scaled against, and where
    ground offsets from the point below the drone lie on the model (``place``, into the coordinates
    ``elevation`` takes)."""

    camera_elevation_m: float
    centre_height_m: float
    place: Place
    elevation: Elevation

    def heights(self, flat_xy_m: np.ndarray, flat_height_m: float) -> np.ndarray:
        """(N,) the height above the terrain where the rays through ground points ``flat_xy_m`` of a
        flat projection at ``flat_height_m`` meet it (NaN: nowhere on the model)."""
        per_metre = np.asarray(flat_xy_m, dtype=np.float64).reshape(-1, 2) / flat_height_m
        return ray_heights(
            per_metre, self.camera_elevation_m, self.place, self.elevation, self.centre_height_m
        )

    def relief(self, lifted_xy_m: np.ndarray, flat_height_m: float) -> np.ndarray:
        """(N,) how far the ground at lifted points (:meth:`lift` of a projection at ``flat_height_m``)
        lies above the centre's ground, in that projection's frame (metres at its scale): where a
        vehicle standing there has its wheels. NaN off the model."""
        h = self.height_above(lifted_xy_m, flat_height_m)
        return flat_height_m * (1.0 - h / self.centre_height_m)

    def height_above(self, lifted_xy_m: np.ndarray, flat_height_m: float) -> np.ndarray:
        """(N,) the camera's height (m, the model's) above the ground at lifted points (:meth:`lift`
        of a projection at ``flat_height_m``); NaN off the model."""
        return self.camera_elevation_m - self._elevation_at(lifted_xy_m, flat_height_m)

    def _elevation_at(self, lifted_xy_m: np.ndarray, flat_height_m: float) -> np.ndarray:
        """(N,) the model's elevation at lifted points of a projection at ``flat_height_m``."""
        xy = np.asarray(lifted_xy_m, dtype=np.float64).reshape(-1, 2)
        scale = self.centre_height_m / flat_height_m  # the projection's metres -> the model's
        return np.asarray(self.elevation(*self.place(xy * scale)), float)

    def slope_factor(self, start_xy_m: np.ndarray, end_xy_m: np.ndarray, flat_height_m: float) -> np.ndarray:
        """(N,) the distance along the terrain per metre of horizontal run from each ground point
        ``start_xy_m`` (N, 2, lifted: :meth:`lift` of a projection at ``flat_height_m``) to ``end_xy_m``:
        sqrt(1 + (rise / run)^2), from the model's elevations at both ends (a step of a vehicle up an
        8 % grade is 0.32 % longer than its run); 1 where the run is nil or either end is off the model."""
        start = np.asarray(start_xy_m, dtype=np.float64).reshape(-1, 2)
        end = np.asarray(end_xy_m, dtype=np.float64).reshape(-1, 2)
        out = np.ones(len(start))
        run = np.hypot(*(end - start).T) * (self.centre_height_m / flat_height_m)  # the model's metres
        ok = np.isfinite(run) & (run > 1e-6)
        if ok.any():
            rise = self._elevation_at(end[ok], flat_height_m) - self._elevation_at(start[ok], flat_height_m)
            factor = np.sqrt(1.0 + (rise / run[ok]) ** 2)
            out[ok] = np.where(np.isfinite(factor), factor, 1.0)
        return out

    def lift(self, flat_xy_m: np.ndarray, flat_height_m: float) -> np.ndarray:
        """Ground points of a flat projection at ``flat_height_m`` moved to where their rays meet the
        terrain, in the same scale: each scaled by its height over the centre's (a point 10 % nearer
        the camera than the centre's ground is 10 % nearer below it). NaN rows stay NaN."""
        flat = np.asarray(flat_xy_m, dtype=np.float64).reshape(-1, 2)
        out = np.full_like(flat, np.nan)
        ok = np.isfinite(flat).all(axis=1)
        if ok.any():
            h = self.heights(flat[ok], flat_height_m)
            out[ok] = flat[ok] * (h / self.centre_height_m)[:, None]
        return out


@dataclass(frozen=True, slots=True)
class TerrainSettings:
    """How the camera's elevation is known (``pipelines.config.TerrainConfig``): ``takeoff`` (lat, lon)
    of the take-off point, whose model elevation plus the altitude reading is the camera's; None: the
    drone's absolute altitude, converted by ``to_model_datum(alt, lat, lon)``. Sigmas in metres."""

    name: str
    sigma_m: float
    altitude_sigma_m: float
    takeoff: tuple[float, float] | None = None
    detail: str = ""


class TerrainHeights:
    """Per frame, the terrain's height reference and view (None and why when the frame has none)."""

    def __init__(
        self,
        settings: TerrainSettings,
        elevation: Elevation,
        to_model_datum: Callable[[float, float, float], float] | None = None,
        local: Local | None = None,
    ):
        self.settings = settings
        self.elevation = elevation
        self.local = local
        self.to_model_datum = to_model_datum
        self._takeoff_elevation: float | None = None
        if settings.takeoff is not None:
            lat, lon = settings.takeoff
            value = float(np.asarray(elevation(np.array([lat]), np.array([lon])))[0])
            if not math.isfinite(value):
                raise ValueError(f"the take-off point {lat:.6f}, {lon:.6f} is not on the terrain model")
            self._takeoff_elevation = value

    def camera_elevation(self, tel: Telemetry, reading_m: float) -> tuple[float | None, str]:
        """The camera's elevation in the model's datum, or None and why."""
        if self._takeoff_elevation is not None:
            return self._takeoff_elevation + reading_m, ""
        if tel.abs_altitude_m is None:
            return None, "no absolute altitude in the telemetry (give the take-off point instead)"
        alt = float(tel.abs_altitude_m)
        if self.to_model_datum is not None:
            alt = self.to_model_datum(alt, float(tel.latitude), float(tel.longitude))
        return alt, ""

    def sigma_m(self) -> float:
        """The reference's sigma (m): the model's at the road and the absolute altitude's; from the
        take-off point, the model's at both points (the barometer's is added by the reference's
        time, :func:`pipelines.height.height_above_road`)."""
        s = self.settings
        if self._takeoff_elevation is not None:
            return math.sqrt(2.0) * s.sigma_m
        return math.hypot(s.sigma_m, s.altitude_sigma_m)

    def for_frame(
        self, tel: Telemetry | None, reading_m: float, pitch_deg: float, time_s: float
    ) -> tuple[HeightReference | None, TerrainView | None, str]:
        """(reference, view, why not) for a frame with the altitude reading ``reading_m`` (above take-off)
        and the gimbal pitch ``pitch_deg`` it is measured with."""
        if tel is None or tel.latitude is None or tel.longitude is None:
            return None, None, "no GPS position in the telemetry"
        if tel.gimbal_yaw_deg is None and pitch_deg > -89.5:
            return None, None, "no gimbal yaw in the telemetry: the oblique view's direction is unknown"
        camera, why = self.camera_elevation(tel, reading_m)
        if camera is None:
            return None, None, why
        depression = math.radians(max(1.0, min(90.0, -pitch_deg)))
        per_metre = np.array([[0.0, math.cos(depression) / math.sin(depression)]])
        heading = float(tel.gimbal_yaw_deg or 0.0)
        lat, lon = float(tel.latitude), float(tel.longitude)
        if self.local is not None:
            place, elevation = self.local(lat, lon, heading)
        else:
            place, elevation = latlon_place(lat, lon, heading), self.elevation
        start = max(reading_m, 1.0)
        centre = float(ray_heights(per_metre, camera, place, elevation, start)[0])
        if not math.isfinite(centre):
            return None, None, "the view's centre is not on the terrain model (or the camera is not above it)"
        s = self.settings
        reference = HeightReference(
            source="terrain",
            takeoff_above_road_m=centre - reading_m,
            sigma_m=self.sigma_m(),
            at_time_s=None if self._takeoff_elevation is not None else time_s,
            set_by="terrain model",
            detail=s.detail or s.name,
        )
        view = TerrainView(camera, centre, place, elevation)
        return reference, view, ""


__all__ = [
    "Elevation",
    "TerrainHeights",
    "TerrainSettings",
    "TerrainView",
    "latlon_place",
    "offsets_to_latlon",
    "ray_heights",
]
