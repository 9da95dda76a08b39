"""What a violation tells the stop team (edge_server.violations.alert_fields, the API): its direction
of travel and the next checkpoint with its ETA, from the track's positions and the site's
checkpoints, stored with the violation and shown by the API and its events; nothing where GPS or
the gimbal yaw is missing."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest
from edge_helpers import violation_recorder

from edge_server.violations import alert_fields
from pipelines.config import AlertsConfig, CheckpointConfig
from pipelines.geometry import EARTH_RADIUS_M
from pipelines.types import Telemetry, TrackPoint, Violation

LAT, LON = 52.5200, 13.4050
pytestmark = pytest.mark.parallel_safe  # API, store and pure calls: no stream (tests/conftest.py)

T0 = dt.datetime(2026, 11, 28, 9, 0, tzinfo=dt.timezone.utc)


def north_of(metres: float) -> float:
    return LAT + math.degrees(metres / EARTH_RADIUS_M)


ALERTS = AlertsConfig(
    checkpoints=[CheckpointConfig(name="north gate", lat=north_of(600), lon=LON),
                 CheckpointConfig(name="south gate", lat=north_of(-900), lon=LON)]
)  # fmt: skip


def speeding(status: str = "enforceable", gps: bool = True, track_id: int = 1, t0: float = 10.0) -> Violation:
    """72 km/h (20 m/s) up a nadir image whose top is north: northbound, from 10 to 12 s."""
    trace = tuple(
        TrackPoint(
            t=t0 + k / 30, frame=300 + k, x_m=0.0, y_m=k * 20 / 30, segment=0, trusted=True, zone="global",
            bbox_xyxy=(300, 200 - k, 340, 220 - k), ground_xy_m=(0.0, -20 + k * 20 / 30), speed_kmh=72.0,
            sigma_kmh=0.8, gsd_m_per_px=0.03, in_base=True,
            telemetry=Telemetry(timestamp_s=t0 + k / 30, altitude_m=60.0, gimbal_pitch_deg=-90.0, gimbal_yaw_deg=0.0,
                                latitude=LAT if gps else None, longitude=LON if gps else None),
        )
        for k in range(61)
    )  # fmt: skip
    snapshot = np.zeros((40, 60, 3), np.uint8)
    snapshot[:] = (30, 30, 200)  # a red car (BGR)
    return Violation(
        track_id=track_id, zone="global", speed_limit_kmh=50.0, peak_speed_kmh=74.0, mean_speed_kmh=72.0,
        sigma_kmh=0.8, start_frame=300, end_frame=360, start_time_s=t0, end_time_s=t0 + 2, class_name="car",
        bbox_xyxy=(300.0, 140.0, 340.0, 160.0), snapshot=snapshot, ticket_speed_kmh=72.0, ticket_sigma_kmh=0.8,
        tolerance_kmh=3.0, confidence_k=1.645, status=status, trace=trace,
    )  # fmt: skip


def test_heading_and_checkpoint_from_the_track() -> None:
    fields = alert_fields(speeding(), T0, ALERTS)
    assert fields["heading_deg"] == pytest.approx(0.0, abs=0.5)
    cp = fields["next_checkpoint"]
    # the last position is 20 m north of the drone at t0 + 2 s: 580 m to go at 20 m/s
    assert cp["name"] == "north gate" and cp["distance_m"] == pytest.approx(580.0, abs=0.5)
    assert cp["eta_s"] == pytest.approx(29.0, abs=0.05)
    assert dt.datetime.fromisoformat(cp["at"]) == pytest.approx(
        T0 + dt.timedelta(seconds=31.0), abs=dt.timedelta(seconds=0.1)
    )


@pytest.mark.parametrize(
    ("violation", "alerts", "heading", "checkpoint"),
    [
        (speeding(gps=False), ALERTS, None, None),  # no GPS: no direction, no checkpoint
        (speeding(), AlertsConfig(), 0.0, None),  # no checkpoints in the site YAML
    ],
)
def test_nothing_is_guessed(violation, alerts, heading, checkpoint) -> None:
    fields = alert_fields(violation, T0, alerts)
    assert fields["heading_deg"] == (None if heading is None else pytest.approx(heading, abs=0.5))
    assert fields["next_checkpoint"] == checkpoint


def test_stored_and_shown_by_the_api(server) -> None:
    recorder = violation_recorder(server.app, server.settings, "alert-s")
    recorder.alerts = ALERTS
    row = recorder.record(speeding(), None, None, T0)
    with server.client() as c:
        shown = c.get(f"/api/v1/violations/{row.id}").json()
    assert shown["heading_deg"] == pytest.approx(0.0, abs=0.5)
    assert shown["next_checkpoint"]["name"] == "north gate" and shown["next_checkpoint"]["at"].startswith(
        "2026-11-28T09:00:31"
    )
