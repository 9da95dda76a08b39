"""One stream's violations on their way from the engine to the officer.

For each :class:`~pipelines.types.Violation` the engine reports, :class:`ViolationRecorder` writes
the snapshot (the engine's crop, else a crop of the annotated frame), stores the row with the
drone's telemetry, pushes a ``violation`` event (the stored violation as the API shows it: the
ticket speed, its sigma, the status and its reason among it), and schedules the clip: pre-roll to post-roll
frames from a ring of annotated frames, written on the shared clip executor once the post-roll has
passed, then a ``violation.clip_ready`` event. With evidence packs on (``evidence``), the engine's
record of the violation (:func:`edge_server.evidence.service.engine_record`: its track, the
configuration and session state from ``context``) is written beside it at once, and its signed pack
made once the clip is written (``violation.evidence_ready``). A violation is stored even when its
snapshot, clip, record or pack cannot be written.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

import numpy as np

from edge_server.events import EventBus, evidence_ready_event, violation_event
from edge_server.evidence.audit import ENGINE, Auditor
from edge_server.evidence.service import EvidenceService, record_stamp
from edge_server.media import FrameRing, PendingClip, write_clip, write_jpeg
from edge_server.metrics import Metrics
from edge_server.schemas import ViolationOut
from edge_server.settings import ServerSettings
from edge_server.store import Store, ViolationRow
from pipelines.checkpoints import Checkpoint, next_checkpoint, travel_heading
from pipelines.config import AlertsConfig
from pipelines.rules import crop_with_margin
from pipelines.types import PitchCheckResult, ScaleCheckResult, Telemetry, Violation

log = logging.getLogger(__name__)

# Seconds the frame ring holds beyond a clip's pre- and post-roll (a violation ends a little
# before the engine reports it).
RING_SLACK_S = 8.0


def _ticket_text(v: Violation) -> str:
    """The speed a log line shows: the ticket's (with its sigma), the per-frame peak only as such."""
    if v.ticket_speed_kmh is None:
        return f"no ticket speed (peak {v.peak_speed_kmh:.1f} km/h, informative)"
    return f"{v.ticket_speed_kmh:.1f} ± {v.ticket_sigma_kmh or 0.0:.1f} km/h"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:40] or "zone"


def alert_fields(v: Violation, occurred_at: dt.datetime, alerts: AlertsConfig) -> dict[str, Any]:
    """The stop team's extras (pipelines.checkpoints): the direction of travel and the next
    checkpoint ahead, ``at`` the UTC time the vehicle gets there at the ticket speed."""
    heading = travel_heading(v.trace)
    checkpoints = [Checkpoint(c.name, c.lat, c.lon) for c in alerts.checkpoints]
    arrival = next_checkpoint(heading, v.ticket_speed_kmh, checkpoints, alerts.max_off_heading_deg)
    nxt = None
    if arrival is not None and heading is not None:
        at = occurred_at + dt.timedelta(seconds=heading.t - v.start_time_s + arrival.eta_s)
        nxt = {**arrival.to_dict(), "at": at.isoformat()}
    return {"heading_deg": None if heading is None else round(heading.bearing_deg, 1), "next_checkpoint": nxt}


class ViolationRecorder:
    """Snapshot, row, event and clip of each violation of one stream (called from its worker thread)."""

    def __init__(
        self,
        session_id: str,
        *,
        settings: ServerSettings,
        store: Store,
        bus: EventBus,
        metrics: Metrics,
        clip_executor: Executor,
        snapshot_margin_px: int,
        evidence: EvidenceService | None = None,
        auditor: Auditor | None = None,
    ) -> None:
        self.session_id = session_id
        self.evidence = evidence
        self.auditor = auditor
        # what a violation's record keeps of the stream's state (set by the worker: the
        # configuration in force, the session's info, the model files); None: the violation only
        self.context: Callable[[], dict] | None = None
        # writes the received video of a span (PeerLink.source_segment; None: the transport keeps none)
        self.source_segment: Callable[[float, float, Path], dict | None] | None = None
        # the site's checkpoints for the stop team's alert (set by the worker: alerts in the config)
        self.alerts: AlertsConfig = AlertsConfig()
        self.store = store
        self.bus = bus
        self.metrics = metrics
        self.clip_executor = clip_executor
        self.media_dir = settings.resolved_media_dir
        self.clip_pre_s = settings.clip_pre_s
        self.clip_post_s = settings.clip_post_s
        self.clip_fps = settings.clip_fps
        self.clip_codec = {"preset": settings.clip_preset, "crf": settings.clip_crf}
        self.snapshot_quality = settings.snapshot_jpeg_quality
        self.snapshot_margin_px = snapshot_margin_px
        self.ring = FrameRing(
            settings.clip_pre_s + settings.clip_post_s + RING_SLACK_S,
            settings.clip_fps,
            settings.clip_max_width,
        )
        self.count = 0
        self._pending: list[PendingClip] = []
        self._clip_futures: list[Future] = []

    # -- frames for clips -----------------------------------------------------------------------

    def frame_due(self, timestamp_s: float) -> bool:
        """Whether the ring wants a frame at this time (annotate it then)."""
        return self.ring.due(timestamp_s)

    def add_frame(self, timestamp_s: float, annotated: np.ndarray) -> None:
        self.ring.add(timestamp_s, annotated)

    # -- violations -----------------------------------------------------------------------------

    def record(
        self,
        v: Violation,
        annotated: np.ndarray | None,
        telemetry: Telemetry | None,
        occurred_at: dt.datetime,
    ) -> ViolationRow:
        """Store one violation (with its snapshot) and announce it; its clip follows later."""
        rel_dir = Path(self.session_id)
        stem = f"t{v.track_id}_{_slug(v.zone)}_{v.start_frame}"
        snapshot_path = self._write_snapshot(rel_dir / f"{stem}.jpg", v, annotated)
        row = self.store.add_violation(
            self.session_id, v, occurred_at=occurred_at, telemetry=telemetry, snapshot_path=snapshot_path,
            alert=alert_fields(v, occurred_at, self.alerts),
        )  # fmt: skip
        self.count += 1
        self.metrics.violations.inc()
        if self.auditor is not None:  # on the clip threads: the stream's thread does not wait for it
            self.clip_executor.submit(
                self.auditor.record, ENGINE, "violation.created", "violation", row.id, None,
                {"session_id": self.session_id, "status": v.status, "ticket_speed_kmh": v.ticket_speed_kmh,
                 "speed_limit_kmh": v.speed_limit_kmh, "zone": v.zone, "track_id": v.track_id},
            )  # fmt: skip
        log.info(
            "session %s: violation %d track %d %s (limit %.0f, zone %s): %s%s",
            self.session_id, row.id, v.track_id, _ticket_text(v), v.speed_limit_kmh, v.zone, v.status,
            f" ({v.status_reason})" if v.status_reason else "",
        )  # fmt: skip
        self.bus.publish_threadsafe(violation_event("violation", ViolationOut.from_row(row)))
        self._pending.append(
            PendingClip(
                violation_id=row.id,
                path=self.media_dir / rel_dir / f"{stem}.mp4",
                start_s=v.start_time_s - self.clip_pre_s,
                end_s=v.end_time_s + self.clip_post_s,
                record=self._keep_record(row.id, rel_dir / f"{stem}.record.json", v),
            )
        )
        return row

    def _keep_record(self, violation_id: int, rel_path: Path, v: Violation) -> Future | None:
        """The engine's record of the violation, written on the clip threads now (the pack follows
        the clip; a crash before keeps the record for a pack made later)."""
        if self.evidence is None:
            return None
        try:
            context = self.context() if self.context is not None else None
            return self.clip_executor.submit(
                self.evidence.write_record, violation_id, rel_path, v, context, record_stamp()
            )
        except Exception:  # noqa: BLE001 - the violation is stored; its pack will say what is missing
            log.exception("session %s: the record of violation %d not kept", self.session_id, violation_id)
            return None

    def hold_recorded(self, check: ScaleCheckResult | PitchCheckResult) -> list[int]:
        """The session's scale or pitch check turned to a status the site holds: its enforceable
        violations stored so far are held for review too (pipelines.scale_session.hold_for_check,
        live), each announced (``violation.updated``, as a review is); returns their ids."""
        reason = f"held for review: {check.describe()} (found after it closed)"
        kind = "pitch_check" if isinstance(check, PitchCheckResult) else "scale_check"
        ids = self.store.hold_enforceable(self.session_id, reason, check.to_dict(), kind)
        if ids:
            log.warning(
                "session %s: %s: violations %s held for review", self.session_id, check.describe(), ids
            )
        for vid in ids:
            if self.auditor is not None:
                self.auditor.record(
                    ENGINE, "violation.held", "violation", vid, {"status": "enforceable"},
                    {"status": "not_enforceable", "status_reason": reason},
                )  # fmt: skip
            row = self.store.get_violation(vid)
            if row is not None:
                self.bus.publish_threadsafe(violation_event("violation.updated", ViolationOut.from_row(row)))
        return ids

    def _write_snapshot(self, rel_path: Path, v: Violation, annotated: np.ndarray | None) -> str | None:
        image = self.snapshot_image(v, annotated)
        if image is None:
            return None
        try:
            write_jpeg(self.media_dir / rel_path, image, self.snapshot_quality)
        except Exception:  # noqa: BLE001 - a violation without a snapshot is still stored
            log.exception("session %s: snapshot not written", self.session_id)
            return None
        return rel_path.as_posix()

    def snapshot_image(self, v: Violation, annotated: np.ndarray | None) -> np.ndarray | None:
        """The engine's snapshot, else the annotated frame around the vehicle, else the whole frame."""
        if v.snapshot is not None and v.snapshot.size:
            return v.snapshot
        if annotated is None:
            return None
        crop = crop_with_margin(annotated, v.bbox_xyxy, self.snapshot_margin_px)
        return crop if crop is not None else annotated

    # -- clips ----------------------------------------------------------------------------------

    def flush(self, now_media_s: float | None) -> None:
        """Write the clips whose post-roll has passed (all of them when ``now_media_s`` is None)."""
        self._clip_futures = [f for f in self._clip_futures if not f.done()]
        keep: list[PendingClip] = []
        for clip in self._pending:
            if now_media_s is not None and now_media_s < clip.end_s:
                keep.append(clip)
                continue
            frames = self.ring.window(clip.start_s, clip.end_s)
            if not frames:
                log.warning(
                    "session %s: no frames for the clip of violation %d", self.session_id, clip.violation_id
                )
            self._clip_futures.append(self.clip_executor.submit(self._write_clip, clip, frames))
        self._pending = keep

    def wait_for_clips(self, timeout_s: float) -> int:
        """Wait at most ``timeout_s`` in all for the clips being written; returns how many are not
        done by then (they finish in the background and announce ``violation.clip_ready``)."""
        deadline = time.monotonic() + timeout_s
        pending = 0
        for fut in self._clip_futures:
            try:
                fut.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                pending += 1
            except Exception:  # noqa: BLE001 - _write_clip logs its own failures
                pass
        return pending

    def _write_clip(self, clip: PendingClip, frames: list) -> None:
        try:
            if frames:
                self._encode_clip(clip, frames)
            self._keep_source(clip)
            self._make_pack(clip)
        finally:
            clip.done.set()

    def _keep_source(self, clip: PendingClip) -> None:
        """The received video of the clip's span, as it arrived (RTMP, RTSP), beside the clip."""
        if self.source_segment is None or self.evidence is None:
            return
        path = clip.path.with_name(f"{clip.path.stem}.source.mp4")
        try:
            kept = self.source_segment(clip.start_s, clip.end_s, path)
        except Exception:  # noqa: BLE001 - the pack says the source is missing
            log.exception(
                "session %s: source video of violation %d not kept", self.session_id, clip.violation_id
            )
            return
        if kept is None:
            return
        if not kept["covers_start"]:
            log.warning(
                "session %s: the source video of violation %d starts at %.2f s, after its clip (%.2f s): "
                "raise source_video_s", self.session_id, clip.violation_id, kept["start_s"], clip.start_s,
            )  # fmt: skip
        self.store.update_violation(
            clip.violation_id, source_path=path.relative_to(self.media_dir).as_posix()
        )

    def _make_pack(self, clip: PendingClip) -> None:
        """The violation's signed pack, once its record is written and its clip too (or failed)."""
        if self.evidence is None:
            return
        t0 = time.perf_counter()
        try:
            if clip.record is not None:
                clip.record.result()  # written by now (submitted before this task); raises its error
        except Exception:  # noqa: BLE001 - the pack says the record is missing
            log.warning(
                "session %s: violation %d packed without its record", self.session_id, clip.violation_id
            )
        try:
            row = self.evidence.make(clip.violation_id, made_later=False)
        except Exception:  # noqa: BLE001 - the violation stays stored; a pack can be made on request
            log.exception(
                "session %s: evidence pack of violation %d not made", self.session_id, clip.violation_id
            )
            self.metrics.evidence_packs.labels("failed").inc()
            return
        self.metrics.evidence_pack_seconds.observe(time.perf_counter() - t0)
        self.metrics.evidence_packs.labels("made").inc()
        self.bus.publish_threadsafe(evidence_ready_event(ViolationOut.from_row(row)))

    def _encode_clip(self, clip: PendingClip, frames: list) -> None:
        try:
            write_clip(clip.path, frames, self.clip_fps, **self.clip_codec)
            row = self.store.update_violation(
                clip.violation_id, clip_path=clip.path.relative_to(self.media_dir).as_posix()
            )
            if row is not None:
                self.bus.publish_threadsafe(
                    {
                        "type": "violation.clip_ready",
                        "session_id": self.session_id,
                        "violation_id": clip.violation_id,
                        "clip_url": ViolationOut.from_row(row).clip_url,
                    }
                )
        except Exception:  # noqa: BLE001 - the violation stays stored without a clip
            log.exception("session %s: clip for violation %d not written", self.session_id, clip.violation_id)


__all__ = ["ViolationRecorder"]
