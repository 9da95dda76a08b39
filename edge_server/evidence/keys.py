"""The server's evidence-signing keys: Ed25519 (``cryptography``), one current private key and the
public half of every key it ever had.

Kept in ``<data_dir>/keys/``: ``signing-ed25519.pem`` (the current private key, PKCS#8, mode 0600)
and ``keyring.json`` (every public key with its fingerprint, when it was made and, once replaced,
when it was retired). :meth:`KeyRing.rotate` makes a new key and retires the old one: its private
half is deleted, its public half stays, so packs signed with it still verify.

A key's fingerprint is the SHA-256 of its 32 raw public bytes (64 hex digits, shown in groups of
four). It is the trust anchor: ``airpatrol doctor`` and ``airpatrol keys show`` print it, the agency
publishes it (docs/evidence.md), and ``airpatrol verify --key`` checks a pack against it; a key
served by the same server would be no independent anchor.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import logging
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pipelines.errors import AirPatrolError

log = logging.getLogger(__name__)

PRIVATE_NAME = "signing-ed25519.pem"
KEYRING_NAME = "keyring.json"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class KeyRingError(AirPatrolError, ValueError):
    """A key or key ring that cannot be used; the message says what is wrong."""


class KeyRotated(KeyRingError):
    """The key changed between naming it and signing with it (sign again)."""


def raw_public(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(key: Ed25519PublicKey | bytes) -> str:
    """SHA-256 of the key's 32 raw public bytes, 64 lower-case hex digits."""
    raw = key if isinstance(key, bytes) else raw_public(key)
    return hashlib.sha256(raw).hexdigest()


def show_fingerprint(fp: str) -> str:
    """``SHA256:1a2b 3c4d ...``: the full fingerprint in groups of four, for reading aloud."""
    return "SHA256:" + " ".join(fp[i : i + 4] for i in range(0, len(fp), 4))


def parse_fingerprint(text: str) -> str:
    """A fingerprint as a person may type it (``SHA256:`` prefix, spaces, colons, capitals)."""
    fp = re.sub(r"[\s:]", "", text.strip().lower().removeprefix("sha256:"))
    if not _HEX64.match(fp):
        raise KeyRingError(
            f"{text!r} is not a key fingerprint (64 hex digits, as `airpatrol keys show` prints)"
        )
    return fp


def public_pem(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def load_public(data: bytes) -> Ed25519PublicKey:
    """An Ed25519 public key from PEM (SubjectPublicKeyInfo) or its 32 raw bytes."""
    if len(data) == 32:
        return Ed25519PublicKey.from_public_bytes(data)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyRingError(f"not an Ed25519 public key in PEM: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyRingError(f"a {type(key).__name__}, not an Ed25519 public key")
    return key


@dataclass(frozen=True)
class PublicKeyEntry:
    fingerprint: str
    public_key: str  # base64 of the 32 raw bytes
    created_at: str
    retired_at: str | None = None

    def key(self) -> Ed25519PublicKey:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(self.public_key))

    def to_dict(self) -> dict:
        return {
            "fingerprint": self.fingerprint,
            "public_key": self.public_key,
            "created_at": self.created_at,
            "retired_at": self.retired_at,
        }


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


class KeyRing:
    """This server's signing key and the public keys of every key it had (thread-safe)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()
        self._private: Ed25519PrivateKey | None = None
        self._entries: list[PublicKeyEntry] = []

    @classmethod
    def open(cls, directory: Path, *, create: bool = True) -> KeyRing:
        """The key ring in ``directory``; with ``create``, a first key is made when there is none."""
        ring = cls(directory)
        ring._load(create)
        return ring

    def _load(self, create: bool) -> None:
        path = self.directory / PRIVATE_NAME
        ring = self.directory / KEYRING_NAME
        if ring.exists():
            try:
                raw = json.loads(ring.read_text(encoding="utf-8"))
                self._entries = [PublicKeyEntry(**e) for e in raw["keys"]]
            except (ValueError, KeyError, TypeError) as exc:
                raise KeyRingError(f"{ring} is not a key ring: {exc}") from None
        if path.exists():
            try:
                key = serialization.load_pem_private_key(path.read_bytes(), password=None)
            except (ValueError, TypeError) as exc:
                raise KeyRingError(f"{path} is not a private key: {exc}") from None
            if not isinstance(key, Ed25519PrivateKey):
                raise KeyRingError(f"{path} holds a {type(key).__name__}, not an Ed25519 key")
            self._private = key
            fp = fingerprint(key.public_key())
            if not any(e.fingerprint == fp for e in self._entries):  # a key ring lost: list the key again
                self._entries.append(self._entry(key.public_key()))
                self._save_ring()
        elif create:
            self._new_key()
        else:
            raise KeyRingError(f"no signing key in {self.directory} (the server makes one when it starts)")

    @staticmethod
    def _entry(pub: Ed25519PublicKey) -> PublicKeyEntry:
        return PublicKeyEntry(fingerprint(pub), base64.b64encode(raw_public(pub)).decode(), _now())

    def _save_ring(self) -> None:
        body = {"format": "airpatrol-keyring/1", "keys": [e.to_dict() for e in self._entries]}
        _write_atomic(self.directory / KEYRING_NAME, json.dumps(body, indent=2).encode() + b"\n")

    def _new_key(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        key = Ed25519PrivateKey.generate()
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        self._entries.append(self._entry(key.public_key()))
        self._save_ring()  # the public half is listed before the private one is in use
        _write_atomic(self.directory / PRIVATE_NAME, pem, mode=0o600)
        self._private = key
        log.warning(
            "evidence signing key made in %s: %s (publish this fingerprint)",
            self.directory,
            show_fingerprint(self.fingerprint),
        )

    # -- use ----------------------------------------------------------------------------------

    @property
    def fingerprint(self) -> str:
        assert self._private is not None
        return fingerprint(self._private.public_key())

    @property
    def public_key(self) -> Ed25519PublicKey:
        assert self._private is not None
        return self._private.public_key()

    def sign(self, data: bytes, expect: str | None = None) -> tuple[bytes, Ed25519PublicKey]:
        """The signature of ``data`` and the public key it verifies with; ``expect``: the fingerprint
        the caller named in ``data`` (:class:`KeyRotated` when the key was rotated since)."""
        with self._lock:
            assert self._private is not None
            pub = self._private.public_key()
            if expect is not None and fingerprint(pub) != expect:
                raise KeyRotated(f"the signing key was rotated while {expect[:16]}... was expected")
            return self._private.sign(data), pub

    @property
    def entries(self) -> list[PublicKeyEntry]:
        return list(self._entries)

    def trusted(self) -> dict[str, Ed25519PublicKey]:
        """fingerprint -> public key, the current and every retired one."""
        return {e.fingerprint: e.key() for e in self._entries}

    def rotate(self) -> tuple[str, str]:
        """A new signing key; the old one retired (its public half kept). Returns (old, new)."""
        with self._lock:
            old = self.fingerprint
            self._entries = [
                PublicKeyEntry(e.fingerprint, e.public_key, e.created_at, _now())
                if e.fingerprint == old
                else e
                for e in self._entries
            ]
            self._new_key()
            return old, self.fingerprint


__all__ = [
    "KeyRingError",
    "KeyRotated",
    "KeyRing",
    "PublicKeyEntry",
    "fingerprint",
    "load_public",
    "parse_fingerprint",
    "public_pem",
    "show_fingerprint",
]
