"""``airpatrol train eval-detector | bench-detector``: a detector's precision / recall / AP50 on
annotated frames (per view), and the CPU milliseconds per frame of its exports."""

from __future__ import annotations

import argparse
import json
import logging
import math
from pathlib import Path

from pipelines.cli import imgsz_arg
from pipelines.config import ConfigError
from training.cli.dataset import expand_groups, parse_dataset_spec

log = logging.getLogger(__name__)


def iou_arg(text: str) -> float:
    """``--iou``: a number in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected an IoU in (0, 1], got {text!r}")
    return value


def cmd_eval_detector(args) -> int:
    """AP50 / precision / recall per dataset, over all its images and per view (nadir, oblique,
    low, day, night where the dataset says): ``{spec: {"all": {...}, "oblique": {...}, ...}}``."""
    from training.datasets import view_tags
    from training.evaluate import VEHICLE_SETS, evaluate_by_view, load_model

    model = load_model(args.weights)
    results = {}
    for spec in args.dataset:
        kind, samples = parse_dataset_spec(spec)
        if args.groups:
            keep = set(expand_groups(args.groups, {kind: samples}) or ())
            samples = [s for s in samples if s.group in keep]
        if not samples:
            raise ConfigError(
                f"no annotated images in {spec}" + (f" for groups {args.groups}" if args.groups else "")
            )
        per_view = evaluate_by_view(
            model,
            samples,
            view_tags(kind),
            imgsz=args.imgsz,
            conf=args.conf,
            only=VEHICLE_SETS[args.vehicles],
            iou_thr=args.iou,
            **({} if args.drop_contained is None else {"drop_contained": args.drop_contained}),
        )
        results[spec] = {view: m.as_dict() for view, m in per_view.items()}
        for view, m in per_view.items():
            log.info(
                "%s [%s, %s vehicles]: %d images, %d vehicles, AP%d %.3f, P %.3f, R %.3f at conf %.2f, imgsz %s",
                spec,
                view,
                args.vehicles,
                m.images,
                m.gt,
                round(100 * m.iou),
                m.ap50,
                m.precision,
                m.recall,
                m.conf,
                m.imgsz,
            )
    text = json.dumps(results, indent=2)
    if args.json:
        Path(args.json).write_text(text)
    print(text)  # noqa: T201 - CLI output
    return 0


def cmd_bench_detector(args) -> int:
    import cv2

    from training.evaluate import benchmark, benchmark_openvino_modes

    if args.openvino_modes:  # the network alone: no image needed
        modes = {
            f"{w}@{imgsz}": benchmark_openvino_modes(w, imgsz=imgsz, runs=args.runs)
            for w in args.weights
            for imgsz in args.imgsz
        }
        print(json.dumps(modes, indent=2))  # noqa: T201 - CLI output
        return 0
    if not args.image:
        raise ConfigError("bench-detector needs --image (or --openvino-modes)")
    src = Path(args.image)
    if src.suffix.lower() in (".mp4", ".avi", ".mov", ".mkv"):
        cap = cv2.VideoCapture(str(src))
        ok, image = cap.read()
        cap.release()
    else:
        image = cv2.imread(str(src))
        ok = image is not None
    if not ok:
        raise ConfigError(f"cannot read an image from {src}")
    if args.size:
        w, h = (int(v) for v in args.size.lower().split("x"))
        image = cv2.resize(image, (w, h), interpolation=cv2.INTER_AREA)
    results = {}
    for weights in args.weights:
        for imgsz in args.imgsz:
            r = benchmark(weights, image, imgsz=imgsz, runs=args.runs)
            results[f"{weights}@{imgsz}"] = r
            log.info(
                "%s imgsz %d on %dx%d: %.1f ms median",
                weights,
                imgsz,
                image.shape[1],
                image.shape[0],
                r["median_ms"],
            )
    print(json.dumps(results, indent=2))  # noqa: T201 - CLI output
    return 0


def add_eval_detector_parser(sub) -> None:
    """``airpatrol train eval-detector``."""
    p = sub.add_parser("eval-detector", help="precision/recall/AP50 of a detector on annotated frames")
    p.add_argument("--weights", required=True)
    p.add_argument("--dataset", action="append", default=[], metavar="KIND=PATH", required=True)
    p.add_argument(
        "--groups",
        help="only these videos/flights (comma-separated; @visdrone-det: the committed held-out clips)",
    )
    p.add_argument(
        "--imgsz",
        type=imgsz_arg,
        default="auto",
        help="input size, or auto: the engine's rule for frames without a GSD (detector.auto_size.fallback)",
    )
    p.add_argument("--conf", type=float, default=0.25)
    p.add_argument(
        "--iou",
        type=iou_arg,
        default=0.5,
        help="the IoU a detection needs to match a labelled box (0.5: AP50, the figure every table uses; "
        "a looser one shows what loose or grouped labels cost, e.g. AU-AIR's)",
    )
    p.add_argument(
        "--vehicles",
        choices=("all", "four-wheel"),
        default="all",
        help="all: every vehicle class (motorcycles too); four-wheel: car/van/truck/bus, motorcycles ignored",
    )
    p.add_argument(
        "--drop-contained",
        type=float,
        metavar="SHARE",
        help="drop boxes with this share of their area inside a box 1.5x larger scoring --conf or more, "
        "as the engine's detector.drop_contained does (default: the engine's default, off)",
    )
    p.add_argument("--json", help="also write the metrics here")
    p.set_defaults(func=cmd_eval_detector)


def add_bench_detector_parser(sub) -> None:
    """``airpatrol train bench-detector``."""
    p = sub.add_parser("bench-detector", help="CPU milliseconds per frame of detector exports")
    p.add_argument("--weights", nargs="+", required=True)
    p.add_argument("--image", help="an image or a video (its first frame); not with --openvino-modes")
    p.add_argument("--size", default="1024x540", help="resize the frame to WxH first ('' keeps it)")
    p.add_argument("--imgsz", type=int, nargs="+", default=[640])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument(
        "--openvino-modes",
        action="store_true",
        help="OpenVINO folders: the raw network's images/s and CPU ms per image one call at a time, "
        "with asynchronous requests (THROUGHPUT hint) and batched (several streams sharing it)",
    )
    p.set_defaults(func=cmd_bench_detector)
