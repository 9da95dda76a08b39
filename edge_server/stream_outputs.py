"""What a stream's worker writes, from its thread: :class:`StreamOutputs` (violations with their
wall-clock time, track summaries, the live ``stats`` event, counters persisted while the stream
runs, everything left at its end and the ``session.ended`` event), and :class:`StreamServices`,
the server's shared services they are written to."""

from __future__ import annotations

import csv
import datetime as dt
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge_server.events import EventBus
from edge_server.evidence.audit import ENGINE, Auditor
from edge_server.evidence.service import EvidenceService
from edge_server.metrics import Metrics
from edge_server.receive_loss import BoxOverflow
from edge_server.settings import ServerSettings
from edge_server.store import Store
from edge_server.stream_stats import StreamStats, TrackSummaries
from edge_server.violations import ViolationRecorder
from pipelines.sinks import SPEED_COLUMNS, speed_rows
from pipelines.types import FrameResult, Telemetry, Violation

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamServices:
    """What every stream on this server shares: settings, store, live events, metrics, clip writer,
    evidence packs."""

    settings: ServerSettings
    store: Store
    bus: EventBus
    metrics: Metrics
    clip_executor: Executor
    evidence: EvidenceService | None = None  # records and signed packs (None: off)
    auditor: Auditor | None = None  # the audit trail (None: a test's services without one)
    # the rung of the effort ladder the last stream ended on (edge_server.adapt): the next starts near it
    effort_memory: dict[str, int] = field(default_factory=dict)
    # whether this box's UDP receive buffers overflow (edge_server.receive_loss; None: not watched)
    box_overflow: BoxOverflow | None = None


class TrackRecord:
    """A stream's per-frame tracks and speeds (``settings.record_tracks``): the offline runner's
    ``speeds.csv`` rows (:func:`pipelines.sinks.speed_rows`), flushed every frame, so a crash keeps
    every frame written."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(path, "w", newline="", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._csv = csv.writer(self._fh)
        self._csv.writerow(SPEED_COLUMNS)

    def write(self, result: FrameResult) -> None:
        rows = speed_rows(result)
        if rows:
            self._csv.writerows(rows)
            self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class StreamOutputs:
    """One stream's outputs, written by its worker thread."""

    def __init__(
        self, session_id: str, services: StreamServices, stats: StreamStats, snapshot_margin_px: int
    ) -> None:
        self.session_id = session_id
        self.services = services
        self.settings = services.settings
        self.metrics = services.metrics
        self.stats = stats
        self.violations = ViolationRecorder(
            session_id,
            settings=services.settings,
            store=services.store,
            bus=services.bus,
            metrics=services.metrics,
            clip_executor=services.clip_executor,
            snapshot_margin_px=snapshot_margin_px,
            evidence=services.evidence,
            auditor=services.auditor,
        )
        self.tracks = TrackSummaries()
        # the first received frame's media and wall-clock times: what a violation's time is counted from
        self.first_media_time: float | None = None
        self.first_wall: float | None = None
        self.last_telemetry: Telemetry | None = None  # of the last frame that had any
        self.engine_pid: int | None = None  # the stream's engine process (None: a thread of the server)
        self.effort: Callable[[], dict[str, Any]] | None = None  # the stream's rung now (edge_server.adapt)
        self.track_record: TrackRecord | None = None
        if services.settings.record_tracks:
            self.track_record = TrackRecord(services.settings.data_dir / "tracks" / f"{session_id}.csv")
        self._last_stats_pub = 0.0
        self._last_persist = time.perf_counter()

    # -- while the stream runs ----------------------------------------------------------------

    def maybe_persist(self, now: float, media_time_s: float) -> None:
        """Every ``session_persist_interval_s``: the live counters into the session row, and the
        summaries of tracks gone for ``track_summary_idle_s`` into the store (a crash then loses at
        most that much of either, and memory holds only the tracks in view)."""
        if now - self._last_persist < self.settings.session_persist_interval_s:
            return
        self._last_persist = now
        store = self.services.store
        try:
            store.update_session(self.session_id, **self.stats.as_session_fields())
            finished = self.tracks.finished(media_time_s, self.settings.track_summary_idle_s)
            if finished:
                store.save_tracks(self.session_id, finished)
                self.tracks.forget([row["track_id"] for row in finished])
        except Exception:  # noqa: BLE001 - the stream goes on; what is missing is written at its end
            log.warning(
                "session %s: live counters or track summaries not stored", self.session_id, exc_info=True
            )

    def maybe_publish_stats(self, now: float) -> None:
        """Every ``stats_interval_s``: the live ``stats`` event and the stream's gauges."""
        if now - self._last_stats_pub < self.settings.stats_interval_s:
            return
        self._last_stats_pub = now
        fps = self.stats.recent_fps()
        self.metrics.stream_fps.labels(self.session_id).set(fps)
        self.metrics.stream_drop_ratio.labels(self.session_id).set(self.stats.drop_ratio())
        self.services.bus.publish_threadsafe(
            {
                "type": "stats",
                "session_id": self.session_id,
                "processed_fps": round(fps, 2),
                "frames_received": self.stats.received,
                "frames_processed": self.stats.processed,
                "frames_dropped": self.stats.dropped,
                # missing between received frames: lost before the server, or never sent
                "frames_lost_before_server": self.stats.lost_before,
                "latency_p50_ms": self.stats.percentile_ms(50),
                "latency_p95_ms": self.stats.percentile_ms(95),
                "latency_p95_recent_ms": self.stats.recent_latency_ms(95),  # the last 5 s
                # capture (the sender's clock) -> arrival here, of the stream's received frames
                "receive_delay_p95_ms": self.stats.receive_delay_ms(95),
                "telemetry_rejected": self.stats.telemetry_rejected,
                # seconds since the last telemetry message arrived (None: none yet)
                "telemetry_age_s": (
                    round(now - self.stats.last_telemetry_perf, 1)
                    if self.stats.last_telemetry_perf is not None
                    else None
                ),
                "altitude_m": self.stats.altitude_m,
                "gimbal_pitch_deg": self.stats.gimbal_pitch_deg,
                "gsd_cm_per_px": round(self.stats.gsd_m_per_px * 100, 2) if self.stats.gsd_m_per_px else None,
                # the latest frame's scale: the height above the road, its source and sigmas (None: no speeds)
                "scale": self.stats.scale.to_dict() if self.stats.scale is not None else None,
                # the session's scale check from the vehicles (None: off)
                "scale_check": None if self.stats.scale_check is None else self.stats.scale_check.to_dict(),
                # the session's pitch check against the traffic (None: off)
                "pitch_check": None if self.stats.pitch_check is None else self.stats.pitch_check.to_dict(),
                # what is wrong with the frame timestamps now (None: nothing): speeds are timed by them
                "clock_problem": self.stats.clock_problem or None,
                "engine_pid": self.engine_pid,  # the stream's engine process (None: a thread of the server)
                # what the stream gives up to keep up (edge_server.adapt; None: settings.adapt off)
                "effort": self.effort() if self.effort is not None else None,
                "frames_skipped": self.stats.skipped,
            }
        )

    # -- violations -----------------------------------------------------------------------------

    def wall_time(self, media_time_s: float) -> dt.datetime:
        base_wall = self.first_wall if self.first_wall is not None else time.time()
        base_media = self.first_media_time or 0.0
        return dt.datetime.fromtimestamp(base_wall + (media_time_s - base_media), dt.timezone.utc)

    def frame_done(self, result: FrameResult) -> None:
        """A processed frame: the track summaries, and its tracks and speeds where they are recorded."""
        self.tracks.update(result)
        if self.track_record is not None:
            self.track_record.write(result)

    def record(self, v: Violation, annotated: np.ndarray | None, telemetry: Telemetry | None) -> None:
        self.violations.record(v, annotated, telemetry or self.last_telemetry, self.wall_time(v.start_time_s))
        self.stats.violations += 1
        self.tracks.violated.add(int(v.track_id))

    # -- the end --------------------------------------------------------------------------------

    def write_out(self, closing: list[Violation]) -> None:
        """The stream ended: the violations its pipeline closed at the end, pending snapshots and
        clips (waited for ``clip_wait_s``) and the track summaries."""
        for v in closing:
            try:
                self.record(v, None, self.last_telemetry)
            except Exception:  # noqa: BLE001
                log.exception("session %s: violation not stored", self.session_id)
        self.violations.flush(None)
        late = self.violations.wait_for_clips(self.settings.clip_wait_s)
        if late:
            log.info(
                "session %s: %d clips still being written; they follow as clip_ready", self.session_id, late
            )
        try:
            self.services.store.save_tracks(self.session_id, self.tracks.rows())
        except Exception:  # noqa: BLE001
            log.exception("session %s: track summaries not stored", self.session_id)
        if self.track_record is not None:
            self.track_record.close()

    def publish_end(self, status: str, reason: str) -> None:
        """The stream is closed and stored: count it, forget its gauges, send ``session.ended``."""
        self.metrics.stream_end_total.labels(status).inc()
        if self.services.auditor is not None:
            self.services.auditor.record(
                ENGINE, "session.ended", "session", self.session_id, None,
                {"status": status, "reason": reason, "violations": self.stats.violations},
            )  # fmt: skip
        self.metrics.forget_stream(self.session_id)
        self.services.bus.publish_threadsafe(
            {
                "type": "session.ended",
                "session_id": self.session_id,
                "status": status,
                "reason": reason,
                **self.stats.as_session_fields(),
            }
        )


__all__ = ["StreamOutputs", "StreamServices"]
