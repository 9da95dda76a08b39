"""Offline driver: a flight's frames with their telemetry, and where a fixed value is applied."""

from __future__ import annotations

import pytest
from flight_helpers import srt_flight

from pipelines.config import CameraConfig
from pipelines.ground import GroundModel
from pipelines.runner import fixed_telemetry_fields, load_frames


@pytest.mark.parametrize(
    ("rel_alt", "fixed_altitude", "used"),
    [
        (80.0, None, 80.0),  # the log's height
        (80.0, 50.0, 50.0),  # --altitude wins, applied by the ground model only
        (90000.0, 50.0, 50.0),  # an absurd logged height is rescued, not checked
    ],
)
def test_a_fixed_value_is_applied_once_by_the_ground_model(tmp_path, rel_alt, fixed_altitude, used):
    video, srt = srt_flight(tmp_path, rel_alt)
    camera = CameraConfig(name="mavic 3", altitude_m=fixed_altitude)
    source, frames, track = load_frames(video, srt, camera="mavic 3", fixed=camera, fps=10.0)
    ground = GroundModel(camera)
    with source:
        for frame in frames:
            assert frame.telemetry.altitude_m == rel_alt  # frames carry the telemetry as logged
            assert ground.projector(frame) is not None
            assert f"altitude {used:.1f} m" in ground.status.reason


@pytest.mark.parametrize(
    ("camera", "fields"),
    [
        (None, set()),
        (CameraConfig(), set()),
        (CameraConfig(altitude_m=50.0, pitch_deg=-60.0), {"altitude_m", "gimbal_pitch_deg"}),
        (CameraConfig(focal_length_mm=12.3), {"focal_length_mm", "focal_length_35mm"}),
    ],
)
def test_fixed_telemetry_fields(camera, fields):
    assert fixed_telemetry_fields(camera) == fields
