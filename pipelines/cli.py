"""``airpatrol bench`` and ``airpatrol cameras``, ``airpatrol process`` on one flight (the command
itself, with its batches, is :mod:`batch.cli`'s), and the options of every command that builds a
pipeline: the engine on recorded flights."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pipelines.config import ConfigError, PipelineConfig


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from exc
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def float_in(lo: float, hi: float | None = None, *, hi_open: bool = False):
    """argparse type: a float in [lo, hi] (or [lo, hi) with ``hi_open``; no upper bound when hi is None)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from exc
        above = hi is not None and (value >= hi if hi_open else value > hi)
        if not value >= lo or above:  # also rejects nan
            bound = "" if hi is None else (f", below {hi:g}" if hi_open else f" and at most {hi:g}")
            raise argparse.ArgumentTypeError(f"must be at least {lo:g}{bound}, got {text}")
        return value

    return parse


def imgsz_arg(text: str) -> int | str:
    """``--imgsz``: ``auto`` or a number (checked by the config: 32..4096)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of pixels or 'auto', got {text!r}") from None


def lens_arg(text: str) -> dict:
    """``--lens``: OpenCV's ``k1[,k2,p1,p2,k3]``, a DJI still's DewarpData (nine numbers, the date
    before a ';' optional), or a DJI still (a JPEG whose XMP carries it): the ``camera.lens`` mapping."""
    if Path(text).suffix.lower() in (".jpg", ".jpeg", ".dng", ".tif", ".tiff"):
        from pipelines.lens import LensError, dewarp_data_from_image

        try:
            return {"dewarp_data": dewarp_data_from_image(text), "source": f"DewarpData of {Path(text).name}"}
        except LensError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if ";" in text or text.count(",") == 8:
        return {"dewarp_data": text.strip(), "source": "DJI DewarpData (--lens)"}
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected k1[,k2,p1,p2,k3] or DJI DewarpData, got {text!r}"
        ) from None
    if not 1 <= len(values) <= 5:
        raise argparse.ArgumentTypeError(f"expected 1 to 5 coefficients (k1,k2,p1,p2,k3), got {len(values)}")
    return dict(zip(("k1", "k2", "p1", "p2", "k3"), values, strict=False)) | {"source": "--lens"}


def add_terrain_options(p: argparse.ArgumentParser) -> None:
    """A terrain model of the site (``camera.terrain``)."""
    p.add_argument(
        "--dem",
        type=Path,
        metavar="FILE.tif",
        help="a terrain model of the site (a DEM GeoTIFF of bare earth): each viewing ray meets the "
        "terrain (docs/calibration.md); --dem-datum, --altitude-datum, --takeoff, --dem-sigma refine it",
    )
    p.add_argument(
        "--dem-datum", choices=("crs", "egm96", "egm2008", "ellipsoid"), help="the model's heights' datum"
    )
    p.add_argument(
        "--altitude-datum",
        choices=("egm96", "egm2008", "ellipsoid"),
        help="the drone's absolute altitude's datum (DJI SRT abs_alt: egm96, the default)",
    )
    p.add_argument(
        "--takeoff",
        type=lat_lon,
        metavar="LAT,LON",
        help="the take-off point: its height on the model plus the altitude reading (no absolute altitude used)",
    )
    p.add_argument(
        "--dem-sigma", type=float_in(0.01, 50.0), metavar="M", help="the model's vertical accuracy"
    )


def add_pipeline_options(p: argparse.ArgumentParser) -> None:
    """Options shared by every command that builds a pipeline."""
    p.add_argument("--config", type=Path, help="site YAML (see configs/site.example.yaml)")
    p.add_argument("--detector", type=Path, help="detector weights: .pt, .onnx or an OpenVINO model folder")
    p.add_argument(
        "--imgsz",
        type=imgsz_arg,
        help="detector input size in pixels, or 'auto' (default: chosen per frame from the GSD)",
    )
    p.add_argument(
        "--device",
        help="auto (default: CUDA where there is a GPU, else the CPU), cpu, cuda, cuda:0 ... (detector and U-Net)",
    )
    p.add_argument("--classes", help="detector class table: auto, coco, visdrone, uavdt, aerial, auair")
    p.add_argument("--road-weights", type=Path, help="U-Net road-mask weights")
    p.add_argument("--no-mask", action="store_true", help="disable the road mask (base layer)")
    p.add_argument("--no-egomotion", action="store_true", help="disable camera-motion compensation")
    p.add_argument(
        "--altitude",
        type=float,
        help="the drone's altitude in metres, above its take-off point as DJI reports it (overrides telemetry)",
    )
    p.add_argument(
        "--takeoff-above-road",
        type=float_in(-500.0, 500.0),
        metavar="M",
        help="the take-off point's height above the road in metres (+ above, - below; 0: took off on the "
        "road); without it or a measured base the road's level is unknown and tickets are rarely enforceable",
    )
    p.add_argument(
        "--takeoff-above-road-sigma",
        type=float_in(0.01, 100.0),
        metavar="M",
        help="how well that height is known (one sigma, metres; default 0.5)",
    )
    p.add_argument(
        "--height-reference",
        type=Path,
        metavar="YAML",
        help="a measured base's solution written by `airpatrol calibrate --out`",
    )
    p.add_argument("--pitch", type=float, help="gimbal pitch in degrees, -90 = nadir (overrides telemetry)")
    p.add_argument("--camera", help="camera profile, e.g. dji_mavic_3 (see `airpatrol cameras`)")
    p.add_argument(
        "--lens",
        type=lens_arg,
        metavar="K1[,K2,P1,P2,K3]|DEWARPDATA|STILL.JPG",
        help="the video's lens distortion (OpenCV's coefficients; --lens=-0.1,0.01 for negative ones), "
        "or a DJI still's XMP DewarpData, or the still itself; omit for a video the camera already corrects",
    )
    p.add_argument(
        "--readout-ms",
        type=float_in(0.0, 100.0),
        metavar="MS",
        help="the sensor's rolling-shutter readout time (each position timed by its image row)",
    )
    add_terrain_options(p)
    p.add_argument("--speed-limit", type=float, help="global speed limit in km/h")
    p.add_argument(
        "--detect-every",
        type=positive_int,
        metavar="N",
        help="1: the detector runs on every frame (default); N > 1: keyframes - at least every N frames "
        "and whenever the scheduler asks, boxes carried by optical flow in between",
    )


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    cfg = PipelineConfig.from_yaml(args.config) if getattr(args, "config", None) else PipelineConfig()
    detector = {"weights": args.detector, "imgsz": args.imgsz, "classes": args.classes}
    if args.device:
        detector["device"] = args.device
    road = {"weights": args.road_weights, "enabled": False if args.no_mask else None}
    if args.device:
        road["device"] = args.device
    keyframes: dict = {}
    every = getattr(args, "detect_every", None)
    if every is not None:
        keyframes = {"enabled": every > 1}
        if every > 1:
            keyframes |= {"interval": every, "max_interval": max(every, cfg.keyframes.max_interval)}
    return cfg.with_overrides(
        detector=detector,
        keyframes=keyframes,
        road=road,
        egomotion={"enabled": False if args.no_egomotion else None},
        camera={
            "altitude_m": args.altitude,
            "pitch_deg": args.pitch,
            "name": args.camera,
            "takeoff_above_road_m": getattr(args, "takeoff_above_road", None),
            "takeoff_above_road_sigma_m": getattr(args, "takeoff_above_road_sigma", None),
            "height_reference": _height_reference(getattr(args, "height_reference", None)),
            "lens": getattr(args, "lens", None),
            "readout_ms": getattr(args, "readout_ms", None),
            "terrain": _terrain(args, cfg),
        },
        rules={"speed_limit_kmh": args.speed_limit},
    )


def lat_lon(text: str) -> tuple[float, float]:
    """``--takeoff``: ``LAT,LON`` in degrees."""
    try:
        lat, lon = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LAT,LON in degrees, got {text!r}") from None
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise argparse.ArgumentTypeError(f"{text!r}: latitude within +-90, longitude within +-180")
    return lat, lon


def _terrain(args: argparse.Namespace, cfg) -> dict | None:
    """``camera.terrain`` from ``--dem`` and its refinements over the configuration's; None: unchanged."""
    given = {
        "dem": getattr(args, "dem", None),
        "dem_datum": getattr(args, "dem_datum", None),
        "altitude_datum": getattr(args, "altitude_datum", None),
        "takeoff": getattr(args, "takeoff", None),
        "sigma_m": getattr(args, "dem_sigma", None),
    }
    given = {k: v for k, v in given.items() if v is not None}
    if not given:
        return None
    base = cfg.camera.terrain.model_dump() if cfg.camera.terrain is not None else {}
    if "dem" not in base and "dem" not in given:
        raise ConfigError("--dem-datum, --altitude-datum, --takeoff and --dem-sigma need --dem FILE.tif")
    return base | given


def _height_reference(path: Path | None) -> dict | None:
    """The ``height_reference`` mapping of a file ``airpatrol calibrate --out`` wrote (its
    ``camera.height_reference``), or None."""
    if path is None:
        return None
    from pipelines.config import read_yaml_mapping

    data = read_yaml_mapping(path, "height reference", ConfigError)
    ref = data.get("camera", {}).get("height_reference") if isinstance(data.get("camera"), dict) else None
    if not isinstance(ref, dict):
        raise ConfigError(
            f"{path}: no camera.height_reference mapping (write it with `airpatrol calibrate --out`)"
        )
    return ref


def cmd_process_one(args: argparse.Namespace) -> int:
    """``airpatrol process`` on one flight (``args.video``: its video or frame folder); the command,
    and its batches, are :mod:`batch.cli`'s."""
    # imported here: every airpatrol command builds this module's parser, and the runner brings
    # torch and the road U-Net's libraries (5 s of a `publish` or `serve-bench` process's start)
    from pipelines.runner import process_flight

    config = config_from_args(args)
    out = Path(args.out or Path("runs") / Path(args.video).stem)
    summary = process_flight(
        args.video,
        config,
        out,
        srt=args.srt,
        max_frames=args.max_frames,
        write_video=not args.no_video,
        progress=not args.quiet,
        camera=args.camera,
        fps=args.fps,
    )
    print(  # noqa: T201 - the command's result on stdout
        f"{summary['frames']} frames, {summary['tracks']} tracks, {summary['violations']} violations "
        f"({summary['enforceable']} enforceable), "
        f"{summary['fps']} fps -> {out}"
    )
    last = (summary.get("scale") or {}).get("last")
    if last:
        print(  # noqa: T201
            f"scale: {last['source']}, {last['height_above_road_m']:.1f} +- {last['height_sigma_m']:.1f} m "
            f"above the road, pitch +- {last['pitch_sigma_deg']:.1f} deg (last frame)"
        )
    if summary.get("scale_check"):
        from pipelines.types import ScaleCheckResult

        print(ScaleCheckResult.from_dict(summary["scale_check"]).describe())  # noqa: T201
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from pipelines.annotate import annotate
    from pipelines.builder import build_pipeline
    from pipelines.runner import StageTimer, config_for_source, format_bench, load_frames, run_pipeline

    config = config_from_args(args)
    source, frames, _ = load_frames(
        args.video, args.srt, args.max_frames, camera=args.camera, fixed=config.camera, fps=args.fps
    )
    config = config_for_source(config, source.fps)
    if args.streams:
        return _bench_streams(args, config, source, frames)
    pipeline = build_pipeline(config)
    timer = StageTimer.create()
    on_result = (lambda r: annotate(r)) if args.annotate else None
    try:
        summary = run_pipeline(
            pipeline,
            frames,
            on_result=on_result,
            progress=not args.quiet,
            timer=timer,
            progress_total=args.max_frames or source.frame_count,
        )
    finally:
        source.close()
    summary["timings"] = timer.summary(skip=args.warmup)
    text = format_bench(summary, config, source.size, args.warmup)
    print(text)  # noqa: T201 - the benchmark's output
    if args.json:
        summary.pop("violation_list", None)
        summary.pop("final_violations", None)
        Path(args.json).write_text(json.dumps(summary, indent=2, default=str))
    return 0


def _bench_streams(args: argparse.Namespace, config: Any, source: Any, frames: Any) -> int:
    """``bench --streams``: the engine's stream count at the frame rate (pipelines.streams_bench)."""
    from pipelines.runner import machine_description
    from pipelines.streams_bench import format_streams, frames_in_memory, run_streams

    try:
        decoded = frames_in_memory(frames)
    finally:
        source.close()
    report = run_streams(
        config,
        decoded,
        args.streams,
        target_fps=args.target_fps or source.fps or 30.0,
        give_up_after=args.give_up_after,
        prepare_ahead=args.prepare_ahead,
    )
    report["machine"] = machine_description()
    print(f"machine: {report['machine']}\n{format_streams(report)}")  # noqa: T201 - the benchmark's output
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 0


def cmd_cameras(args: argparse.Namespace) -> int:
    from pipelines.camera import PROFILES, equivalent_35mm, lens_note

    for p in PROFILES:
        print(  # noqa: T201
            f"{p.name:<20} sensor {p.sensor_width_mm:>5.2f} x {p.sensor_height_mm:<5.2f} mm  "
            f"f {p.focal_length_mm:>5.2f} mm ({equivalent_35mm(p.focal_length_mm, p):.0f} mm eq.)  "
            f"{p.native_width_px}x{p.native_height_px}  aliases: {', '.join(p.aliases)}\n"
            f"{'':<20} lens and shutter: {lens_note(p)}"
        )
    return 0


FPS_HELP = "frame rate of a frame folder without seqinfo.ini (default 30, logged); speeds scale with it"


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="per-stage ms and end-to-end fps on a video")
    b.add_argument("video", type=Path)
    b.add_argument("--srt", type=Path)
    b.add_argument("--max-frames", type=positive_int, default=300)
    b.add_argument("--fps", type=float_in(0.1, 1000.0), help=FPS_HELP)
    b.add_argument("--warmup", type=int, default=10, help="frames left out of the stage statistics")
    b.add_argument("--annotate", action="store_true", help="include drawing the annotated frame")
    b.add_argument("--json", type=Path, help="also write the numbers as JSON")
    b.add_argument("-q", "--quiet", action="store_true")
    b.add_argument(
        "--streams",
        type=positive_int,
        nargs="+",
        metavar="N",
        help="run N pipelines at once around one batched detector (each count given), the frames decoded "
        "once into memory: how many streams the engine keeps at the video's frame rate, and what limits it",
    )
    b.add_argument(
        "--target-fps",
        type=float_in(0.1, 1000.0),
        help="with --streams: the rate to keep (default: the video's)",
    )
    b.add_argument(
        "--give-up-after",
        type=positive_int,
        metavar="K",
        help="with --streams: leave the larger counts out once K counts in a row missed the rate and added "
        "no frames (10 %% more in all than the count before)",
    )
    b.add_argument(
        "--no-prepare-ahead",
        dest="prepare_ahead",
        action="store_false",
        default=None,
        help="with --streams: no second thread a stream preparing its next frame (a live server's "
        "prepare_ahead; default: as the server, where two CPUs or more may be used)",
    )
    add_pipeline_options(b)
    b.set_defaults(func=cmd_bench)

    c = sub.add_parser("cameras", help="list the known camera profiles")
    c.set_defaults(func=cmd_cameras)
