"""The detector service (settings.engine_detector_service): one detector for every engine process,
its frames batched; a lost service costs each engine one slow frame, never its stream."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest
from shared_material import visdrone_images
from test_edge_engines import CONFIG, frames, our_slots

from edge_client.bench_server import process_tree
from edge_client.synthetic import BrightBlobDetector, SceneRoadSegmenter
from edge_server.engines import slots
from edge_server.engines.child import EngineSpec
from edge_server.engines.detector_service import RemoteModel, ServiceSpec
from edge_server.engines.supervisor import EngineProcesses
from pipelines.builder import build_pipeline
from pipelines.config import DetectorConfig
from pipelines.types import Frame


def pool(detector_factory=BrightBlobDetector, timeout_s: float = 3.0, **service) -> EngineProcesses:
    engines = EngineProcesses(timeout_s=timeout_s, start_timeout_s=120.0, keep_idle=2)
    engines.use_detector_service(ServiceSpec(DetectorConfig(), detector_factory, **service))
    return engines


def spec(factory=BrightBlobDetector) -> EngineSpec:
    return EngineSpec(CONFIG, factory, SceneRoadSegmenter)


def _same(got, want) -> None:
    assert list(got.detections.tracker_id) == list(want.detections.tracker_id)
    np.testing.assert_allclose(got.detections.xyxy, want.detections.xyxy)
    assert {t: s.speed_kmh for t, s in got.speeds.items()} == pytest.approx(
        {t: s.speed_kmh for t, s in want.speeds.items()}, nan_ok=True
    )


def test_two_engines_ask_one_detector_service_and_get_what_their_pipeline_gives() -> None:
    engines = pool(nice=3)
    try:
        a, b = engines.start(spec()), engines.start(spec())
        health = engines.health()["detector_service"]
        assert health["running"] and health["started"] == 1 and health["pid"] not in (a.pid, b.pid)
        if hasattr(os, "getpriority"):  # it yields the cores to receiving as the engines do
            assert os.getpriority(os.PRIO_PROCESS, health["pid"]) == min(
                19, os.getpriority(os.PRIO_PROCESS, 0) + 3
            )
        roles = {pid: p["role"] for pid, p in process_tree(os.getpid()).items()}  # as serve-bench reads them
        assert roles[health["pid"]] == "detector service" and roles[a.pid] == roles[b.pid] == "engine"
        local = build_pipeline(CONFIG, detector=BrightBlobDetector(), segmenter=SceneRoadSegmenter())
        other = build_pipeline(CONFIG, detector=BrightBlobDetector(), segmenter=SceneRoadSegmenter())
        for frame in frames(90):
            _same(a.process(frame), local.process(frame))
            _same(b.process(frame, prepared=b.prepare(frame)), other.process(frame))
        health = engines.health()["detector_service"]
        assert health["calls"] >= 2 * 30 and health["weights"] == "BrightBlobDetector", health
        assert a.metadata["detector"] == "RemoteModel"  # the engine ran no detector of its own
        pids = a.pid, b.pid
        a.close()
        b.close()
    finally:
        engines.close()
    assert not engines.detector_service.alive
    assert all(our_slots(pid) == [] for pid in pids)  # the engines' slots for the service, removed


@pytest.mark.parametrize(
    ("sig", "how"), [(signal.SIGKILL, "was killed by SIGKILL"), (signal.SIGSTOP, "hung")]
)
def test_a_lost_detector_service_costs_each_engine_a_frame_not_its_stream(sig, how) -> None:
    """The service killed or stopped mid-stream: each engine loads its own detector on the frame that
    found it gone (within the engine's watchdog) and its results stay the pipeline's; the next stream
    gets a new service (also in a process reused from a stream before), and /healthz counts the loss."""
    engines = pool()
    try:
        a = engines.start(spec())
        local = build_pipeline(CONFIG, detector=BrightBlobDetector(), segmenter=SceneRoadSegmenter())
        clip = frames(80)
        for frame in clip[:40]:
            _same(a.process(frame), local.process(frame))
        first = engines.health()["detector_service"]["pid"]
        os.kill(first, sig)
        for frame in clip[40:]:
            _same(a.process(frame), local.process(frame))
        assert a.alive and engines.lost == {}  # the engine lives on
        b = engines.start(spec())  # a new stream: a new service
        health = engines.health()["detector_service"]
        assert health["running"] and health["pid"] != first and health["started"] == 2 and health["lost"] == 1
        assert health["last_lost"] == f"detector service {first} {how}"
        b.process(clip[0])
        assert engines.health()["detector_service"]["calls"] >= 1
        a.close()  # its process waits for the next stream, its own detector loaded
        c = engines.start(spec())
        assert c.pid == a.pid  # ... and asks the new service again
        before = engines.health()["detector_service"]["calls"]
        again = build_pipeline(CONFIG, detector=BrightBlobDetector(), segmenter=SceneRoadSegmenter())
        for frame in clip[:10]:
            _same(c.process(frame), again.process(frame))
        assert engines.health()["detector_service"]["calls"] >= before + 4  # keyframes: at least every 3
        b.close()
        c.close()
    finally:
        engines.close()


def test_the_shipped_detector_served_finds_what_it_finds_in_process_and_batches_engines() -> None:
    """The real network in the service: three clients' VisDrone frames come back with the boxes the
    network finds here, batched; an engine's pipeline runs it, sized per frame as its own would be."""
    from pipelines.builder import build_detector_model

    engines = pool(detector_factory=None, timeout_s=30.0, wait_ms=3000.0)  # the three arrive well within 3 s
    try:
        where = engines.detector_service.ensure()
        assert where.info["device"] == "cpu" and where.info["weights"].endswith("int8_openvino_model")
        images = visdrone_images(3)
        here = build_detector_model(DetectorConfig())
        want = [here.detect_at(Frame(i, 0.0, im), 960) for i, im in enumerate(images)]
        clients = [RemoteModel(where, fallback=lambda: pytest.fail("the service was lost")) for _ in images]
        got: dict[int, object] = {}
        threads = [
            threading.Thread(
                target=lambda i=i: got.__setitem__(i, clients[i].detect_at(Frame(i, 0.0, images[i]), 960))
            )
            for i in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for i, w in enumerate(want):
            np.testing.assert_allclose(got[i].xyxy, w.xyxy, atol=0.01)
            np.testing.assert_array_equal(got[i].class_id, w.class_id)
        assert sum(len(w) for w in want) > 30
        assert engines.health()["detector_service"]["batch_sizes"] == {"3": 1}
        for c in clients:
            c.close()
        engine = engines.start(spec(factory=None))
        assert engine.metadata["detector"].endswith("int8_openvino_model")
        assert engine.metadata["detector_device"] == "cpu"
        engine.process(frames(1)[0])
        assert engines.health()["detector_service"]["calls"] == 4
        engine.close()
    finally:
        engines.close()
    assert not list(slots.slot_dir().glob(f"{slots.PREFIX}{os.getpid()}-*"))
