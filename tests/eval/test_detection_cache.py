"""The detection cache (eval.detection_cache): a flight's first run records the shipped detector's
and the road U-Net's output, later runs of the same video replay exactly that, and nothing is
detected silently: another video, or a frame that was not recorded, is an error."""

from __future__ import annotations

import argparse
import json
import shutil

import numpy as np
import pytest
import supervision as sv

from eval.datasets import sim_sequence
from eval.detection_cache import (
    CacheEntry,
    DetectionCache,
    DetectionCacheError,
    RecordingModel,
    ReplayModel,
    ReplaySegmenter,
    _pack,
)
from eval.runner import run_sequence
from eval.variants import Variant
from pipelines.config import PipelineConfig
from pipelines.types import Frame


def _det(n: int, names=("car", "bus"), confidence=True) -> sv.Detections:
    rng = np.random.default_rng(n)
    d = sv.Detections(
        xyxy=rng.uniform(0, 100, (n, 4)).astype(np.float32),
        confidence=rng.uniform(0, 1, n).astype(np.float32) if confidence else None,
        class_id=np.arange(n, dtype=np.int64),
    )
    d.data["class_name"] = np.array([names[i % len(names)] for i in range(n)], dtype=object)
    d.data["source_class_id"] = np.arange(n, dtype=np.int64) + 7
    return d


def _frame(index: int) -> Frame:
    return Frame(index=index, timestamp_s=index / 30.0, image=np.zeros((36, 64, 3), np.uint8))


def _same(a: sv.Detections, b: sv.Detections) -> bool:
    same = np.array_equal(a.xyxy, b.xyxy) and a.xyxy.dtype == b.xyxy.dtype
    for x, y in ((a.confidence, b.confidence), (a.class_id, b.class_id)):
        same &= (x is None and y is None) or (x is not None and y is not None and np.array_equal(x, y))
    same &= set(a.data) == set(b.data)
    return bool(same and all(np.array_equal(a.data[k], b.data[k]) for k in a.data))


class _Fake:
    """A detector network: a frame's detections are a function of its index."""

    weights = "fake.pt"
    imgsz = 640

    def detect_at(self, frame: Frame, imgsz: int) -> sv.Detections:
        return _det(frame.index % 4, confidence=frame.index != 2)

    def detect(self, frame: Frame) -> sv.Detections:
        return self.detect_at(frame, self.imgsz)


def test_packed_detections_come_back_exactly(tmp_path):
    rec = RecordingModel(_Fake())
    sizes = {0: 640, 1: 960, 2: 640, 3: 1280, 5: 640}
    given = {i: rec.detect_at(_frame(i), s) for i, s in sizes.items()}
    given[5].data["class_name"][:] = "truck"  # the pipeline writes into detections: the copy is kept
    (tmp_path / "e").mkdir()
    np.savez(tmp_path / "e" / "detections.npz", **_pack(rec.frames))
    (tmp_path / "e" / "meta.json").write_text(
        '{"frames": 6, "detector_weights": "fake.pt", "detector_imgsz": 640}'
    )
    entry = CacheEntry(tmp_path / "e")
    replay = ReplayModel(entry, "video.mp4")
    for i, size in sizes.items():
        got = replay.detect_at(_frame(i), size)
        assert _same(got, _Fake().detect_at(_frame(i), size)), i
        assert got.data["class_name"].dtype == object or got.data["class_name"].dtype.kind == "U"
    assert replay.size_mismatch_frames == 0 and replay.served == len(sizes)
    replay.detect_at(_frame(1), 640)  # the GSD asks for another size: served, counted
    assert replay.size_mismatch_frames == 1
    with pytest.raises(DetectionCacheError, match="frame 4 of video.mp4 is not in the detection cache"):
        replay.detect(_frame(4))
    with pytest.raises(DetectionCacheError, match="detected twice"):
        rec.detect_at(_frame(0), 640)


def test_replay_segmenter_refuses_a_frame_it_has_no_logits_for(tmp_path):
    entry = type(
        "E",
        (),
        {"meta": {"road_input_size": [64, 32]}, "logits": {0: np.zeros((1, 1, 32, 64))}, "path": tmp_path},
    )
    seg = ReplaySegmenter(entry(), "video.mp4")
    prob = seg.segment(_frame(0))
    assert prob.shape == (36, 64) and np.allclose(prob, 0.5)  # sigmoid(0), resized to the frame
    with pytest.raises(DetectionCacheError, match="road network's output for frame 3"):
        seg.segment(_frame(3))


def _run(seq, cache, max_frames=45):
    return run_sequence(
        seq, PipelineConfig(), Variant("base"), progress=False, max_frames=max_frames, cache=cache
    )


def test_a_second_run_replays_exactly_the_first_runs_detections(small_flight_dir, tmp_path):
    seq = sim_sequence(small_flight_dir)
    cache = DetectionCache(tmp_path / "cache")
    first = _run(seq, cache)
    second = _run(seq, DetectionCache(tmp_path / "cache", record=False))
    assert first.pipeline["detection_cache"]["mode"] == "record"
    assert second.pipeline["detection_cache"] == {
        "mode": "replay",
        "entry": first.pipeline["detection_cache"]["entry"],
        "size_mismatch_frames": 0,
    }
    entry = CacheEntry(tmp_path / "cache" / first.pipeline["detection_cache"]["entry"])
    assert entry.frames == 45 and entry.logits, "the road U-Net ran and was recorded"
    assert entry.meta["detector"]["weights"]["sha256"] and entry.meta["road"]["threshold"] is not None
    a, b = first.tracks, second.tracks
    assert np.array_equal(a.frames, b.frames) and np.array_equal(a.ids, b.ids)
    assert np.array_equal(a.xyxy, b.xyxy)
    assert np.array_equal(a.speed_kmh, b.speed_kmh, equal_nan=True)
    assert np.array_equal(first.speed_samples.pred_kmh, second.speed_samples.pred_kmh, equal_nan=True)
    assert len(first.speed_samples) > 50
    assert [v.ticket_speed_kmh for v in first.predicted_violations] == [
        v.ticket_speed_kmh for v in second.predicted_violations
    ]
    assert second.timings["detect"]["mean_ms"] < 5.0  # nothing was detected


def test_a_changed_video_or_a_frame_not_recorded_is_refused(small_flight_dir, tmp_path):
    seq = sim_sequence(small_flight_dir)
    _run(seq, DetectionCache(tmp_path / "cache"), max_frames=20)
    replay_only = DetectionCache(tmp_path / "cache", record=False)
    with pytest.raises(DetectionCacheError, match="frame 20 of .* is not in the detection cache"):
        _run(seq, replay_only, max_frames=25)
    changed = tmp_path / "changed"
    shutil.copytree(small_flight_dir, changed)
    with (changed / "video.mp4").open("ab") as fh:  # another file: its hash, not its name, keys the cache
        fh.write(b"\0")
    with pytest.raises(DetectionCacheError, match="no detections of .*changed/video.mp4"):
        _run(sim_sequence(changed), replay_only, max_frames=20)
    with pytest.raises(DetectionCacheError, match="no detections"):  # another detector setting
        run_sequence(
            seq,
            PipelineConfig().with_overrides(detector={"conf": 0.3}),
            Variant("base"),
            progress=False,
            max_frames=20,
            cache=replay_only,
        )


def test_airpatrol_eval_records_once_then_replays(small_flight_dir, tmp_path):
    from eval.cli import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    modes = []
    for run in ("first", "second"):
        out = tmp_path / run
        cache = ["--detection-cache", str(tmp_path / "cache")]
        args = parser.parse_args(
            ["eval", str(small_flight_dir), *cache, "--max-frames", "15", "--out", str(out), "-q"]
        )
        assert args.func(args) == 0
        seq = json.loads((out / "metrics.json").read_text())["sequences"][0]
        modes.append(seq["pipeline"]["detection_cache"]["mode"])
    assert modes == ["record", "replay"]
