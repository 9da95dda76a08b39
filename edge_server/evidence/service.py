"""The server's side of evidence packs: the engine's record of a violation when it is stored, and
its pack once its clip is ready (or on request, for a violation stored before packs: marked as
made later).

* :func:`engine_record`: the record (``<stem>.record.json`` beside the snapshot): the engine's
  violation and its track's measured positions, the configuration and session state in force
  (``context``, from the stream's worker), the software, the model files' SHA-256 and the clock;
* :class:`EvidenceService`: writes records and makes packs (:class:`~edge_server.evidence.pack.
  EvidencePacker`) for stored violations, and keeps the pack's path, SHA-256 and time in the row.

Runs on the clip writers' threads (the stream's worker only takes the state a record keeps).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from edge_server.evidence.audit import ENGINE, Auditor
from edge_server.evidence.contents import RECORD_FORMAT, track_point_dict
from edge_server.evidence.keys import KeyRing, show_fingerprint
from edge_server.evidence.pack import PACK_SUFFIX, EvidencePacker
from edge_server.evidence.provenance import clock_state, model_files, software
from edge_server.schemas import ViolationOut
from edge_server.settings import ServerSettings
from edge_server.store import Store, ViolationRow
from pipelines.sinks import atomic_write_text
from pipelines.types import Violation

log = logging.getLogger(__name__)


class EvidenceError(Exception):
    """A pack that cannot be made (the violation is gone, its media dir unwritable)."""


def record_stamp() -> dict[str, Any]:
    """When a violation's record was taken, and the clock's state then (on the stream's thread)."""
    return {
        "recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        "clock": clock_state(),
    }


def engine_record(v: Violation, context: dict[str, Any] | None, stamp: dict[str, Any]) -> dict[str, Any]:
    """What the engine knew of a violation when it closed, as plain dictionaries: ``context`` (the
    stream's state, taken on its thread then) and ``stamp`` (:func:`record_stamp`); the model files
    are hashed by :meth:`EvidenceService.write_record` (``context["model_paths"]``)."""
    context = dict(context or {})
    return {
        "format": RECORD_FORMAT,
        **stamp,
        "violation": v.to_dict(),
        "trace": [track_point_dict(p) for p in v.trace],
        "config": context.get("config"),
        "session": context.get("session"),
        "model_paths": context.get("model_paths") or {},
    }


class EvidenceService:
    """Records and packs of this server's violations (thread-safe; one per server)."""

    def __init__(self, packer: EvidencePacker, store: Store, media_dir: Path, auditor: Auditor) -> None:
        self.packer = packer
        self.store = store
        self.media_dir = media_dir
        self.auditor = auditor
        self._locks: dict[int, threading.Lock] = {}
        self._guard = threading.Lock()

    def write_record(
        self, violation_id: int, rel_path: Path, v: Violation, context: dict[str, Any] | None, stamp: dict
    ) -> None:
        """The engine's record of ``v`` (:func:`engine_record`, with the software and the model
        files' hashes), kept beside the violation's media; on a clip thread, off the stream's."""
        record = engine_record(v, context, stamp)
        paths = record.pop("model_paths")
        record.update(software=software(), models=model_files(paths))
        path = self.media_dir / rel_path
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(record, separators=(",", ":"), allow_nan=False, default=str))
        self.store.update_violation(violation_id, record_path=rel_path.as_posix())

    def _lock(self, violation_id: int) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(violation_id, threading.Lock())

    def _file(self, rel: str | None) -> Path | None:
        if not rel:
            return None
        path = (self.media_dir / rel).resolve()
        return path if path.is_file() and path.is_relative_to(self.media_dir.resolve()) else None

    def _record(self, row: ViolationRow) -> dict[str, Any] | None:
        path = self._file(row.record_path)
        if path is None:
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            log.warning("violation %d: its engine record %s is unreadable", row.id, path, exc_info=True)
            return None

    def _no_source(self, session_id: str) -> str:
        session = self.store.get_session(session_id)
        if session is not None and session.kind in ("webrtc", "whip"):
            return "not kept: a WebRTC stream reaches the server as decoded frames only (docs/evidence.md)"
        return "not kept (source_video_s 0, a violation stored before it, or gone from the stream's ring)"

    def _audit(self, violation_id: int) -> dict[str, Any]:
        """What the pack says of the audit trail: the violation's entries so far, and a checkpoint
        of the whole trail signed now (a tail cut later is found from the pack)."""
        return {
            "entries": self.store.audit.history("violation", violation_id),
            "checkpoint": self.auditor.checkpoint(),
        }

    def make(
        self, violation_id: int, *, made_later: bool, remake: bool = False, actor: str = ENGINE
    ) -> ViolationRow:
        """The violation's pack (made now unless it has one and not ``remake``); its row after."""
        with self._lock(violation_id):
            row = self.store.get_violation(violation_id)
            if row is None:
                raise EvidenceError(f"violation {violation_id} does not exist")
            if row.evidence_path and not remake and self._file(row.evidence_path) is not None:
                return row
            rel = Path(row.session_id) / f"v{row.id}{PACK_SUFFIX}"
            stored = ViolationOut.from_row(row).model_dump(mode="json")
            media: dict[str, Path | str] = {
                "snapshot.jpg": self._file(row.snapshot_path) or "not recorded for this violation",
                "clip.mp4": self._file(row.clip_path) or "not written (no frames of it were kept)",
                "source.mp4": self._file(row.source_path) or self._no_source(row.session_id),
            }
            try:
                info = self.packer.make(
                    self.media_dir / rel,
                    stored,
                    record=self._record(row),
                    media=media,
                    made_later=made_later,
                    audit=self._audit(violation_id),
                )
            except OSError as exc:
                raise EvidenceError(
                    f"the pack of violation {violation_id} could not be written: {exc}"
                ) from exc
            updated = self.store.update_violation(
                violation_id,
                evidence_path=rel.as_posix(),
                evidence_sha256=info.sha256,
                evidence_made_at=info.made_at,
                evidence_made_later=made_later,
            )
            self.auditor.record(
                actor, "evidence.made", "violation", violation_id, None,
                {"path": rel.as_posix(), "sha256": info.sha256, "bytes": info.bytes, "made_later": made_later},
            )  # fmt: skip
            log.info(
                "violation %d: evidence pack %s (%d files, %.1f MB, sha256 %s)%s",
                violation_id, rel, info.files, info.bytes / 1e6, info.sha256[:16],
                " made later, on request" if made_later else "",
            )  # fmt: skip
            return updated if updated is not None else row


def start_evidence(
    settings: ServerSettings, store: Store, server_id: str
) -> tuple[EvidenceService | None, Auditor]:
    """At the server's start: the signing key (made at the first start), the audit trail's service
    (its pre-audit entries made once), and the packs' service (None: packs are off,
    ``evidence_packs: false``; the audit trail is kept either way)."""
    ring = KeyRing.open(settings.resolved_keys_dir)
    log.info("evidence and audit checkpoints signed with key %s", show_fingerprint(ring.fingerprint))
    auditor = Auditor(store, ring, server_id, settings.audit_checkpoint_every)
    auditor.genesis()
    if not settings.evidence_packs:
        log.warning("evidence packs are off (evidence_packs: false): violations are stored unsigned")
        return None, auditor
    service = EvidenceService(EvidencePacker(ring, server_id), store, settings.resolved_media_dir, auditor)
    return service, auditor


@contextlib.contextmanager
def beside_server(settings_path: Path | None) -> Iterator[tuple[ServerSettings, Store, str, Auditor]]:
    """For a command run beside the server (``airpatrol users``, ``tokens``, ``retention``): its
    settings, its store (migrated), its id and its audit trail (the signing key made if it has none
    yet); the store is closed at the end, whatever happens."""
    settings = ServerSettings.load(settings_path)
    store = Store.from_url(settings.resolved_database_url)
    try:
        server_id = settings.resolve_server_id()
        _, auditor = start_evidence(settings, store, server_id)
        yield settings, store, server_id, auditor
    finally:
        store.close()


__all__ = [
    "EvidenceError",
    "EvidenceService",
    "beside_server",
    "engine_record",
    "record_stamp",
    "start_evidence",
]
