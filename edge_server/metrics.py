"""Prometheus metrics of one server instance (own registry, so several apps can live in one process)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

LATENCY_BUCKETS_S = (0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0, 5.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.active_streams = Gauge("airpatrol_active_streams", "Streams being received now", registry=r)
        self.streams_total = Counter(
            "airpatrol_streams_total", "Streams started, by ingest kind", ["kind"], registry=r
        )
        self.stream_end_total = Counter(
            "airpatrol_stream_end_total", "Streams ended, by outcome", ["status"], registry=r
        )
        self._frames(r)
        self.stream_fps = Gauge(
            "airpatrol_stream_processed_fps",
            "Processed frames per second of each active stream",
            ["session"],
            registry=r,
        )
        self.stream_drop_ratio = Gauge(
            "airpatrol_stream_dropped_ratio",
            "Dropped / received frames of each active stream",
            ["session"],
            registry=r,
        )
        self.telemetry_messages = Counter(
            "airpatrol_telemetry_messages_total",
            "Telemetry data-channel messages, by result",
            ["result"],
            registry=r,
        )
        self.ingest_rejected = Counter(
            "airpatrol_ingest_rejected_total",
            "RTMP publishers and pulled streams refused or failed, by kind and reason",
            ["kind", "reason"],
            registry=r,
        )
        self.violations = Counter("airpatrol_violations_total", "Violations detected", registry=r)
        self.evidence_pack_seconds = Histogram(
            "airpatrol_evidence_pack_seconds",
            "A violation's clip written (or given up) -> its signed evidence pack on disk",
            buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0),
            registry=r,
        )
        self.evidence_packs = Counter(
            "airpatrol_evidence_packs_total", "Evidence packs made live, by result", ["result"], registry=r
        )
        self.api_read_wait = Histogram(
            "airpatrol_api_read_wait_seconds",
            "Time each API read paced while a stream was live waited for its turn",
            buckets=(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=r,
        )
        self.api_reads_refused = Counter(
            "airpatrol_api_reads_refused_total",
            "API reads answered 503 busy: too many were waiting while a stream was live",
            registry=r,
        )
        self._alerts(r)
        self._engines(r)
        self._detector(r)
        self.event_subscribers = Gauge(
            "airpatrol_event_subscribers", "Open /api/v1/events WebSockets", registry=r
        )

    def _frames(self, r: CollectorRegistry) -> None:
        """Frames: received, processed, dropped, lost before the server, and their latencies."""
        self.frames_received = Counter(
            "airpatrol_frames_received_total", "Decoded video frames received", registry=r
        )
        self.frames_processed = Counter(
            "airpatrol_frames_processed_total", "Frames run through a pipeline", registry=r
        )
        self.frames_dropped = Counter(
            "airpatrol_frames_dropped_total",
            "Frames replaced in the latest-frame slot before a worker took them (processing slower than the stream)",
            registry=r,
        )
        self.frame_latency = Histogram(
            "airpatrol_frame_latency_seconds",
            "Server-added latency per processed frame: decoded frame received -> pipeline result",
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.frames_lost_before_server = Counter(
            "airpatrol_frames_lost_before_server_total",
            "Frames missing between a stream's received frames (their media times): lost on the way, in a "
            "full socket buffer here, or never sent",
            registry=r,
        )
        self.frame_capture_to_result = Histogram(
            "airpatrol_frame_capture_to_result_seconds",
            "Per processed frame whose capture time is known (WebRTC Sender Reports): capture on the "
            "sender's clock -> pipeline result (the receive delay before the server, then its latency)",
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )

    def _alerts(self, r: CollectorRegistry) -> None:
        """The stop team's webhooks (edge_server.alerts.webhooks), and streams refused for memory."""
        self.streams_refused_memory = Counter(
            "airpatrol_streams_refused_memory_total",
            "New streams refused: the box's available memory would fall below min_free_memory_mb",
            registry=r,
        )
        self.webhook_deliveries = Counter(
            "airpatrol_webhook_deliveries_total",
            "Webhook tries by target and outcome (delivered, retried, dead)",
            ["target", "outcome"],
            registry=r,
        )
        self.webhook_delay = Histogram(
            "airpatrol_webhook_delay_seconds",
            "An event queued -> its webhook delivered (a 2xx), retries included",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0, 900.0),
            registry=r,
        )

    def _engines(self, r: CollectorRegistry) -> None:
        """Streams' engine processes (settings.engine_processes, edge_server.engines)."""
        self.engine_processes = Gauge(
            "airpatrol_engine_processes",
            "Engine processes running (one per live stream, and a spare)",
            registry=r,
        )
        self.engines_lost = Counter(
            "airpatrol_engines_lost_total",
            "Engine processes lost: died (killed, out of memory, a native crash) or hung (stopped by the watchdog)",
            ["cause"],
            registry=r,
        )

    def _detector(self, r: CollectorRegistry) -> None:
        """The streams' shared detector (settings.shared_detector): its batches and their queueing."""
        self.detector_batch_size = Histogram(
            "airpatrol_detector_batch_size",
            "Frames per run of the shared detector (streams' frames batched: settings.detector_batch)",
            buckets=(1, 2, 3, 4, 6, 8, 12, 16, 32),
            registry=r,
        )
        self.detector_queue = Histogram(
            "airpatrol_detector_queue_seconds",
            "A frame's wait for the shared detector (other streams' runs, a batch filling)",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0),
            registry=r,
        )

    def detector_batch(self, size: int, waits_s: Sequence[float]) -> None:
        self.detector_batch_size.observe(size)
        for w in waits_s:
            self.detector_queue.observe(w)

    def forget_stream(self, session_id: str) -> None:
        for gauge in (self.stream_fps, self.stream_drop_ratio):
            with contextlib.suppress(KeyError):
                gauge.remove(session_id)
