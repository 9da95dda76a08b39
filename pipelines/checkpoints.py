"""Where a speeding vehicle is heading, for the stop team down the road (issue 41): its direction of
travel from its measured track, and the next named checkpoint ahead (``alerts.checkpoints`` in the
site YAML: lat/lon points) with the distance and the time it will take at the ticket speed.

Nothing is guessed: a bearing needs at least two of the track's trusted positions placed on the
earth (the drone's GPS and gimbal yaw in their frames' telemetry) a few metres apart, and a
checkpoint must lie within ``max_off_heading_deg`` of that bearing. Pure functions; imports the
engine's types and geometry only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pipelines.geometry import EARTH_RADIUS_M, geolocate
from pipelines.types import TrackPoint

MIN_TRAVEL_M = 3.0  # a bearing from less than this is noise
COMPASS = ("N", "NE", "E", "SE", "S", "SW", "W", "NW")


@dataclass(frozen=True, slots=True)
class Checkpoint:
    name: str
    latitude: float
    longitude: float


@dataclass(frozen=True, slots=True)
class Heading:
    """The vehicle's direction of travel (compass bearing, 0 north, 90 east) and the last position it
    was measured at (``t``: its stream time, s)."""

    bearing_deg: float
    latitude: float
    longitude: float
    t: float


@dataclass(frozen=True, slots=True)
class Arrival:
    """The next checkpoint ahead: how far (m, straight line) and in how many seconds at the speed."""

    name: str
    latitude: float
    longitude: float
    distance_m: float
    eta_s: float

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "latitude": self.latitude,
            "longitude": self.longitude,
            "distance_m": round(self.distance_m, 1),
            "eta_s": round(self.eta_s, 1),
        }


def offset_m(lat0: float, lon0: float, lat1: float, lon1: float) -> tuple[float, float]:
    """(east, north) metres from point 0 to point 1 (local flat earth: exact enough for kilometres)."""
    north = math.radians(lat1 - lat0) * EARTH_RADIUS_M
    east = math.radians(lon1 - lon0) * EARTH_RADIUS_M * math.cos(math.radians((lat0 + lat1) / 2))
    return east, north


def bearing_deg(lat0: float, lon0: float, lat1: float, lon1: float) -> float:
    east, north = offset_m(lat0, lon0, lat1, lon1)
    return math.degrees(math.atan2(east, north)) % 360.0


def compass(bearing: float) -> str:
    """``N``, ``NE``, ... for a bearing (for people: "northbound")."""
    return COMPASS[round((bearing % 360.0) / 45.0) % 8]


def _placed(p: TrackPoint) -> tuple[float, float] | None:
    tel = p.telemetry
    if not p.trusted or p.ground_xy_m is None or tel is None:
        return None
    if tel.latitude is None or tel.longitude is None or tel.gimbal_yaw_deg is None:
        return None
    return geolocate(tel.latitude, tel.longitude, tel.gimbal_yaw_deg, p.ground_xy_m)


def travel_heading(trace: Sequence[TrackPoint], window_s: float = 2.0) -> Heading | None:
    """The direction from the track's position ``window_s`` before its last placed one to that last
    one; None without two placed positions at least :data:`MIN_TRAVEL_M` apart."""
    placed = [(p.t, pos) for p in trace if (pos := _placed(p)) is not None]
    if len(placed) < 2:
        return None
    t_end, end = placed[-1]
    start = next((pos for t, pos in placed if t >= t_end - window_s), placed[0][1])
    east, north = offset_m(*start, *end)
    if math.hypot(east, north) < MIN_TRAVEL_M:
        start = placed[0][1]
        east, north = offset_m(*start, *end)
        if math.hypot(east, north) < MIN_TRAVEL_M:
            return None
    return Heading(math.degrees(math.atan2(east, north)) % 360.0, end[0], end[1], t_end)


def next_checkpoint(
    heading: Heading | None,
    speed_kmh: float | None,
    checkpoints: Sequence[Checkpoint],
    max_off_heading_deg: float = 60.0,
) -> Arrival | None:
    """The nearest checkpoint ahead (its bearing from the vehicle within ``max_off_heading_deg`` of
    the heading) and when the vehicle reaches it at ``speed_kmh``; None when the heading or a
    positive speed is missing or no checkpoint is ahead."""
    if heading is None or speed_kmh is None or not math.isfinite(speed_kmh) or speed_kmh <= 0:
        return None
    best: Arrival | None = None
    for cp in checkpoints:
        east, north = offset_m(heading.latitude, heading.longitude, cp.latitude, cp.longitude)
        distance = math.hypot(east, north)
        off = abs((math.degrees(math.atan2(east, north)) - heading.bearing_deg + 180.0) % 360.0 - 180.0)
        if off > max_off_heading_deg or (best is not None and distance >= best.distance_m):
            continue
        best = Arrival(cp.name, cp.latitude, cp.longitude, distance, distance / (speed_kmh / 3.6))
    return best


__all__ = [
    "Arrival",
    "Checkpoint",
    "Heading",
    "bearing_deg",
    "compass",
    "next_checkpoint",
    "offset_m",
    "travel_heading",
]
