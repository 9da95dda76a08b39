"""Counters and per-track summaries of one live stream, filled by its worker and read by the API."""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np

from pipelines.height import ScaleInfo
from pipelines.types import FrameResult, PitchCheckResult, ScaleCheckResult

_QUANTILES = (("p50", 50), ("p95", 95), ("max", 100))


def _percentile(values: deque, q: float) -> float | None:
    if not values:
        return None
    return round(float(np.percentile(np.fromiter(values, float, len(values)), q)), 2)


@dataclass
class StreamStats:
    """Counters of one stream; ints are bumped from the loop thread and the worker (GIL-atomic)."""

    received: int = 0
    dropped: int = 0  # the queue was full (edge_server.frame_queue)
    skipped: int = 0  # skipped on purpose: the stream's stride (edge_server.adapt)
    # frames missing between received ones (edge_server.receive_loss): lost on the way or never sent,
    # and those of them lost while this box's UDP receive buffers overflowed (the server's own loss)
    lost_before: int = 0
    lost_locally: int = 0
    processed: int = 0
    resized: int = 0
    without_telemetry: int = 0
    telemetry_received: int = 0
    telemetry_rejected: int = 0
    telemetry_reject_reasons: Counter = field(default_factory=Counter)
    violations: int = 0
    latencies_ms: deque = field(default_factory=lambda: deque(maxlen=20000))
    # before the server: each received frame's delay from its capture (the sender's clock) to its
    # arrival here, and each processed frame's from its capture to its result (receive delay +
    # latency); only frames whose capture time is known (WebRTC, once a Sender Report came)
    receive_delays_ms: deque = field(default_factory=lambda: deque(maxlen=20000))
    capture_to_result_ms: deque = field(default_factory=lambda: deque(maxlen=20000))
    processed_at: deque = field(default_factory=lambda: deque(maxlen=300))  # perf times, recent
    first_processed_perf: float | None = None
    last_processed_perf: float | None = None
    width: int | None = None
    height: int | None = None
    camera: str | None = None
    stage_ms_sum: Counter = field(default_factory=Counter)  # pipeline stage timings, summed
    last_telemetry_perf: float | None = None  # when the last accepted telemetry message arrived
    # the scale of the latest processed frame: its telemetry's height and pitch, the ground size of a
    # pixel at the image centre (None when unknown: no telemetry, no camera)
    altitude_m: float | None = None
    gimbal_pitch_deg: float | None = None
    gsd_m_per_px: float | None = None
    scale: ScaleInfo | None = None  # its height above the road and sigmas (pipelines.height)
    scale_check: ScaleCheckResult | None = None  # the session's scale check (pipelines.scale_session)
    pitch_check: PitchCheckResult | None = None  # the session's pitch check (pipelines.pitch_check)
    # what is wrong with the frame timestamps speeds are timed by, now ("" when nothing:
    # pipelines.timestamps), and every such problem seen, with how many frames it held for
    clock_problem: str = ""
    clock_problems: Counter = field(default_factory=Counter)

    def stage_ms_mean(self) -> dict[str, float]:
        n = max(self.processed, 1)
        return {k: round(v / n, 2) for k, v in self.stage_ms_sum.items()}

    def percentile_ms(self, q: float) -> float | None:
        return _percentile(self.latencies_ms, q)

    def receive_delay_ms(self, q: float) -> float | None:
        return _percentile(self.receive_delays_ms, q)

    def delays_ms(self) -> dict[str, Any] | None:
        """The receive delay and the capture-to-result latency (p50, p95, max; None: no frame's
        capture time known), what the processing latency alone leaves out: a frame the server
        receives late was late before its latency was counted."""
        if not self.receive_delays_ms:
            return None
        return {
            "frames": len(self.receive_delays_ms),
            **{f"receive_{k}": _percentile(self.receive_delays_ms, q) for k, q in _QUANTILES},
            **{f"capture_to_result_{k}": _percentile(self.capture_to_result_ms, q) for k, q in _QUANTILES},
        }

    def recent_latency_ms(self, q: float, window_s: float = 5.0) -> float | None:
        """The latency percentile ``q`` of the frames processed in the last ``window_s`` seconds
        (a stream's state now, where :meth:`percentile_ms` covers the whole stream)."""
        now = time.perf_counter()
        n = min(sum(1 for t in self.processed_at if now - t <= window_s), len(self.latencies_ms))
        if n == 0:
            return None
        recent = list(islice(reversed(self.latencies_ms), n))  # the newest n of up to 20,000
        return round(float(np.percentile(recent, q)), 2)

    def fps(self) -> float | None:
        """Processed frames per second over the whole stream."""
        if self.first_processed_perf is None or self.last_processed_perf is None or self.processed < 2:
            return None
        span = self.last_processed_perf - self.first_processed_perf
        return round((self.processed - 1) / span, 2) if span > 0 else None

    def recent_fps(self, window_s: float = 5.0) -> float:
        now = time.perf_counter()
        times = [t for t in self.processed_at if now - t <= window_s]
        if len(times) < 2:
            return 0.0
        return (len(times) - 1) / max(times[-1] - times[0], 1e-6)

    def drop_ratio(self) -> float:
        return round(self.dropped / self.received, 4) if self.received else 0.0

    def as_session_fields(self) -> dict[str, Any]:
        return {
            "frames_received": self.received,
            "frames_processed": self.processed,
            "frames_dropped": self.dropped,
            "telemetry_received": self.telemetry_received,
            "telemetry_rejected": self.telemetry_rejected,
            "violations_count": self.violations,
            "processed_fps": self.fps(),
            "latency_p50_ms": self.percentile_ms(50),
            "latency_p95_ms": self.percentile_ms(95),
            "width": self.width,
            "height": self.height,
            "camera": self.camera,
        }


@dataclass
class _TrackAgg:
    class_name: str
    first_time_s: float
    last_time_s: float
    frames: int = 0
    speed_sum: float = 0.0
    speed_n: int = 0
    peak: float | None = None


class TrackSummaries:
    """Per-track summary built from the pipeline's frame results."""

    def __init__(self) -> None:
        self._tracks: dict[int, _TrackAgg] = {}
        self.violated: set[int] = set()

    def update(self, result: FrameResult) -> None:
        det = result.detections
        ids = det.tracker_id
        if ids is None or len(det) == 0:
            return
        t = result.frame.timestamp_s
        names = det.data.get("class_name") if det.data else None
        for i, tid in enumerate(ids):
            if tid is None or (isinstance(tid, float) and np.isnan(tid)):
                continue
            tid = int(tid)
            agg = self._tracks.get(tid)
            if agg is None:
                name = str(names[i]) if names is not None else "vehicle"
                agg = self._tracks[tid] = _TrackAgg(name, t, t)
            agg.last_time_s = t
            agg.frames += 1
            est = result.speeds.get(tid)
            if est is not None and np.isfinite(est.speed_kmh):
                agg.speed_sum += est.speed_kmh
                agg.speed_n += 1
                agg.peak = est.speed_kmh if agg.peak is None else max(agg.peak, est.speed_kmh)

    def __len__(self) -> int:
        return len(self._tracks)

    def rows(self) -> list[dict[str, Any]]:
        """The summaries of the tracks held (as the store's track rows)."""
        return [self._row(tid, a) for tid, a in sorted(self._tracks.items())]

    def finished(self, now_s: float, idle_s: float) -> list[dict[str, Any]]:
        """Summaries of the tracks not seen for ``idle_s`` (media time): the store gets them while
        the stream runs, then :meth:`forget` lets go of them, so memory holds only the tracks in
        view. The tracker never brings an id back after so long (its lost-track buffer is far
        shorter)."""
        return [
            self._row(tid, a) for tid, a in sorted(self._tracks.items()) if now_s - a.last_time_s > idle_s
        ]

    def forget(self, track_ids: list[int]) -> None:
        for tid in track_ids:
            self._tracks.pop(tid, None)
        self.violated.difference_update(track_ids)

    def _row(self, tid: int, a: _TrackAgg) -> dict[str, Any]:
        return {
            "track_id": tid,
            "class_name": a.class_name,
            "first_time_s": round(a.first_time_s, 4),
            "last_time_s": round(a.last_time_s, 4),
            "frames": a.frames,
            "peak_speed_kmh": None if a.peak is None else round(a.peak, 2),
            "mean_speed_kmh": round(a.speed_sum / a.speed_n, 2) if a.speed_n else None,
            "violated": tid in self.violated,
        }


__all__ = ["StreamStats", "TrackSummaries"]
