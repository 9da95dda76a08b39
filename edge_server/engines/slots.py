"""Frames handed to an engine process through shared memory: :class:`FrameSlot`.

A slot is one file in ``/dev/shm`` (a RAM file system on Linux; elsewhere the temporary folder)
mapped by the server and by the engine process. The server writes a frame's pixels into it and
sends only the frame's index, time, telemetry and shape over the engine's pipe; the engine copies
the pixels out before it answers, so the slot is free again once the call returns (one slot per
pipe: one call at a time on each).

The server owns every slot: it creates them (named ``airpatrol-eng-<server pid>-<random>``) and
removes them when the stream's engine closes, however the engine ended (a crash included).
:func:`sweep_stale` removes the slots of a server that is no longer running (killed before it
could): called when a server starts.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from pipelines.types import Frame

log = logging.getLogger(__name__)

PREFIX = "airpatrol-eng-"


def slot_dir() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


class FrameSlot:
    """One frame's room in shared memory (``create``: made by the server; else opened by name)."""

    def __init__(self, path: Path, size: int, create: bool = False) -> None:
        self.path = path
        self.size = size
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o600)
        try:
            if create:
                os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        finally:
            os.close(fd)

    @classmethod
    def create(cls, size: int) -> FrameSlot:
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        return cls(slot_dir() / name, size, create=True)

    def write(self, image: np.ndarray) -> None:
        view = np.ndarray(image.shape, np.uint8, buffer=self._map)
        np.copyto(view, image)

    def view(self, shape: tuple[int, ...]) -> np.ndarray:
        """The frame of ``shape`` in place (no copy): valid while its writer waits for the reader."""
        return np.ndarray(shape, np.uint8, buffer=self._map)

    def read(self, shape: tuple[int, ...]) -> np.ndarray:
        """A private copy of the frame of ``shape`` in the slot."""
        return np.ndarray(shape, np.uint8, buffer=self._map).copy()

    def close(self) -> None:
        with contextlib.suppress(BufferError, ValueError):
            self._map.close()

    def unlink(self) -> None:
        """Close and remove the slot (the server's, at the engine's end; harmless twice)."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@dataclass(frozen=True)
class FrameMeta:
    """A frame as it crosses the pipe; its pixels are in ``slot`` (path, size)."""

    index: int
    timestamp_s: float
    telemetry: Any
    shape: tuple[int, ...]
    slot: tuple[str, int]


def open_slot(opened: dict[str, FrameSlot], meta: FrameMeta) -> FrameSlot:
    """The slot ``meta``'s pixels are in, as the reading side maps it: kept in ``opened`` by path
    (mapped again when the writer made it anew at another size)."""
    path, size = meta.slot
    slot = opened.get(path)
    if slot is None or slot.size != size:
        slot = opened[path] = FrameSlot(Path(path), size)
    return slot


def to_slot(slot: FrameSlot | None, frame: Frame) -> tuple[FrameSlot, FrameMeta]:
    """``frame``'s pixels written to ``slot`` (a new one where it is missing or too small: the old one
    removed) and the description that goes over the pipe instead of them."""
    image = np.ascontiguousarray(frame.image)
    if slot is None or slot.size < image.nbytes:
        if slot is not None:
            slot.unlink()
        slot = FrameSlot.create(image.nbytes)
    slot.write(image)
    return slot, FrameMeta(
        frame.index, frame.timestamp_s, frame.telemetry, image.shape, (str(slot.path), slot.size)
    )


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_slots_of(pid: int, folder: Path | None = None) -> int:
    """Remove the slots a process made itself (an engine's for the detector service) once it has
    ended, however it ended; how many were removed."""
    removed = 0
    for path in (folder or slot_dir()).glob(f"{PREFIX}{pid}-*"):
        with contextlib.suppress(OSError):
            path.unlink()
            removed += 1
    return removed


def sweep_stale(folder: Path | None = None) -> int:
    """Remove the slots left by servers that are no longer running; how many were removed."""
    removed = 0
    for path in (folder or slot_dir()).glob(f"{PREFIX}*"):
        try:
            pid = int(path.name[len(PREFIX) :].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not _running(pid):
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
    if removed:
        log.info("removed %d frame slot(s) of engine processes of a server that had stopped", removed)
    return removed


__all__ = [
    "PREFIX",
    "FrameMeta",
    "FrameSlot",
    "open_slot",
    "to_slot",
    "remove_slots_of",
    "slot_dir",
    "sweep_stale",
]
