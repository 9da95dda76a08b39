"""The evaluator: every sequence of a dataset through ``build_pipeline`` under each configuration.

Nothing here re-implements pipeline logic: frames come from ``pipelines.runner.load_frames`` and
go through ``pipelines.runner.run_pipeline`` on a pipeline made by
``pipelines.builder.build_pipeline``; only models are injected (oracle detector / oracle road mask).
The configurations ("variants", ``--ablate``) are described in :mod:`eval.variants`; the results
and ``metrics.json`` in :mod:`eval.results`; ``report.md`` and the plots in :mod:`eval.report`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eval.datasets import Dataset, SequenceSpec
from eval.detection_cache import DetectionCache
from eval.egomotion import ego_errors, summarize_ego
from eval.groundtruth import GroundTruth
from eval.metrics import (
    MatchedSequence,
    PredTracks,
    TicketRules,
    TrackCollector,
    association_counts,
    prepare_sequence,
    raw_tracking_results,
    speed_samples,
    summarize_speed,
    summarize_tickets,
    summarize_tracking,
    ticket_samples,
    violation_metrics,
)
from eval.oracle import OracleDetector, OracleSegmenter
from eval.report import write_report
from eval.results import EvalReport, SequenceResult, combine
from eval.simulate import FlightSpec
from eval.variants import OracleOptions, Variant
from pipelines.config import ConfigError, PipelineConfig, RulesConfig
from pipelines.telemetry import TelemetryTrack
from pipelines.types import Violation
from pipelines.vehicle_height import ON_THE_ROAD

log = logging.getLogger(__name__)


def sequence_config(
    base: PipelineConfig, seq: SequenceSpec, variant: Variant, fps: float | None
) -> PipelineConfig:
    """The variant's config with the sequence's camera facts and the ground truth's rules. The
    sequence's own overrides (its ``config``: a site's height reference, say) come first, the
    variant's on top of them; a simulated flight of flat sprites measures its vehicles on the road."""
    own = seq.load_config()
    if seq.flat_vehicles:
        flat = {"point_height_m": dict.fromkeys(base.speed.point_height_m, 0.0) | ON_THE_ROAD}
        own = own | {"speed": flat | own.get("speed", {})}
    cfg = variant.apply(base.with_overrides(**own) if own else base)
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
    from pipelines.builder import DEFAULT_ROAD_CANDIDATES, default_weights  # loads torch

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
    shared_models: bool = False,
    on_frame=None,
    cache: DetectionCache | None = None,
) -> SequenceResult:
    """Run one sequence through ``build_pipeline`` and score it. ``shared_models``: take the
    detector network from the process's cache (a batch worker's, :func:`pipelines.batch.worker_detector`);
    ``on_frame()``: called after every frame (a batch's progress); ``cache``: the detector's (and
    the road network's) output recorded on the video's first run and replayed on later ones
    (:mod:`eval.detection_cache`; not with the oracle detector)."""
    from pipelines.builder import build_pipeline  # loads torch
    from pipelines.runner import load_frames, run_pipeline  # loads torch

    fixed = sequence_config(base, seq, variant, None).camera
    source, frames, track = load_frames(seq.video, seq.telemetry, max_frames, camera=seq.camera, fixed=fixed)
    cfg = sequence_config(base, seq, variant, source.fps)
    gt = seq.load_gt()
    notes: list[str] = []
    detector = _oracle_detector(seq, gt, oracle or OracleOptions()) if variant.oracle else None
    mask_source, use_oracle_mask = _mask_plan(cfg, seq, variant)
    segmenter = OracleSegmenter(seq.flight_dir) if use_oracle_mask else None
    if variant.mask in ("on", "oracle") and mask_source.startswith("N/A"):
        notes.append(f"mask={variant.mask} requested but no such mask exists for this sequence")
        cfg = cfg.with_overrides(road={"enabled": False})
    model = _shared_model(cfg) if shared_models and detector is None else None
    cached, cfg, segmenter, model = _cached_models(cache, seq, cfg, detector, segmenter, model)
    pipeline = build_pipeline(cfg, detector=detector, segmenter=segmenter, model=model)
    strided = _Strided(_set_effort(pipeline, variant, notes))
    collector = TrackCollector()
    egos: dict[int, tuple] = {}  # frame index -> (estimated prev -> current homography, valid)

    def on_result(r) -> None:
        collector.add(r.frame.index, r.detections, "" if r.scale is None else r.scale.source)
        egos[r.frame.index] = (r.ego.homography, r.ego.valid)
        if on_frame is not None:
            on_frame()

    total = source.frame_count if max_frames is None else min(max_frames, source.frame_count or max_frames)
    summary = run_pipeline(
        pipeline, strided(frames), on_result=on_result, progress_total=total, progress=progress
    )
    n_frames = strided.read if strided.stride > 1 else int(summary["frames"])
    if gt is not None and strided.stride > 1:  # scored on the frames it processed
        gt = gt.on_frames({i + 1 for i in egos})
    metadata = _run_metadata(pipeline, summary, cached, n_frames, cfg, notes)
    tracks = collector.result().of_classes(seq.scored_classes)
    if seq.scored_classes:
        notes.append(f"scored classes: {', '.join(seq.scored_classes)} (tracks of other classes left out)")
    predicted: list[Violation] = list(summary["violation_list"])
    altitude, pitch = _camera_height(cfg, seq, track)
    scores = _score_run(seq, gt, tracks, predicted, n_frames, source, altitude, pitch, cfg, notes)
    return SequenceResult(
        variant=variant.name,
        sequence=seq.name,
        frames=n_frames,
        wall_s=float(summary["wall_s"]),
        fps=summary["fps"],
        predicted_violations=predicted,
        tracks=tracks,
        gt=gt.truncated(n_frames) if gt is not None else None,
        mask_source=mask_source,
        notes=notes,
        timings=summary.get("timings", {}),
        pipeline=metadata,
        altitude_m=altitude,
        pitch_deg=pitch,
        # (a stride's homographies span several frames: not comparable with the camera's per frame)
        egomotion=_ego_score(seq, egos, source.size) if strided.stride == 1 else None,
        **scores,
    )


def _run_metadata(
    pipeline: Any, summary: dict, cached: Any, n_frames: int, cfg: PipelineConfig, notes: list[str]
):
    """The pipeline's metadata, the laser's readings (used, refused and why), the scale check at the end
    and the detection cache's (a recording is written now; the report says which it was)."""
    lrf = summary["scale"]["rangefinder"]
    metadata = dict(pipeline.metadata) | ({"rangefinder": lrf} if lrf is not None else {})
    for check in ("scale_check", "pitch_check"):  # the session's checks as it ended
        if summary.get(check) is not None:
            metadata[check] = summary[check]
    if cached is not None:
        cached.finish(n_frames, cfg)
        metadata["detection_cache"] = cached.metadata()
        notes.append(f"detections: {cached.mode} ({cached.key.name})")
    return metadata


def _shared_model(cfg: PipelineConfig):
    from batch.jobs import worker_detector

    return worker_detector(cfg.detector)


class _Strided:
    """The frames a pipeline on an effort rung gets: every ``stride``-th (a live stream on that rung
    never hands it the rest); ``read`` counts every frame read from the source."""

    def __init__(self, stride: int) -> None:
        self.stride, self.read = stride, 0

    def __call__(self, frames):
        for f in frames:
            self.read = f.index + 1
            if f.index % self.stride == 0:
                yield f


def _set_effort(pipeline: Any, variant: Variant, notes: list[str]) -> int:
    """``--ablate effort=N``: the pipeline on rung N of the live ladder (the server's default
    bounds); returns its stride (1: every frame)."""
    if not variant.effort:
        return 1
    from pipelines.effort import effort_ladder

    cfg = pipeline.config
    ladder = effort_ladder(cfg.keyframes, cfg.road, cfg.egomotion)
    rung = ladder[min(variant.effort, len(ladder) - 1)]
    pipeline.set_effort(rung)
    notes.append(f"effort {rung.describe()}")
    return rung.stride


def _cached_models(
    cache: DetectionCache | None, seq: SequenceSpec, cfg: PipelineConfig, detector, segmenter, model
):
    """(the cache's run or None, config, segmenter, detector network): with a cache and no injected
    detector, the network and the road U-Net are wrapped to record, or replaced by the replay."""
    if cache is None or detector is not None:
        return None, cfg, segmenter, model
    cached = cache.open(seq.video, cfg, road=cfg.road.enabled and segmenter is None)
    cfg, model, recorded = cached.prepare(cfg, model)
    return cached, cfg, segmenter if segmenter is not None else recorded, model


def _score_run(
    seq: SequenceSpec,
    gt: GroundTruth | None,
    tracks: PredTracks,
    predicted: list[Violation],
    n_frames: int,
    source,
    altitude: float | None,
    pitch: float | None,
    cfg: PipelineConfig,
    notes: list[str],
) -> dict[str, Any]:
    """The scores of a run of ``n_frames`` frames of ``source`` (:func:`_score` against the ground
    truth cut to those frames), or none without ground truth (noted in ``notes``)."""
    if gt is None:
        notes.append("no ground truth: only timings")
        scores = {
            "tracking": None,
            "tracking_raw": None,
            "speed": None,
            "speed_samples": None,
            "violations": None,
            "tickets": None,
            "ticket_samples": None,
        }
    else:
        matched = prepare_sequence(gt.truncated(n_frames), tracks, n_frames, source.size)
        last_t = (n_frames - 1) / source.fps if source.fps else None
        scores = _score(
            seq, matched, tracks, predicted, last_t, altitude, pitch, cfg.speed.altitude_sigma_frac
        )
        scores |= _ticket_scores(seq, gt, matched, tracks, predicted, cfg.rules, source.fps)
    return scores


def _ticket_scores(
    seq: SequenceSpec,
    gt: GroundTruth,
    matched: MatchedSequence,
    tracks: PredTracks,
    predicted: list[Violation],
    rules: RulesConfig,
    fps: float | None,
) -> dict[str, Any]:
    """The ticket metrics (:mod:`eval.metrics.tickets`) where the sequence has true speeds and a
    limit (its ground truth's, else the configuration's global one); else None."""
    gt_speeds = seq.load_speeds()
    truth = seq.load_violations()
    limit = truth.speed_limit_kmh if truth is not None else rules.speed_limit_kmh
    if gt_speeds is None or limit is None:
        return {"tickets": None, "ticket_samples": None}
    visible = {(int(f), int(i)) for f, i, d in zip(gt.frames, gt.ids, gt.distractor, strict=True) if not d}
    samples = ticket_samples(
        seq.name,
        predicted,
        matched,
        tracks,
        gt_speeds,
        TicketRules.of(rules, limit),
        visible=visible,
        fps=fps,
        gt=gt,
    )
    return {"tickets": summarize_tickets(samples), "ticket_samples": samples}


def _ego_score(seq: SequenceSpec, egos: dict[int, tuple], size: tuple[int, int]) -> dict | None:
    """Ego-motion error against the exact camera homographies (simulated flights only)."""
    truth = seq.load_camera_truth()
    if truth is None:
        return None
    estimates = {k: h for k, (h, _) in egos.items()}
    valid = {k: ok for k, (_, ok) in egos.items()}
    return summarize_ego(ego_errors(estimates, truth, size[0], size[1], valid))


def _oracle_detector(seq: SequenceSpec, gt: GroundTruth | None, o: OracleOptions) -> OracleDetector:
    if gt is None:
        raise ConfigError(f"sequence {seq.name} has no ground truth: the oracle detector needs it")
    return OracleDetector(
        gt.by_frame(include_distractors=False),
        jitter_px=o.jitter_px,
        drop_rate=o.drop_rate,
        seed=o.seed,
        min_visibility=max(o.min_visibility, seq.min_visibility),
    )


def _camera_height(
    cfg: PipelineConfig, seq: SequenceSpec, track: TelemetryTrack | None = None
) -> tuple[float | None, float | None]:
    """Altitude and pitch the sequence was run with: the configuration's, else a simulated
    flight's spec, else the median of its telemetry (a real flight's SRT)."""
    altitude = cfg.camera.altitude_m
    pitch = cfg.camera.pitch_deg
    if seq.flight_dir is not None:
        spec = FlightSpec.from_yaml(seq.flight_dir / "flight.yaml")
        altitude = altitude if altitude is not None else spec.altitude_m
        pitch = pitch if pitch is not None else spec.pitch_deg
    if track is not None:
        altitude = altitude if altitude is not None else _median_of(track, "altitude_m")
        pitch = pitch if pitch is not None else _median_of(track, "gimbal_pitch_deg")
    return altitude, pitch


def _median_of(track: TelemetryTrack, name: str) -> float | None:
    values = [v for v in (getattr(s, name) for s in track.samples) if v is not None]
    return round(float(np.median(values)), 2) if values else None


def _score(
    seq: SequenceSpec,
    matched: MatchedSequence,
    tracks: PredTracks,
    predicted: list[Violation],
    last_t: float | None,
    altitude: float | None,
    pitch: float | None,
    altitude_sigma_frac: float = 0.0,
) -> dict[str, Any]:
    """Tracking, speed and violation scores (the :class:`SequenceResult` fields of that name) of
    the predicted ``tracks`` matched to the ground truth; violations up to ``last_t`` seconds.
    ``altitude_sigma_frac``: the configuration's, for the measurement's own sigma."""
    tracking_raw = raw_tracking_results(matched)
    scores: dict[str, Any] = {
        "tracking": summarize_tracking(tracking_raw),
        "tracking_raw": tracking_raw,
        "speed": None,
        "speed_samples": None,
        "violations": None,
    }
    gt_speeds = seq.load_speeds()
    if gt_speeds is not None:
        samples = speed_samples(seq.name, matched, tracks, gt_speeds, altitude, pitch, altitude_sigma_frac)
        scores |= {"speed": summarize_speed(samples), "speed_samples": samples}
    truth = seq.load_violations()
    if truth is not None:
        scores["violations"] = violation_metrics(
            predicted, truth, association_counts(matched, tracks), max_time_s=last_t
        )
    return scores


def evaluate(
    dataset: Dataset,
    base: PipelineConfig,
    variants: Sequence[Variant],
    *,
    oracle: OracleOptions | None = None,
    max_frames: int | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
    cache: DetectionCache | None = None,
) -> EvalReport:
    """Run every (variant, sequence) pair, one after another in this process; write metrics.json,
    report.md and plots to ``out_dir``. (On Ray, one task per pair: :func:`eval.batch.evaluate_on`.)
    ``cache``: the detections recorded once per video and replayed (:mod:`eval.detection_cache`)."""
    t0 = time.perf_counter()
    results = []
    for v in variants:
        for seq in dataset.sequences:
            log.info("evaluating %s on %s", v.name, seq.name)
            results.append(
                run_sequence(
                    seq, base, v, oracle=oracle, max_frames=max_frames, progress=progress, cache=cache
                )
            )
    log.info("evaluation took %.1f s", time.perf_counter() - t0)
    return finish_report(
        dataset, base, variants, results, oracle=oracle, max_frames=max_frames, out_dir=out_dir
    )


def finish_report(
    dataset: Dataset,
    base: PipelineConfig,
    variants: Sequence[Variant],
    results: list[SequenceResult],
    *,
    oracle: OracleOptions | None = None,
    max_frames: int | None = None,
    out_dir: str | Path | None = None,
) -> EvalReport:
    """Combine the results of every (variant, sequence) pair into the report, and write it."""
    for r in results:
        if r.tracking:
            log.info(
                "%s / %s: HOTA %.3f MOTA %.3f IDF1 %.3f%s",
                r.variant,
                r.sequence,
                r.tracking["HOTA"],
                r.tracking["MOTA"],
                r.tracking["IDF1"],
                f", speed MAE {r.speed['mae_kmh']:.2f} km/h" if r.speed and r.speed.get("n") else "",
            )
    report = EvalReport(dataset.name, list(variants), results, combine(results, variants))
    if out_dir is not None:
        report.out_dir = Path(out_dir)
        write_report(report, Path(out_dir), base=base, oracle=oracle, max_frames=max_frames)
    return report
