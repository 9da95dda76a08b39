"""Making an evidence pack: the files (:mod:`edge_server.evidence.contents`), a manifest of their
SHA-256, its Ed25519 signature, written atomically as one canonical zip.

:func:`write_pack` is the signing and writing: the zip is written beside its final name and
renamed onto it once complete and on disk (fsync), so a crash mid-write leaves no pack (only a
``.part.zip`` file, which :func:`edge_server.media.remove_partial_files` removes with the other
half-written media when the server starts). :class:`EvidencePacker`
gathers a violation's files (the stored row, the engine's record, snapshot, clip, source segment)
and says in the manifest what is missing and why.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from edge_server.evidence import contents
from edge_server.evidence.canonical_zip import write_canonical
from edge_server.evidence.keys import KeyRing, KeyRotated, public_pem
from edge_server.evidence.provenance import clock_state, software
from edge_server.evidence.verify import FORMAT, MANIFEST, PUBLIC_KEY, SIGNATURE

log = logging.getLogger(__name__)

PARTIAL_SUFFIX = ".part.zip"  # what edge_server.media.remove_partial_files sweeps at the start
PACK_SUFFIX = ".evidence.zip"


@dataclass(frozen=True)
class PackInfo:
    path: Path
    sha256: str  # of the zip file
    bytes: int
    made_at: dt.datetime
    made_later: bool
    files: int


def file_list(members: list[tuple[str, bytes]]) -> list[dict]:
    """The manifest's entry of each member: its name, size, SHA-256 and what it is."""
    return [
        {
            "path": name,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "description": contents.DESCRIPTIONS.get(name, ""),
        }
        for name, data in members
    ]


def manifest_bytes(meta: dict, files: list[dict]) -> bytes:
    """The manifest's exact bytes (what is signed): ``meta`` then the file list, indented JSON."""
    return json.dumps({**meta, "files": files}, indent=2, ensure_ascii=False).encode() + b"\n"


class _HashingWriter:
    """Writes to a file and hashes what it writes (the pack's SHA-256 without reading it back)."""

    def __init__(self, out, digest) -> None:  # noqa: ANN001 - a binary file, a hashlib object
        self.out, self.digest = out, digest

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.out.write(data)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_pack(
    dest: Path, members: list[tuple[str, bytes]], meta: dict, keyring: KeyRing, key_fingerprint: str
) -> tuple[str, int]:
    """Sign ``members`` (name, content; in pack order) under ``meta`` with the key of
    ``key_fingerprint`` (:class:`KeyRotated` if it is no longer the ring's) and write the pack to
    ``dest`` atomically; returns (the zip's SHA-256, its size)."""
    manifest = manifest_bytes({**meta, "signing_key": key_fingerprint}, file_list(members))
    signature, pub = keyring.sign(manifest, expect=key_fingerprint)
    signed = [
        *members,
        (MANIFEST, manifest),
        (SIGNATURE, base64.b64encode(signature) + b"\n"),
        (PUBLIC_KEY, public_pem(pub)),
    ]
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}")
    digest = hashlib.sha256()
    try:
        with open(tmp, "wb") as raw:
            size = write_canonical(_HashingWriter(raw, digest), signed)  # type: ignore[arg-type]
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(tmp, dest)
        _fsync_dir(dest.parent)
    finally:
        if tmp.exists():
            tmp.unlink()
    return digest.hexdigest(), size


class EvidencePacker:
    """Makes the packs of one server (its key ring and id); thread-safe."""

    def __init__(self, keyring: KeyRing, server_id: str) -> None:
        self.keyring = keyring
        self.server_id = server_id

    def make(
        self,
        dest: Path,
        stored: dict,
        *,
        record: dict | None,
        media: dict[str, Path | str | None],
        made_later: bool,
        audit: dict | None = None,
    ) -> PackInfo:
        """Write the pack of one violation: ``stored`` (the API's view of its row), ``record`` (the
        engine's, None: lost or from before packs), ``media`` (pack name -> file, or why there is none)."""
        made_at = dt.datetime.now(dt.timezone.utc)
        missing: list[dict] = []
        members: list[tuple[str, bytes]] = []
        for name, path in media.items():
            if not isinstance(path, Path):  # None, or why it is missing
                missing.append({"what": name, "why": path or "not recorded for this violation"})
                continue
            try:
                members.append((name, path.read_bytes()))
            except OSError as exc:
                missing.append({"what": name, "why": f"unreadable: {exc.strerror or exc}"})
        if record is None:
            missing.append(
                {
                    "what": "the engine's record (track positions, telemetry, configuration, models)",
                    "why": "not kept for this violation (stored before evidence packs, or lost in a crash)",
                }
            )
        meta = {
            "format": FORMAT,
            "violation_id": stored["id"],
            "session_id": stored["session_id"],
            "server_id": stored.get("server_id") or self.server_id,
            "packed_by": self.server_id,
            "occurred_at": stored.get("occurred_at"),
            "made_at": made_at.isoformat(timespec="milliseconds"),
            "made_later": made_later,
            "clock": clock_state(),
            "software": software(),
            "missing": missing,
        }
        members += contents.data_files(stored, record, meta)
        if audit is not None:  # the violation's audit entries and a signed checkpoint of the trail
            members.append(("audit.json", contents.to_json(audit)))
        for attempt in range(2):
            fp = self.keyring.fingerprint
            page = contents.summary_html({**meta, "signing_key": fp}, stored, record, file_list(members))
            try:
                sha, size = write_pack(dest, [*members, ("summary.html", page)], meta, self.keyring, fp)
                break
            except KeyRotated:
                if attempt:
                    raise
        return PackInfo(dest, sha, size, made_at, made_later, len(members) + 1)


__all__ = [
    "PACK_SUFFIX",
    "EvidencePacker",
    "PackInfo",
    "file_list",
    "manifest_bytes",
    "write_pack",
]
