"""``airpatrol process``: one recorded flight, or a batch of them (a folder of flights, a glob, a
list file, or ``--ray``), and the batch options ``airpatrol eval`` shares (``--ray``, per-task
resources). One flight is :func:`pipelines.cli.cmd_process_one`'s; a batch runs here."""

from __future__ import annotations

import argparse
import glob
import logging
from pathlib import Path

from pipelines.cli import (
    FPS_HELP,
    add_pipeline_options,
    cmd_process_one,
    config_from_args,
    float_in,
    positive_int,
)
from pipelines.config import ConfigError, PipelineConfig

log = logging.getLogger(__name__)


def add_batch_options(p: argparse.ArgumentParser, unit: str) -> None:
    """``--ray`` and the per-task resources (:mod:`batch`)."""
    g = p.add_argument_group("batch on Ray (docs/scale-out.md)")
    g.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help=f"one Ray task per {unit}: alone, a local Ray started for this run; 'auto' the cluster this "
        "machine belongs to; or host:port / ray://host:10001. Without it: one after another in this process",
    )
    g.add_argument(
        "--workers", type=positive_int, help="task slots of a local Ray (default: CPUs / --cpus-per-task)"
    )
    g.add_argument(
        "--cpus-per-task", type=float_in(0.01), default=1.0, help="CPUs Ray reserves per task (default 1)"
    )
    g.add_argument(
        "--gpus-per-task", type=float_in(0.0), default=0.0, help="GPUs per task (e.g. 0.5; default 0)"
    )
    g.add_argument(
        "--threads-per-task",
        type=positive_int,
        help="CPU threads of each task's detector, torch and OpenCV (default: --cpus-per-task with --ray, "
        "the libraries' own without)",
    )
    g.add_argument("--retries", type=int, default=3, help="re-runs of a task whose worker died (default 3)")


def executor_from_args(args: argparse.Namespace):
    from batch.executors import executor_for

    if args.ray is None:
        return executor_for(None)
    return executor_for(
        args.ray,
        workers=args.workers,
        cpus_per_task=args.cpus_per_task,
        gpus_per_task=args.gpus_per_task,
        retries=max(0, args.retries),
    )


def batch_config(config: PipelineConfig, args: argparse.Namespace) -> PipelineConfig:
    """Per-task settings: the detector's threads, and CUDA when tasks get a GPU (Ray exposes the
    task's GPU as device 0)."""
    threads = args.threads_per_task or (max(1, int(args.cpus_per_task)) if args.ray else None)
    detector: dict = {"threads": threads} if threads else {}
    road: dict = {}
    if args.ray and args.gpus_per_task > 0 and not args.device:
        detector["device"] = road["device"] = "cuda"
    return config.with_overrides(detector=detector, road=road)


def is_batch(args: argparse.Namespace) -> bool:
    from batch.discovery import LIST_SUFFIXES, is_sequence_folder

    if args.ray is not None or len(args.video) > 1:
        return True
    text = str(args.video[0])
    if "://" in text:
        return False
    path = Path(text).expanduser()
    if glob.has_magic(text) and not path.exists():
        return True
    if path.is_file():
        return path.suffix.lower() in LIST_SUFFIXES
    return path.is_dir() and not is_sequence_folder(path)


def cmd_process_batch(args: argparse.Namespace) -> int:
    from batch.discovery import discover_flights
    from batch.jobs import ProcessJob
    from batch.run import run_batch

    if args.srt is not None:
        raise ConfigError(
            "--srt names one flight's telemetry; in a batch each video's .SRT beside it is used (or a list file's second column)"
        )
    out = Path(args.out or Path("runs") / f"batch-{Path(str(args.video[0])).stem.strip('*?[]') or 'flights'}")
    flights = discover_flights(args.video, exclude=out)
    config = batch_config(config_from_args(args), args)
    job = ProcessJob(config, args.max_frames, not args.no_video, args.camera, args.fps)
    executor = executor_from_args(args)
    log.info("%d flight(s) -> %s on %s", len(flights), out, executor.description)
    report = run_batch(job, flights, out, executor, progress=not args.quiet)
    t = report.totals()
    print(  # noqa: T201 - the command's result on stdout
        f"{t['items']} flights: {t['done']} processed, {t['skipped']} already done, {t['failed']} failed; "
        f"{t['frames']} frames, {t['violations']} violations in {t['wall_s']} s -> {out / 'batch.md'}"
    )
    for r in report.failed:
        log.error("%s: %s", r["name"], r.get("error"))
    return 1 if report.failed else 0


def cmd_process(args: argparse.Namespace) -> int:
    if is_batch(args):
        return cmd_process_batch(args)
    args.video = args.video[0]
    return cmd_process_one(args)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "process",
        help="run the pipeline on recorded flights and write their outputs",
        description="One flight: its outputs in --out. Several (a folder of flights, a quoted glob, a list "
        "file of 'VIDEO [TELEMETRY]' lines, or --ray): one folder per flight under --out, batch.json and "
        "batch.md; a re-run skips the flights already done with the same inputs and settings.",
    )
    p.add_argument(
        "video",
        nargs="+",
        help="video file or frame folder (MOT/UAVDT/VisDrone layout); or a folder of flights, a glob, a list file",
    )
    p.add_argument("--srt", type=Path, help="DJI .SRT sidecar or flight-log CSV with telemetry (one flight)")
    p.add_argument("--out", type=Path, help="output folder (default runs/<video name>, runs/batch-<name>)")
    p.add_argument("--max-frames", type=positive_int, help="stop after N frames")
    p.add_argument("--fps", type=float_in(0.1, 1000.0), help=FPS_HELP)
    p.add_argument("--no-video", action="store_true", help="skip the annotated video")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_pipeline_options(p)
    add_batch_options(p, "flight")
    p.set_defaults(func=cmd_process)
