"""Offline driver: a flight's frames with their telemetry, and where a fixed value is applied."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from pipelines.config import CameraConfig
from pipelines.ground import GroundModel
from pipelines.runner import fixed_telemetry_fields, load_frames


def _flight(tmp_path: Path, rel_alt: float, n: int = 3) -> tuple[Path, Path]:
    frames = tmp_path / "img1"
    frames.mkdir()
    for k in range(n):
        cv2.imwrite(str(frames / f"{k + 1:06d}.jpg"), np.full((90, 160, 3), 40 * k, np.uint8))
    srt = tmp_path / "flight.SRT"
    srt.write_text(
        "".join(
            f"{k + 1}\n00:00:00,{k * 100:03d} --> 00:00:00,{k * 100 + 100:03d}\n"
            f"[focal_len: 24.00] [latitude: 47.3769] [longitude: 8.5417] [rel_alt: {rel_alt} abs_alt: 460.1] "
            "[gb_yaw: 10.0 gb_pitch: -60.0]\n\n"
            for k in range(n)
        )
    )
    return frames, srt


@pytest.mark.parametrize(
    ("rel_alt", "fixed_altitude", "used"),
    [
        (80.0, None, 80.0),  # the log's height
        (80.0, 50.0, 50.0),  # --altitude wins, applied by the ground model only
        (90000.0, 50.0, 50.0),  # an absurd logged height is rescued, not checked
    ],
)
def test_a_fixed_value_is_applied_once_by_the_ground_model(tmp_path, rel_alt, fixed_altitude, used):
    video, srt = _flight(tmp_path, rel_alt)
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
