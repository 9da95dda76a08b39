"""eval.streams_processes: the streams benchmark with an engine process per stream around one
detector service (a server's engine_processes + engine_detector_service), on frames decoded once."""

from __future__ import annotations

import json

import pytest

from edge_client.synthetic import DEFAULT_CAMERA, BrightBlobDetector, SyntheticScene
from eval.streams_processes import run_streams_processes
from pipelines.config import PipelineConfig
from pipelines.streams_bench import format_streams
from pipelines.types import Frame, Telemetry


def _frames(n: int) -> list[Frame]:
    scene = SyntheticScene()
    tel = dict(altitude_m=50.0, gimbal_pitch_deg=-90.0, focal_length_35mm=24.0, camera=DEFAULT_CAMERA)
    return [Frame(i, i / 30, scene.render(i / 30), Telemetry(timestamp_s=i / 30, **tel)) for i in range(n)]


@pytest.mark.parametrize(("target_fps", "kept"), [(0.5, 2), (1e6, 0)])
def test_each_stream_runs_in_an_engine_process_around_one_detector_service(target_fps, kept) -> None:
    """Every frame of every engine goes to the one service (detector on every frame: frames x
    streams requests); each count's engines run at once; what limits the next count is named."""
    frames = _frames(12)
    config = PipelineConfig().with_overrides(road={"enabled": False})
    report = run_streams_processes(
        config, frames, [1, 2], target_fps=target_fps, detector_factory=BrightBlobDetector, threads=1
    )
    one, two = report["runs"]
    assert report["mode"] == "processes" and report["device"] == "cpu" and report["frames"] == 12
    assert [r["streams"] for r in report["runs"]] == [1, 2] and len(two["fps"]) == 2
    assert one["detector_frames"] == 12 and two["detector_frames"] == 2 * 12  # warm-up frames not counted
    assert (
        two["detector_runs"] <= two["detector_frames"]
        and sum(two["batch_sizes"].values()) == two["detector_runs"]
    )
    assert min(two["fps"]) > 0 and two["cores"] > 0
    assert report["streams_kept"] == kept
    if not kept:
        assert report["limit"].startswith(("the detector", "the CPU", "neither"))
    text = format_streams(report)
    assert "a process per stream around the detector service" in text
    json.dumps(report)
