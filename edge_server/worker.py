"""Per-stream processing: a worker thread running one pipeline, fed by a latest-frame slot.

The receiving coroutine puts each decoded frame into a short queue (``frame_queue`` frames, 2 by
default); when the worker falls further behind, the oldest waiting frame is dropped (and counted),
so latency never accumulates when processing is slower than the stream. How many frames wait is
the pipeline's ``backlog``: with keyframes on, it detects less often while frames wait. Conversion
to BGR happens after the queue (in the worker, or in its prepare thread, which prepares one frame
ahead), so dropped frames cost nothing but their decode.

Whatever ends the stream - the peer leaving, a corrupt frame, an engine error, server shutdown -
the worker calls ``pipeline.finish()``, stores every violation, writes pending clips and the
track summaries, and closes the session row.

:class:`StreamWorker` is the stream's engine behind :class:`edge_server.engine_link.StreamEngine`;
its frame hand-over is :mod:`edge_server.frame_queue`, what it writes :mod:`edge_server.stream_outputs`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import cv2

from edge_server.adapt import StreamAdapter
from edge_server.engine_link import EngineLost, IncomingFrame, PeerLink
from edge_server.frame_queue import CorruptFrameError, FrameQueue, ReadyFrame, to_bgr
from edge_server.height_reference import LatestFrame, SessionHeight
from edge_server.media import fit_width
from edge_server.priority import lower_thread_priority
from edge_server.receive_loss import ReceiveGaps
from edge_server.stream_outputs import StreamOutputs, StreamServices
from edge_server.stream_stats import StreamStats
from pipelines.annotate import annotate
from pipelines.config import RulesConfig
from pipelines.height import HeightReference
from pipelines.serialize import to_jsonable
from pipelines.types import Frame, FrameResult, PitchCheckResult, ScaleCheckResult

if TYPE_CHECKING:  # the engine (torch, models) loads when the first pipeline is built
    from pipelines.pipeline import Pipeline

log = logging.getLogger(__name__)

Check = ScaleCheckResult | PitchCheckResult
PREPARE_NICE = 5  # the prepare thread's nice value above the worker's (Linux)


class StreamWorker:
    """Runs one pipeline in its own thread for one stream (a :class:`~edge_server.engine_link.StreamEngine`);
    what it writes goes through its :class:`~edge_server.stream_outputs.StreamOutputs`."""

    def __init__(
        self,
        session_id: str,
        pipeline: Pipeline,
        services: StreamServices,
        peer: PeerLink | None = None,
        stats: StreamStats | None = None,
        prepare_ahead: bool | None = None,
    ) -> None:
        """``prepare_ahead`` (default: the setting, where the server may use two CPUs or more): a
        prepare thread of its own (see _prepare_loop), unless ``frame_queue`` is 1: that asks for
        the lowest latency, and a prepared frame waits for the frame being processed (one
        processing time more under overload)."""
        self.session_id = session_id
        self.pipeline = pipeline
        self.services = services
        self.settings = services.settings
        self.metrics = services.metrics
        self.peer = peer or PeerLink()
        self.stats = stats or StreamStats()
        self.outputs = StreamOutputs(
            session_id, services, self.stats, pipeline.config.rules.snapshot_margin_px
        )
        self.outputs.violations.context = self._evidence_context  # what a violation's record keeps
        self.outputs.engine_pid = getattr(pipeline, "pid", None)  # an engine process's (None: a thread)
        self.outputs.violations.source_segment = self.peer.source_segment  # RTMP/RTSP: the received video
        self.outputs.violations.alerts = pipeline.config.alerts  # the stop team's checkpoints
        # settings.prepare_ahead: received frames -> ``incoming`` -> prepare thread (BGR, grey,
        # camera motion) -> ``slot`` -> worker; else received frames go to ``slot`` directly
        if prepare_ahead is None:  # the setting; on one CPU a second thread would only add latency
            prepare_ahead = services.settings.prepare_ahead and len(os.sched_getaffinity(0)) >= 2
        self._prepare_thread = (
            threading.Thread(target=self._prepare_loop, name=f"prepare-{session_id[:8]}", daemon=True)
            if prepare_ahead and services.settings.frame_queue >= 2
            else None
        )
        # With a prepare thread, frames wait (and are dropped) in ``incoming``, and the worker's
        # slot holds the one prepared frame it takes next: a frame then waits for the frame being
        # processed only (a longer slot would add a processing time per place to the latency, and
        # 4 streams ran no faster with 2 places: 37-40 vs 40-42 fps in all, p50 240-270 vs 185 ms)
        self.incoming = FrameQueue(services.settings.frame_queue)
        self.slot = FrameQueue(1 if self._prepare_thread is not None else services.settings.frame_queue)
        self._speed_limit = pipeline.config.rules.speed_limit_kmh
        # settings.adapt: what the stream gives up when it cannot keep up (edge_server.adapt); its
        # stride is applied here, as frames arrive (the skipped ones are never converted)
        self.adapter = (
            StreamAdapter(session_id, pipeline, self.stats, services.settings, services.effort_memory)
            if services.settings.adapt
            else None
        )
        self.outputs.effort = self.adapter.live if self.adapter is not None else None
        self._phase = 0
        self._gaps = ReceiveGaps()  # frames missing between received ones (edge_server.receive_loss)
        # the operator's rules for this stream (PUT .../rules), applied by this thread at its next frame
        self._rules_lock = threading.Lock()
        self._pending_rules: RulesConfig | None = None
        # the session's height reference (PUT .../height-reference), likewise, and its latest frame
        self.height = SessionHeight(session_id, pipeline.config.camera)
        self._stop = threading.Event()
        self._stop_reason: str | None = None
        self._stop_failed = False
        self._size: tuple[int, int] | None = None
        self._thread = threading.Thread(target=self._run, name=f"stream-{session_id[:8]}", daemon=True)
        self.status = "active"
        self.end_reason: str | None = None
        self.finished = threading.Event()
        if self.adapter is not None:  # it may start on a rung that skips (near the last stream's)
            self._fit_queue()

    def _fit_queue(self) -> None:
        """Skipping frames on purpose (the adapter's stride), at most one frame waits: a frame never
        waits for two others; else the configured queue."""
        assert self.adapter is not None
        queue = self.incoming if self._prepare_thread is not None else self.slot
        queue.capacity = 1 if self.adapter.stride > 1 else self.settings.frame_queue

    # -- called from the event loop -------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        if self._prepare_thread is not None:
            self._prepare_thread.start()

    def submit(self, item: IncomingFrame) -> None:
        """Hand a received frame to the worker (never blocks)."""
        self.stats.received += 1
        self.metrics.frames_received.inc()
        if item.receive_delay_s is not None:
            self.stats.receive_delays_ms.append(item.receive_delay_s * 1000.0)
        if missing := self._gaps.add(item.media_time_s):
            self._count_lost(missing)
        if self.outputs.first_wall is None:
            self.outputs.first_wall = item.received_wall
            self.outputs.first_media_time = item.media_time_s
        stride = self.adapter.stride if self.adapter is not None else 1
        self._phase = (self._phase + 1) % stride if stride > 1 else 0
        if self._phase:  # skipped on purpose: every stride-th frame is processed, evenly
            self.stats.skipped += 1
            return
        queue = self.incoming if self._prepare_thread is not None else self.slot
        if queue.put(item) is not None:
            self._count_dropped()

    def _count_lost(self, missing: int) -> None:
        self.stats.lost_before += missing
        self.metrics.frames_lost_before_server.inc(missing)
        overflow = self.outputs.services.box_overflow
        if overflow is not None and overflow.overflowing():
            self.stats.lost_locally += missing

    def _count_dropped(self) -> None:
        self.stats.dropped += 1
        self.metrics.frames_dropped.inc()

    def stop(self, reason: str, failed: bool = False) -> None:
        """Ask the worker to finish (idempotent); the first reason given is kept, and ``failed``
        with it (the stream ended on an error of its transport: the session is stored as failed)."""
        if self._stop_reason is None:
            self._stop_reason = reason
            self._stop_failed = failed
        self._stop.set()
        self.incoming.close()
        self.slot.close()

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        if self._prepare_thread is not None and self._prepare_thread.is_alive():
            self._prepare_thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def prepares_ahead(self) -> bool:
        """Whether a prepare thread of its own readies each frame (see _prepare_loop)."""
        return self._prepare_thread is not None

    # -- worker thread --------------------------------------------------------------------------

    def _prepare_loop(self) -> None:
        """The prepare thread: each frame converted, and its grey image and camera motion computed
        (``Pipeline.prepare``) while the worker processes the frame before. It runs a little nicer
        than the worker, and one frame ahead only: it waits until the worker has taken the last
        prepared frame, so it never prepares a frame that would be dropped (wasted conversion and
        camera motion); frames arriving while it waits are dropped from ``incoming``, unconverted."""
        lower_thread_priority(PREPARE_NICE)
        while not self._stop.is_set():
            if not self.slot.wait_room(timeout=0.25):
                if self.slot.closed:
                    return
                continue
            item = self.incoming.take(timeout=0.25)
            if item is None:
                if self.incoming.closed:
                    return
                continue
            try:
                t0 = time.perf_counter()
                frame = self._frame(item)
                self.stats.stage_ms_sum["convert"] += (time.perf_counter() - t0) * 1000.0
                ready = ReadyFrame(item, frame, self.pipeline.prepare(frame))
            except Exception as exc:  # noqa: BLE001 - handed to the worker, which ends the stream
                self.slot.put(ReadyFrame(item, error=exc))
                return
            self.slot.put(ready)  # there is room: nothing is dropped

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
        except EngineLost as exc:  # its process died or hung: this stream alone ends
            status, reason = "failed", str(exc)
            log.warning("session %s ends: %s", self.session_id, reason)
        except Exception as exc:  # noqa: BLE001 - the stream ends, the server goes on
            status, reason = "failed", f"processing error: {type(exc).__name__}: {exc}"
            log.exception("session %s: processing failed", self.session_id)
        if reason is None:
            reason = self._stop_reason or "stopped"
            if self._stop_failed:
                status = "failed"
        self.incoming.close()
        self.slot.close()
        if self._prepare_thread is not None and self._prepare_thread.is_alive():
            self._prepare_thread.join(5.0)  # it may be inside the pipeline: let it leave first
        self._finish(status, reason)

    def _frame(self, item: IncomingFrame) -> Frame:
        """The received image as the pipeline's frame: BGR, one size for the whole stream, telemetry."""
        image = to_bgr(item.image)
        max_width = self.settings.process_max_width
        if max_width and image.shape[1] > max_width:
            image = fit_width(image, max_width)  # the whole frame: geometry stays consistent
        h, w = image.shape[:2]
        if self._size is None:
            self._size = (w, h)
            self.stats.width, self.stats.height = w, h
        elif (w, h) != self._size:  # senders adapt resolution to bandwidth; the pipeline keeps one
            image = cv2.resize(image, self._size, interpolation=cv2.INTER_LINEAR)
            self.stats.resized += 1
        telemetry = self.peer.telemetry_at(item.media_time_s)
        if telemetry is None:
            self.stats.without_telemetry += 1
        else:
            self.outputs.last_telemetry = telemetry
            if telemetry.camera:
                self.stats.camera = telemetry.camera
        return Frame(index=item.index, timestamp_s=item.media_time_s, image=image, telemetry=telemetry)

    def _count_processed(self, item: IncomingFrame, result: FrameResult) -> float:
        now = time.perf_counter()
        latency_s = now - item.received_perf
        self.stats.latencies_ms.append(latency_s * 1000.0)
        if item.receive_delay_s is not None:
            self.stats.capture_to_result_ms.append((item.receive_delay_s + latency_s) * 1000.0)
            self.metrics.frame_capture_to_result.observe(max(0.0, item.receive_delay_s + latency_s))
        self.metrics.frame_latency.observe(latency_s)
        self.metrics.frames_processed.inc()
        self.stats.processed += 1
        self.stats.processed_at.append(now)
        if self.stats.first_processed_perf is None:
            self.stats.first_processed_perf = now
        self.stats.last_processed_perf = now
        for stage, ms in (result.timings_ms or {}).items():
            self.stats.stage_ms_sum[stage] += ms
        telemetry = result.frame.telemetry
        self.stats.altitude_m = telemetry.altitude_m if telemetry is not None else None
        self.stats.gimbal_pitch_deg = telemetry.gimbal_pitch_deg if telemetry is not None else None
        self.stats.gsd_m_per_px = result.gsd_m_per_px
        self.stats.scale = result.scale
        self._check_turned(self.stats.scale_check, result.scale_check, self.rules.hold_scale_check)
        self.stats.scale_check = result.scale_check
        self._check_turned(self.stats.pitch_check, result.pitch_check, self.rules.hold_pitch_check)
        self.stats.pitch_check = result.pitch_check
        problem = self.pipeline.timestamps.problem
        if problem and not self.stats.clock_problem:
            log.warning("session %s: %s", self.session_id, problem)
        self.stats.clock_problem = problem
        if problem:
            self.stats.clock_problems[problem] += 1
        return now

    def _check_turned(self, before: Check | None, now: Check | None, hold: Sequence[str]) -> None:
        """The scale or the pitch check turned to a status the site holds: the tickets stored before
        are held too."""
        if now is not None and now.status in hold and (before is None or before.status not in hold):
            self.outputs.violations.hold_recorded(now)

    def _process(self, item: IncomingFrame | ReadyFrame) -> None:
        t_start = time.perf_counter()
        try:
            self._process_one(item)
        finally:  # the worker's whole time per frame: what its fps is bound by
            self.stats.stage_ms_sum["worker"] += (time.perf_counter() - t_start) * 1000.0

    @property
    def rules(self) -> RulesConfig:
        """The limits and zones this stream is (or, from its next frame, will be) measured against."""
        pending = self._pending_rules
        return pending if pending is not None else self.pipeline.rules.cfg

    def set_rules(self, rules: RulesConfig) -> None:
        """New limits and zones from the next frame on (called from the API's thread)."""
        with self._rules_lock:
            self._pending_rules = rules

    def _apply_rules(self) -> None:
        with self._rules_lock:
            rules, self._pending_rules = self._pending_rules, None
        if rules is None:
            return
        closing = self.pipeline.rules.set_rules(rules)
        self._speed_limit = rules.speed_limit_kmh
        log.info(
            "session %s: rules now global limit %s km/h, %d zone(s), tolerance %s of %.1f km/h and %.1f %%, "
            "ticket rule %s at %.3f confidence (%d open episode(s) closed)",
            self.session_id, rules.speed_limit_kmh, len(rules.zones), rules.tolerance_mode, rules.tolerance_kmh,
            rules.tolerance_percent, rules.ticket_rule, rules.confidence, len(closing),
        )  # fmt: skip
        for v in closing:
            self.outputs.record(v, None, self.outputs.last_telemetry)

    def _apply_height(self, reference: HeightReference | None) -> None:
        self.pipeline.set_height_reference(reference)
        log.info(
            "session %s: height reference from this frame on: %s",
            self.session_id, reference.detail if reference is not None else "the configuration's",
        )  # fmt: skip

    def _process_one(self, item: IncomingFrame | ReadyFrame) -> None:
        if self._pending_rules is not None:
            self._apply_rules()
        changed, reference = self.height.take_pending()
        if changed:
            self._apply_height(reference)
        prepared = None
        if isinstance(item, ReadyFrame):
            if item.error is not None:
                raise item.error
            assert item.frame is not None
            frame, prepared, item = item.frame, item.prepared, item.item
        else:
            t_convert = time.perf_counter()
            frame = self._frame(item)
            self.stats.stage_ms_sum["convert"] += (time.perf_counter() - t_convert) * 1000.0
        backlog = self.slot.waiting + self.incoming.waiting
        result = self.pipeline.process(frame, backlog=backlog, prepared=prepared)
        now = self._count_processed(item, result)
        if self.adapter is not None and self.adapter.after_frame(now, self.stats.latencies_ms[-1]):
            self._fit_queue()
        self.height.latest = LatestFrame(frame, result.road_mask, result.scale)
        t_annotate = time.perf_counter()
        wants_return = self.peer.return_sink is not None and self.peer.return_wanted()
        annotated = None
        violations = self.outputs.violations
        if result.violations or wants_return or violations.frame_due(frame.timestamp_s):
            annotated = annotate(
                result,
                speed_limit_kmh=self._speed_limit,
                fps=round(self.stats.recent_fps(), 1),
                max_width=self._annotate_width(result, wants_return),
            )
            violations.add_frame(frame.timestamp_s, annotated)
        if wants_return:
            try:
                self.peer.return_sink(annotated)
            except Exception:  # noqa: BLE001 - the return video is best effort
                log.debug("return video push failed", exc_info=True)
        self.outputs.frame_done(result)
        for v in result.violations:
            self.outputs.record(v, annotated, frame.telemetry)
        violations.flush(frame.timestamp_s)
        self.stats.stage_ms_sum["annotate_ring_return"] += (time.perf_counter() - t_annotate) * 1000.0
        self.outputs.maybe_publish_stats(now)
        self.outputs.maybe_persist(now, frame.timestamp_s)

    def _annotate_width(self, result: FrameResult, wants_return: bool) -> int | None:
        """Draw at the size the annotated frame is used at: full size for a violation's frame (its
        snapshot may be cut from it), else the widest of the clip ring and the return video."""
        if result.violations:
            return None
        width = self.settings.clip_max_width
        return max(width, self.settings.return_video_max_width) if wants_return else width

    # -- the end --------------------------------------------------------------------------------

    def _finish(self, status: str, reason: str) -> None:
        """Close the pipeline and persist everything, whatever happened before; then announce it."""
        try:
            self._store_everything()
            self.services.store.end_session(
                self.session_id, status, reason, info=self._session_info(), **self.stats.as_session_fields()
            )
        except Exception:  # noqa: BLE001
            log.exception("session %s: could not close the session record", self.session_id)
        finally:
            self.height.release()  # the last and the frozen frames' images and masks
            self.status, self.end_reason = status, reason
            self._announce_end(status, reason)

    def _store_everything(self) -> None:
        try:
            closing = self.pipeline.finish()
        except EngineLost:  # the violations it had closed are stored; the open ones died with it
            closing = []
        except Exception:  # noqa: BLE001
            log.exception("session %s: pipeline.finish() failed", self.session_id)
            closing = []
        close_pipeline(self.pipeline)
        if self.adapter is not None:
            self.adapter.ended()
        self.outputs.write_out(closing)

    def _session_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"pipeline": to_jsonable(self.pipeline.metadata, max_array_size=64)}
        if self.peer.session_info is not None:
            try:
                info.update(to_jsonable(self.peer.session_info(), max_array_size=64))
            except Exception:  # noqa: BLE001 - transport details are optional
                log.debug("session info unavailable", exc_info=True)
        info["stage_ms_mean"] = self.stats.stage_ms_mean()
        # the latency's tail, where a step some frames take shows (p50 and p95 are the record's own)
        info["latency_tail_ms"] = {"p99": self.stats.percentile_ms(99), "max": self.stats.percentile_ms(100)}
        # before the server: the receive delay and the capture-to-result latency (None: unknown)
        info["delays_ms"] = self.stats.delays_ms()
        # frames missing between received ones: all, and those while the box's receive buffers overflowed
        info["frames_lost_before_server"] = {
            "all": self.stats.lost_before,
            "box_overflowing": self.stats.lost_locally,
        }
        info["frames_resized"] = self.stats.resized
        info["frames_without_telemetry"] = self.stats.without_telemetry
        info["telemetry_reject_reasons"] = dict(self.stats.telemetry_reject_reasons.most_common(10))
        # frame timestamps speeds could not be timed by (pipelines.timestamps): problem -> frames
        info["clock_problems"] = dict(self.stats.clock_problems.most_common(5))
        info.update(self.height.info())  # the height reference in effect and every change
        if self.adapter is not None:  # what it gave up to keep up, when and why
            info.update(self.adapter.info())
        # the laser's readings, the lens and shutter corrected for, the scale against the vehicles
        info.update(self.pipeline.summary())
        return info

    def _evidence_context(self) -> dict[str, Any]:
        """The stream's state a violation's evidence record keeps (this thread, when it closes): the
        configuration in force (the rules as the operator last set them), the session's info, and
        the model files to hash."""
        config = self.pipeline.config
        sections = {
            name: getattr(config, name).model_dump(mode="json")
            for name in ("camera", "speed", "scale_check", "detector", "road", "tracker")
        }
        sections["rules"] = self.pipeline.rules.cfg.model_dump(mode="json")
        meta = self.pipeline.metadata
        models = {k: meta[k] for k in ("detector", "road_weights") if isinstance(meta.get(k), str)}
        return {
            "config": sections,
            "session": self._session_info(),
            "model_paths": {k: p for k, p in models.items() if Path(p).exists()},
        }

    def _announce_end(self, status: str, reason: str) -> None:
        self.outputs.publish_end(status, reason)
        self.finished.set()
        log.info(
            "session %s %s (%s): %d received, %d processed, %d dropped, %d violations",
            self.session_id, status, reason, self.stats.received, self.stats.processed,
            self.stats.dropped, self.stats.violations,
        )  # fmt: skip
        on_finished = self.peer.on_finished
        self.peer = PeerLink()  # the transport's callbacks refer back to it: no cycle outlives the stream
        if on_finished is not None:
            with contextlib.suppress(Exception):
                on_finished(self.session_id, status, reason)


def close_pipeline(pipeline: Pipeline) -> None:
    """Free a pipeline's per-stream state (never raises: the stream is ending anyway)."""
    try:
        pipeline.close()
    except Exception:  # noqa: BLE001 - releasing is best effort
        log.warning("pipeline.close() failed", exc_info=True)
