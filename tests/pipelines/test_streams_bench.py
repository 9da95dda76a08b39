"""pipelines.streams_bench (``airpatrol bench --streams``): N pipelines at once around one batched
detector, on frames decoded once: how many keep the frame rate, and what holds the next count back."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from edge_client.synthetic import DEFAULT_CAMERA, BrightBlobDetector, SyntheticScene
from pipelines.config import PipelineConfig
from pipelines.streams_bench import (
    PROCESSES,
    SERIAL,
    THREADS,
    _limit,
    format_streams,
    gave_up,
    report_of,
    run_streams,
    stage_line,
)
from pipelines.types import Frame, Telemetry

CONFIG = PipelineConfig().with_overrides(road={"enabled": False}, keyframes={"enabled": True})


class _BlobModel:
    """A loaded network's interface over the scene's bright-blob detector, a little slow per run."""

    weights = Path("blobs")
    imgsz = 640
    device = "cpu"

    def __init__(self) -> None:
        self.inner = BrightBlobDetector()

    def detect_at(self, frame: Frame, imgsz: int):
        time.sleep(0.004)
        return self.inner(frame.image)

    def detect_many(self, images, imgsz):
        time.sleep(0.004)
        return [self.inner(im) for im in images]


def _frames(n: int) -> list[Frame]:
    scene = SyntheticScene()
    tel = dict(altitude_m=50.0, gimbal_pitch_deg=-90.0, focal_length_35mm=24.0, camera=DEFAULT_CAMERA)
    return [Frame(i, i / 30, scene.render(i / 30), Telemetry(timestamp_s=i / 30, **tel)) for i in range(n)]


@pytest.mark.parametrize(("target_fps", "kept"), [(1.0, 3), (1e6, 0)])
def test_every_count_runs_its_streams_at_once_around_one_detector(target_fps: float, kept: int) -> None:
    frames = _frames(30)
    report = run_streams(CONFIG, frames, [1, 3], target_fps=target_fps, model=_BlobModel())
    one, three = report["runs"]
    assert [r["streams"] for r in report["runs"]] == [1, 3] and len(three["fps"]) == 3
    assert one["detector_frames"] >= 10 and three["detector_frames"] >= 3 * 10  # keyframes of every stream
    assert three["detector_frames"] == 3 * one["detector_frames"]  # the same frames, the same work each
    assert one["mean_batch"] == 1.0 and three["detector_runs"] <= three["detector_frames"]
    assert report["streams_kept"] == kept and report["device"] == "cpu" and report["max_batch"] == 4
    assert report["size"] == [frames[0].image.shape[1], frames[0].image.shape[0]]
    if kept:
        assert report["limit"] is None
    else:
        assert report["limit"].startswith(("the detector", "the CPU", "neither"))
    text = format_streams(report)
    assert f"streams kept at {target_fps:g} fps: {kept}" in text
    json.dumps(report)


@pytest.mark.parametrize(
    ("run", "mode", "said"),
    [
        (
            {"detector_busy": 0.95, "mean_batch": 3.5, "cores": 1.0},
            THREADS,
            "the detector: busy 95 % of the time (mean batch 3.5)",
        ),
        ({"detector_busy": 0.5, "mean_batch": 1.0, "cores": 99.0}, PROCESSES, "the CPU: 99.0 of"),
        (
            {"detector_busy": 0.5, "mean_batch": 1.0, "cores": 0.1},
            THREADS,
            "the interpreter lock the streams share",
        ),
        (
            {"detector_busy": 0.5, "mean_batch": 1.0, "cores": 0.1},
            PROCESSES,
            "a frame waits for its detector answer",
        ),
    ],
)
def test_what_limits_a_count_is_named(run, mode, said) -> None:
    assert said in _limit(run, SERIAL[mode])


def test_the_command_reports_streams_of_a_video(tmp_path, capsys) -> None:
    """``airpatrol bench VIDEO --streams 1 2`` with the shipped models."""
    import cv2

    from airpatrol.cli import main

    video = tmp_path / "v.mp4"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 30.0, (320, 180))
    for frame in _frames(12):
        writer.write(cv2.resize(frame.image, (320, 180)))
    writer.release()
    out = tmp_path / "streams.json"
    code = main(["bench", str(video), "--streams", "1", "2", "--max-frames", "12", "--altitude", "50", "--pitch", "-90",
                 "--camera", "mavic 3", "--target-fps", "0.5", "--json", str(out), "-q"])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0
    report = json.loads(out.read_text())
    assert [r["streams"] for r in report["runs"]] == [1, 2] and report["frames"] == 12
    assert report["device"] == "cpu" and "cores" in report["machine"]
    assert "12 frames of 320x180 decoded once" in text and "streams kept at 0.5 fps: 2" in text
    assert np.all(np.asarray(report["runs"][1]["fps"]) > 0)


GPU_THREADS = [(False, 20.5), (False, 29.7), (False, 30.7), (False, 28.1)]  # the H200 box's, threads


@pytest.mark.parametrize(
    ("counts", "give_up_after", "gave"),
    [
        ([(True, 30.0), (False, 40.0)], 2, False),  # one miss: the next count may still tell
        ([(True, 30.0), (False, 31.0), (False, 32.0)], 2, True),  # two misses, no frames added
        ([(True, 30.0), (False, 40.0), (False, 41.0)], 2, False),  # the first miss still added frames
        ([(False, 21.0), (True, 30.0), (False, 31.0)], 2, False),  # not in a row
        ([(False, 20.0), (False, 30.0), (False, 31.0)], 1, True),
        ([(False, 20.0), (False, 30.0)], 1, False),  # one stream too slow, two add frames: go on
        ([(False, 10.0)], 1, False),  # a first count has nothing to add to
        ([(False, 20.0), (False, 20.0), (False, 20.0)], None, False),  # never give up
        (GPU_THREADS[:3], 2, False),
        (GPU_THREADS, 2, True),  # 4 and 8 threads added nothing: 16 would not either
    ],
)
def test_gave_up_after_misses_that_add_no_frames(
    counts: list[tuple[bool, float]], give_up_after: int | None, gave: bool
) -> None:
    runs = [{"kept_target": k, "fps_total": fps} for k, fps in counts]
    assert gave_up(runs, give_up_after) is gave


def test_larger_counts_are_left_out_once_given_up(monkeypatch) -> None:
    monkeypatch.setattr("pipelines.streams_bench.GROWTH", 1e9)  # no count adds enough: the misses decide
    report = run_streams(
        CONFIG, _frames(12), [1, 2, 3, 4], target_fps=1e6, model=_BlobModel(), give_up_after=2
    )
    assert [r["streams"] for r in report["runs"]] == [1, 2, 3] and report[
        "streams_kept"
    ] == 0  # 2 and 3 missed


def _row(streams: int, kept: bool, busy: float, cores: float) -> dict:
    return {
        "streams": streams,
        "fps_min": 40.0 if kept else 10.0,
        "fps_total": 40.0 * streams if kept else 10.0 * streams,
        "cores": cores,
        "detector_busy": busy,
        "mean_batch": 1.0,
        "detector_run_ms": 10.0,
        "detector_queue_ms": 1.0,
        "kept_target": kept,
        "stages_ms": {"flow": 12.5, "speed": 3.25, "total": 20.0},
    }


def test_the_report_says_what_bounds_the_largest_count_too() -> None:
    frames = _frames(1)
    cpus = len(__import__("os").sched_getaffinity(0))
    runs = [_row(1, True, 0.1, 0.5), _row(2, False, 0.2, 1.0), _row(8, False, 0.3, float(cpus))]
    report = report_of(runs, frames, device="cuda:0", target_fps=30.0, max_batch=8, mode=PROCESSES)
    assert report["streams_kept"] == 1 and report["limit"].startswith("neither")
    assert report["limit_largest"].startswith("the CPU")
    text = format_streams(report)
    assert "at 8 streams all their frames are bounded by the CPU" in text
    assert "1 stream(s), ms a frame: flow 12.5, speed 3.2; total 20.0" in text
    kept_all = report_of(runs[:1], frames, device="cpu", target_fps=30.0, max_batch=4, mode=THREADS)
    assert kept_all["limit"] is None and kept_all["limit_largest"] is None


@pytest.mark.parametrize(
    ("stages", "line"),
    [
        ({}, "-"),
        ({"total": 5.0}, "; total 5.0"),
        ({"a": 1.0, "b": 2.0, "tiny": 0.01, "total": 3.0}, "b 2.0, a 1.0; total 3.0"),
    ],
)
def test_stage_line(stages: dict, line: str) -> None:
    assert stage_line(stages) == line


class _Preparing:
    """A pipeline's prepare/process interface that records when each frame was prepared, and where."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.taken = 0  # frames handed to the caller so far
        self.prepared_when: list[tuple[int, int, str]] = []  # (frame index, frames taken then, thread)
        self.fail_at = fail_at

    def prepare(self, frame: Frame) -> str:
        import threading

        if frame.index == self.fail_at:
            raise RuntimeError("camera motion failed")
        time.sleep(0.002)
        self.prepared_when.append((frame.index, self.taken, threading.current_thread().name))
        return f"prepared {frame.index}"


@pytest.mark.parametrize("n", [1, 2, 7])
def test_prepared_ahead_one_frame_ahead_in_order_on_its_own_thread(n: int) -> None:
    import threading

    from pipelines.streams_bench import prepared_ahead

    frames = [Frame(i, i / 30, np.zeros((4, 4, 3), np.uint8)) for i in range(n)]
    fake = _Preparing()
    seen = []
    for frame, prepared in prepared_ahead(fake, frames):
        fake.taken += 1
        assert prepared == f"prepared {frame.index}"
        seen.append(frame.index)
        time.sleep(0.005)  # the caller's processing: the next frame is prepared meanwhile, no further
    assert seen == list(range(n))
    assert [i for i, _, _ in fake.prepared_when] == list(range(n))
    assert all(taken >= i for i, taken, _ in fake.prepared_when)  # frame i waited until i were taken
    assert {name for _, _, name in fake.prepared_when} == {"prepare"} != {threading.current_thread().name}


def test_a_failed_prepare_is_raised_to_the_caller() -> None:
    from pipelines.streams_bench import prepared_ahead

    frames = [Frame(i, i / 30, np.zeros((4, 4, 3), np.uint8)) for i in range(5)]
    got = []
    with pytest.raises(RuntimeError, match="camera motion failed"):
        for frame, _ in prepared_ahead(_Preparing(fail_at=3), frames):
            got.append(frame.index)
    assert got == [0, 1, 2]


@pytest.mark.parametrize("ahead", [True, False])
def test_streams_run_as_a_live_server_prepares_them(ahead: bool) -> None:
    report = run_streams(CONFIG, _frames(12), [2], target_fps=1.0, model=_BlobModel(), prepare_ahead=ahead)
    stages = report["runs"][0]["stages_ms"]
    assert report["prepare_ahead"] is ahead and ("prepare" in stages) is ahead
    assert ("each frame prepared ahead" in format_streams(report)) is ahead
