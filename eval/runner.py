"""The evaluator: every sequence of a dataset through ``build_pipeline`` under each configuration.

Nothing here re-implements pipeline logic: frames come from ``pipelines.runner.load_frames`` and
go through ``pipelines.runner.run_pipeline`` on a pipeline made by
``pipelines.builder.build_pipeline``; only models are injected (oracle detector / oracle road mask).

Configurations ("variants"): the base config, plus one per ``--ablate`` item:

* ``mask`` -> ``mask=on`` and ``mask=off``; ``mask=on|off`` for one of them. "On" uses, in order:
  the configured U-Net weights (the shipped one by default), the simulator's exact road masks
  (sim sequences), the sequence's road polygon; when none exists the variant runs without a mask
  and the report says "N/A". ``mask=oracle`` takes the simulator's exact masks even where a U-Net
  exists (isolates the detector and tracker from segmentation errors; sim sequences only).
* ``egomotion`` -> ego-motion compensation toggled; ``egomotion=on|off`` explicit.
* ``detector=PATH`` -> other detector weights; ``oracle`` -> the ground-truth oracle detector.
* ``section.key=value`` -> any config field (value parsed as YAML), e.g. ``tracker.lost_track_buffer=10``.
* ``a+b`` combines items into one variant, e.g. ``detector=m.onnx+detector.classes=coco``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from eval.datasets import Dataset, GroundTruth, SequenceSpec
from eval.metrics import (
    PredTracks,
    SpeedSamples,
    TrackCollector,
    association_counts,
    combine_tracking_results,
    combine_violation_metrics,
    prepare_sequence,
    raw_tracking_results,
    speed_samples,
    summarize_speed,
    summarize_tracking,
    violation_metrics,
)
from eval.oracle import OracleDetector, OracleSegmenter
from pipelines.config import ConfigError, PipelineConfig
from pipelines.types import Violation

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OracleOptions:
    jitter_px: float = 0.0
    drop_rate: float = 0.0
    seed: int = 0
    min_visibility: float = 0.3


@dataclass(frozen=True, slots=True)
class Variant:
    """One pipeline configuration to evaluate."""

    name: str
    overrides: tuple[tuple[str, str, Any], ...] = ()  # (section, key, value)
    mask: str = "config"  # config | on | off | oracle
    oracle: bool = False

    def apply(self, config: PipelineConfig) -> PipelineConfig:
        sections: dict[str, dict[str, Any]] = {}
        for section, key, value in self.overrides:
            sections.setdefault(section, {})[key] = value
        if self.mask == "off":
            sections.setdefault("road", {})["enabled"] = False
        elif self.mask in ("on", "oracle"):
            sections.setdefault("road", {})["enabled"] = True
        return config.with_overrides(**sections) if sections else config


def _parse_value(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def parse_ablations(text: str | None, base: Variant) -> list[Variant]:
    """``--ablate`` text -> variants (the base first). See the module docstring for the syntax."""
    variants = [base]
    if not text:
        return variants
    fields = set(PipelineConfig.model_fields)
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        if item == "mask":
            expanded = ["mask=on", "mask=off"]
        elif item == "egomotion":
            expanded = ["egomotion=off"]
        else:
            expanded = [item]
        for one in expanded:
            v = dataclasses.replace(base, name=one)
            overrides = list(base.overrides)
            for part in (p.strip() for p in one.split("+")):
                key, sep, value = part.partition("=")
                key = key.strip()
                if part == "oracle":
                    v = dataclasses.replace(v, oracle=True)
                elif key == "mask" and value in ("on", "off", "oracle"):
                    v = dataclasses.replace(v, mask=value)
                elif key == "egomotion" and value in ("on", "off"):
                    overrides.append(("egomotion", "enabled", value == "on"))
                elif key == "detector" and sep:
                    overrides.append(("detector", "weights", value))
                    v = dataclasses.replace(v, oracle=False)
                elif "." in key and sep and key.split(".", 1)[0] in fields:
                    section, field_name = key.split(".", 1)
                    section_model = PipelineConfig.model_fields[section].annotation
                    if field_name not in getattr(section_model, "model_fields", {}):
                        raise ConfigError(f"--ablate {part!r}: {section} has no field {field_name!r}")
                    overrides.append((section, field_name, _parse_value(value)))
                else:
                    raise ConfigError(
                        f"--ablate: cannot read {part!r}; use mask, mask=on|off, egomotion, egomotion=on|off, "
                        "oracle, detector=PATH or section.key=value (join with '+')"
                    )
            variants.append(dataclasses.replace(v, overrides=tuple(overrides)))
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ConfigError(f"--ablate lists a configuration twice: {names}")
    return variants


# --------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SequenceResult:
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


def sequence_config(
    base: PipelineConfig, seq: SequenceSpec, variant: Variant, fps: float | None
) -> PipelineConfig:
    """The variant's config with the sequence's camera facts and the ground truth's rules."""
    cfg = variant.apply(base)
    camera: dict[str, Any] = {}
    if cfg.camera.name is None and seq.camera:
        camera["name"] = seq.camera
    if seq.altitude_m is not None and cfg.camera.altitude_m is None:
        camera["altitude_m"] = seq.altitude_m
    if seq.pitch_deg is not None and cfg.camera.pitch_deg is None:
        camera["pitch_deg"] = seq.pitch_deg
    if seq.focal_length_mm is not None and cfg.camera.focal_length_mm is None:
        camera["focal_length_mm"] = seq.focal_length_mm
    sections: dict[str, dict[str, Any]] = {"camera": camera}
    truth = seq.load_violations()
    if truth is not None:
        # score against the same limit and minimum duration the ground truth was made with
        sections["rules"] = {"speed_limit_kmh": truth.speed_limit_kmh, "min_duration_s": truth.min_duration_s}
    if fps:
        sections["tracker"] = {"frame_rate": float(fps)}
    if seq.road_polygon and cfg.road.enabled and cfg.road.polygon is None:
        sections["road"] = {"polygon": [list(p) for p in seq.road_polygon]}
    return cfg.with_overrides(**sections)


def _mask_plan(cfg: PipelineConfig, seq: SequenceSpec, variant: Variant) -> tuple[str, bool]:
    """(description of the road-mask source, inject the simulator's oracle masks?)."""
    from pipelines.builder import DEFAULT_ROAD_CANDIDATES, default_weights

    if not cfg.road.enabled:
        return "off", False
    if variant.mask == "oracle":
        if seq.flight_dir is not None:
            return "oracle (exact simulator masks)", True
        return "N/A (mask=oracle needs a simulated flight: mask disabled)", False
    weights = cfg.road.weights or default_weights(DEFAULT_ROAD_CANDIDATES)
    if weights is not None:
        polygon = f" ({cfg.road.polygon_mode} site polygon)" if cfg.road.polygon else ""
        return f"U-Net {Path(weights).name}{polygon}", False
    if variant.mask == "on" and seq.flight_dir is not None:
        return "oracle (exact simulator masks)", True
    if cfg.road.polygon:
        return "site polygon", False
    return "N/A (no road weights, no polygon: mask disabled)", False


def run_sequence(
    seq: SequenceSpec,
    base: PipelineConfig,
    variant: Variant,
    *,
    oracle: OracleOptions | None = None,
    max_frames: int | None = None,
    progress: bool = True,
) -> SequenceResult:
    """Run one sequence through ``build_pipeline`` and score it."""
    from pipelines.builder import build_pipeline
    from pipelines.runner import load_frames, run_pipeline

    fixed = sequence_config(base, seq, variant, None).camera
    source, frames, _track = load_frames(seq.video, seq.telemetry, max_frames, camera=seq.camera, fixed=fixed)
    cfg = sequence_config(base, seq, variant, source.fps)
    gt = seq.load_gt()
    notes: list[str] = []
    detector = None
    if variant.oracle:
        if gt is None:
            raise ConfigError(f"sequence {seq.name} has no ground truth: the oracle detector needs it")
        o = oracle or OracleOptions()
        min_vis = max(o.min_visibility, seq.min_visibility)
        detector = OracleDetector(
            gt.by_frame(include_distractors=False),
            jitter_px=o.jitter_px,
            drop_rate=o.drop_rate,
            seed=o.seed,
            min_visibility=min_vis,
        )
    mask_source, use_oracle_mask = _mask_plan(cfg, seq, variant)
    segmenter = OracleSegmenter(seq.flight_dir) if use_oracle_mask else None
    if variant.mask in ("on", "oracle") and mask_source.startswith("N/A"):
        notes.append(f"mask={variant.mask} requested but no such mask exists for this sequence")
        cfg = cfg.with_overrides(road={"enabled": False})
    pipeline = build_pipeline(cfg, detector=detector, segmenter=segmenter)
    collector = TrackCollector()

    total = source.frame_count if max_frames is None else min(max_frames, source.frame_count or max_frames)
    summary = run_pipeline(
        pipeline,
        frames,
        on_result=lambda r: collector.add(r.frame.index, r.detections),
        progress_total=total,
        progress=progress,
    )
    n_frames = int(summary["frames"])
    tracks = collector.result()
    predicted: list[Violation] = list(summary["violation_list"])
    altitude = cfg.camera.altitude_m
    pitch = cfg.camera.pitch_deg
    if seq.flight_dir is not None:
        from eval.simulate import FlightSpec

        spec = FlightSpec.from_yaml(seq.flight_dir / "flight.yaml")
        altitude = altitude if altitude is not None else spec.altitude_m
        pitch = pitch if pitch is not None else spec.pitch_deg

    tracking = tracking_raw = speed = vio = None
    samples = None
    if gt is not None:
        gt_cut = gt.truncated(n_frames)
        matched = prepare_sequence(gt_cut, tracks, n_frames, source.size)
        tracking_raw = raw_tracking_results(matched)
        tracking = summarize_tracking(tracking_raw)
        gt_speeds = seq.load_speeds()
        if gt_speeds is not None:
            samples = speed_samples(seq.name, matched, tracks, gt_speeds, altitude, pitch)
            speed = summarize_speed(samples)
        truth = seq.load_violations()
        if truth is not None:
            last_t = (n_frames - 1) / source.fps if source.fps else None
            vio = violation_metrics(predicted, truth, association_counts(matched, tracks), max_time_s=last_t)
    else:
        notes.append("no ground truth: only timings")
    return SequenceResult(
        variant=variant.name,
        sequence=seq.name,
        frames=n_frames,
        wall_s=float(summary["wall_s"]),
        fps=summary["fps"],
        tracking=tracking,
        tracking_raw=tracking_raw,
        speed=speed,
        speed_samples=samples,
        violations=vio,
        predicted_violations=predicted,
        tracks=tracks,
        gt=gt.truncated(n_frames) if gt is not None else None,
        mask_source=mask_source,
        notes=notes,
        timings=summary.get("timings", {}),
        pipeline=dict(pipeline.metadata),
        altitude_m=altitude,
        pitch_deg=pitch,
    )


@dataclass(slots=True)
class EvalReport:
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
        wall = sum(r.wall_s for r in rs)
        entry["fps"] = entry["frames"] / wall if wall > 0 else None
        out[v.name] = entry
    return out


def evaluate(
    dataset: Dataset,
    base: PipelineConfig,
    variants: Sequence[Variant],
    *,
    oracle: OracleOptions | None = None,
    max_frames: int | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
) -> EvalReport:
    """Run every (variant, sequence) pair; write metrics.json, report.md and plots to ``out_dir``."""
    results: list[SequenceResult] = []
    t0 = time.perf_counter()
    for v in variants:
        for seq in dataset.sequences:
            log.info("evaluating %s on %s", v.name, seq.name)
            r = run_sequence(seq, base, v, oracle=oracle, max_frames=max_frames, progress=progress)
            results.append(r)
            if r.tracking:
                log.info(
                    "%s / %s: HOTA %.3f MOTA %.3f IDF1 %.3f%s",
                    v.name,
                    seq.name,
                    r.tracking["HOTA"],
                    r.tracking["MOTA"],
                    r.tracking["IDF1"],
                    f", speed MAE {r.speed['mae_kmh']:.2f} km/h" if r.speed and r.speed.get("n") else "",
                )
    report = EvalReport(dataset.name, list(variants), results, combine(results, variants))
    log.info("evaluation took %.1f s", time.perf_counter() - t0)
    if out_dir is not None:
        from eval.report import write_report

        report.out_dir = Path(out_dir)
        write_report(report, Path(out_dir), base=base, oracle=oracle, max_frames=max_frames)
    return report


def to_jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        f = float(obj)
        return None if not math.isfinite(f) else round(f, 6)
    if isinstance(obj, Path):
        return str(obj)
    return obj


def results_json(report: EvalReport, **meta: Any) -> str:
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
                "predicted_violations": [v.to_dict() for v in r.predicted_violations],
                "notes": r.notes,
                "timings_ms": r.timings,
            }
            for r in report.results
        ],
    }
    return json.dumps(to_jsonable(data), indent=2)
