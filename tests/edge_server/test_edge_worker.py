"""The stream worker's frame hand-over: the frame queue and the prepare thread (edge_server/worker.py,
edge_server/frame_queue.py), run with a real pipeline, store and clip writer, fed faster than it can
process."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from edge_client.synthetic import BrightBlobDetector
from edge_server.engine_link import IncomingFrame
from edge_server.events import EventBus
from edge_server.frame_queue import FrameQueue
from edge_server.metrics import Metrics
from edge_server.settings import ServerSettings
from edge_server.store import Store
from edge_server.stream_outputs import StreamServices
from edge_server.worker import StreamWorker
from pipelines.builder import build_pipeline
from pipelines.config import PipelineConfig


def _incoming(i: int, image=None) -> IncomingFrame:
    return IncomingFrame(image, i / 30, time.perf_counter(), time.time(), i)


def test_frame_queue_wait_room_waits_for_the_consumer() -> None:
    queue = FrameQueue(2)
    assert queue.wait_room(0.0)  # empty: at once
    queue.put(_incoming(0))
    assert queue.wait_room(0.0)  # one of two places taken
    queue.put(_incoming(1))
    t0 = time.perf_counter()
    assert not queue.wait_room(0.05)  # full after the timeout
    assert time.perf_counter() - t0 >= 0.04
    threading.Timer(0.05, lambda: queue.take(1.0)).start()
    assert queue.wait_room(5.0)  # woken by the take
    queue.put(_incoming(2))
    threading.Timer(0.05, queue.close).start()
    assert not queue.wait_room(5.0) and queue.closed  # closed meanwhile: False, without waiting it out


@pytest.mark.parametrize("prepare_ahead", [True, False])
def test_an_overloaded_worker_spends_no_work_on_frames_it_drops(tmp_path, prepare_ahead: bool) -> None:
    """Frames arrive four times faster than the pipeline processes them. With a prepare thread,
    every frame it prepares is processed, in order (none is converted and given camera motion only
    to be dropped), and a processed frame waited less than two processing times; either way
    every received frame is processed or counted as dropped."""
    settings = ServerSettings(data_dir=tmp_path, frame_queue=2)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    clips = ThreadPoolExecutor(1)
    cfg = PipelineConfig().with_overrides(road={"enabled": False}, keyframes={"enabled": True})
    pipeline = build_pipeline(cfg, detector=BrightBlobDetector())
    prepared: list[int] = []
    processed: list[tuple[int, float]] = []  # frame index, its age when processing started (s)
    received_at: dict[int, float] = {}
    prepare, process = pipeline.prepare, pipeline.process

    def slow_prepare(frame):
        prepared.append(frame.index)
        return prepare(frame)

    def slow_process(frame, **kw):
        processed.append((frame.index, time.perf_counter() - received_at[frame.index]))
        time.sleep(PROCESS_S)
        return process(frame, **kw)

    pipeline.prepare, pipeline.process = slow_prepare, slow_process
    store.create_session("s1", "test")
    worker = StreamWorker(
        "s1",
        pipeline,
        StreamServices(settings, store, EventBus(), Metrics(), clips),
        prepare_ahead=prepare_ahead,
    )
    worker.start()
    image = np.zeros((240, 320, 3), np.uint8)
    try:
        for i in range(60):
            received_at[i] = time.perf_counter()
            worker.submit(_incoming(i, image))
            time.sleep(PROCESS_S / 4)
        time.sleep(4 * PROCESS_S)  # what was queued is processed
    finally:
        worker.stop("test over")
        assert worker.join(30)
        clips.shutdown()
    assert worker.finished.is_set() and worker.status == "ended"
    indices = [i for i, _ in processed]
    assert indices == sorted(indices) and len(indices) >= 10
    assert worker.stats.received == 60 and worker.stats.processed == len(indices)
    assert worker.stats.processed + worker.stats.dropped == 60
    if prepare_ahead:
        assert prepared == indices  # nothing prepared was dropped
        # prepared one ahead: a frame waits for the one being processed only (~1.5 processing
        # times with its time in the queue; the margin is for a loaded machine's thread scheduling)
        ages = [age for _, age in processed[2:]]
        assert max(ages) < 2 * PROCESS_S + 0.1, ages
    else:
        assert prepared == []
    row = store.get_session("s1")
    assert row is not None and row.frames_processed == len(indices)
    store.close()


PROCESS_S = 0.08  # the slowed pipeline's time per frame


@pytest.mark.parametrize(("frame_queue", "prepares"), [(1, False), (2, True), (3, True)])
def test_a_latest_frame_slot_gets_no_prepare_thread(tmp_path, frame_queue: int, prepares: bool) -> None:
    """frame_queue 1 asks for the lowest latency: no prepared frame waiting behind the one being
    processed. Longer queues get a prepare thread, whose hand-over slot holds one frame."""
    settings = ServerSettings(data_dir=tmp_path, frame_queue=frame_queue, prepare_ahead=True)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    cfg = PipelineConfig().with_overrides(road={"enabled": False})
    with ThreadPoolExecutor(1) as clips:
        worker = StreamWorker(
            "s1",
            build_pipeline(cfg, detector=BrightBlobDetector()),
            StreamServices(settings, store, EventBus(), Metrics(), clips),
        )
        assert worker.prepares_ahead is prepares
        assert (worker.incoming.capacity, worker.slot.capacity) == (
            frame_queue,
            1 if prepares else frame_queue,
        )
    store.close()


def test_a_stream_whose_clock_crawls_says_why_on_its_card_its_session_and_the_log(tmp_path, caplog) -> None:
    """An RTMP encoder's 30 fps video whose media times advance 1 ms a frame: the live stats name
    the problem, the session keeps it, and the log says it once, with the session's id."""
    settings = ServerSettings(data_dir=tmp_path)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    clips = ThreadPoolExecutor(1)
    bus = EventBus()
    pipeline = build_pipeline(
        PipelineConfig().with_overrides(road={"enabled": False}), detector=BrightBlobDetector()
    )
    store.create_session("c1", "test")
    worker = StreamWorker("c1", pipeline, StreamServices(settings, store, bus, Metrics(), clips))
    worker.start()
    image = np.zeros((240, 320, 3), np.uint8)
    try:
        with caplog.at_level("WARNING", logger="edge_server.worker"):
            for i in range(40):
                worker.submit(IncomingFrame(image, 5.0 + 0.001 * i, time.perf_counter(), time.time(), i))
                time.sleep(0.02)
            deadline = time.time() + 20
            while worker.stats.processed + worker.stats.dropped < 40 and time.time() < deadline:
                time.sleep(0.05)
        assert "1.0 ms a frame" in worker.stats.clock_problem
    finally:
        worker.stop("test over")
        assert worker.join(30)
        clips.shutdown()
    mine = [
        r.getMessage()
        for r in caplog.records
        if r.name == "edge_server.worker" and "ms a frame" in r.getMessage()
    ]
    assert mine[:1] == [f"session c1: {worker.stats.clock_problems.most_common(1)[0][0]}"]
    info = store.get_session("c1").info
    assert info["clock_problems"] and all("ms a frame" in k for k in info["clock_problems"])
    store.close()
