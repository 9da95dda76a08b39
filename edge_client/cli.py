"""``airpatrol publish`` and ``airpatrol serve-bench``: the edge server's client tools."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "publish",
        help="stream a recorded flight to an edge server in real time (reference phone-app client, demo)",
        description=(
            "Stream VIDEO (a file, a frame folder, or 'synthetic') to the server over WebRTC with telemetry on "
            "the 'telemetry' data channel; print the live events the server sends back as JSON lines."
        ),
    )
    p.add_argument("video", help="video file, frame folder, or 'synthetic' (generated test scene)")
    p.add_argument(
        "--srt", type=Path, default=None, help="DJI SRT / flight log (default: VIDEO's .SRT sidecar if any)"
    )
    p.add_argument("--server", default="http://127.0.0.1:8080", help="server base URL")
    p.add_argument("--token", default=None, help="API token (default $AIRPATROL_API_TOKEN)")
    p.add_argument(
        "--whip", action="store_true", help="negotiate with WHIP (POST /whip) instead of the phone API"
    )
    p.add_argument("--loop", action="store_true", help="repeat the video until --max-seconds")
    p.add_argument("--max-seconds", type=float, default=None, help="stop after this much video time")
    p.add_argument("--telemetry-hz", type=float, default=10.0)
    p.add_argument("--no-return-video", action="store_true", help="do not ask for the annotated video back")
    p.add_argument(
        "--passthrough",
        action="store_true",
        help="relay the file's H.264 as is (no re-encoding, like a drone app); needs a stream without B-frames",
    )
    p.add_argument("--altitude", type=float, default=None, help="constant altitude (m) when there is no SRT")
    p.add_argument("--pitch", type=float, default=None, help="constant gimbal pitch (deg, -90 = nadir)")
    p.add_argument("--focal-35mm", type=float, default=None, help="35 mm-equivalent focal length")
    p.add_argument("--camera", default=None, help="camera model sent in telemetry, e.g. 'DJI Mini 4 Pro'")
    p.add_argument(
        "--ice-host", action="append", default=None, metavar="ADDR", help="offer only this ICE host address"
    )
    p.add_argument(
        "--rtmp",
        default=None,
        metavar="URL",
        help="push over RTMP to URL (rtmp://edge:1935/live/<key>), as DJI Pilot 2 / DJI Fly do, instead of WebRTC",
    )
    p.add_argument(
        "--mqtt",
        default=None,
        metavar="URL",
        help="with --rtmp: send the flight's telemetry as DJI Cloud API OSD to this broker "
        "(mqtt://user:password@edge:1883), as Pilot 2 does; needs --device-sn",
    )
    p.add_argument(
        "--device-sn", default=None, help="the aircraft serial of the OSD topic (thing/product/<sn>/osd)"
    )
    p.add_argument(
        "--osd-hz", type=float, default=None, help="OSD messages per second (default 0.5, DJI's rate)"
    )
    p.add_argument(
        "--lrf",
        action="store_true",
        help="with --mqtt: a laser rangefinder's range in every OSD message (an H20/H30 payload's "
        "measure_target_distance): the slant range to the image centre over flat ground, "
        "height / sin(-pitch), from the flight's true height above the road",
    )
    p.add_argument(
        "--takeoff-below-road",
        type=float,
        default=0.0,
        metavar="M",
        help="with --mqtt: the pilot took off M m below the road (negative: above it): the OSD's "
        "elevation reads M m more than the height above the road; the --lrf range does not (default 0)",
    )
    p.set_defaults(func=_publish)

    p = subparsers.add_parser(
        "serve-bench",
        help="measure server latency, fps, drops and memory with 1..N concurrent streams",
        description="Starts `airpatrol serve` in a subprocess and streams to it; see edge_client/bench.py.",
    )
    from edge_client.bench import add_arguments

    add_arguments(p)
    p.set_defaults(func=_bench)


def _publish(args: argparse.Namespace) -> int:
    from edge_client.tracks import PublishError

    if (args.lrf or args.takeoff_below_road) and not (args.rtmp and args.mqtt):
        raise PublishError("--lrf and --takeoff-below-road go with --rtmp and --mqtt (DJI Cloud API OSD)")
    if args.rtmp:
        return _publish_rtmp(args)
    import asyncio

    from edge_client.publish import publish, telemetry_source
    from edge_server.ice import restrict_ice_host_addresses

    token = args.token or os.environ.get("AIRPATROL_API_TOKEN")
    if not token:
        raise PublishError("no API token: pass --token or set AIRPATROL_API_TOKEN")
    if args.ice_host:
        restrict_ice_host_addresses(args.ice_host)
    tel = telemetry_source(
        args.video,
        args.srt,
        altitude_m=args.altitude,
        pitch_deg=args.pitch,
        focal_35mm=args.focal_35mm,
        camera=args.camera,
    )

    def on_event(event: dict) -> None:
        if event.get("type") == "stats":
            log.info("stats: %s", {k: v for k, v in event.items() if k not in ("type", "session_id")})
            return
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    result = asyncio.run(
        publish(
            args.video,
            args.server,
            token,
            srt=args.srt,
            whip=args.whip,
            telemetry_hz=args.telemetry_hz,
            loop_playback=args.loop,
            max_seconds=args.max_seconds,
            return_video=not args.no_return_video,
            on_event=on_event,
            passthrough=args.passthrough,
            telemetry=tel,
        )
    )
    sys.stdout.write(json.dumps({"type": "summary", **result.summary()}) + "\n")
    if result.error is not None:
        log.error("the stream did not run to its end: %s", result.error)
        return 1
    return 0


def _publish_rtmp(args: argparse.Namespace) -> int:
    """The simulated DJI app: video over RTMP (edge_client/rtmp_publish.py), with --mqtt its
    telemetry as DJI Cloud API OSD (edge_client/osd_publish.py)."""
    from edge_client.osd_publish import DJI_OSD_HZ, OsdPublisher
    from edge_client.publish import telemetry_source
    from edge_client.rtmp_publish import check_rtmp_url, publish_rtmp
    from edge_client.tracks import PublishError

    check_rtmp_url(args.rtmp)
    osd = None
    if args.mqtt:
        if not args.device_sn:
            raise PublishError("--mqtt needs --device-sn: the aircraft serial the OSD topic names")
        tel = telemetry_source(
            args.video, args.srt, altitude_m=args.altitude, pitch_deg=args.pitch, focal_35mm=args.focal_35mm
        )
        if tel is None:
            raise PublishError(
                "no telemetry to send: give --srt (or a .SRT beside the video), or --altitude/--pitch"
            )
        osd = OsdPublisher(
            args.mqtt,
            args.device_sn,
            tel,
            hz=args.osd_hz or DJI_OSD_HZ,
            lrf=args.lrf,
            takeoff_below_road_m=args.takeoff_below_road,
        )
    try:
        with _stop_on_sigterm() as stop:
            result = publish_rtmp(
                args.video,
                args.rtmp,
                max_seconds=args.max_seconds,
                passthrough=args.passthrough,
                on_frame=osd.on_frame if osd else None,
                stop=stop,
            )
    finally:
        if osd is not None:
            osd.close()
    summary = {"type": "summary", **result.summary(), "osd_sent": osd.sent if osd else 0}
    sys.stdout.write(json.dumps(summary) + "\n")
    if result.error is not None:
        log.error("the stream did not run to its end: %s", result.error)
        return 1
    return 0


@contextmanager
def _stop_on_sigterm() -> Iterator[threading.Event]:
    """An event set by SIGTERM (``kill``, ``docker stop``, a supervisor): the stream then ends
    after its current frame, as at its natural end (summary, exit 0). Outside the main thread
    (no signal handlers there) the event is never set."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def on_term(_signum, _frame) -> None:
        log.info("SIGTERM: ending the stream")
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)


def _bench(args: argparse.Namespace) -> int:
    from edge_client.bench import run_from_args

    return run_from_args(args)
