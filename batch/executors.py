"""Where a batch's items run: :class:`LocalExecutor` (one after another in this process) or
:class:`~batch.ray_executor.RayExecutor` (``--ray``), as :func:`executor_for` picks from ``--ray``."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from batch.commit import Job, run_item
from batch.progress import BatchProgress, Outcome
from batch.ray_executor import RayExecutor
from pipelines.errors import is_user_error

log = logging.getLogger(__name__)


class LocalExecutor:
    """One item after another in this process: today's loop, with resume and a merged report."""

    description = "local, one flight at a time"

    def run(
        self,
        job: Job,
        items: Sequence[Any],
        fps: Sequence[str],
        out_root: Path,
        progress: BatchProgress,
    ) -> None:
        for item, fp in zip(items, fps, strict=True):
            name = job.name_of(item)
            try:
                record = run_item(job, item, out_root, fp, report=progress.running, report_every_s=0.2)
            except Exception as exc:  # noqa: BLE001 - one bad flight must not stop the batch
                if is_user_error(exc):
                    log.error("%s failed: %s", name, exc)
                else:
                    log.exception("%s failed", name)
                progress.done(Outcome(name, error=f"{type(exc).__name__}: {exc}"))
            else:
                progress.done(Outcome(name, record=record))


Executor = LocalExecutor | RayExecutor


def executor_for(ray: str | None, **kwargs: Any) -> Executor:
    """``--ray`` as given: None -> local loop; "local" -> a local Ray; else a cluster address."""
    if ray is None:
        return LocalExecutor()
    return RayExecutor(address=None if ray == "local" else ray, **kwargs)
