"""The one zip layout an evidence pack is written in, byte for byte.

Every member is stored (not compressed: JPEG, MP4 and the like are compressed already), with the
same fixed header fields (1980-01-01 00:00, UTF-8 names, Unix 0644, no extra fields, no comments),
in the manifest's order. So the whole file is determined by its members' names and contents: the
verifier rebuilds it from what it read and compares (:func:`canonical_bytes`), and a changed byte
anywhere (a member, a header, the directory, data before or after) is found, not only in the
files the manifest hashes. Any zip tool reads such a file.

Stdlib only (struct, zlib): ``airpatrol verify`` runs on a machine with nothing else installed.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import BinaryIO

_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_END = struct.Struct("<IHHHHIIH")
_VERSION = 20  # 2.0: stored members, no zip64
_MADE_BY = (3 << 8) | _VERSION  # Unix
_UTF8 = 0x0800
_DOS_TIME, _DOS_DATE = 0, (0 << 9) | (1 << 5) | 1  # 1980-01-01 00:00:00
_UNIX_FILE = (0o100644 << 16) & 0xFFFFFFFF
MAX_MEMBER_BYTES = 0xFFFFFFFF - 1  # no zip64: a member and the whole file under 4 GiB


class PackFormatError(ValueError):
    """What cannot be written in the canonical layout (a name, a size)."""


def _entries(members: Iterable[tuple[str, bytes]]) -> Iterator[tuple[bytes, bytes, int]]:
    for name, data in members:
        raw = name.encode("utf-8")
        if not raw or len(raw) > 0xFFFF or name.startswith("/") or "\\" in name or ".." in name.split("/"):
            raise PackFormatError(f"member name {name!r} is not a plain relative path")
        if len(data) > MAX_MEMBER_BYTES:
            raise PackFormatError(
                f"member {name} is {len(data)} bytes: over the 4 GiB a pack member may have"
            )
        yield raw, data, zlib.crc32(data) & 0xFFFFFFFF


def write_canonical(out: BinaryIO, members: Iterable[tuple[str, bytes]]) -> int:
    """Write ``members`` (name, content) in order as the canonical zip; returns the bytes written."""
    central: list[bytes] = []
    offset = 0
    for raw, data, crc in _entries(members):
        header = _LOCAL.pack(
            0x04034B50, _VERSION, _UTF8, 0, _DOS_TIME, _DOS_DATE, crc, len(data), len(data), len(raw), 0
        )
        out.write(header)
        out.write(raw)
        out.write(data)
        central.append(
            _CENTRAL.pack(
                0x02014B50,
                _MADE_BY,
                _VERSION,
                _UTF8,
                0,
                _DOS_TIME,
                _DOS_DATE,
                crc,
                len(data),
                len(data),
                len(raw),
                0,
                0,
                0,
                0,
                _UNIX_FILE,
                offset,
            )  # fmt: skip
            + raw
        )
        offset += len(header) + len(raw) + len(data)
        if offset > MAX_MEMBER_BYTES:
            raise PackFormatError("the pack is over the 4 GiB a canonical zip may have")
    directory = b"".join(central)
    out.write(directory)
    out.write(_END.pack(0x06054B50, 0, 0, len(central), len(central), len(directory), offset, 0))
    return offset + len(directory) + _END.size


class _Counter:
    """A write-only sink that hashes what is written (the rebuilt file is never held whole)."""

    def __init__(self, digest) -> None:  # noqa: ANN001 - a hashlib object
        self.digest = digest

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return len(data)


def canonical_digest(members: Iterable[tuple[str, bytes]], digest) -> object:  # noqa: ANN001
    """``digest`` (a hashlib object) updated with the canonical zip of ``members``; returned."""
    write_canonical(_Counter(digest), members)  # type: ignore[arg-type]
    return digest


def canonical_bytes(members: Iterable[tuple[str, bytes]]) -> bytes:
    import io

    buf = io.BytesIO()
    write_canonical(buf, members)
    return buf.getvalue()


__all__ = ["MAX_MEMBER_BYTES", "PackFormatError", "canonical_bytes", "canonical_digest", "write_canonical"]
