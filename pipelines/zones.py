"""Where a vehicle is and what limit holds there: zone geometry and the pure helpers of the rules.

:func:`point_in_zone`, :func:`zone_for_point`, :func:`limit_for_point` (a zone's limit, else the
global one), :func:`is_speeding` (a per-frame candidate), :func:`vehicle_position` (latitude and
longitude of a vehicle from the drone's GPS and its ground offset), :func:`crop_with_margin`
(snapshots) and :func:`bottom_centre` (a box's ground contact). Imported by
:mod:`pipelines.rules`, which re-exports them; imports only the engine's config, geometry and types.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cv2
import numpy as np

from pipelines.config import RulesConfig, ZoneConfig
from pipelines.geometry import geolocate
from pipelines.types import Telemetry

GLOBAL_ZONE = "global"


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


def zone_of_box(cfg: RulesConfig, xyxy: Sequence[float]) -> str | None:
    """The name of the zone a box's bottom centre lies in (its limit's: :func:`limit_for_point`)."""
    zl = limit_for_point(cfg, bottom_centre(np.asarray(xyxy, dtype=np.float64).reshape(1, 4))[0])
    return None if zl is None else zl[0]


def is_speeding(speed_kmh: float, limit_kmh: float) -> bool:
    """True when a per-frame speed is above the limit (a candidate; the ticket is measured over a
    base, :mod:`pipelines.ticket`). Unknown speeds (NaN) never count."""
    return math.isfinite(speed_kmh) and speed_kmh > limit_kmh


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


__all__ = [
    "GLOBAL_ZONE",
    "bottom_centre",
    "crop_with_margin",
    "is_speeding",
    "limit_for_point",
    "point_in_zone",
    "vehicle_position",
    "zone_for_point",
]
