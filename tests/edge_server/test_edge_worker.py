"""The stream worker's frame hand-over: the frame queue and the prepare thread (edge_server/worker.py,
edge_server/frame_queue.py), run with a real pipeline, store and clip writer, fed faster than it can
process."""

from __future__ import annotations

import itertools
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
from pipelines.effort import LoadGovernor


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
    settings = ServerSettings(data_dir=tmp_path, frame_queue=2, adapt=False)
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


@pytest.mark.parametrize(
    ("frame_queue", "cpus", "prepares"), [(1, 2, False), (2, 2, True), (3, 4, True), (2, 1, False)]
)
def test_a_latest_frame_slot_gets_no_prepare_thread(
    tmp_path, monkeypatch, frame_queue: int, cpus: int, prepares: bool
) -> None:
    """frame_queue 1 asks for the lowest latency: no prepared frame waiting behind the one being
    processed. Longer queues get a prepare thread, whose hand-over slot holds one frame, unless the
    server may use one CPU only (a container's cpuset, taskset): a second thread would only wait."""
    monkeypatch.setattr("edge_server.worker.os.sched_getaffinity", lambda pid: set(range(cpus)))
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


def test_an_overloaded_stream_gives_up_work_in_steps_instead_of_dropping_at_random(tmp_path) -> None:
    """30 fps into a pipeline that takes 45 ms a frame (22 fps at most), a governor with short
    windows: the stream climbs the ladder (the detector less often, then every 2nd frame), then
    processes every 2nd frame, evenly, with none dropped; the choice is in the stats event, the
    log and the session record, and the pipeline got each rung."""
    settings = ServerSettings(data_dir=tmp_path, adapt_max_stride=2)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    clips = ThreadPoolExecutor(1)
    bus = EventBus()
    events: list[dict] = []
    bus.add_listener("e1", events.append)
    bus.publish_threadsafe = bus.publish  # no event loop here: the worker's events straight to the listener
    cfg = PipelineConfig().with_overrides(road={"enabled": False}, keyframes={"enabled": True})
    pipeline = build_pipeline(cfg, detector=BrightBlobDetector())
    processed: list[int] = []
    process, efforts = pipeline.process, []

    def slow_process(frame, **kw):
        processed.append(frame.index)
        time.sleep(0.045)
        return process(frame, **kw)

    pipeline.process = slow_process
    set_effort = pipeline.set_effort
    pipeline.set_effort = lambda e: (efforts.append(e), set_effort(e))
    store.create_session("e1", "test")
    services = StreamServices(settings, store, bus, Metrics(), clips)
    worker = StreamWorker("e1", pipeline, services)
    assert worker.adapter is not None and worker.adapter.effort.level == 0  # the server's first stream
    worker.adapter.governor = LoadGovernor(worker.adapter.governor.ladder, window_s=0.5, settle_s=0.5)
    worker.start()
    image = np.zeros((240, 320, 3), np.uint8)
    t0 = time.perf_counter()
    try:
        for i in range(150):  # 5 s at 30 fps, paced by the clock
            worker.submit(_incoming(i, image))
            time.sleep(max(0.0, t0 + (i + 1) / 30 - time.perf_counter()))
        time.sleep(0.3)
    finally:
        worker.stop("test over")
        assert worker.join(30)
        clips.shutdown()
    ladder = worker.adapter.governor.ladder
    # a rung at a time, up to every 2nd frame (and maybe the bound's rarer detector at that stride)
    assert [e.level for e in efforts] == list(range(1, len(efforts) + 1)) and efforts[-1].stride == 2
    assert efforts[-1] == ladder[len(efforts)]
    assert pipeline.keyframes.cfg.interval == efforts[-1].keyframe_interval
    # from its last change on: every 2nd frame, evenly, none dropped
    since = int(worker.adapter.changes[-1]["t_s"] * 30) + 15
    late = [i for i in processed if i >= since]
    assert len(late) >= 20 and set(np.diff(late)) == {2}, late
    stats = worker.stats
    assert stats.received == 150 and stats.processed + stats.dropped + stats.skipped == 150
    assert stats.skipped >= 40
    live = [e["effort"] for e in events if e.get("type") == "stats" and e.get("effort")]
    level = efforts[-1].level
    assert live[-1]["level"] == level and live[-1]["stride"] == 2 and "every 2nd frame" in live[-1]["text"]
    assert "frames dropped" in live[-1]["reason"] or "latency" in live[-1]["reason"]
    info = store.get_session("e1").info["effort"]
    assert (
        info["level"] == level and info["highest_level"] == level and info["frames_skipped"] == stats.skipped
    )
    assert [c["level"] for c in info["changes"]] == [e.level for e in efforts]
    assert all(c["reason"] for c in info["changes"])
    # the server's next stream starts one rung below where this one ended, skipping from its first frame
    assert services.effort_memory == {"level": level}
    nxt = build_pipeline(cfg, detector=BrightBlobDetector())
    second = StreamWorker("e2", nxt, services)
    assert second.adapter.effort == ladder[level - 1] and nxt.effort == ladder[level - 1]
    assert second.adapter.stride == ladder[level - 1].stride and second.incoming.capacity == (
        1 if second.adapter.stride > 1 else settings.frame_queue
    )
    assert second.adapter.changes[0]["reason"].startswith("where the last stream on this server ended")
    store.close()


@pytest.mark.parametrize(("overflowing", "locally"), [(False, 0), (True, 36)])
def test_frames_lost_before_the_server_are_counted_and_blamed_on_the_box_only_when_it_overflows(
    tmp_path, overflowing: bool, locally: int
) -> None:
    """Every 4th frame of a 30 fps stream never arrives: the worker counts them from the media
    times (the stats event, the session, the metric), and as the server's own loss - what its
    adapter counts as drops - only while the box's UDP receive buffers overflow."""
    from edge_server.receive_loss import BoxOverflow

    settings = ServerSettings(data_dir=tmp_path, adapt=False)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    clips = ThreadPoolExecutor(1)
    pipeline = build_pipeline(
        PipelineConfig().with_overrides(road={"enabled": False}), detector=BrightBlobDetector()
    )
    readings = itertools.count(0, 7) if overflowing else itertools.repeat(5)  # the box's counter
    box = BoxOverflow(lambda: next(readings), min_interval_s=0.0)
    metrics = Metrics()
    services = StreamServices(settings, store, EventBus(), metrics, clips, box_overflow=box)
    store.create_session("l1", "test")
    worker = StreamWorker("l1", pipeline, services)
    worker.start()
    image = np.zeros((120, 160, 3), np.uint8)
    try:
        for i in range(160):
            if i % 4 != 3:
                worker.submit(_incoming(i, image))
    finally:
        worker.stop("test over")
        assert worker.join(30)
        clips.shutdown()
    # frames 11, 15, ..., 155: 3 and 7 come before the interval is known (8 gaps), 159 after the last
    assert worker.stats.lost_before == 37
    assert worker.stats.lost_locally == locally  # the box's first reading has nothing to compare with
    assert store.get_session("l1").info["frames_lost_before_server"] == {
        "all": 37,
        "box_overflowing": locally,
    }
    assert metrics.frames_lost_before_server._value.get() == 37
    store.close()


def test_a_recorded_stream_keeps_every_processed_frames_tracks_and_speeds(tmp_path) -> None:
    """record_tracks: each processed frame's tracked boxes and speeds, as the offline runner's
    speeds.csv (its columns; the frame's media time), flushed as they come; the live run is scored
    from it (eval.live_tickets --speeds)."""
    import csv

    from edge_client.synthetic import DEFAULT_CAMERA, SyntheticScene
    from edge_server.engine_link import PeerLink
    from pipelines.sinks import SPEED_COLUMNS
    from pipelines.types import Telemetry

    settings = ServerSettings(data_dir=tmp_path, record_tracks=True, adapt=False)
    store = Store.from_url(f"sqlite:///{tmp_path / 'store.db'}")
    clips = ThreadPoolExecutor(1)
    pipeline = build_pipeline(
        PipelineConfig().with_overrides(road={"enabled": False}), detector=BrightBlobDetector()
    )

    def telemetry_at(t: float) -> Telemetry:
        return Telemetry(timestamp_s=t, altitude_m=50.0, gimbal_pitch_deg=-90.0, camera=DEFAULT_CAMERA)

    store.create_session("r1", "test")
    worker = StreamWorker(
        "r1", pipeline, StreamServices(settings, store, EventBus(), Metrics(), clips), PeerLink(telemetry_at)
    )
    worker.start()
    scene = SyntheticScene()
    try:
        for i in range(60):
            worker.submit(_incoming(i, scene.render(i / 30)))
            time.sleep(0.01)
            while worker.stats.processed + worker.stats.dropped < i + 1:
                time.sleep(0.005)
    finally:
        worker.stop("test over")
        assert worker.join(30)
        clips.shutdown()
    with open(tmp_path / "tracks" / "r1.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert tuple(rows[0]) == SPEED_COLUMNS
    times = {float(r[1]) for r in rows[1:]}
    assert len(times) >= 50 and times <= {round(i / 30, 4) for i in range(60)}
    speeds = [float(r[8]) for r in rows[1:] if r[8]]
    assert len({r[2] for r in rows[1:]}) >= 2 and len(speeds) > 50 and all(0 < v < 200 for v in speeds)
    store.close()
