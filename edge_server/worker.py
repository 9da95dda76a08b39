"""Per-stream processing: a worker thread running one pipeline, fed by a latest-frame slot.

The receiving coroutine drops each decoded frame into a one-place slot; when the worker is still
busy with the previous frame, the waiting frame is replaced (and counted as dropped), so latency
never accumulates when processing is slower than the stream. Conversion to BGR happens in the
worker, so dropped frames cost nothing but their decode.

Whatever ends the stream - the peer leaving, a corrupt frame, an engine error, server shutdown -
the worker calls ``pipeline.finish()``, stores every violation, writes pending clips and the
track summaries, and closes the session row.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import re
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from edge_server.events import EventBus
from edge_server.media import FrameRing, PendingClip, fit_width, write_clip, write_jpeg
from edge_server.metrics import Metrics
from edge_server.schemas import ViolationOut
from edge_server.store import Store
from pipelines.annotate import annotate
from pipelines.types import Frame, FrameResult, Telemetry, Violation

log = logging.getLogger(__name__)


class CorruptFrameError(Exception):
    """A received frame that cannot be turned into a usable image."""


@dataclass
class IncomingFrame:
    image: Any  # av.VideoFrame (converted in the worker) or a BGR ndarray
    media_time_s: float  # zero-based media time from the RTP timestamps
    received_perf: float  # time.perf_counter() when the decoded frame reached the server code
    received_wall: float  # time.time() at the same moment
    index: int  # received-frame index (gaps in processed indices = dropped frames)


class LatestSlot:
    """One-place mailbox: ``put`` replaces what is waiting and returns the replaced item."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._item: IncomingFrame | None = None
        self._closed = False

    def put(self, item: IncomingFrame) -> IncomingFrame | None:
        with self._cond:
            if self._closed:
                return None
            dropped, self._item = self._item, item
            self._cond.notify()
            return dropped

    def take(self, timeout: float) -> IncomingFrame | None:
        with self._cond:
            if self._item is None and not self._closed:
                self._cond.wait(timeout)
            item, self._item = self._item, None
            return item

    def close(self) -> IncomingFrame | None:
        with self._cond:
            self._closed = True
            item, self._item = self._item, None
            self._cond.notify_all()
            return item

    @property
    def closed(self) -> bool:
        return self._closed


@dataclass
class StreamStats:
    """Counters of one stream; ints are bumped from the loop thread and the worker (GIL-atomic)."""

    received: int = 0
    dropped: int = 0
    processed: int = 0
    resized: int = 0
    without_telemetry: int = 0
    telemetry_received: int = 0
    telemetry_rejected: int = 0
    telemetry_reject_reasons: Counter = field(default_factory=Counter)
    violations: int = 0
    latencies_ms: deque = field(default_factory=lambda: deque(maxlen=20000))
    processed_at: deque = field(default_factory=lambda: deque(maxlen=300))  # perf times, recent
    first_processed_perf: float | None = None
    last_processed_perf: float | None = None
    width: int | None = None
    height: int | None = None
    camera: str | None = None
    stage_ms_sum: Counter = field(default_factory=Counter)  # pipeline stage timings, summed

    def stage_ms_mean(self) -> dict[str, float]:
        n = max(self.processed, 1)
        return {k: round(v / n, 2) for k, v in self.stage_ms_sum.items()}

    def percentile_ms(self, q: float) -> float | None:
        if not self.latencies_ms:
            return None
        return round(float(np.percentile(np.fromiter(self.latencies_ms, float), q)), 2)

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
        ids = getattr(det, "tracker_id", None)
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

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "track_id": tid,
                "class_name": a.class_name,
                "first_time_s": round(a.first_time_s, 4),
                "last_time_s": round(a.last_time_s, 4),
                "frames": a.frames,
                "peak_speed_kmh": None if a.peak is None else round(a.peak, 2),
                "mean_speed_kmh": round(a.speed_sum / a.speed_n, 2) if a.speed_n else None,
                "violated": tid in self.violated,
            }
            for tid, a in sorted(self._tracks.items())
        ]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:40] or "zone"


def _to_bgr(image: Any) -> np.ndarray:
    if isinstance(image, np.ndarray):
        arr = image
    else:
        try:
            arr = image.to_ndarray(format="bgr24")
        except Exception as exc:  # noqa: BLE001 - whatever the decoder handed us
            raise CorruptFrameError(f"frame could not be converted to BGR: {exc}") from exc
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
        raise CorruptFrameError(f"frame has shape {arr.shape} and dtype {arr.dtype}, expected HxWx3 uint8")
    if arr.shape[0] < 16 or arr.shape[1] < 16:
        raise CorruptFrameError(f"frame is {arr.shape[1]}x{arr.shape[0]} pixels, too small to process")
    return arr


class StreamWorker:
    """Runs one pipeline in its own thread for one stream."""

    def __init__(
        self,
        session_id: str,
        pipeline: Any,
        *,
        store: Store,
        bus: EventBus,
        metrics: Metrics,
        media_dir: Path,
        clip_executor: Executor,
        telemetry_at: Callable[[float], Telemetry | None] = lambda _t: None,
        return_sink: Callable[[np.ndarray], None] | None = None,
        return_wanted: Callable[[], bool] = lambda: True,
        process_max_width: int | None = None,
        on_finished: Callable[[str, str, str | None], None] | None = None,
        stats: StreamStats | None = None,
        clip_pre_s: float = 3.0,
        clip_post_s: float = 2.0,
        clip_fps: float = 10.0,
        clip_max_width: int = 640,
        snapshot_quality: int = 90,
        stats_interval_s: float = 2.0,
        session_info: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.session_id = session_id
        self.pipeline = pipeline
        self.store = store
        self.bus = bus
        self.metrics = metrics
        self.media_dir = media_dir
        self.clip_executor = clip_executor
        self.telemetry_at = telemetry_at
        self.return_sink = return_sink
        self.return_wanted = return_wanted
        self.process_max_width = process_max_width
        self.on_finished = on_finished
        self.stats = stats or StreamStats()
        self.clip_pre_s = clip_pre_s
        self.clip_post_s = clip_post_s
        self.clip_fps = clip_fps
        self.snapshot_quality = snapshot_quality
        self.stats_interval_s = stats_interval_s
        self.session_info = session_info
        self.ring = FrameRing(clip_pre_s + clip_post_s + 8.0, clip_fps, clip_max_width)
        self.tracks = TrackSummaries()
        self.slot = LatestSlot()
        rules = getattr(getattr(pipeline, "config", None), "rules", None)
        self._speed_limit = getattr(rules, "speed_limit_kmh", None)
        self._stop = threading.Event()
        self._stop_reason: str | None = None
        self._pending: list[PendingClip] = []
        self._clip_futures: list[Future] = []
        self._size: tuple[int, int] | None = None
        self._first_media_time: float | None = None
        self._first_wall: float | None = None
        self._last_telemetry: Telemetry | None = None
        self._last_stats_pub = 0.0
        self._thread = threading.Thread(target=self._run, name=f"stream-{session_id[:8]}", daemon=True)
        self.status = "active"
        self.end_reason: str | None = None
        self.finished = threading.Event()

    # -- called from the event loop -------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def submit(self, item: IncomingFrame) -> None:
        """Hand a received frame to the worker (never blocks)."""
        self.stats.received += 1
        self.metrics.frames_received.inc()
        if self._first_wall is None:
            self._first_wall = item.received_wall
            self._first_media_time = item.media_time_s
        if self.slot.put(item) is not None:
            self.stats.dropped += 1
            self.metrics.frames_dropped.inc()

    def stop(self, reason: str) -> None:
        """Ask the worker to finish (idempotent); the first reason given is kept."""
        if self._stop_reason is None:
            self._stop_reason = reason
        self._stop.set()
        self.slot.close()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- worker thread --------------------------------------------------------------------------

    def _run(self) -> None:
        status, reason = "ended", None
        try:
            while not self._stop.is_set():
                item = self.slot.take(timeout=0.25)
                if item is None:
                    continue
                self._process(item)
        except CorruptFrameError as exc:
            status, reason = "failed", f"corrupt frame: {exc}"
            log.warning("session %s: %s", self.session_id, reason)
        except Exception as exc:  # noqa: BLE001 - the stream ends, the server goes on
            status, reason = "failed", f"processing error: {type(exc).__name__}: {exc}"
            log.exception("session %s: processing failed", self.session_id)
        if reason is None:
            reason = self._stop_reason or "stopped"
        self.slot.close()
        self._finish(status, reason)

    def _process(self, item: IncomingFrame) -> None:
        image = _to_bgr(item.image)
        if self.process_max_width and image.shape[1] > self.process_max_width:
            image = fit_width(image, self.process_max_width)  # the whole frame: geometry stays consistent
        h, w = image.shape[:2]
        if self._size is None:
            self._size = (w, h)
            self.stats.width, self.stats.height = w, h
        elif (w, h) != self._size:  # senders adapt resolution to bandwidth; the pipeline keeps one
            image = cv2.resize(image, self._size, interpolation=cv2.INTER_LINEAR)
            self.stats.resized += 1
        telemetry = self.telemetry_at(item.media_time_s)
        if telemetry is None:
            self.stats.without_telemetry += 1
        else:
            self._last_telemetry = telemetry
            if telemetry.camera:
                self.stats.camera = telemetry.camera
        frame = Frame(index=item.index, timestamp_s=item.media_time_s, image=image, telemetry=telemetry)
        result = self.pipeline.process(frame)
        now = time.perf_counter()
        latency_s = now - item.received_perf
        self.stats.latencies_ms.append(latency_s * 1000.0)
        self.metrics.frame_latency.observe(latency_s)
        self.metrics.frames_processed.inc()
        self.stats.processed += 1
        self.stats.processed_at.append(now)
        if self.stats.first_processed_perf is None:
            self.stats.first_processed_perf = now
        self.stats.last_processed_perf = now

        for stage, ms in (result.timings_ms or {}).items():
            self.stats.stage_ms_sum[stage] += ms
        t_annotate = time.perf_counter()
        wants_return = self.return_sink is not None and self.return_wanted()
        annotated = None
        if result.violations or wants_return or self.ring.due(frame.timestamp_s):
            annotated = annotate(
                result, speed_limit_kmh=self._speed_limit, fps=round(self.stats.recent_fps(), 1)
            )
            self.ring.add(frame.timestamp_s, annotated)
        if wants_return:
            try:
                self.return_sink(annotated)
            except Exception:  # noqa: BLE001 - the return video is best effort
                log.debug("return video push failed", exc_info=True)
        self.tracks.update(result)
        for v in result.violations:
            self._handle_violation(v, annotated, telemetry)
        self._flush_clips(frame.timestamp_s)
        self.stats.stage_ms_sum["annotate_ring_return"] += (time.perf_counter() - t_annotate) * 1000.0
        self._maybe_publish_stats(now)

    def _maybe_publish_stats(self, now: float) -> None:
        if now - self._last_stats_pub < self.stats_interval_s:
            return
        self._last_stats_pub = now
        fps = self.stats.recent_fps()
        self.metrics.stream_fps.labels(self.session_id).set(fps)
        self.metrics.stream_drop_ratio.labels(self.session_id).set(self.stats.drop_ratio())
        self.bus.publish_threadsafe(
            {
                "type": "stats",
                "session_id": self.session_id,
                "processed_fps": round(fps, 2),
                "frames_received": self.stats.received,
                "frames_processed": self.stats.processed,
                "frames_dropped": self.stats.dropped,
                "latency_p50_ms": self.stats.percentile_ms(50),
                "latency_p95_ms": self.stats.percentile_ms(95),
                "telemetry_rejected": self.stats.telemetry_rejected,
            }
        )

    # -- violations and media -------------------------------------------------------------------

    def _wall_time(self, media_time_s: float) -> dt.datetime:
        base_wall = self._first_wall if self._first_wall is not None else time.time()
        base_media = self._first_media_time or 0.0
        return dt.datetime.fromtimestamp(base_wall + (media_time_s - base_media), dt.timezone.utc)

    def _handle_violation(
        self, v: Violation, annotated: np.ndarray | None, telemetry: Telemetry | None
    ) -> None:
        rel_dir = Path(self.session_id)
        stem = f"t{v.track_id}_{_slug(v.zone)}_{v.start_frame}"
        snapshot_rel = rel_dir / f"{stem}.jpg"
        snapshot = self._snapshot_image(v, annotated)
        snapshot_path: str | None = None
        if snapshot is not None:
            try:
                write_jpeg(self.media_dir / snapshot_rel, snapshot, self.snapshot_quality)
                snapshot_path = snapshot_rel.as_posix()
            except Exception:  # noqa: BLE001 - a violation without a snapshot is still stored
                log.exception("session %s: snapshot not written", self.session_id)
        tel = telemetry or self._last_telemetry
        ground = v.ground_xy_m
        row = self.store.add_violation(
            session_id=self.session_id,
            occurred_at=self._wall_time(v.start_time_s),
            track_id=int(v.track_id),
            class_name=v.class_name,
            zone=v.zone,
            speed_limit_kmh=float(v.speed_limit_kmh),
            peak_speed_kmh=float(v.peak_speed_kmh),
            mean_speed_kmh=float(v.mean_speed_kmh),
            sigma_kmh=float(v.sigma_kmh),
            start_time_s=float(v.start_time_s),
            end_time_s=float(v.end_time_s),
            start_frame=int(v.start_frame),
            end_frame=int(v.end_frame),
            bbox_xyxy=[round(float(x), 1) for x in v.bbox_xyxy],
            ground_x_m=None if ground is None else float(ground[0]),
            ground_y_m=None if ground is None else float(ground[1]),
            latitude=v.latitude,
            longitude=v.longitude,
            drone_latitude=None if tel is None else tel.latitude,
            drone_longitude=None if tel is None else tel.longitude,
            altitude_m=None if tel is None else tel.altitude_m,
            snapshot_path=snapshot_path,
        )
        self.stats.violations += 1
        self.metrics.violations.inc()
        self.tracks.violated.add(int(v.track_id))
        log.info(
            "session %s: violation %d track %d %.1f km/h (limit %.0f, zone %s)",
            self.session_id, row.id, v.track_id, v.peak_speed_kmh, v.speed_limit_kmh, v.zone,
        )  # fmt: skip
        self.bus.publish_threadsafe(
            {
                "type": "violation",
                "session_id": self.session_id,
                "violation": ViolationOut.from_row(row).model_dump(mode="json"),
            }
        )
        self._pending.append(
            PendingClip(
                violation_id=row.id,
                path=self.media_dir / rel_dir / f"{stem}.mp4",
                start_s=v.start_time_s - self.clip_pre_s,
                end_s=v.end_time_s + self.clip_post_s,
            )
        )

    def _snapshot_image(self, v: Violation, annotated: np.ndarray | None) -> np.ndarray | None:
        if v.snapshot is not None and getattr(v.snapshot, "size", 0):
            return v.snapshot
        if annotated is None:
            return None
        x1, y1, x2, y2 = (int(round(c)) for c in v.bbox_xyxy)
        if x2 > x1 and y2 > y1:
            h, w = annotated.shape[:2]
            m = 48
            crop = annotated[max(0, y1 - m) : min(h, y2 + m), max(0, x1 - m) : min(w, x2 + m)]
            if crop.size:
                return crop
        return annotated

    def _flush_clips(self, now_media_s: float | None) -> None:
        """Write the clips whose post-roll has passed (all of them when ``now_media_s`` is None)."""
        self._clip_futures = [f for f in self._clip_futures if not f.done()]
        keep: list[PendingClip] = []
        for clip in self._pending:
            if now_media_s is None or now_media_s >= clip.end_s:
                frames = self.ring.window(clip.start_s, clip.end_s)
                if frames:
                    self._clip_futures.append(self.clip_executor.submit(self._write_clip, clip, frames))
                else:
                    log.warning(
                        "session %s: no frames for the clip of violation %d",
                        self.session_id,
                        clip.violation_id,
                    )
            else:
                keep.append(clip)
        self._pending = keep

    def _write_clip(self, clip: PendingClip, frames: list) -> None:
        try:
            write_clip(clip.path, frames, self.clip_fps)
            rel = clip.path.relative_to(self.media_dir).as_posix()
            row = self.store.update_violation(clip.violation_id, clip_path=rel)
            if row is not None:
                self.bus.publish_threadsafe(
                    {
                        "type": "violation.clip_ready",
                        "session_id": self.session_id,
                        "violation_id": clip.violation_id,
                        "clip_url": f"/api/v1/violations/{clip.violation_id}/clip.mp4",
                    }
                )
        except Exception:  # noqa: BLE001 - the violation stays stored without a clip
            log.exception("session %s: clip for violation %d not written", self.session_id, clip.violation_id)
        finally:
            clip.done.set()

    def _finish(self, status: str, reason: str) -> None:
        """Close the pipeline and persist everything, whatever happened before."""
        try:
            try:
                closing = self.pipeline.finish() or []
            except Exception:  # noqa: BLE001
                log.exception("session %s: pipeline.finish() failed", self.session_id)
                closing = []
            release_pipeline(self.pipeline)
            for v in closing:
                try:
                    self._handle_violation(v, None, self._last_telemetry)
                except Exception:  # noqa: BLE001
                    log.exception("session %s: violation not stored", self.session_id)
            self._flush_clips(None)
            for fut in self._clip_futures:
                with contextlib.suppress(Exception):
                    fut.result(timeout=60)
            try:
                self.store.replace_tracks(self.session_id, self.tracks.rows())
            except Exception:  # noqa: BLE001
                log.exception("session %s: track summaries not stored", self.session_id)
            info: dict[str, Any] = {}
            with contextlib.suppress(Exception):
                meta = getattr(self.pipeline, "metadata", None)
                if isinstance(meta, dict):
                    info["pipeline"] = _jsonable(meta)
            if self.session_info is not None:
                with contextlib.suppress(Exception):
                    info.update(_jsonable(self.session_info()))
            info["stage_ms_mean"] = self.stats.stage_ms_mean()
            info["frames_resized"] = self.stats.resized
            info["frames_without_telemetry"] = self.stats.without_telemetry
            info["telemetry_reject_reasons"] = dict(self.stats.telemetry_reject_reasons.most_common(10))
            self.store.end_session(
                self.session_id, status, reason, info=info, **self.stats.as_session_fields()
            )
        except Exception:  # noqa: BLE001
            log.exception("session %s: could not close the session record", self.session_id)
        finally:
            self.status, self.end_reason = status, reason
            self.metrics.stream_end_total.labels(status).inc()
            self.metrics.forget_stream(self.session_id)
            self.bus.publish_threadsafe(
                {
                    "type": "session.ended",
                    "session_id": self.session_id,
                    "status": status,
                    "reason": reason,
                    **self.stats.as_session_fields(),
                }
            )
            self.finished.set()
            log.info(
                "session %s %s (%s): %d received, %d processed, %d dropped, %d violations",
                self.session_id, status, reason, self.stats.received, self.stats.processed,
                self.stats.dropped, self.stats.violations,
            )  # fmt: skip
            if self.on_finished is not None:
                with contextlib.suppress(Exception):
                    self.on_finished(self.session_id, status, reason)


def release_pipeline(pipeline: Any) -> None:
    """Free a pipeline's resources: its ``close()`` when it has one (never raises)."""
    close = getattr(pipeline, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # noqa: BLE001 - releasing is best effort
            log.warning("pipeline.close() failed", exc_info=True)


def _jsonable(value: Any) -> Any:
    """Best-effort JSON view of metadata (numpy scalars, paths, tuples ...)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 64 else f"<array {value.shape}>"
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
