"""Offline driver: a recorded flight (video + telemetry) through the pipeline into the sinks.

Also the benchmark: the same loop, timing each stage (decode, mask, detect, flow, track, speed).
"""

from __future__ import annotations

import json
import logging
import platform
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipelines.config import CameraConfig, PipelineConfig
from pipelines.pipeline import STAGES, Pipeline
from pipelines.types import Frame, FrameResult, ScaleCheckResult, ScaleInfo

log = logging.getLogger(__name__)


def fixed_telemetry_fields(camera: CameraConfig | None) -> frozenset[str]:
    """The Telemetry fields a camera config fixes (``--altitude``, ``--pitch``, ``--focal-length``).

    The log keeps its own values of these (frames carry the telemetry as recorded); they are not
    checked, and the ground model (:class:`pipelines.ground.GroundModel`) uses the configured ones:
    one place applies an override, live and offline.
    """
    if camera is None:
        return frozenset()
    out: set[str] = set()
    if camera.altitude_m is not None:
        out.add("altitude_m")
    if camera.pitch_deg is not None:
        out.add("gimbal_pitch_deg")
    if camera.focal_length_mm is not None:
        out |= {"focal_length_mm", "focal_length_35mm"}
    return frozenset(out)


def load_frames(
    video: str | Path,
    srt: str | Path | None = None,
    max_frames: int | None = None,
    camera: str | None = None,
    fixed: CameraConfig | None = None,
    fps: float | None = None,
):
    """Open a video or frame folder and attach its telemetry; returns (source, frames, track).

    ``fixed``: the run's camera config; the log's values of what it fixes are not checked (the
    ground model applies the fixed ones).
    ``fps``: frame rate of a folder without ``seqinfo.ini`` (speeds scale with it).
    """
    from pipelines.sources import open_source
    from pipelines.telemetry import attach_telemetry, load_telemetry

    source = open_source(video, max_frames=max_frames, fps=fps)
    track = None
    frames: Iterable[Frame] = source
    if srt is not None:
        try:
            track = load_telemetry(srt, camera=camera, fps=source.fps, ignore=fixed_telemetry_fields(fixed))
        except Exception:
            source.close()
            raise
        frames = attach_telemetry(source, track)
        log.info("telemetry: %d samples, %.2f-%.2f s from %s", len(track), track.start_s, track.end_s, srt)
    return source, frames, track


def config_for_source(config: PipelineConfig, fps: float | None) -> PipelineConfig:
    """The config with the tracker's frame rate set to the source's (its lost-track buffer counts
    frames, so it must know how many make a second)."""
    return config.with_overrides(tracker={"frame_rate": float(fps)}) if fps else config


@dataclass
class StageTimer:
    """Collects per-stage milliseconds."""

    samples: dict[str, list[float]]

    @classmethod
    def create(cls) -> StageTimer:
        return cls(defaultdict(list))

    def add(self, stage: str, ms: float) -> None:
        self.samples[stage].append(ms)

    def summary(self, skip: int = 0) -> dict[str, dict[str, float]]:
        out = {}
        for stage, values in self.samples.items():
            arr = np.asarray(values[skip:] if len(values) > skip else values, dtype=float)
            if arr.size == 0:
                continue
            out[stage] = {
                "mean_ms": round(float(arr.mean()), 3),
                "median_ms": round(float(np.median(arr)), 3),
                "p95_ms": round(float(np.percentile(arr, 95)), 3),
                "max_ms": round(float(arr.max()), 3),  # a step some frames take (a stall) shows here
            }
        return out


def timed_frames(frames: Iterable[Frame], timer: StageTimer) -> Iterator[Frame]:
    """Yield frames, charging the time spent producing each one to the 'decode' stage."""
    it = iter(frames)
    while True:
        t0 = time.perf_counter()
        try:
            frame = next(it)
        except StopIteration:
            return
        timer.add("decode", (time.perf_counter() - t0) * 1e3)
        yield frame


def run_pipeline(
    pipeline: Pipeline,
    frames: Iterable[Frame],
    *,
    on_result=None,
    progress_total: int | None = None,
    progress: bool = True,
    timer: StageTimer | None = None,
) -> dict:
    """Drive ``pipeline`` over ``frames``; ``on_result(FrameResult)`` receives each result.

    Returns a run summary (frames, wall time, fps, per-stage timings, violations, warnings).
    """
    from tqdm import tqdm

    timer = timer or StageTimer.create()
    warnings: dict[str, int] = defaultdict(int)
    violations = []
    track_ids: set[int] = set()
    scale_sources: dict[str, int] = defaultdict(int)  # frames per scale source
    last_scale = None
    n = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    bar = tqdm(total=progress_total, unit="frame", disable=not progress, dynamic_ncols=True)
    try:
        for frame in timed_frames(frames, timer):
            t0 = time.perf_counter()
            result: FrameResult = pipeline.process(frame)
            timer.add("pipeline", (time.perf_counter() - t0) * 1e3)
            for stage, ms in result.timings_ms.items():
                timer.add(stage, ms)
            for w in result.warnings:
                warnings[w.split(":")[0]] += 1
            if result.detections.tracker_id is not None:
                track_ids.update(int(t) for t in result.detections.tracker_id)
            violations.extend(result.violations)
            if result.scale is not None:
                scale_sources[result.scale.source] += 1
                last_scale = result.scale
            if on_result is not None:
                t1 = time.perf_counter()
                on_result(result)
                timer.add("sinks", (time.perf_counter() - t1) * 1e3)
            n += 1
            bar.update(1)
            if n % 10 == 0:
                bar.set_postfix(tracks=len(track_ids), violations=len(violations))
    finally:
        bar.close()
        tail = pipeline.finish()
        violations.extend(tail)
        # the scale check as it ended: earlier tickets of a session since found suspect are held too
        violations = pipeline.rehold(violations)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    return {
        "cpu_ms_per_frame": round(cpu / n * 1e3, 2) if n else None,
        "frames": n,
        "wall_s": round(wall, 3),
        "fps": round(n / wall, 2) if wall > 0 else None,
        "tracks": len(track_ids),
        "violations": len(violations),
        # of them, enforceable: a ticket may be issued (Violation.status)
        "enforceable": sum(v.enforceable for v in violations),
        "violation_list": violations,
        "final_violations": tail,
        "warnings": dict(warnings),
        # what the speeds rest on (pipelines.height): frames per scale source, the last frame's scale
        "scale": _scale_summary(pipeline, scale_sources, last_scale),
        # the scale against the vehicles' sizes (pipelines.scale_session); None: the check is off
        "scale_check": None if pipeline.scale_check is None else pipeline.scale_check.summary(),
        # the pitch against the traffic's speeds (pipelines.pitch_check); None: the check is off
        "pitch_check": None if pipeline.pitch_check is None else pipeline.pitch_check.result().to_dict(),
        "timings": timer.summary(),
        "pipeline": pipeline.metadata,
    }


def _scale_summary(pipeline: Pipeline, sources: dict[str, int], last: ScaleInfo | None) -> dict:
    return {
        "sources": dict(sources),
        "last": None if last is None else last.to_dict(),
        # the laser's readings (pipelines.rangefinder): used, refused and why; None: none
        "rangefinder": None if pipeline.ground.rangefinder is None else pipeline.ground.rangefinder.summary(),
        # the lens and shutter the points were corrected for (pipelines.lens)
        "optics": pipeline.ground.optics_summary(),
    }


def machine_description() -> str:
    import os

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = ""
    if hasattr(os, "getloadavg"):
        load = f", load average {os.getloadavg()[0]:.1f}"
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}{load}"


def describe_imgsz(metadata: dict, config: PipelineConfig) -> str:
    """``960`` for a fixed size; ``auto: 960 (120 frames), 1280 (30 frames)`` for the GSD-chosen one."""
    used = metadata.get("detector_imgsz", config.detector.imgsz)
    if isinstance(used, Mapping):
        return "auto: " + (", ".join(f"{k} ({v} frames)" for k, v in sorted(used.items())) or "no frame")
    return str(used)


def describe_keyframes(metadata: dict) -> str:
    """``every frame``, or ``keyframes ...: 120 of 300 frames (40 %): interval 80, entering 30, ...``
    (mask, detect: mean over the frames they ran on)."""
    counts = metadata.get("keyframes")
    text = str(metadata.get("detect_every", "every frame"))
    if not isinstance(counts, Mapping) or not counts:
        return text
    total = sum(counts.values())
    detected = total - counts.get("propagated", 0)
    reasons = ", ".join(
        f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]) if k != "propagated"
    )
    return f"{text}; detected {detected} of {total} frames ({100 * detected / total:.0f} %): {reasons}"


def format_bench(summary: dict, config: PipelineConfig, size: tuple[int, int], skip: int) -> str:
    rows = [
        "decode",
        "mask",
        "detect",
        "flow",
        "propagate",
        "track",
        "speed",
        "scale_check",
        "rules",
        "schedule",
        "pipeline",
        "sinks",
    ]
    t = summary["timings"]
    lines = [
        f"machine: {machine_description()}",
        f"frames: {summary['frames']} at {size[0]}x{size[1]} (first {skip} excluded from stage stats)",
        f"detector: {summary['pipeline'].get('detector')}  imgsz {describe_imgsz(summary['pipeline'], config)}"
        f"  device {summary['pipeline'].get('detector_device', config.detector.device)}",
        f"road mask: {summary['pipeline'].get('road_mask')}",
        f"detection: {describe_keyframes(summary['pipeline'])}",
        f"{'stage':<10}{'mean ms':>10}{'median':>10}{'p95':>10}{'max':>10}",
    ]
    for stage in rows:
        if stage in t:
            s = t[stage]
            lines.append(
                f"{stage:<10}{s['mean_ms']:>10.2f}{s['median_ms']:>10.2f}{s['p95_ms']:>10.2f}"
                f"{s['max_ms']:>10.2f}"
            )
    per_frame = sum(t[s]["mean_ms"] for s in ("decode", "pipeline", "sinks") if s in t)
    lines.append(
        f"end-to-end: {summary['fps']:.2f} fps wall ({per_frame:.1f} ms/frame mean, {1000 / per_frame:.1f} fps "
        f"from stage means); process CPU {summary['cpu_ms_per_frame']:.1f} ms/frame"
    )
    check = summary.get("scale_check")
    if check:
        lines.append(f"scale check: {ScaleCheckResult.from_dict(check).describe()}")
    lines.append(f"machine at the end: {machine_description()}")
    return "\n".join(lines)


__all__ = ["STAGES", "StageTimer", "format_bench", "load_frames", "run_pipeline", "timed_frames"]


def process_flight(
    video: Path,
    config: PipelineConfig,
    out: Path,
    *,
    srt: Path | None = None,
    max_frames: int | None = None,
    write_video: bool = True,
    progress: bool = True,
    camera: str | None = None,
    on_result=None,
    fps: float | None = None,
    model=None,
) -> dict:
    """Run the pipeline on a recorded flight and write every output into ``out``; returns the summary.

    ``on_result`` (optional) also receives every ``FrameResult``, e.g. to score a run in-process.
    ``model``: a loaded detector network to run (a batch worker's, loaded once for all its flights).
    """
    from pipelines.builder import build_pipeline
    from pipelines.sinks import OutputWriter

    source, frames, track = load_frames(
        video, srt, max_frames, camera=camera or config.camera.name, fixed=config.camera, fps=fps
    )
    try:
        config = config_for_source(config, source.fps)
        pipeline = build_pipeline(config, model=model)
        if pipeline.ground.terrain is not None and track is not None:
            from pipelines.terrain_io import check_covers

            check_covers(pipeline.ground.terrain, track.samples)
        total = (
            source.frame_count if max_frames is None else min(max_frames, source.frame_count or max_frames)
        )
        with OutputWriter(
            out,
            fps=source.fps,
            size=source.size,
            write_video=write_video,
            speed_limit_kmh=config.rules.speed_limit_kmh,
        ) as writer:

            def sinks(result):
                writer.write(result)
                if on_result is not None:
                    on_result(result)

            summary = run_pipeline(pipeline, frames, on_result=sinks, progress_total=total, progress=progress)
            writer.add_violations(summary.pop("final_violations"))
            writer.restamp(summary.pop("violation_list"))  # as the scale check ended (Pipeline.rehold)
            summary.update(
                video=str(video),
                telemetry=str(srt) if srt else None,
                size=list(source.size),
                source_fps=source.fps,
                source_stats=str(getattr(source, "stats", "")),
                config=json.loads(config.model_dump_json()),
            )
            summary["outputs"] = writer.close(summary)
    finally:
        source.close()
    return summary
