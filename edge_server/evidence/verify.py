"""Checking an evidence pack offline: ``airpatrol verify PACK``.

A pack (a ``.zip``, or the folder it was unpacked into) holds its files, ``manifest.json`` (every
file's name, size and SHA-256, and what the pack is of), ``manifest.sig`` (the Ed25519 signature of
the manifest's exact bytes, base64) and ``signing-key.pub`` (the public key, PEM). It is intact
when the signature verifies, the signing key is one the checker trusts (by its fingerprint: the
agency's published one, ``--key``; or a server's key ring), every listed file is there with its
size and hash, no other file is, and (a zip) the file is byte for byte the canonical layout of
those files (:mod:`edge_server.evidence.canonical_zip`). Each problem found is one line.

Depends on the standard library and ``cryptography`` only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import zipfile
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from edge_server.evidence.canonical_zip import PackFormatError, canonical_digest
from edge_server.evidence.keys import KeyRingError, fingerprint, load_public, public_pem, show_fingerprint

FORMAT = "airpatrol-evidence-pack/1"
MANIFEST, SIGNATURE, PUBLIC_KEY = "manifest.json", "manifest.sig", "signing-key.pub"
META_FILES = (MANIFEST, SIGNATURE, PUBLIC_KEY)  # in this order after the listed files


@dataclass
class VerifyReport:
    """What ``verify`` found: ``problems`` (one line each; none: intact) and what the pack says it is.
    ``anchored``: the signing key was checked against trusted ones (False: none were given)."""

    path: str
    problems: list[str] = field(default_factory=list)
    fingerprint: str | None = None
    anchored: bool = False
    manifest: dict = field(default_factory=dict)
    files_checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        m = self.manifest
        what = f"violation {m.get('violation_id')} of session {m.get('session_id')} on {m.get('server_id')}"
        key = show_fingerprint(self.fingerprint) if self.fingerprint else "?"
        if self.problems:
            return f"TAMPERED or damaged: {self.path}: " + "; ".join(self.problems)
        if not self.anchored:
            return (
                f"INTACT but UNANCHORED: {self.path} ({what}, {self.files_checked} files) is signed by key "
                f"{key}, which was not checked against a trusted key: give --key with the agency's "
                "published fingerprint"
            )
        return f"OK: {self.path}: {what}, {self.files_checked} files, signed by trusted key {key}"


def _read_members(path: Path, report: VerifyReport) -> dict[str, bytes] | None:
    """name -> content of a pack zip or folder, in the zip's order (None: unreadable, said why)."""
    if path.is_dir():
        return {
            p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
        }
    try:
        with zipfile.ZipFile(path) as zf:
            members: dict[str, bytes] = {}
            for info in zf.infolist():
                if info.is_dir():
                    report.problems.append(
                        f"the zip holds a folder entry {info.filename!r} (a pack has none)"
                    )
                    continue
                if info.filename in members:
                    report.problems.append(f"the zip holds {info.filename!r} twice")
                members[info.filename] = zf.read(info)
            return members
    except FileNotFoundError:
        report.problems.append("no such file")
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        OSError,
        EOFError,
        ValueError,
        NotImplementedError,
    ) as exc:
        # zlib.error, a bad CRC, a header that disagrees with the directory: the zip was changed
        report.problems.append(f"not a readable zip: {exc}")
    except Exception as exc:  # noqa: BLE001 - any damage to a zip must end in a reason, not a crash
        report.problems.append(f"not a readable zip: {type(exc).__name__}: {exc}")
    return None


def _signature(members: Mapping[str, bytes], report: VerifyReport) -> tuple[Ed25519PublicKey, bytes] | None:
    missing = [n for n in META_FILES if n not in members]
    if missing:
        report.problems.append(
            f"{', '.join(missing)} missing: not a signed pack, or its signature was removed"
        )
        return None
    try:
        key = load_public(members[PUBLIC_KEY])
    except (KeyRingError, ValueError) as exc:
        report.problems.append(f"{PUBLIC_KEY} is not a usable public key ({exc})")
        return None
    report.fingerprint = fingerprint(key)
    if members[PUBLIC_KEY] != public_pem(key):
        report.problems.append(f"{PUBLIC_KEY} was changed (not the key's PEM as the pack wrote it)")
    try:
        sig = base64.b64decode(members[SIGNATURE].strip(), validate=True)
    except (binascii.Error, ValueError):
        report.problems.append(f"{SIGNATURE} is not base64: the signature was changed")
        return None
    if members[SIGNATURE] != base64.b64encode(sig) + b"\n":
        report.problems.append(f"{SIGNATURE} was changed (not the signature as the pack wrote it)")
    return key, sig


def _check_trust(report: VerifyReport, trusted: Collection[str] | None) -> None:
    if trusted is None:
        return
    report.anchored = True
    if report.fingerprint not in trusted:
        report.problems.append(
            f"signed by key {show_fingerprint(report.fingerprint or '')}, which is not a trusted key "
            f"(trusted: {', '.join(show_fingerprint(fp)[:26] + ' ...' for fp in trusted) or 'none'}): "
            "re-signed by someone else, or the wrong key was given"
        )


def _check_files(members: Mapping[str, bytes], manifest: dict, report: VerifyReport) -> list[str]:
    """Every listed file present with its size and hash, nothing else; returns the listed names."""
    listed = manifest.get("files")
    if not isinstance(listed, list) or not all(isinstance(f, dict) for f in listed):
        report.problems.append("the manifest lists no files")
        return []
    names = [str(f.get("path")) for f in listed]
    wanted = {str(f.get("path")): f for f in listed}
    present = {n: hashlib.sha256(data).hexdigest() for n, data in members.items() if n not in META_FILES}
    missing = [n for n in names if n not in present]
    added = [n for n in present if n not in wanted]
    for name in list(missing):
        renamed = [a for a in added if present[a] == wanted[name].get("sha256")]
        if renamed:
            report.problems.append(f"{name} was renamed to {renamed[0]}")
            missing.remove(name)
            added.remove(renamed[0])
    report.problems += [f"{n} is listed in the manifest but missing (removed)" for n in missing]
    report.problems += [f"{n} is not in the manifest (added)" for n in added]
    for name in names:
        if name not in present:
            continue
        entry = wanted[name]
        if entry.get("bytes") != len(members[name]):
            report.problems.append(
                f"{name} is {len(members[name])} bytes, the manifest says {entry.get('bytes')} (changed)"
            )
        elif present[name] != entry.get("sha256"):
            report.problems.append(f"{name} does not match its SHA-256 in the manifest (changed)")
        else:
            report.files_checked += 1
    if len(set(names)) != len(names):
        report.problems.append("the manifest lists a file twice")
    return names


def _check_container(
    path: Path, members: Mapping[str, bytes], names: list[str], report: VerifyReport
) -> None:
    """A zip must be byte for byte the canonical layout of its files in the manifest's order."""
    order = [n for n in names if n in members] + [n for n in META_FILES if n in members]
    order += [n for n in members if n not in order]
    try:
        expected = canonical_digest(((n, members[n]) for n in order), hashlib.sha256()).hexdigest()
    except PackFormatError as exc:
        report.problems.append(f"the zip is not in the pack layout: {exc}")
        return
    actual = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            actual.update(block)
    if actual.hexdigest() != expected:
        report.problems.append(
            "the zip's bytes differ from the pack layout of its own files (its headers, order, "
            "timestamps or the data around them were changed)"
        )


def verify_pack(path: Path | str, trusted: Collection[str] | None = None) -> VerifyReport:
    """Check the pack at ``path``; ``trusted``: the fingerprints of the keys it may be signed by (a
    key ring's fingerprint -> key mapping will do; None: not anchored, the report says so)."""
    path = Path(path)
    report = VerifyReport(str(path))
    members = _read_members(path, report)
    if members is None:
        return report
    signed = _signature(members, report)
    if signed is None:
        return report
    key, sig = signed
    try:
        key.verify(sig, members[MANIFEST])
    except InvalidSignature:
        report.problems.append(
            f"the manifest's signature does not verify with {PUBLIC_KEY} (the manifest, its signature "
            "or the key was changed)"
        )
    try:
        manifest = json.loads(members[MANIFEST])
        if not isinstance(manifest, dict):
            raise ValueError("not an object")
    except ValueError as exc:
        report.problems.append(f"{MANIFEST} is not JSON ({exc})")
        return report
    report.manifest = manifest
    if manifest.get("format") != FORMAT:
        report.problems.append(f"{MANIFEST} is of format {manifest.get('format')!r}, not {FORMAT}")
    if manifest.get("signing_key") != report.fingerprint:
        report.problems.append("the manifest names another signing key than the pack carries")
    _check_trust(report, trusted)
    names = _check_files(members, manifest, report)
    if not path.is_dir():
        _check_container(path, members, names, report)
    return report


__all__ = ["FORMAT", "MANIFEST", "META_FILES", "PUBLIC_KEY", "SIGNATURE", "VerifyReport", "verify_pack"]
