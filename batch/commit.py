"""One item of a batch, run exactly once: its fingerprint, its record, the commit, and the
frame reports of a running task.

Exactly once, whatever dies: a task writes into ``.partial/<item>.<attempt>/`` and commits by
renaming that folder to ``<item>/`` (atomic on one filesystem), with ``batch-record.json`` inside
holding the item's fingerprint (its input files' sizes and times, the job's settings). An item
whose committed record has the same fingerprint is done: a re-run skips it (resume), a retried
task that finds it returns it, and a second attempt that lost the rename race discards its own
folder. A worker killed mid-item leaves only a ``.partial`` folder, which Ray's retry (and the
next run) ignores and the driver removes at the end. A changed input or setting (a new model)
re-runs the item and replaces its folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from pipelines.sinks import atomic_write_text

# what a batch's output folder holds besides one folder per item: each item's record (in its folder),
# the attempts being written, a marker per running attempt, and the driver's lock (batch.run)
RECORD_NAME = "batch-record.json"
PARTIAL_DIR = ".partial"
RUNNING_DIR = ".running"
LOCK_NAME = ".batch.lock"


def is_batch_output(folder: Path) -> bool:
    """A batch's output folder, or one flight's inside it: never a flight to process."""
    return (folder / LOCK_NAME).exists() or (folder / RECORD_NAME).exists()


def _stat_of(path: Path) -> dict[str, Any]:
    """Size and modification time of a file, or of a folder's files (a frame folder)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return {
            "path": str(path.resolve()),
            "files": len(files),
            "bytes": sum(p.stat().st_size for p in files),
            "mtime_ns": max((p.stat().st_mtime_ns for p in files), default=0),
        }
    st = path.stat()
    return {"path": str(path.resolve()), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}


def fingerprint(inputs: Sequence[Path], settings: Any) -> str:
    """What an item's outputs depend on: its input files (size, mtime) and the job's settings."""
    blob = json.dumps(
        {"inputs": [_stat_of(p) for p in inputs], "settings": settings}, sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Job(Protocol):
    """Runs one item into a fresh folder; returns a JSON-able summary of it."""

    def __call__(self, item: Any, out_dir: Path) -> dict[str, Any]: ...

    def name_of(self, item: Any) -> str: ...

    def inputs_of(self, item: Any) -> Sequence[Path]: ...

    def settings(self) -> Any: ...


LOADS: dict[str, int] = {"detector": 0}  # models this process loaded (the batch report counts them)


def _safe(name: str) -> str:
    return name.replace("/", "__")


def read_record(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def _commit(partial: Path, final: Path, fp: str) -> tuple[dict[str, Any], bool]:
    """Make ``partial`` the item's output folder; (record kept, whether it was this attempt's)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    old = read_record(final) if final.exists() else None
    if old is not None and old.get("fingerprint") == fp:
        shutil.rmtree(partial, ignore_errors=True)  # another attempt committed first
        return old, False
    if final.exists():  # stale outputs (inputs or settings changed since): replaced
        trash = partial.parent / f"{partial.name}.old"
        os.rename(final, trash)
        shutil.rmtree(trash, ignore_errors=True)
    try:
        os.rename(partial, final)
    except OSError:
        won = read_record(final)
        if won is None or won.get("fingerprint") != fp:
            raise
        shutil.rmtree(partial, ignore_errors=True)
        return won, False
    return read_record(final) or {}, True


FrameReporter = Callable[[str, str, int], None]  # (item name, attempt, frames done so far)
_frame_hook: Callable[[], None] | None = None


def frame_done() -> None:
    """Called by a job for every frame it has processed: the batch's progress (a no-op outside one)."""
    if _frame_hook is not None:
        _frame_hook()


@contextlib.contextmanager
def _reporting(name: str, attempt: str, report: FrameReporter | None, every_s: float):
    """Route :func:`frame_done` to ``report`` (at most every ``every_s`` seconds, and at the end)."""
    global _frame_hook
    if report is None:
        yield
        return
    count = 0
    last = 0.0

    def hook() -> None:
        nonlocal count, last
        count += 1
        now = time.monotonic()
        if now - last >= every_s:
            last = now
            report(name, attempt, count)

    _frame_hook = hook
    try:
        yield
    finally:
        _frame_hook = None
        report(name, attempt, count)


def run_item(
    job: Job,
    item: Any,
    out_root: Path,
    fp: str,
    attempt_note: str = "",
    report: FrameReporter | None = None,
    report_every_s: float = 0.0,
) -> dict[str, Any]:
    """Run one item of a batch exactly once into ``out_root/<name>/`` (see the module docstring).
    Returns its record: the job's summary plus name, fingerprint, status, worker and timing.
    ``report``: told the frames done as the job runs (the batch's progress)."""
    name = job.name_of(item)
    final = out_root / name
    done = read_record(final)
    if done is not None and done.get("fingerprint") == fp and done.get("status") == "done":
        return {**done, "status": "skipped"}
    attempt = uuid.uuid4().hex[:8]
    partial = out_root / PARTIAL_DIR / f"{_safe(name)}.{attempt}"
    partial.mkdir(parents=True)
    running = out_root / RUNNING_DIR / f"{_safe(name)}.{attempt}.json"
    running.parent.mkdir(parents=True, exist_ok=True)
    worker = {"host": socket.gethostname(), "pid": os.getpid(), "attempt": attempt}
    _write_json(
        running,
        {"name": name, **worker, "folder": str(partial), "started": time.time(), "note": attempt_note},
    )
    t0 = time.perf_counter()
    loads_before = dict(LOADS)
    try:
        with _reporting(name, attempt, report, report_every_s):
            summary = job(item, partial)
        record = {
            "name": name,
            "status": "done",
            "fingerprint": fp,
            "worker": worker,
            "task_wall_s": round(time.perf_counter() - t0, 3),
            "models_loaded": {k: LOADS[k] - loads_before.get(k, 0) for k in LOADS},
            "finished": time.time(),
            "summary": summary,
        }
        _write_json(partial / RECORD_NAME, record)
        kept, mine = _commit(partial, final, fp)
        return kept if mine else {**kept, "status": "skipped"}
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        with contextlib.suppress(OSError):
            running.unlink()


def running_attempts(out_root: Path) -> list[dict[str, Any]]:
    """The attempts running now in a batch's output folder: name, host, pid, attempt, started,
    and ``folder``, the attempt's own output folder as it fills (committed when it ends)."""
    found = []
    for marker in sorted((Path(out_root) / RUNNING_DIR).glob("*.json")):
        try:
            found.append(json.loads(marker.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue  # gone since (the attempt ended)
    return found
