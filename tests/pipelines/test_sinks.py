"""OutputWriter end to end on synthetic FrameResults: every file parses back, crash-safe as it goes."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
import supervision as sv

from pipelines.sinks import SPEED_COLUMNS, OutputWriter
from pipelines.sources import open_source
from pipelines.types import EgoMotion, Frame, FrameResult, Violation

W, H = 160, 96
# Irregular frame times (a 0.3 s gap) so the video must keep pts, not a constant rate.
TIMES = [0.0, 0.1, 0.2, 0.3, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3]


def tracked(index: int, n: int = 2) -> sv.Detections:
    """Track 1 moves right at 30 km/h (speed unknown on frame 0); track 2 appears at frame 3."""
    ids = [1, 2][: n if index >= 3 else 1]
    xyxy = [[10.0 + 5 * index, 20.0, 40.0 + 5 * index, 40.0], [100.0, 50.0 + index, 130.0, 70.0 + index]]
    speed = [math.nan if index == 0 else 30.0, 62.5]
    sigma = [math.nan if index == 0 else 1.5, 3.25]
    ground = [[0.5 * index, 1.0], [math.nan, math.nan]]
    k = len(ids)
    return sv.Detections(
        xyxy=np.array(xyxy[:k], dtype=np.float32),
        confidence=np.array([0.9, 0.75][:k], dtype=np.float32),
        class_id=np.array([0, 2][:k]),
        tracker_id=np.array(ids),
        data={
            "class_name": np.array(["car", "truck"][:k]),
            "speed_kmh": np.array(speed[:k]),
            "speed_sigma_kmh": np.array(sigma[:k]),
            "ground_xy_m": np.array(ground[:k]),
        },
    )


def violation(track_id: int, frame: int, snapshot: np.ndarray | None, zone: str = "global") -> Violation:
    return Violation(
        track_id=track_id,
        zone=zone,
        speed_limit_kmh=50.0,
        peak_speed_kmh=63.0,
        mean_speed_kmh=62.5,
        sigma_kmh=3.25,
        start_frame=3,
        end_frame=frame,
        start_time_s=0.3,
        end_time_s=TIMES[frame],
        class_name="truck",
        bbox_xyxy=(100.0, 55.0, 130.0, 75.0),
        snapshot=snapshot,
    )


def frame_result(index: int, size: tuple[int, int] = (W, H), violations: tuple = ()) -> FrameResult:
    image = np.full((size[1], size[0], 3), (20 * index) % 200, np.uint8)
    mask = np.zeros((size[1], size[0]), bool)
    mask[size[1] // 2 :] = True
    return FrameResult(
        frame=Frame(index=index, timestamp_s=TIMES[index], image=image),
        detections=tracked(index),
        road_mask=mask,
        ego=EgoMotion.identity(),
        gsd_m_per_px=0.05,
        speeds={},
        violations=violations,
        timings_ms={"total": 40.0},
    )


def run_writer(out: Path, n: int = len(TIMES), **kw) -> tuple[OutputWriter, dict[str, str]]:
    writer = OutputWriter(out, fps=10.0, size=kw.pop("size", (W, H)), speed_limit_kmh=50.0, **kw)
    snapshot = np.full((20, 30, 3), 255, np.uint8)
    for i in range(n):
        writer.write(frame_result(i, violations=(violation(2, i, snapshot),) if i == 6 else ()))
    writer.add_violations([violation(1, n - 1, None, zone="School zone #1")])  # e.g. Pipeline.finish()
    return writer, writer.close({"source": Path("clip.mp4"), "nan_value": math.nan, "fps": np.float32(10)})


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("codec", ["libx264", "mpeg4"])
def test_output_writer_end_to_end(tmp_path: Path, codec: str) -> None:
    if codec not in av.codecs_available:
        pytest.skip(f"{codec} not in this PyAV build")
    writer, paths = run_writer(tmp_path / "run", codec=codec)
    assert set(paths) == {"video", "tracks", "speeds", "violations", "summary", "snapshots"}

    mot = np.loadtxt(paths["tracks"], delimiter=",", ndmin=2)
    assert mot.shape == (3 + 2 * 9, 10)  # 3 frames with one track, 9 with two
    np.testing.assert_array_equal(mot[:3, 0], [1, 2, 3])  # 1-based frame numbers
    np.testing.assert_allclose(mot[0, 1:7], [1, 10, 20, 30, 20, 0.9], atol=1e-4)
    np.testing.assert_array_equal(mot[:, 7:], -1)

    rows = read_csv(Path(paths["speeds"]))
    assert tuple(rows[0]) == SPEED_COLUMNS and len(rows) == len(mot)
    # one frame numbering in every output: speeds.csv joins tracks.txt row by row
    assert [(int(r["frame"]), int(r["track_id"])) for r in rows] == [(int(f), int(i)) for f, i in mot[:, :2]]
    assert rows[0] == {
        "frame": "1",
        "time_s": "0.0000",
        "track_id": "1",
        "class": "car",
        "x1": "10.0",
        "y1": "20.0",
        "x2": "40.0",
        "y2": "40.0",
        "speed_kmh": "",  # NaN -> empty cell
        "sigma_kmh": "",
        "ground_x_m": "0.000",
        "ground_y_m": "1.000",
        "trusted": "",  # no speed, nothing to trust
        "scale_sigma_pct": "",  # no scale given with it
    }
    truck = next(r for r in rows if r["track_id"] == "2")
    assert (truck["frame"], truck["time_s"], truck["class"]) == ("4", "0.3000", "truck")
    assert (float(truck["speed_kmh"]), float(truck["sigma_kmh"]), truck["ground_x_m"]) == (62.5, 3.25, "")
    assert truck["trusted"] == "1"

    records = json.loads(Path(paths["violations"]).read_text())
    assert [r["track_id"] for r in records] == [2, 1]
    assert records[0]["peak_speed_kmh"] == 63.0 and records[0]["zone"] == "global"
    for record in records:
        snap = cv2.imread(str(tmp_path / "run" / record["snapshot"]))
        assert snap is not None and snap.size > 0
    assert cv2.imread(str(tmp_path / "run" / records[0]["snapshot"])).shape == (20, 30, 3)
    assert "School-zone-1" in records[1]["snapshot"]  # crop of the last frame, zone name sanitised

    summary = json.loads(Path(paths["summary"]).read_text())
    assert (summary["source"], summary["nan_value"], summary["fps"]) == ("clip.mp4", None, 10.0)
    counts = summary["counts"]
    assert (counts["frames"], counts["track_rows"], counts["unique_tracks"], counts["violations"]) == (
        12,
        21,
        2,
        2,
    )
    assert (counts["first_frame"], counts["last_frame"], counts["video_codec"]) == (1, 12, codec)

    video = open_source(paths["video"])
    frames = list(video)
    assert video.size == (W, H) and len(frames) == len(TIMES)
    np.testing.assert_allclose([f.timestamp_s for f in frames], TIMES, atol=2e-3)
    assert writer.close() == paths  # idempotent


def test_odd_frame_size_gives_even_video(tmp_path: Path) -> None:
    writer = OutputWriter(tmp_path, fps=25.0, size=(101, 75))
    for i in range(3):
        writer.write(frame_result(i, size=(101, 75)))
    paths = writer.close({})
    with av.open(paths["video"]) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == (100, 74)
        assert sum(1 for _ in container.decode(stream)) == 3


def test_files_are_readable_before_close(tmp_path: Path) -> None:
    """A crash mid-run keeps what was written: text files flushed per frame, violations.json atomic."""
    writer = OutputWriter(tmp_path, fps=10.0, size=(W, H), write_video=False)
    assert json.loads((tmp_path / "violations.json").read_text()) == []
    for i in range(5):
        writer.write(frame_result(i, violations=(violation(2, i, None),) if i == 4 else ()))
    assert len((tmp_path / "tracks.txt").read_text().splitlines()) == 3 + 2 * 2
    assert len(read_csv(tmp_path / "speeds.csv")) == 7
    records = json.loads((tmp_path / "violations.json").read_text())
    assert records[0]["track_id"] == 2 and (tmp_path / records[0]["snapshot"]).is_file()
    assert not list(tmp_path.glob(".*.tmp"))
    assert not (tmp_path / "summary.json").exists()
    paths = writer.close({})
    assert "video" not in paths and not (tmp_path / "annotated.mp4").exists()


def test_context_manager_records_a_failed_run(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), OutputWriter(tmp_path, fps=10.0, size=(W, H)) as writer:
        writer.write(frame_result(0))
        raise RuntimeError("boom")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["status"], summary["error"], summary["counts"]["frames"]) == ("failed", "boom", 1)
    with pytest.raises(RuntimeError, match="after close"):
        writer.write(frame_result(1))


def test_untracked_detections_write_no_rows(tmp_path: Path) -> None:
    result = frame_result(0)
    untracked = FrameResult(
        frame=result.frame,
        detections=sv.Detections(xyxy=np.array([[1.0, 1.0, 5.0, 5.0]])),
        road_mask=None,
        ego=result.ego,
        gsd_m_per_px=None,
        speeds={},
    )
    with OutputWriter(tmp_path, fps=10.0, size=(W, H), write_video=False) as writer:
        writer.write(untracked)
        writer.write(FrameResult(result.frame, sv.Detections.empty(), None, result.ego, None, {}))
    assert (tmp_path / "tracks.txt").read_text() == ""
    assert len(read_csv(tmp_path / "speeds.csv")) == 0


def test_violations_written_are_restamped_as_they_stand_at_the_end(tmp_path: Path) -> None:
    """A session found suspect after its first violations closed: violations.json says so, and
    keeps their snapshots (Pipeline.rehold, then OutputWriter.restamp)."""
    import dataclasses

    writer = OutputWriter(tmp_path / "run", fps=10.0, size=(W, H), speed_limit_kmh=50.0, write_video=False)
    snapshot = np.full((20, 30, 3), 255, np.uint8)
    first = violation(2, 3, snapshot)
    writer.write(frame_result(3, violations=(first,)))
    held = dataclasses.replace(first, status="not_enforceable", status_reason="held for review: ...")
    writer.restamp([held, held])  # not the violations written: left as they are
    assert json.loads((tmp_path / "run" / "violations.json").read_text())[0]["status_reason"] == ""
    writer.restamp([held])
    paths = writer.close({})
    (record,) = json.loads(Path(paths["violations"]).read_text())
    assert (record["status"], record["status_reason"]) == ("not_enforceable", "held for review: ...")
    assert record["snapshot"] and (tmp_path / "run" / record["snapshot"]).is_file()
