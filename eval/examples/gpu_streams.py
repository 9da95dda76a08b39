"""``airpatrol bench --streams`` for a bare GPU box: the same engine run, the frames decoded by OpenCV.

A GPU box lent for a few minutes may hold only PyTorch, CUDA and the scientific stack, with no package
registry and 64 MiB of room (eval/examples/gpu_kit.sh makes the wheels it lacks). PyAV, which
``airpatrol bench`` reads videos with, is 36 MB of that; this reads the flight with OpenCV instead (the
benchmark decodes the frames once into memory before it starts the clock, so the decoder is not what it
measures) and then runs exactly what ``bench --streams`` runs: the configuration built from the same
options (:func:`pipelines.cli.config_from_args`), the telemetry of the .SRT, and
:func:`pipelines.streams_bench.run_streams`.

    python eval/examples/gpu_streams.py VIDEO --srt SRT --camera dji_mavic_3 --device cuda \\
        --detect-every 3 --streams 1 2 4 8 --target-fps 30 --json OUT.json

``--engine-processes`` runs each stream in an engine process of its own around the detector service,
as a server with ``engine_processes`` and ``engine_detector_service`` does
(:func:`eval.streams_processes.run_streams_processes`); ``--engine-threads N`` is that server's
``engine_threads``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

import cv2

from pipelines.cli import config_from_args, register
from pipelines.runner import config_for_source, fixed_telemetry_fields, machine_description
from pipelines.streams_bench import format_streams, run_streams
from pipelines.telemetry import attach_telemetry, load_telemetry
from pipelines.types import Frame


def decode(video: Path, max_frames: int) -> tuple[list[Frame], float]:
    """The first ``max_frames`` frames of ``video`` (OpenCV), timed by their index at the file's rate."""
    cap = cv2.VideoCapture(str(video))
    if not cap.isOpened():
        raise SystemExit(f"gpu_streams: OpenCV cannot open {video}")
    fps = cap.get(cv2.CAP_PROP_FPS) or 30.0
    frames: list[Frame] = []
    try:
        while len(frames) < max_frames:
            ok, image = cap.read()
            if not ok:
                break
            frames.append(Frame(len(frames), len(frames) / fps, image))
    finally:
        cap.release()
    if not frames:
        raise SystemExit(f"gpu_streams: no frames in {video}")
    return frames, float(fps)


def gpu_name() -> str | None:
    """The CUDA device's name and torch's version, where there is one."""
    import torch

    if not torch.cuda.is_available():
        return None
    return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_streams.py")
    sub = parser.add_subparsers(dest="command")
    register(sub)  # bench's options, as `airpatrol bench` parses them
    bench = sub.choices["bench"]
    bench.add_argument(
        "--engine-processes", action="store_true", help="a process per stream, one detector service"
    )
    bench.add_argument(
        "--engine-threads",
        type=int,
        default=1,
        help="with --engine-processes: each engine's CPU threads (default 1, as the server's engine_threads; "
        "0: the libraries' own, every core)",
    )
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    if not args.streams:
        parser.error("give --streams N ...")
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("pipelines.streams_bench").setLevel(logging.INFO)  # each count as it ends, also with -q
    config = config_from_args(args)
    frames, fps = decode(args.video, args.max_frames)
    if args.srt is not None:  # as `bench` attaches it (pipelines.runner.load_frames)
        ignore = fixed_telemetry_fields(config.camera)
        track = load_telemetry(args.srt, camera=args.camera, fps=fps, ignore=ignore)
        frames = list(attach_telemetry(frames, track))
    config = config_for_source(config, args.fps or fps)
    options = {
        "target_fps": args.target_fps or fps,
        "give_up_after": args.give_up_after,
        "prepare_ahead": args.prepare_ahead,
    }
    if args.engine_processes:
        from eval.streams_processes import run_streams_processes

        report = run_streams_processes(
            config, frames, args.streams, threads=args.engine_threads or None, **options
        )
    else:
        report = run_streams(config, frames, args.streams, **options)
    report["machine"] = machine_description()
    report["decoder"] = f"OpenCV {cv2.__version__}"
    report["gpu"] = gpu_name()
    gpu = f"; {report['gpu']}" if report["gpu"] else ""
    print(f"machine: {report['machine']}{gpu}\n{format_streams(report)}")  # noqa: T201 - the benchmark's output
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
