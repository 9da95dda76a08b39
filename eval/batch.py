"""``airpatrol eval --ray``: one Ray task per (configuration, sequence), merged into one report.

Each task runs :func:`eval.runner.run_sequence` (the same code as the sequential evaluator) and
keeps its :class:`~eval.results.SequenceResult` in ``<out>/parts/<variant>/<sequence>/`` under the
batch's exactly-once protocol (:mod:`batch.commit`): a re-run, or a retry after a worker died,
redoes only the pairs not finished with the same inputs and settings. The driver then combines the
results in the dataset's order and writes metrics.json, report.md and plots as the sequential run
does.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batch.commit import frame_done
from batch.discovery import safe_name_part
from batch.errors import BatchError
from batch.executors import Executor
from batch.jobs import configure_worker, frames_in
from batch.run import run_batch
from eval.datasets import Dataset, SequenceSpec
from eval.results import EvalReport
from eval.variants import OracleOptions, Variant
from pipelines.config import PipelineConfig

log = logging.getLogger(__name__)

RESULT_NAME = "result.pkl"
PARTS_DIR = "parts"


@dataclass(frozen=True)
class EvalItem:
    variant: Variant
    sequence: SequenceSpec


def _paths(seq: SequenceSpec) -> list[Path]:
    """The files a sequence's scores depend on (frames, telemetry and every ground-truth file)."""
    found = []
    for f in dataclasses.fields(seq):
        value = getattr(seq, f.name)
        if isinstance(value, Path) and value.exists() and f.name != "flight_dir":
            found.append(value)
    return found


@dataclass(frozen=True)
class SequenceJob:
    base: PipelineConfig
    oracle: OracleOptions | None = None
    max_frames: int | None = None
    detection_cache: str | None = None  # eval.detection_cache: record once, replay after

    @property
    def threads(self) -> int | None:
        return self.base.detector.threads

    def name_of(self, item: EvalItem) -> str:
        return f"{safe_name_part(item.variant.name)}/{safe_name_part(item.sequence.name)}"

    def frames_of(self, item: EvalItem) -> int | None:
        return frames_in(item.sequence.video, self.max_frames)

    def inputs_of(self, item: EvalItem) -> Sequence[Path]:
        return _paths(item.sequence)

    def settings(self) -> Any:
        return {
            "job": "eval",
            "config": self.base.model_dump(mode="json"),
            "oracle": dataclasses.asdict(self.oracle) if self.oracle else None,
            "max_frames": self.max_frames,
            "detection_cache": self.detection_cache,
        }

    def item_settings(self, item: EvalItem) -> Any:
        return {"variant": repr(item.variant), "sequence": repr(item.sequence)}

    def __call__(self, item: EvalItem, out_dir: Path) -> dict[str, Any]:
        from eval.detection_cache import DetectionCache
        from eval.runner import run_sequence

        configure_worker(self.base)
        cache = DetectionCache(self.detection_cache) if self.detection_cache else None
        r = run_sequence(
            item.sequence,
            self.base,
            item.variant,
            oracle=self.oracle,
            max_frames=self.max_frames,
            progress=False,
            shared_models=True,
            on_frame=frame_done,
            cache=cache,
        )
        (out_dir / RESULT_NAME).write_bytes(pickle.dumps(r, protocol=pickle.HIGHEST_PROTOCOL))
        t = r.tracking or {}
        return {
            "frames": r.frames,
            "fps": r.fps,
            "wall_s": round(r.wall_s, 3),
            "HOTA": t.get("HOTA"),
            "MOTA": t.get("MOTA"),
            "IDF1": t.get("IDF1"),
            "speed_mae_kmh": (r.speed or {}).get("mae_kmh"),
        }


def evaluate_on(
    executor: Executor,
    dataset: Dataset,
    base: PipelineConfig,
    variants: Sequence[Variant],
    out_dir: str | Path,
    *,
    oracle: OracleOptions | None = None,
    max_frames: int | None = None,
    progress: bool = True,
    detection_cache: str | Path | None = None,
) -> EvalReport:
    """:func:`eval.runner.evaluate` with every (variant, sequence) pair as one task of ``executor``;
    the results combined in the sequential evaluator's order into the same report. Raises
    ``BatchError`` naming the pairs that failed (the finished ones stay for a re-run)."""
    from eval.runner import finish_report

    job = SequenceJob(base, oracle, max_frames, str(detection_cache) if detection_cache else None)
    items = [EvalItem(v, s) for v in variants for s in dataset.sequences]
    parts = Path(out_dir) / PARTS_DIR
    batch = run_batch(job, items, parts, executor, progress=progress)
    if batch.failed:
        named = "; ".join(f"{r['name']}: {r.get('error')}" for r in batch.failed)
        raise BatchError(
            f"{len(batch.failed)} of {len(items)} evaluation task(s) failed ({named}); "
            f"finished ones are kept in {parts}: run again to redo only the rest"
        )
    results = []
    for item in items:
        path = parts / job.name_of(item) / RESULT_NAME
        results.append(pickle.loads(path.read_bytes()))  # noqa: S301 - written by this batch's own tasks
    return finish_report(
        dataset, base, variants, results, oracle=oracle, max_frames=max_frames, out_dir=out_dir
    )
