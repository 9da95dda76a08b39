"""The stop team's direction of travel and next checkpoint (pipelines.checkpoints): bearings on the
compass, a heading from a track's positions placed by GPS and gimbal yaw (none without them), and
the nearest checkpoint ahead with its ETA at the ticket speed."""

from __future__ import annotations

import math

import pytest

from pipelines.checkpoints import (
    Checkpoint,
    Heading,
    bearing_deg,
    compass,
    next_checkpoint,
    offset_m,
    travel_heading,
)
from pipelines.geometry import EARTH_RADIUS_M
from pipelines.types import Telemetry, TrackPoint

LAT, LON = 52.5200, 13.4050
M_PER_DEG_LAT = math.radians(1) * EARTH_RADIUS_M


def moved(east_m: float, north_m: float) -> tuple[float, float]:
    return (
        LAT + north_m / M_PER_DEG_LAT,
        LON + east_m / (M_PER_DEG_LAT * math.cos(math.radians(LAT))),
    )


def point(
    t: float,
    ground: tuple[float, float] | None,
    yaw: float | None = 0.0,
    gps: bool = True,
    trusted: bool = True,
) -> TrackPoint:
    tel = Telemetry(
        timestamp_s=t, altitude_m=60.0, gimbal_pitch_deg=-90.0, gimbal_yaw_deg=yaw,
        latitude=LAT if gps else None, longitude=LON if gps else None,
    )  # fmt: skip
    return TrackPoint(
        t=t, frame=int(t * 30) + 1, x_m=0.0, y_m=0.0, segment=0, trusted=trusted, zone=None,
        bbox_xyxy=(0, 0, 1, 1), ground_xy_m=ground, speed_kmh=60.0, sigma_kmh=1.0, gsd_m_per_px=0.02,
        in_base=True, telemetry=tel,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("east", "north", "bearing", "name"),
    [
        (0, 100, 0, "N"),
        (100, 0, 90, "E"),
        (0, -100, 180, "S"),
        (-100, 0, 270, "W"),
        (70, 70, 45, "NE"),
        (-70, -70, 225, "SW"),
    ],
)
def test_bearings_on_the_compass(east, north, bearing, name) -> None:
    lat, lon = moved(east, north)
    assert bearing_deg(LAT, LON, lat, lon) == pytest.approx(bearing, abs=0.01)
    assert compass(bearing) == name
    e, n = offset_m(LAT, LON, lat, lon)
    assert (e, n) == (pytest.approx(east, abs=0.01), pytest.approx(north, abs=0.01))


@pytest.mark.parametrize(
    ("yaw", "dx", "dy", "expected"),
    [
        (0.0, 0.0, 1.0, 0.0),  # camera looks north, the car moves up the image: north
        (90.0, 0.0, 1.0, 90.0),  # camera looks east: the same motion is eastbound
        (0.0, 1.0, 0.0, 90.0),  # camera north, the car moves to the image's right: east
        (180.0, 1.0, 0.0, 270.0),  # camera south, moving right: west
    ],
)
def test_heading_from_the_track(yaw, dx, dy, expected) -> None:
    trace = [point(k * 0.1, (dx * k * 1.5, dy * k * 1.5), yaw) for k in range(20)]
    heading = travel_heading(trace)
    assert heading is not None and heading.bearing_deg == pytest.approx(expected, abs=0.5)
    assert heading.t == pytest.approx(1.9)
    assert (heading.latitude, heading.longitude) != (LAT, LON)


@pytest.mark.parametrize(
    "trace",
    [
        [],
        [point(0, (0, 0))],
        [point(k * 0.1, (0, k * 1.5), yaw=None) for k in range(10)],  # no gimbal yaw
        [point(k * 0.1, (0, k * 1.5), gps=False) for k in range(10)],  # no GPS
        [point(k * 0.1, None) for k in range(10)],  # no ground position
        [point(k * 0.1, (0, k * 1.5), trusted=False) for k in range(10)],  # untrusted positions
        [point(k * 0.1, (0, k * 0.1)) for k in range(10)],  # 0.9 m: standing still
    ],
)
def test_no_heading_without_placed_motion(trace) -> None:
    assert travel_heading(trace) is None


CHECKPOINTS = [
    Checkpoint("north gate", *moved(0, 600)),
    Checkpoint("far north", *moved(0, 1500)),
    Checkpoint("east junction", *moved(400, 100)),
    Checkpoint("behind", *moved(0, -200)),
]


@pytest.mark.parametrize(
    ("bearing", "speed", "name", "distance", "eta"),
    [
        (0.0, 72.0, "north gate", 600.0, 30.0),  # 72 km/h = 20 m/s
        (10.0, 36.0, "north gate", 600.0, 60.0),
        (80.0, 72.0, "east junction", math.hypot(400, 100), math.hypot(400, 100) / 20),
        (180.0, 72.0, "behind", 200.0, 10.0),
        (270.0, 72.0, None, None, None),  # nothing to the west
    ],
)
def test_next_checkpoint_ahead(bearing, speed, name, distance, eta) -> None:
    arrival = next_checkpoint(Heading(bearing, LAT, LON, 0.0), speed, CHECKPOINTS)
    if name is None:
        assert arrival is None
        return
    assert arrival.name == name
    assert arrival.distance_m == pytest.approx(distance, rel=1e-4)
    assert arrival.eta_s == pytest.approx(eta, rel=1e-4)
    assert arrival.to_dict()["distance_m"] == round(arrival.distance_m, 1)


@pytest.mark.parametrize("speed", [None, 0.0, -5.0, math.nan])
def test_no_eta_without_a_speed(speed) -> None:
    assert next_checkpoint(Heading(0.0, LAT, LON, 0.0), speed, CHECKPOINTS) is None


def test_no_eta_without_a_heading_or_checkpoints() -> None:
    assert next_checkpoint(None, 72.0, CHECKPOINTS) is None
    assert next_checkpoint(Heading(0.0, LAT, LON, 0.0), 72.0, []) is None


def test_the_cone_ahead_is_configurable() -> None:
    heading = Heading(20.0, LAT, LON, 0.0)  # the north gate is 20 degrees off, the junction 56
    assert next_checkpoint(heading, 72.0, CHECKPOINTS, max_off_heading_deg=30.0).name == "north gate"
    assert (
        next_checkpoint(heading, 72.0, CHECKPOINTS, max_off_heading_deg=60.0).name == "east junction"
    )  # nearer
    assert next_checkpoint(heading, 72.0, CHECKPOINTS, max_off_heading_deg=10.0) is None
