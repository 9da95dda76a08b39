"""What an evaluation produces: one :class:`SequenceResult` per (variant, sequence), the
:class:`EvalReport` over a dataset, the per-variant combination and its ``metrics.json`` form."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.groundtruth import GroundTruth
from eval.metrics import (
    PredTracks,
    SpeedSamples,
    TicketSamples,
    combine_tracking_results,
    combine_violation_metrics,
    summarize_speed,
    summarize_tickets,
    summarize_tracking,
)
from eval.variants import Variant
from pipelines.serialize import to_jsonable
from pipelines.types import Violation

JSON_FLOAT_DIGITS = 6


@dataclass(slots=True)
class SequenceResult:
    """One variant run on one sequence: its scores (None where the sequence has no such truth)."""

    variant: str
    sequence: str
    frames: int
    wall_s: float
    fps: float | None
    tracking: dict[str, float] | None
    tracking_raw: dict | None
    speed: dict | None
    speed_samples: SpeedSamples | None
    violations: dict | None
    predicted_violations: list[Violation]
    tracks: PredTracks
    gt: GroundTruth | None
    mask_source: str
    notes: list[str] = field(default_factory=list)
    timings: dict = field(default_factory=dict)
    altitude_m: float | None = None
    pitch_deg: float | None = None
    pipeline: dict = field(default_factory=dict)  # build_pipeline's metadata: models really used
    egomotion: dict | None = None  # ego-motion error (eval.egomotion.summarize_ego); simulated flights
    # the ticket metrics (eval.metrics.tickets) where the sequence has true speeds; last, so that a
    # result pickled before they existed still loads (getattr)
    tickets: dict | None = None
    ticket_samples: TicketSamples | None = None


@dataclass(slots=True)
class EvalReport:
    """Every (variant, sequence) result of a dataset and the per-variant combination."""

    dataset: str
    variants: list[Variant]
    results: list[SequenceResult]
    combined: dict[str, dict]
    out_dir: Path | None = None


def combine(results: Sequence[SequenceResult], variants: Sequence[Variant]) -> dict[str, dict]:
    """Per-variant metrics over all sequences."""
    out: dict[str, dict] = {}
    for v in variants:
        rs = [r for r in results if r.variant == v.name]
        entry: dict[str, Any] = {"sequences": len(rs), "frames": sum(r.frames for r in rs)}
        raw = {r.sequence: r.tracking_raw for r in rs if r.tracking_raw is not None}
        if raw:
            entry["tracking"] = summarize_tracking(combine_tracking_results(raw))
        samples = [r.speed_samples for r in rs if r.speed_samples is not None]
        if samples:
            entry["speed"] = summarize_speed(SpeedSamples.concat(samples))
        vios = [r.violations for r in rs if r.violations is not None]
        if vios:
            entry["violations"] = combine_violation_metrics(vios)
        tickets = [t for t in (getattr(r, "ticket_samples", None) for r in rs) if t is not None]
        if tickets:
            entry["tickets"] = summarize_tickets(TicketSamples.concat(tickets))
        wall = sum(r.wall_s for r in rs)
        entry["fps"] = entry["frames"] / wall if wall > 0 else None
        out[v.name] = entry
    return out


def _ticket_records(r: SequenceResult) -> dict | None:
    """A sequence's ticket records and vehicle counts (:meth:`TicketSamples.to_json`): what a
    benchmark pools over sequences (eval.ticket_grid)."""
    samples = getattr(r, "ticket_samples", None)
    return None if samples is None else samples.to_json()


def results_json(report: EvalReport, **meta: Any) -> str:
    """``metrics.json``: variants, combined metrics and per-sequence results (floats to 6 digits)."""
    data = {
        "dataset": report.dataset,
        "meta": meta,
        "variants": [
            {"name": v.name, "overrides": [list(o) for o in v.overrides], "mask": v.mask, "oracle": v.oracle}
            for v in report.variants
        ],
        "combined": report.combined,
        "sequences": [
            {
                "variant": r.variant,
                "sequence": r.sequence,
                "frames": r.frames,
                "wall_s": r.wall_s,
                "fps": r.fps,
                "altitude_m": r.altitude_m,
                "pitch_deg": r.pitch_deg,
                "mask_source": r.mask_source,
                "pipeline": r.pipeline,
                "tracking": r.tracking,
                "speed": r.speed,
                "violations": r.violations,
                "tickets": getattr(r, "tickets", None),
                "ticket_records": _ticket_records(r),
                "egomotion": r.egomotion,
                "predicted_violations": [v.to_dict() for v in r.predicted_violations],
                "notes": r.notes,
                "timings_ms": r.timings,
            }
            for r in report.results
        ],
    }
    return json.dumps(to_jsonable(data, float_digits=JSON_FLOAT_DIGITS), indent=2)
