"""Server benchmark: latency, processed fps, dropped frames and memory with 1..N concurrent streams.

``airpatrol serve-bench`` (or ``python -m edge_client.bench``) starts ``airpatrol serve`` in a
subprocess on 127.0.0.1 with a fresh data folder, streams to it from this process with the
reference publisher (real time, telemetry on the data channel), and reads the per-session
numbers the server measured itself (received -> result latency percentiles, processed fps,
dropped-frame ratio) plus the server process's RSS. The publishers' video encoding runs on the
same machine and competes with the server for CPU; on a real deployment the drones' phones do it.

By default the footage is the synthetic scene with the bright-blob detector, which isolates the
server + engine cost from the detector model; pass ``--config site.yaml`` with detector weights
and ``--detector-factory none`` to include a real model.

Here: the options and the run's order. The server subprocess is :mod:`edge_client.bench_server`,
the stream runs (concurrent, long, churn) :mod:`edge_client.bench_runs`, ``--api-load``
:mod:`edge_client.bench_api_load`, the text report :mod:`edge_client.bench_report`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from edge_client.bench_api_load import api_load
from edge_client.bench_fault import add_fault_arguments
from edge_client.bench_report import cpu_model, loadavg, print_report
from edge_client.bench_runs import churn, long_run, run_streams
from edge_client.bench_server import ServerProcess

log = logging.getLogger(__name__)

DEFAULT_DETECTOR = "edge_client.synthetic:BrightBlobDetector"


def cpu_list(text: str) -> list[int]:
    """``0`` / ``0,1`` / ``0-3`` -> the CPU numbers; an argparse error for anything else."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a CPU list: {text!r} (e.g. 0 or 0,1 or 0-3)") from None
    usable = os.sched_getaffinity(0)
    if not cpus or not cpus <= usable:
        raise argparse.ArgumentTypeError(
            f"CPUs {sorted(cpus)} are not all usable here (usable: {sorted(usable)})"
        )
    return sorted(cpus)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--streams",
        type=int,
        nargs="+",
        default=[1, 2, 4],
        help="concurrent stream counts to run (0: none, e.g. with --churn)",
    )
    p.add_argument("--duration", type=float, default=30.0, help="seconds of video per run")
    p.add_argument(
        "--video",
        default="synthetic:1280x720",
        help="video file (H.264 without B-frames unless --encode), or synthetic[:WxH] (default synthetic:1280x720)",
    )
    p.add_argument("--srt", type=Path, default=None, help="telemetry for a video file")
    p.add_argument(
        "--encode",
        action="store_true",
        help="encode the video live in the publishers (default: relay pre-encoded H.264 like a drone app, "
        "so the publishers' CPU stays out of the server's numbers)",
    )
    p.add_argument("--config", type=Path, default=None, help="site pipeline config YAML for the server")
    p.add_argument(
        "--detector-factory",
        default=DEFAULT_DETECTOR,
        help=f"server detector 'module:callable', or 'none' to load it from --config (default {DEFAULT_DETECTOR})",
    )
    p.add_argument("--return-video", action="store_true", help="also receive the annotated return video")
    p.add_argument("--process-max-width", type=int, default=None, help="server setting process_max_width")
    p.add_argument(
        "--server-cpus",
        type=cpu_list,
        default=None,
        metavar="LIST",
        help="confine the server (and every process it starts) to these CPUs, e.g. 0 or 0,1 (a slow box, "
        "as `taskset -c`); the publishers keep every CPU",
    )
    p.add_argument(
        "--long-run",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="then one stream this long, sampling RSS",
    )
    p.add_argument("--camera", help="camera profile for the telemetry (DJI .SRT files do not name it)")
    p.add_argument("--altitude", type=float, help="altitude in metres for the telemetry (overrides the SRT)")
    p.add_argument(
        "--pitch", type=float, help="gimbal pitch in degrees for the telemetry (overrides the SRT)"
    )
    p.add_argument(
        "--churn",
        type=int,
        default=0,
        help="after the runs, open and close this many short streams in a row and report the server's "
        "RSS, threads and open files after the first and after the last (a per-session leak check)",
    )
    p.add_argument("--churn-seconds", type=float, default=2.0, help="video seconds per --churn stream")
    p.add_argument(
        "--api-load",
        type=int,
        default=0,
        help="during one live stream, send this many GET /api/v1/violations from a client process and compare "
        "the stream's processed fps with a window before (API isolation)",
    )
    p.add_argument(
        "--api-warmup", type=float, default=10.0, help="--api-load: seconds of stream left out at its start"
    )
    p.add_argument(
        "--api-baseline",
        type=float,
        default=20.0,
        help="--api-load: seconds of stream without load measured just before the load, and again after it",
    )
    p.add_argument("--api-concurrency", type=int, default=50, help="concurrent requests of --api-load")
    add_fault_arguments(p)
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--port", type=int, default=0, help="server port (default: a free one)")


def run_from_args(args: argparse.Namespace) -> int:
    import asyncio
    import platform
    import secrets

    from edge_server.ice import restrict_ice_host_addresses

    restrict_ice_host_addresses(["127.0.0.1"])
    token = secrets.token_urlsafe(16)
    data_dir = Path(tempfile.mkdtemp(prefix="airpatrol-bench-"))
    server = ServerProcess(args, data_dir, token)
    report: dict[str, Any] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs ({cpu_model()})",
        "video": args.video,
        "publisher": "live encoding" if args.encode else "pre-encoded H.264 relayed (no publisher encoding)",
        "duration_s": args.duration,
        "detector": args.detector_factory,
        "camera": args.camera,
        "return_video": args.return_video,
        "server_cpus": args.server_cpus,
        "loadavg_before": loadavg(),
        "runs": [],
    }
    source = args.video
    if not args.encode:
        from edge_client.tracks import synthetic_size

        size = synthetic_size(args.video)
        if size is not None:  # render the scene once as WebRTC-ready H.264 and relay it
            from edge_client.synthetic import write_video

            source = str(write_video(data_dir / f"synthetic_{size[0]}x{size[1]}.mp4", 10.0, 30, *size))
    args.source = source
    try:
        server.wait_ready()
        report["rss_mb_idle"] = round(server.rss_mb(), 1)
        for n in (n for n in args.streams if n > 0):  # --streams 0: no concurrency runs
            log.info("bench: %d concurrent stream(s) for %.0f s", n, args.duration)
            run = asyncio.run(run_streams(server.url, token, n, args, server))
            run["loadavg_after"] = loadavg()
            report["runs"].append(run)
            time.sleep(2.0)
        if args.long_run > 0:
            log.info("bench: long run, one stream for %.0f s", args.long_run)
            report["long_run"] = asyncio.run(long_run(server.url, token, args, server))
        if args.api_load > 0:
            log.info("bench: %d API reads during a live stream", args.api_load)
            report["api_load"] = asyncio.run(api_load(server.url, token, args, server))
        if args.churn > 0:
            log.info("bench: %d short streams in a row", args.churn)
            report["churn"] = asyncio.run(churn(server.url, token, args, server))
    finally:
        server.stop()
    print_report(report, args, sys.stdout)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edge_client.bench", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    for ours in ("edge_client", "edge_server"):
        logging.getLogger(ours).setLevel(logging.INFO)
    for noisy in ("aioice", "aiortc", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return run_from_args(args)


if __name__ == "__main__":
    sys.exit(main())
