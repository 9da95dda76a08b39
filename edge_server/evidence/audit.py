"""The audit trail's service: recording actions (who, what, when, before/after) and signing
checkpoints of the chain's head with the server's evidence key; checking the whole trail
(``airpatrol audit verify``).

* :class:`Auditor`: :meth:`~Auditor.record` appends an entry (:mod:`edge_server.store.audit`) and
  signs a checkpoint every ``every`` entries; :meth:`~Auditor.checkpoint` signs one now (each
  evidence pack carries one, so a tail cut after the pack was handed out is found from the pack);
  :meth:`~Auditor.genesis` gives the false-positive marks made before the trail a "pre-audit" entry.
  A failure to record is logged and counted, never raised into the action it records.
* :func:`verify_trail`: the chain (no gap, every link, every hash), then every checkpoint (the
  database's and those of the packs given): signed by a trusted key, and the chain still has that
  hash at that entry. One line per problem.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import logging
import threading
import zipfile
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from edge_server.evidence.keys import KeyRing, fingerprint, show_fingerprint
from edge_server.store import Store, ViolationFilter
from edge_server.store.audit import check_chain

log = logging.getLogger(__name__)

ENGINE = "engine"  # the actor of what the engine does by itself (a violation stored, held, packed)
PRE_AUDIT = "pre-audit"


def checkpoint_message(cp: Mapping[str, Any]) -> bytes:
    """The exact bytes a checkpoint's signature covers."""
    return (
        f"airpatrol-audit-checkpoint/1\nseq={cp['seq']}\nhead={cp['head_hash']}\nat={cp['at']}\n"
        f"server={cp['server_id'] or ''}\n"
    ).encode()


class Auditor:
    """Records this server's actions in the store's audit trail (thread-safe)."""

    def __init__(self, store: Store, keyring: KeyRing, server_id: str, every: int = 100) -> None:
        self.store = store
        self.keyring = keyring
        self.server_id = server_id
        self.every = max(1, int(every))
        self.failures = 0
        self._lock = threading.Lock()

    def record(
        self,
        actor: str,
        action: str,
        target_type: str,
        target_id: str | int,
        before: dict | None = None,
        after: dict | None = None,
        detail: str = "",
    ) -> dict | None:
        """Append one entry (a checkpoint after every ``every``-th); None when it could not be."""
        try:
            entry = self.store.audit.append(actor, action, target_type, target_id, before, after, detail)
            if entry["seq"] % self.every == 0:
                self.checkpoint()
            return entry
        except Exception:  # noqa: BLE001 - the action happened; its entry is missing, said loudly
            with self._lock:
                self.failures += 1
            log.exception("audit: %s by %s on %s %s not recorded", action, actor, target_type, target_id)
            return None

    def checkpoint(self) -> dict | None:
        """Sign the chain's head now and keep the checkpoint; None while the trail is empty."""
        head = self.store.audit.head()
        if head is None:
            return None
        cp = {
            "seq": head[0],
            "head_hash": head[1],
            "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds"),
            "server_id": self.server_id,
        }
        signature, pub = self.keyring.sign(checkpoint_message(cp))
        cp["key_fingerprint"] = fingerprint(pub)
        cp["signature"] = base64.b64encode(signature).decode()
        self.store.audit.add_checkpoint(cp)
        return cp

    def genesis(self) -> int:
        """An empty trail on a store with false-positive marks: one "pre-audit" entry for each
        (made before the trail existed, by whom unknown). Returns how many."""
        if self.store.audit.head() is not None:
            return 0
        n = 0
        for page in self.store.violation_pages(ViolationFilter(false_positive=True), sort="id"):
            for row in page:
                self.record(
                    PRE_AUDIT, "violation.false_positive", "violation", row.id, None, {"false_positive": True},
                    "marked a false positive before the audit trail existed (by whom and when is not known)",
                )  # fmt: skip
                n += 1
        if n:
            log.warning("audit: %d false-positive marks from before the audit trail got a pre-audit entry", n)
        return n


@dataclass
class TrailReport:
    problems: list[str] = field(default_factory=list)
    entries: int = 0
    checkpoints: int = 0
    head: tuple[int, str] | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        if self.problems:
            return "AUDIT TRAIL BROKEN: " + "; ".join(self.problems)
        head = f"head entry {self.head[0]}" if self.head else "empty"
        return f"OK: {self.entries} entries, {head}, {self.checkpoints} signed checkpoints hold"


def pack_checkpoints(packs: Iterable[Path]) -> list[dict]:
    """The audit checkpoint each evidence pack carries (``audit.json``; a pack from before the
    trail has none and adds nothing)."""
    out = []
    for pack in packs:
        with zipfile.ZipFile(pack) as zf:
            if "audit.json" not in zf.namelist():  # a pack made before the audit trail
                log.warning("%s holds no audit checkpoint (made before the audit trail)", pack)
                continue
            data = json.loads(zf.read("audit.json"))
        cp = data.get("checkpoint")
        if cp:
            out.append({**cp, "from": str(pack)})
    return out


def _signature_ok(cp: Mapping[str, Any], trusted: Mapping[str, Ed25519PublicKey]) -> bool:
    key = trusted.get(cp.get("key_fingerprint", ""))
    if key is None:
        return False
    try:
        key.verify(base64.b64decode(cp["signature"], validate=True), checkpoint_message(cp))
        return True
    except (InvalidSignature, binascii.Error, ValueError, KeyError):
        return False


def verify_trail(
    store: Store, trusted: Mapping[str, Ed25519PublicKey], extra: Collection[dict] = ()
) -> TrailReport:
    """Check the store's audit trail against itself and its signed checkpoints (and ``extra``:
    checkpoints from packs)."""
    checkpoints = [*store.audit.checkpoints(), *extra]
    chain = check_chain(store.audit.iter_all(), {int(cp["seq"]) for cp in checkpoints})
    report = TrailReport(list(chain.problems), chain.entries, len(checkpoints), chain.head)
    last = chain.head[0] if chain.head else 0
    for cp in checkpoints:
        where = f"checkpoint of entry {cp['seq']} signed {cp['at']}" + (
            f" (in {cp['from']})" if "from" in cp else ""
        )
        if not _signature_ok(cp, trusted):
            fp = cp.get("key_fingerprint", "")
            report.problems.append(
                f"{where}: its signature does not verify with a trusted key ({show_fingerprint(fp)[:26]} ...)"
            )
        elif int(cp["seq"]) > last:
            report.problems.append(
                f"{where}: the trail ends at entry {last}: entries {last + 1}-{cp['seq']} were cut"
            )
        elif chain.hashes.get(int(cp["seq"])) != cp["head_hash"]:
            report.problems.append(
                f"{where}: entry {cp['seq']} is not what was signed (the chain was rewritten)"
            )
    return report


__all__ = [
    "ENGINE",
    "PRE_AUDIT",
    "Auditor",
    "TrailReport",
    "checkpoint_message",
    "pack_checkpoints",
    "verify_trail",
]
