"""A whole batch: :func:`run_batch` runs a job on every item not already done in an output folder
(one driver per folder at a time) and writes its report."""

from __future__ import annotations

import contextlib
import fcntl
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from batch.commit import LOCK_NAME, PARTIAL_DIR, RUNNING_DIR, Job, fingerprint
from batch.errors import BatchError
from batch.executors import Executor, LocalExecutor
from batch.progress import BatchProgress
from batch.ray_executor import RayExecutor
from batch.report import BatchReport


@contextlib.contextmanager
def _exclusive(out_root: Path):
    """One batch driver per output folder at a time."""
    out_root.mkdir(parents=True, exist_ok=True)
    with open(out_root / LOCK_NAME, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BatchError(f"{out_root} is in use by another batch (lock {out_root / LOCK_NAME})") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_batch(
    job: Job,
    items: Sequence[Any],
    out_root: str | Path,
    executor: Executor | None = None,
    *,
    progress: bool = True,
) -> BatchReport:
    """Run ``job`` on every item not already done in ``out_root``; write batch.json and batch.md.

    Progress (items and frames across the whole batch) goes to a progress bar and the log."""
    out_root = Path(out_root)
    executor = executor or LocalExecutor()
    names = [job.name_of(i) for i in items]
    if len(set(names)) != len(names):
        raise BatchError("two items of the batch have one name")
    settings = job.settings()
    with _exclusive(out_root):
        shutil.rmtree(out_root / PARTIAL_DIR, ignore_errors=True)  # attempts of a killed earlier run
        shutil.rmtree(out_root / RUNNING_DIR, ignore_errors=True)
        per_item = getattr(job, "item_settings", None)
        fps = [fingerprint(job.inputs_of(i), [settings, per_item(i) if per_item else None]) for i in items]
        frames_of = getattr(job, "frames_of", None)
        counts = [frames_of(i) for i in items] if frames_of else []
        total = sum(counts) if counts and all(c is not None for c in counts) else None
        tracker = BatchProgress(len(items), total, show=progress)
        try:
            executor.run(job, items, fps, out_root, tracker)
        finally:
            tracker.close()
            if isinstance(executor, RayExecutor):
                executor.stop()
        outcomes = tracker.outcomes
        shutil.rmtree(out_root / PARTIAL_DIR, ignore_errors=True)
        shutil.rmtree(out_root / RUNNING_DIR, ignore_errors=True)
        report = BatchReport(
            out_root,
            executor.description,
            [outcomes.get(n, {"name": n, "status": "failed", "error": "no result"}) for n in names],
            tracker.elapsed_s,
            getattr(job, "threads", None),
        )
        report.write()
    return report
