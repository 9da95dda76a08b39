"""The streams' one detector in a live server: its batch size from the settings and the device, its
figures in /healthz and /metrics (settings.shared_detector, detector_batch)."""

from __future__ import annotations

import pytest
from edge_helpers import synthetic_stream, wait_until

from edge_client.synthetic import SceneRoadSegmenter
from edge_server.app import make_pipeline_factory
from edge_server.metrics import Metrics
from edge_server.settings import ServerSettings


@pytest.mark.parametrize(("batch", "expected"), [(None, 4), (1, 1), (6, 6)])
def test_every_stream_gets_the_one_detector_batched_as_set(tmp_path, batch, expected) -> None:
    """``detector_batch`` None: 4 on the CPU (8 on CUDA); each stream's pipeline sizes its own input
    around the one network, and each run is counted in the metrics."""
    shared: list = []
    metrics = Metrics()
    settings = ServerSettings(data_dir=tmp_path / "data", detector_batch=batch)
    factory = make_pipeline_factory(
        settings, segmenter_factory=SceneRoadSegmenter, metrics=metrics, shared_detectors=shared
    )
    a, b = factory(), factory()
    assert len(shared) == 1 and shared[0].batcher.max_batch == expected and shared[0].device == "cpu"
    assert a.detector.inner is b.detector.inner is shared[0]  # each its own AutoSizedDetector
    import numpy as np

    from pipelines.types import Frame

    shared[0].detect_at(Frame(index=0, timestamp_s=0.0, image=np.zeros((360, 640, 3), np.uint8)), 640)
    assert metrics.registry.get_sample_value("airpatrol_detector_batch_size_count") == 1
    assert metrics.registry.get_sample_value("airpatrol_detector_queue_seconds_count") == 1
    shared[0].close()


def test_healthz_shows_the_shared_detector_of_live_streams(server_factory) -> None:
    """Two live streams on the shipped detector: /healthz says where it runs, its batches and how long
    frames waited for it; /metrics has the same."""
    srv = server_factory(
        app_kwargs={"segmenter_factory": SceneRoadSegmenter}, detector_batch=4, max_streams=2
    )
    with srv.client() as c:
        assert c.get("/healthz").json()["detector"] is None  # not loaded before a stream needs it
        with synthetic_stream(srv, 30) as a, synthetic_stream(srv, 30, others={a}):
            health = wait_until(
                lambda: (d := c.get("/healthz").json()["detector"]) and d["calls"] >= 20 and d,
                60,
                "the detector serving both streams",
            )
        assert health["device"] == "cpu" and health["max_batch"] == 4 and health["wait_ms"] == 0
        assert health["weights"].endswith("airpatrol_vehicles_n_int8_openvino_model")
        assert sum(int(k) * v for k, v in health["batch_sizes"].items()) == health["calls"]
        assert health["queue_ms_p95"] >= health["queue_ms_p50"] >= 0 and health["run_ms_mean"] > 0
        assert "airpatrol_detector_batch_size_bucket" in c.get("/metrics").text
