"""The synthetic scene's SRT sidecar reads back as the telemetry the scene was drawn for."""

from __future__ import annotations

import pytest

from edge_client import synthetic
from pipelines.telemetry import load_telemetry


def test_write_srt_reads_back_with_the_scene_telemetry(tmp_path) -> None:
    path = synthetic.write_srt(tmp_path / "DJI_0001.SRT", seconds=2.0, fps=25, lat=48.1234567, lon=11.5)
    assert path == tmp_path / "DJI_0001.SRT"
    samples = list(load_telemetry(path, camera=synthetic.DEFAULT_CAMERA).samples)
    assert len(samples) == 50
    assert [s.timestamp_s for s in samples[:3]] == [0.0, 0.04, 0.08]
    for s in samples:
        assert s.altitude_m == synthetic.DEFAULT_ALTITUDE_M and s.abs_altitude_m == 70.0
        assert s.gimbal_pitch_deg == synthetic.DEFAULT_PITCH_DEG and s.gimbal_yaw_deg == 0.0
        assert s.focal_length_35mm == synthetic.DEFAULT_FOCAL_35MM and s.focal_length_mm is not None
        assert s.longitude == 11.5
    # 6 decimals, as a DJI drone writes them; the drone drifts north 1e-7 deg a frame
    assert samples[0].latitude == 48.123457 and samples[-1].latitude == pytest.approx(48.123462, abs=1e-9)
