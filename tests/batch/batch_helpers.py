"""What the batch tests share: files to find, and a job that writes one file per item."""

from __future__ import annotations

import threading
from pathlib import Path

from batch.discovery import Flight


def touch(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


class WriteJob:
    """A job that writes one file per item (and can be told to fail or wait)."""

    def __init__(self, fail: set[str] = frozenset(), gate: threading.Event | None = None) -> None:
        self.fail = set(fail)
        self.gate = gate
        self.calls: list[str] = []

    def name_of(self, item: Flight) -> str:
        return item.name

    def inputs_of(self, item: Flight):
        return item.inputs

    def settings(self):
        return {"job": "write"}

    def __call__(self, item: Flight, out_dir: Path) -> dict:
        self.calls.append(item.name)
        if self.gate is not None:
            self.gate.wait(10)
        if item.name in self.fail:
            raise ValueError(f"{item.video.name} is corrupt")
        (out_dir / "out.txt").write_text(item.video.read_text())
        return {"frames": len(item.video.read_text())}


def write_items(root: Path, n: int = 3) -> list[Flight]:
    return [Flight(f"f{i}", touch(root / "in" / f"f{i}.mp4", "x" * (i + 1))) for i in range(n)]
