"""pipelines.motion.shared_detector: one detector for every stream of a server, their frames batched."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import supervision as sv
from shared_material import visdrone_images

from pipelines.motion.detector import YoloDetector, empty_detections
from pipelines.motion.shared_detector import SharedDetector
from pipelines.types import Frame


class _SlowModel:
    """Stands in for a YoloDetector: records how many calls run at once."""

    weights = Path("fake_openvino_model")
    imgsz = 640

    def __init__(self) -> None:
        self.active = 0
        self.most_at_once = 0
        self._count_lock = threading.Lock()

    def _work(self, tag: object) -> sv.Detections:
        with self._count_lock:
            self.active += 1
            self.most_at_once = max(self.most_at_once, self.active)
        time.sleep(0.005)
        with self._count_lock:
            self.active -= 1
        det = empty_detections()
        det.data["tag"] = np.array([], dtype=object)
        det.metadata = {"tag": tag}
        return det

    def __call__(self, image):
        return self._work(("call", image.shape))

    def detect(self, frame):
        return self._work(("detect", frame.index))

    def detect_at(self, frame, imgsz):
        return self._work(("detect_at", frame.index, imgsz))


def test_shared_detector_serves_streams_one_call_at_a_time() -> None:
    inner = _SlowModel()
    shared = SharedDetector(inner)
    frame = Frame(index=3, timestamp_s=0.1, image=np.zeros((8, 8, 3), np.uint8))
    results: list = []

    def stream() -> None:
        for _ in range(5):
            results.append(shared.detect_at(frame, 960).metadata["tag"])
            results.append(shared.detect(frame).metadata["tag"])
            results.append(shared(frame.image).metadata["tag"])

    threads = [threading.Thread(target=stream) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert inner.most_at_once == 1 and shared.calls == 60 and len(results) == 60
    assert set(results) == {("detect_at", 3, 960), ("detect", 3), ("call", (8, 8, 3))}
    assert shared.weights == inner.weights and shared.imgsz == 640 and shared.wait_s > 0


class _BatchModel(_SlowModel):
    """A fake model that also runs batches: each result tagged with its image, input size and batch."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[tuple[int | None, list[tuple[int, ...]]]] = []

    def detect_many(self, images, imgsz):
        self.batches.append((imgsz, [im.shape for im in images]))
        out = []
        for im in images:
            det = self._work(("batch", int(im[0, 0, 0]), imgsz, len(images)))
            out.append(det)
        return out


def _frame(i: int, shape=(8, 8, 3)) -> Frame:
    return Frame(index=i, timestamp_s=i / 30, image=np.full(shape, i, np.uint8))


def test_frames_of_one_input_size_and_shape_go_through_in_one_batch() -> None:
    """Four streams, two of them at another input size, one at another frame size: each frame's
    result comes back to its stream, and only frames that would be letterboxed alike share a batch."""
    inner = _BatchModel()
    release = threading.Event()
    first = inner._work
    started = threading.Event()

    def held_first(tag):  # the first run holds until the others have queued
        if not started.is_set():
            started.set()
            release.wait(10)
        return first(tag)

    inner._work = held_first
    shared = SharedDetector(inner, max_batch=8)
    requests = [(_frame(0), 640), (_frame(1), 960), (_frame(2), 640), (_frame(3), 960), (_frame(4), 640)]
    requests.append((_frame(5, (16, 8, 3)), 640))
    results: dict[int, object] = {}

    def stream(frame, imgsz) -> None:
        results[frame.index] = shared.detect_at(frame, imgsz).metadata["tag"]

    threads = [threading.Thread(target=stream, args=requests[0])]
    threads[0].start()
    assert started.wait(10)
    for req in requests[1:]:
        threads.append(threading.Thread(target=stream, args=req))
        threads[-1].start()
        deadline = time.monotonic() + 10
        while shared.batcher.pending < len(threads) - 1:
            assert time.monotonic() < deadline
            time.sleep(0.002)
    release.set()
    for t in threads:
        t.join(10)
    assert results == {
        0: ("detect_at", 0, 640),  # alone: as without a batcher
        1: ("batch", 1, 960, 2),
        3: ("batch", 3, 960, 2),
        2: ("batch", 2, 640, 2),
        4: ("batch", 4, 640, 2),
        5: ("detect_at", 5, 640),  # another shape: letterboxed otherwise, its own run
    }
    assert inner.batches == [(960, [(8, 8, 3)] * 2), (640, [(8, 8, 3)] * 2)]
    assert inner.most_at_once == 1
    stats = shared.stats()
    assert (
        stats["batch_sizes"] == {"1": 2, "2": 2} and stats["mean_batch"] == 1.5 and stats["device"] == "cpu"
    )


def test_a_model_without_batches_serves_one_frame_at_a_time_only() -> None:
    with pytest.raises(TypeError, match="detect_many"):
        SharedDetector(_SlowModel(), max_batch=4)


def test_the_shipped_detector_finds_the_same_boxes_in_a_batch_as_alone() -> None:
    """Four streams' real frames (VisDrone) through the shipped int8 OpenVINO detector in one batch:
    the same boxes, scores and classes as each frame alone."""
    from pipelines.config import DEFAULT_WEIGHTS_DIR

    model = YoloDetector(DEFAULT_WEIGHTS_DIR / "airpatrol_vehicles_n_int8_openvino_model")
    frames = [Frame(index=i, timestamp_s=0.0, image=im) for i, im in enumerate(visdrone_images(4))]
    alone = [model.detect_at(f, 960) for f in frames]
    shared = SharedDetector(model, max_batch=4, wait_ms=5000)  # the four arrive well within 5 s
    together: dict[int, sv.Detections] = {}
    threads = [
        threading.Thread(target=lambda f=f: together.__setitem__(f.index, shared.detect_at(f, 960)))
        for f in frames
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert shared.stats()["batch_sizes"] == {"4": 1}
    assert sum(len(d) for d in alone) > 40  # real traffic
    for a, f in zip(alone, frames, strict=True):
        b = together[f.index]
        np.testing.assert_allclose(b.xyxy, a.xyxy, atol=0.01)
        np.testing.assert_allclose(b.confidence, a.confidence, atol=1e-4)
        np.testing.assert_array_equal(b.class_id, a.class_id)
    shared.close()
