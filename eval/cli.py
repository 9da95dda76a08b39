"""``airpatrol eval`` and ``airpatrol simulate``."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from batch.cli import add_batch_options, batch_config, executor_from_args
from pipelines.cli import add_pipeline_options, config_from_args, float_in, positive_int

log = logging.getLogger(__name__)


def _pair(text: str) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in text.replace("x", ",").split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected two numbers like 1.5,0.5, got {text!r}") from exc
    return a, b


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {text!r}") from exc
    return w, h


def register(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser(
        "eval",
        help="evaluate the pipeline on a dataset (tracking, speed and violation metrics)",
        description="Run every sequence of DATASET through the pipeline (build_pipeline) for each "
        "configuration and write metrics.json, report.md and plots.",
    )
    e.add_argument("dataset", type=Path, help="dataset YAML, a folder of sequences, or one sequence folder")
    e.add_argument("--out", type=Path, help="output folder (default runs/eval-<dataset>)")
    e.add_argument(
        "--ablate",
        help="extra configurations, comma separated: mask, mask=on|off|oracle, egomotion, oracle, detector=PATH, "
        "section.key=value; join with + (e.g. detector=m.onnx+detector.classes=coco)",
    )
    e.add_argument("--oracle", action="store_true", help="use the ground-truth oracle detector")
    e.add_argument("--jitter", type=float_in(0.0), default=0.0, help="oracle box jitter (pixels, std)")
    e.add_argument(
        "--drop", type=float_in(0.0, 1.0, hi_open=True), default=0.0, help="oracle drop rate, 0 <= d < 1"
    )
    e.add_argument("--seed", type=int, default=0, help="oracle random seed")
    e.add_argument("--max-frames", type=positive_int, help="stop each sequence after N frames")
    e.add_argument(
        "--detection-cache",
        type=Path,
        help="a folder where each video's detections (and road masks) are recorded on its first run "
        "and replayed on later ones (same video and detector settings): runs that change only the "
        "telemetry or the speed and rule settings skip the detector",
    )
    e.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    add_pipeline_options(e)
    add_batch_options(e, "(configuration, sequence) pair")
    e.set_defaults(func=cmd_eval)

    s = sub.add_parser(
        "simulate",
        help="generate a synthetic drone flight with exact ground truth",
        description="Render a flight over procedural roads: video.mp4, video.SRT, MOT ground truth, "
        "true speeds, ground-truth violations and road masks. Flags override --spec.",
    )
    s.add_argument("out", type=Path, help="output folder")
    s.add_argument("--spec", type=Path, help="flight.yaml to start from (e.g. one written by an earlier run)")
    s.add_argument("--seed", type=int)
    s.add_argument("--duration", type=float, help="seconds")
    s.add_argument("--fps", type=float)
    s.add_argument("--size", type=_size, help="WIDTHxHEIGHT, e.g. 1280x720")
    s.add_argument("--camera", help="camera profile (see `airpatrol cameras`)")
    s.add_argument("--altitude", type=float, help="metres above the road")
    s.add_argument("--pitch", type=float, help="gimbal pitch, -90 = nadir")
    s.add_argument("--drift", type=_pair, help="drone velocity east,north in m/s")
    s.add_argument("--yaw", type=float, help="initial heading (compass degrees)")
    s.add_argument("--yaw-rate", type=float, help="degrees per second")
    s.add_argument("--layout", choices=("straight", "curved", "intersection"))
    s.add_argument("--lanes", type=int, help="lanes per direction")
    s.add_argument(
        "--grade",
        type=float,
        help="the road's grade in %% (rising along the main road; -15..15): a graded plane, level with the "
        "take-off point where the camera looks in the middle of the flight",
    )
    s.add_argument("--vehicles", type=int, help="number of vehicles")
    s.add_argument("--speed-limit", type=float, help="km/h (ground-truth violations)")
    s.add_argument("--speeding-fraction", type=float, help="share of vehicles above the limit")
    s.add_argument(
        "--sprites", type=Path, help="folder of image + YOLO txt pairs to cut real vehicle crops from"
    )
    s.add_argument(
        "--real-sprite-fraction",
        type=float,
        help="share of vehicles drawn with real crops from --sprites (default 0.6; 1: real crops only, "
        "classes without crops left out)",
    )
    s.add_argument("--mask-every", type=int, help="write the road mask of every N-th frame (0: none)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    from eval.simulate import FlightSpec, simulate_flight

    spec = FlightSpec.from_yaml(args.spec) if args.spec else FlightSpec()
    width, height = args.size if args.size else (None, None)
    spec = spec.replace(
        seed=args.seed,
        duration_s=args.duration,
        fps=args.fps,
        width=width,
        height=height,
        camera=args.camera,
        altitude_m=args.altitude,
        pitch_deg=args.pitch,
        drift_mps=args.drift,
        yaw_deg=args.yaw,
        yaw_rate_dps=args.yaw_rate,
        layout=args.layout,
        lanes_per_direction=args.lanes,
        road_grade_pct=args.grade,
        n_vehicles=args.vehicles,
        speed_limit_kmh=args.speed_limit,
        speeding_fraction=args.speeding_fraction,
        sprites_dir=str(args.sprites) if args.sprites else None,
        real_sprite_fraction=args.real_sprite_fraction,
        mask_every=args.mask_every,
    )
    flight = simulate_flight(spec, args.out, progress=not args.quiet)
    print(  # noqa: T201 - the command's result line
        f"{flight.out_dir}: {flight.n_frames} frames {flight.width}x{flight.height} @ {flight.fps:g} fps, "
        f"{flight.n_vehicles} vehicles, {flight.n_violations} ground-truth violations "
        f"(limit {spec.speed_limit_kmh:g} km/h), {flight.elapsed_s:.1f} s"
    )
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from eval.datasets import load_dataset
    from eval.runner import evaluate
    from eval.variants import OracleOptions, Variant, parse_ablations

    dataset = load_dataset(args.dataset)
    base_cfg = batch_config(config_from_args(args), args)
    variants = parse_ablations(args.ablate, Variant("base", oracle=args.oracle))
    oracle = OracleOptions(jitter_px=args.jitter, drop_rate=args.drop, seed=args.seed)
    out = args.out or Path("runs") / f"eval-{dataset.name}"
    if args.ray is not None:
        from eval.batch import evaluate_on

        report = evaluate_on(
            executor_from_args(args),
            dataset,
            base_cfg,
            variants,
            out,
            oracle=oracle,
            max_frames=args.max_frames,
            progress=not args.quiet,
            detection_cache=args.detection_cache,
        )
    else:
        from batch.jobs import configure_worker
        from eval.detection_cache import DetectionCache

        configure_worker(base_cfg)  # --threads-per-task
        report = evaluate(
            dataset,
            base_cfg,
            variants,
            oracle=oracle,
            max_frames=args.max_frames,
            out_dir=out,
            progress=not args.quiet,
            cache=DetectionCache(args.detection_cache) if args.detection_cache else None,
        )
    for v in report.variants:
        c = report.combined[v.name]
        t = c.get("tracking") or {}
        s = c.get("speed") or {}
        line = f"{v.name:<24} frames {c['frames']:>5}"
        if t:
            line += f"  HOTA {t['HOTA']:.3f}  MOTA {t['MOTA']:.3f}  IDF1 {t['IDF1']:.3f}"
        if s.get("n"):
            line += f"  speed MAE {s['mae_kmh']:.2f} km/h  p95 {s['p95_abs_kmh']:.2f}"
        vi = c.get("violations")
        if vi:
            line += f"  violations P {vi['precision']:.2f} R {vi['recall']:.2f}"
        tk = c.get("tickets")
        if tk:
            line += (
                f"  wrong tickets {tk['wrong_tickets']} of {tk['at_or_below_limit']} vehicles at/below the"
                f" limit, missed {tk['missed_violations']} of {tk['clear_speeders']}"
            )
        print(line)  # noqa: T201 - the command's result table
    print(f"report: {out / 'report.md'}")  # noqa: T201
    return 0
