"""The audit trail in the database: append-only, hash-chained (``audit_log``), with signed
checkpoints of its head (``audit_checkpoints``; signed by :mod:`edge_server.evidence.audit`).

Entry ``seq`` (1, 2, 3, ... without gaps) holds who did what to which record, when, and the record's
fields before and after; its ``hash`` is the SHA-256 of those fields in canonical JSON together
with the hash of the entry before it (:func:`entry_hash`; the first follows :data:`GENESIS`). A
changed entry no longer matches its hash, a removed one leaves a gap and breaks the next entry's
link, and a cut tail is found by any signed checkpoint made after it (:func:`check_chain`).

Appending is safe from many threads and from several servers on one database: the next ``seq`` is
the head's plus one, and the primary key refuses a second entry with it (the loser reads the new
head and tries again), so the chain never forks.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from edge_server.store.models import AuditCheckpointRow, AuditEntryRow, utcnow

log = logging.getLogger(__name__)

GENESIS = "0" * 64
FIELDS = (
    "seq",
    "at",
    "actor",
    "action",
    "target_type",
    "target_id",
    "before",
    "after",
    "detail",
    "server_id",
)


def _iso(at: dt.datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.timezone.utc)
    return at.astimezone(dt.timezone.utc).isoformat(timespec="microseconds")


def plain(value: Any) -> Any:
    """``value`` as the database's JSON gives it back (what is hashed must be what is stored)."""
    return None if value is None else json.loads(json.dumps(value, default=str, allow_nan=False))


def entry_hash(entry: dict[str, Any], prev_hash: str) -> str:
    body = {k: entry[k] for k in FIELDS}
    body["at"] = _iso(entry["at"]) if isinstance(entry["at"], dt.datetime) else entry["at"]
    body["prev_hash"] = prev_hash
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def entry_dict(row: AuditEntryRow) -> dict[str, Any]:
    return {
        "seq": row.seq,
        "at": _iso(row.at),
        "actor": row.actor,
        "action": row.action,
        "target_type": row.target_type,
        "target_id": row.target_id,
        "before": row.before,
        "after": row.after,
        "detail": row.detail,
        "server_id": row.server_id,
        "prev_hash": row.prev_hash,
        "hash": row.hash,
    }


def checkpoint_dict(row: AuditCheckpointRow) -> dict[str, Any]:
    return {
        "seq": row.seq,
        "head_hash": row.head_hash,
        "at": _iso(row.at),
        "server_id": row.server_id,
        "key_fingerprint": row.key_fingerprint,
        "signature": row.signature,
    }


class AuditLog:
    """The audit tables of one store (thread-safe)."""

    def __init__(self, sessions: sessionmaker, server_id: str | None) -> None:
        self._sessions = sessions
        self.server_id = server_id

    def append(
        self,
        actor: str,
        action: str,
        target_type: str,
        target_id: str | int,
        before: dict | None = None,
        after: dict | None = None,
        detail: str = "",
    ) -> dict[str, Any]:
        """Add an entry at the head of the chain; returns it as :func:`entry_dict` gives it."""
        entry = {
            "actor": actor[:128],
            "action": action[:64],
            "target_type": target_type[:32],
            "target_id": str(target_id)[:64],
            "before": plain(before),
            "after": plain(after),
            "detail": detail,
            "server_id": self.server_id,
        }
        for attempt in range(50):
            try:
                with self._sessions.begin() as s:
                    head = s.execute(
                        select(AuditEntryRow.seq, AuditEntryRow.hash)
                        .order_by(AuditEntryRow.seq.desc())
                        .limit(1)
                    ).first()
                    seq, prev = (1, GENESIS) if head is None else (head.seq + 1, head.hash)
                    at = utcnow()
                    full = {**entry, "seq": seq, "at": at}
                    row = AuditEntryRow(**full, prev_hash=prev, hash=entry_hash(full, prev))
                    s.add(row)
                return entry_dict(row)
            except IntegrityError:  # another writer took this seq: read the new head, try again
                time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise RuntimeError("the audit trail's head kept moving: 50 tries to append failed")

    def head(self) -> tuple[int, str] | None:
        with self._sessions() as s:
            row = s.execute(
                select(AuditEntryRow.seq, AuditEntryRow.hash).order_by(AuditEntryRow.seq.desc()).limit(1)
            ).first()
        return None if row is None else (row.seq, row.hash)

    def history(self, target_type: str, target_id: str | int) -> list[dict[str, Any]]:
        with self._sessions() as s:
            rows = s.scalars(
                select(AuditEntryRow)
                .where(AuditEntryRow.target_type == target_type, AuditEntryRow.target_id == str(target_id))
                .order_by(AuditEntryRow.seq)
            ).all()
        return [entry_dict(r) for r in rows]

    def entries(self, after_seq: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
        with self._sessions() as s:
            rows = s.scalars(
                select(AuditEntryRow)
                .where(AuditEntryRow.seq > after_seq)
                .order_by(AuditEntryRow.seq)
                .limit(limit)
            ).all()
        return [entry_dict(r) for r in rows]

    def iter_all(self, batch: int = 2000) -> Iterator[dict[str, Any]]:
        after = 0
        while rows := self.entries(after, batch):
            yield from rows
            after = rows[-1]["seq"]

    def add_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        with self._sessions.begin() as s:
            s.add(
                AuditCheckpointRow(
                    seq=checkpoint["seq"],
                    head_hash=checkpoint["head_hash"],
                    at=dt.datetime.fromisoformat(checkpoint["at"]),
                    server_id=checkpoint["server_id"],
                    key_fingerprint=checkpoint["key_fingerprint"],
                    signature=checkpoint["signature"],
                )
            )

    def checkpoints(self) -> list[dict[str, Any]]:
        with self._sessions() as s:
            rows = s.scalars(select(AuditCheckpointRow).order_by(AuditCheckpointRow.seq)).all()
        return [checkpoint_dict(r) for r in rows]


@dataclass
class ChainReport:
    """What :func:`check_chain` found: one line per problem; the head; the hashes at ``wanted``."""

    problems: list[str] = field(default_factory=list)
    entries: int = 0
    head: tuple[int, str] | None = None
    hashes: dict[int, str] = field(default_factory=dict)


def check_chain(entries: Iterator[dict[str, Any]], wanted: set[int]) -> ChainReport:
    """Walk the entries in ``seq`` order: no gap, each linked to the one before, each matching its
    hash; keeps the hash of each seq in ``wanted`` (the checkpoints')."""
    report = ChainReport()
    expected, prev = 1, GENESIS
    for e in entries:
        report.entries += 1
        seq = e["seq"]
        if seq != expected:
            span = f"{expected}" if seq == expected + 1 else f"{expected}-{seq - 1}"
            report.problems.append(f"entries {span} are missing (removed)")
        elif e["prev_hash"] != prev:
            report.problems.append(f"entry {seq} does not follow entry {seq - 1} (the chain was rewritten)")
        if entry_hash(e, e["prev_hash"]) != e["hash"]:
            report.problems.append(
                f"entry {seq} ({e['action']} on {e['target_type']} {e['target_id']}) was changed"
            )
        if seq in wanted:
            report.hashes[seq] = e["hash"]
        expected, prev = seq + 1, e["hash"]
        report.head = (seq, e["hash"])
    return report


__all__ = ["GENESIS", "AuditLog", "ChainReport", "check_chain", "entry_dict", "entry_hash", "plain"]
