"""Retention: what the server removes, and when (issue 41).

Three rules, each off (None) unless set, counted in days from when the violation occurred:

* ``retention_media_days``: the **media** (snapshot, clip, received video, the engine's record, the
  evidence pack) of violations that are not enforceable or were dismissed; the row stays, marked
  ``media_purged_at``;
* ``retention_dismissed_days``: violations an officer **dismissed** (false positives), row and media;
* ``retention_violation_days``: **every** violation, row and media (the agency's retention period).

A violation under a **legal hold** is kept whatever the rules say (the hold is checked in the same
statement that removes the row, so a hold placed during a purge still wins). Only this server's
violations are purged (in a fleet each server keeps its own media), and none stored within the last
hour (its clip or pack may still be in the making). The row goes first, then its files: a crash in
between leaves files without a row, never a row whose evidence is gone. Every removal is an entry in
the audit trail (``violation.purged``, ``violation.media_purged``: what was removed, the pack's
SHA-256), and each run that removed something a ``retention.run`` entry with its counts; the audit
trail itself is never purged.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edge_server.store.models import ViolationRow, utcnow
from edge_server.store.retention import MEDIA_COLUMNS

if TYPE_CHECKING:
    from edge_server.settings import ServerSettings
    from edge_server.store import Store

log = logging.getLogger(__name__)

SETTLE = dt.timedelta(hours=1)  # a violation stored this recently is never purged
BATCH = 500


@dataclass(frozen=True)
class RetentionPolicy:
    media_days: float | None = None
    dismissed_days: float | None = None
    violation_days: float | None = None

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> RetentionPolicy:
        return cls(
            settings.retention_media_days,
            settings.retention_dismissed_days,
            settings.retention_violation_days,
        )

    def rules(self) -> list[tuple[str, float]]:
        """(rule, days) that are on: whole records first, then the media of those left."""
        pairs = [("all", self.violation_days), ("dismissed", self.dismissed_days), ("media", self.media_days)]
        return [(rule, days) for rule, days in pairs if days is not None]

    @property
    def active(self) -> bool:
        return bool(self.rules())


@dataclass
class PurgeReport:
    at: dt.datetime
    dry_run: bool
    deleted: list[int] = field(default_factory=list)  # violations removed, row and media
    media_cleared: list[int] = field(default_factory=list)  # violations whose media were removed
    files: int = 0
    bytes: int = 0
    held: int = 0  # violations under a legal hold (kept)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def hold_view(row: ViolationRow) -> dict[str, Any] | None:
    """A violation's legal hold as the audit trail records it (None: none)."""
    if row.legal_hold_at is None:
        return None
    return {"at": row.legal_hold_at.isoformat(), "by": row.legal_hold_by, "reason": row.legal_hold_reason}


def _summary(row: ViolationRow, files: list[str]) -> dict[str, Any]:
    return {
        "session_id": row.session_id,
        "occurred_at": row.occurred_at.isoformat(),
        "status": row.status,
        "ticket_speed_kmh": row.ticket_speed_kmh,
        "zone": row.zone,
        "evidence_sha256": row.evidence_sha256,
        "files": files,
    }


class Purger:
    """Applies a :class:`RetentionPolicy` to one server's violations. ``audit`` is the audit trail's
    ``Auditor.record`` (None: not recorded, e.g. in a unit test)."""

    def __init__(
        self,
        store: Store,
        media_dir: Path,
        server_id: str | None,
        policy: RetentionPolicy,
        audit: Callable[..., Any] | None = None,
    ) -> None:
        self.store = store
        self.media_dir = media_dir.resolve()
        self.server_id = server_id
        self.policy = policy
        self._audit = audit
        self.last: PurgeReport | None = None

    def _files(self, row: ViolationRow) -> list[Path]:
        out = []
        for column in MEDIA_COLUMNS:
            rel = getattr(row, column)
            if rel:
                path = (self.media_dir / rel).resolve()
                if path.is_relative_to(self.media_dir) and path.is_file():
                    out.append(path)
        return out

    def run(
        self, actor: str = "retention", dry_run: bool = False, now: dt.datetime | None = None
    ) -> PurgeReport:
        """One pass of every rule; with ``dry_run`` only what it would remove."""
        now = now or utcnow()
        report = PurgeReport(at=now, dry_run=dry_run, held=self.store.retention.held())
        seen: set[int] = set()  # a row an earlier rule removed (or, dry, would have): not counted twice
        for rule, days in self.policy.rules():
            cutoff = now - dt.timedelta(days=days)
            after_id = 0
            while rows := self.store.retention.candidates(
                rule, cutoff, self.server_id, now - SETTLE, after_id, BATCH
            ):
                after_id = rows[-1].id
                for row in rows:
                    if row.id not in seen:
                        seen.add(row.id)
                        self._one(row, rule, days, actor, dry_run, report)
        if not dry_run:
            self.last = report
            if report.deleted or report.media_cleared:
                self._record(actor, "retention.run", "retention", now.isoformat(timespec="seconds"), None,
                             {"deleted": len(report.deleted), "media_cleared": len(report.media_cleared),
                              "files": report.files, "bytes": report.bytes, "held": report.held},
                             f"policy {asdict(self.policy)}")  # fmt: skip
                log.info(
                    "retention: %d violations removed, the media of %d (%d files, %.1f MB); %d under a legal hold kept",
                    len(report.deleted), len(report.media_cleared), report.files, report.bytes / 1e6, report.held,
                )  # fmt: skip
        return report

    def set_hold(self, violation_id: int, actor: str, reason: str | None) -> ViolationRow | None:
        """Place a legal hold (``reason``) or release it (None), in the audit trail with the hold
        before and after; the row after, or None when there is no such violation."""
        before = self.store.get_violation(violation_id)
        row = self.store.retention.set_hold(violation_id, actor if reason else None, reason)
        if before is None or row is None:
            return None
        action = "violation.legal_hold" if reason else "violation.legal_hold_released"
        self._record(actor, action, "violation", violation_id, {"legal_hold": hold_view(before)},
                     {"legal_hold": hold_view(row)})  # fmt: skip
        return row

    def _one(
        self, row: ViolationRow, rule: str, days: float, actor: str, dry_run: bool, report: PurgeReport
    ) -> None:
        files = self._files(row)
        size = sum(p.stat().st_size for p in files)
        ids = report.media_cleared if rule == "media" else report.deleted
        if dry_run:
            ids.append(row.id)
            report.files += len(files)
            report.bytes += size
            return
        removed = (
            self.store.retention.clear_media(row.id)
            if rule == "media"
            else self.store.retention.delete(row.id)
        )
        if not removed:  # a legal hold came in between
            return
        for path in files:
            try:
                path.unlink()
            except OSError as exc:
                report.errors.append(f"violation {row.id}: {path.name}: {exc.strerror or exc}")
        ids.append(row.id)
        report.files += len(files)
        report.bytes += size
        action = "violation.media_purged" if rule == "media" else "violation.purged"
        what = {"media": "not enforceable or dismissed", "dismissed": "dismissed", "all": "a violation"}[rule]
        self._record(actor, action, "violation", row.id, _summary(row, [p.name for p in files]), None,
                     f"retention: {what}, occurred more than {days:g} days ago")  # fmt: skip

    def _record(self, *entry: Any) -> None:
        if self._audit is not None:
            self._audit(*entry)


async def run_periodically(purger: Purger, interval_s: float) -> None:
    """The server's retention: one pass now and every ``interval_s`` (until cancelled); a pass that
    fails is logged and tried again at the next."""
    while True:
        try:
            await asyncio.to_thread(purger.run)
        except Exception:  # noqa: BLE001 - retention must not stop the server
            log.exception("retention pass failed (tried again in %.0f s)", interval_s)
        await asyncio.sleep(interval_s)


def start_retention(
    settings: ServerSettings, store: Store, server_id: str, audit: Callable[..., Any] | None
) -> tuple[Purger, asyncio.Task | None]:
    """At the server's start (on its event loop): the purger, and its periodic pass when a rule is on."""
    purger = Purger(
        store, settings.resolved_media_dir, server_id, RetentionPolicy.from_settings(settings), audit
    )
    if not purger.policy.active:
        log.info("retention is off: every violation and its media are kept (retention_* settings)")
        return purger, None
    log.info("retention: %s, a pass every %.0f s", purger.policy, settings.retention_interval_s)
    return purger, asyncio.get_running_loop().create_task(
        run_periodically(purger, settings.retention_interval_s)
    )


__all__ = [
    "SETTLE",
    "PurgeReport",
    "Purger",
    "hold_view",
    "RetentionPolicy",
    "run_periodically",
    "start_retention",
]
