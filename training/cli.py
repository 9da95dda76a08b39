"""``airpatrol train ...``: dataset building, detector and road-mask training, evaluation."""

from __future__ import annotations

import argparse
import json
import logging
import math
from dataclasses import replace
from pathlib import Path

from pipelines.cli import imgsz_arg, positive_int
from pipelines.config import ConfigError
from training.defaults import PRECISIONS, ROAD_DECODER_CHANNELS, ROAD_ENCODER

log = logging.getLogger(__name__)

DATASET_KINDS = ("aerial-cars", "yolo", "visdrone-det", "visdrone-mot", "uavdt", "auair", "mot")
NONCOMMERCIAL = {"auair"}


VIDEO_KINDS = ("visdrone-mot", "uavdt", "mot")  # readers that take every N-th frame


def parse_dataset_spec(spec: str, every: int = 1):
    """``KIND=PATH`` -> samples. KIND is one of :data:`DATASET_KINDS`; ``every`` thins the frames of
    video datasets (consecutive frames of one flight add little but time)."""
    from training import datasets as ds

    kind, sep, path = spec.partition("=")
    if not sep or kind not in DATASET_KINDS:
        raise ConfigError(
            f"--dataset expects KIND=PATH with KIND in {', '.join(DATASET_KINDS)}; got {spec!r}"
        )
    root = Path(path)
    if not root.exists():
        raise ConfigError(f"dataset path not found: {root}")
    readers = {
        "aerial-cars": ds.read_aerial_cars,
        "yolo": ds.read_yolo_folder,
        "visdrone-det": ds.read_visdrone_det,
        "visdrone-mot": ds.read_visdrone_mot,
        "uavdt": ds.read_uavdt,
        "auair": ds.read_auair,
        "mot": ds.read_mot,
    }
    if kind in VIDEO_KINDS:
        return kind, readers[kind](root, every=every)
    return kind, readers[kind](root)


HOLDOUT_TOKENS = {"@visdrone-det": "visdrone-det"}  # --groups / --val-groups token -> dataset kind


def expand_groups(spec: str | None, samples_by_kind: dict[str, list]) -> list[str] | None:
    """Comma-separated groups -> list; ``@visdrone-det`` stands for the committed VisDrone-DET
    held-out clips among the given samples (:func:`training.datasets.visdrone_det_heldout_among`)."""
    from training.datasets import visdrone_det_heldout_among

    out: list[str] = []
    for token in (spec or "").split(","):
        token = token.strip()
        if not token:
            continue
        if token.startswith("@"):
            kind = HOLDOUT_TOKENS.get(token)
            if kind is None:
                raise ConfigError(f"unknown group set {token!r}; known: {', '.join(HOLDOUT_TOKENS)}")
            if kind not in samples_by_kind:
                raise ConfigError(f"{token} needs a --dataset {kind}=PATH")
            out += visdrone_det_heldout_among(s.group for s in samples_by_kind[kind])
        else:
            out.append(token)
    return out or None


def _collect_by_kind(args) -> dict[str, list]:
    by_kind: dict[str, list] = {}
    repeats = _oversample(args.oversample)
    for spec in args.dataset:
        kind, ss = parse_dataset_spec(spec, every=args.every)
        ss = [replace(s, name=f"{s.name}_r{k}") if k else s for k in range(repeats.get(kind, 1)) for s in ss]
        if kind in NONCOMMERCIAL and not args.allow_noncommercial:
            raise ConfigError(
                f"{kind} data is licensed non-commercially (AU-AIR: CC BY-NC-SA); keep it for evaluation "
                "or pass --allow-noncommercial for a research-only model"
            )
        if "overlay" in str(Path(spec.partition("=")[2]).resolve()).lower():
            raise ConfigError(
                f"{spec}: this video has third-party boxes burned in; never train on its pixels"
            )
        by_kind.setdefault(kind, []).extend(ss)
    if not any(by_kind.values()):
        raise ConfigError("no annotated images found in the given --dataset paths")
    return by_kind


def _oversample(specs: list[str]) -> dict[str, int]:
    """``KIND=N`` items -> {kind: N}: the training frames of that dataset are used N times (each
    time with its own copy-paste and transposes), to balance a small real set against others."""
    out = {}
    for spec in specs:
        kind, _, n = spec.partition("=")
        if kind not in DATASET_KINDS or not n.isdigit() or int(n) < 1:
            raise ConfigError(
                f"--oversample expects KIND=N with KIND in {', '.join(DATASET_KINDS)}; got {spec!r}"
            )
        out[kind] = int(n)
    return out


def _build_dataset(args, out_dir: Path) -> Path:
    from training.copy_paste import CopyPaste
    from training.samples import split_by_group
    from training.yolo_dataset import build_yolo_dataset

    by_kind = _collect_by_kind(args)
    samples = [s for ss in by_kind.values() for s in ss]
    val_groups = expand_groups(args.val_groups, by_kind)
    splits = split_by_group(samples, val_groups=val_groups, val_fraction=args.val_fraction, seed=args.seed)
    scales = tuple(float(v) for v in args.scales.split(","))
    return build_yolo_dataset(
        splits,
        out_dir,
        tile=args.tile or None,
        overlap=args.overlap,
        scales=scales,
        copy_paste=CopyPaste(per_image=args.copy_paste, seed=args.seed) if args.copy_paste > 0 else None,
        transpose_prob=args.transpose,
        empty_fraction=args.empty_fraction,
        seed=args.seed,
    )


def _add_dataset_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="KIND=PATH",
        help=f"KIND in {', '.join(DATASET_KINDS)}; repeatable",
    )
    p.add_argument(
        "--val-groups",
        help="comma-separated videos/flights held out for validation (default: drawn by group)",
    )
    p.add_argument("--val-fraction", type=float, default=0.2)
    p.add_argument(
        "--every",
        type=positive_int,
        default=1,
        help=f"keep every N-th frame of video datasets ({', '.join(VIDEO_KINDS)})",
    )
    p.add_argument(
        "--oversample",
        action="append",
        default=[],
        metavar="KIND=N",
        help="use that dataset's frames N times",
    )
    p.add_argument("--tile", type=int, default=640, help="tile size in px (0: whole frames)")
    p.add_argument("--overlap", type=float, default=0.2)
    p.add_argument("--scales", default="1.0,0.6,0.35", help="frame scales tiled for training")
    p.add_argument(
        "--copy-paste", type=int, default=6, help="vehicle crops pasted per training frame (0: off)"
    )
    p.add_argument("--transpose", type=float, default=0.5, help="probability of transposing a training tile")
    p.add_argument("--empty-fraction", type=float, default=0.3, help="share of vehicle-free tiles kept")
    p.add_argument("--allow-noncommercial", action="store_true", help="allow AU-AIR (CC BY-NC) in training")
    p.add_argument("--seed", type=int, default=0)


def cmd_dataset(args) -> int:
    path = _build_dataset(args, Path(args.out))
    log.info("dataset written: %s", path)
    return 0


def cmd_detector(args) -> int:
    from training.detector import (
        TrainSettings,
        export_detector,
        install_detector,
        strip_checkpoint,
        train_detector,
    )

    project = Path(args.out)
    built = project / f"{args.name}_data" / "data.yaml"
    if args.data:
        data_yaml = Path(args.data)
    elif args.resume and built.exists():
        data_yaml = built  # the cut-off run's tiles
    elif args.dataset:
        data_yaml = _build_dataset(args, project / f"{args.name}_data")
    else:
        raise ConfigError("give --data DATA.yaml or at least one --dataset KIND=PATH")
    settings = TrainSettings(
        epochs=args.epochs,
        time_h=args.time_h,
        imgsz=args.imgsz,
        batch=args.batch,
        workers=args.workers,
        device=args.device,
        freeze=args.freeze,
        degrees=args.degrees,
        plots=args.plots,
        seed=args.seed,
        lr0=args.lr0,
        lrf=args.lrf,
        warmup_epochs=args.warmup_epochs,
        flipud=args.flipud,
        precision=args.precision,
    )
    chosen = train_detector(
        data_yaml, args.init, project, args.name, settings, pick=args.checkpoint, resume=args.resume
    )
    slim = strip_checkpoint(chosen, chosen.with_name(f"{chosen.stem}_fp16.pt"))
    exports: dict[str, Path] = {"pt": slim}
    if args.export:
        formats = tuple(f for f in args.export.split(",") if f)
        exports.update(export_detector(slim, formats, imgsz=args.imgsz, calib_data=data_yaml))
    if args.install:
        install_detector(exports, args.install)
    log.info("trained detector: %s (exports: %s)", slim, {k: str(v) for k, v in exports.items()})
    return 0


def cmd_average(args) -> int:
    from training.detector import average_checkpoints

    for path in (args.base, args.tuned):
        if not Path(path).is_file():
            raise ConfigError(f"no checkpoint at {path}")
    average_checkpoints(args.base, args.tuned, args.weight, args.out)
    return 0


def cmd_export(args) -> int:
    """Export a trained checkpoint (e.g. to try NNCF int8 after a run) and optionally install it."""
    from training.detector import export_detector, install_detector

    formats = tuple(f for f in args.formats.split(",") if f)
    exports = export_detector(args.weights, formats, imgsz=args.imgsz, calib_data=args.data)
    if args.install:
        install_detector(exports, args.install)
    for fmt, path in exports.items():
        log.info("%s: %s", fmt, path)
    return 0


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


def cmd_eval_road(args) -> int:
    import numpy as np

    from pipelines.builder import build_road_segmenter
    from pipelines.config import RoadConfig
    from training.road_metrics import mask_keep_sweep
    from training.samples import iter_loaded

    built = build_road_segmenter(RoadConfig(weights=args.weights))
    if built is None:
        raise ConfigError("no road U-Net weights: pass --weights PATH (a road checkpoint)")
    segmenter, rcfg, weights = built
    thresholds = [float(v) for v in args.threshold.split(",")] if args.threshold else [rcfg.threshold]
    dilates = [int(v) for v in args.dilate.split(",")] if args.dilate else [rcfg.dilate_px]
    min_overlap = args.min_overlap if args.min_overlap is not None else rcfg.min_overlap
    results = {"weights": str(weights), "min_overlap": min_overlap, "datasets": {}}
    for spec in args.dataset:
        _kind, samples = parse_dataset_spec(spec)
        if args.groups:
            keep = set(args.groups.split(","))
            samples = [s for s in samples if s.group in keep]
        if not samples:
            raise ConfigError(
                f"no annotated frames in {spec}" + (f" for groups {args.groups}" if args.groups else "")
            )
        frames = ((image, s.boxes[:, 1:5]) for s, image in iter_loaded(samples))
        points, ms = mask_keep_sweep(segmenter, frames, thresholds, dilates, min_overlap)
        results["datasets"][spec] = {
            "frames": len(samples),
            "segmenter_ms_median": float(np.median(ms)),
            "operating_points": [p.as_dict() for p in points],
        }
        for p in points:
            log.info(
                "%s: threshold %.2f dilate %d px: kept %d/%d vehicles (%.1f %%), frame covered %.1f %%",
                spec,
                p.threshold,
                p.dilate_px,
                p.kept,
                p.vehicles,
                100 * (p.keep_rate or 0),
                100 * p.coverage,
            )
    text = json.dumps(results, indent=2)
    if args.json:
        Path(args.json).write_text(text)
    print(text)  # noqa: T201 - CLI output
    return 0


def cmd_road(args) -> int:
    from training.road_data import collect_pairs
    from training.road_model import export_road_onnx
    from training.road_train import RoadTrainSettings, train_road

    pairs = collect_pairs(args.pairs, args.flights)
    settings = RoadTrainSettings(
        encoder=args.encoder,
        decoder_channels=tuple(int(v) for v in args.decoder_channels.split(",")),
        input_size=(args.width, args.height),
        epochs=args.epochs,
        steps_per_epoch=args.steps_per_epoch,
        batch=args.batch,
        lr=args.lr,
        seed=args.seed,
        time_s=args.time_s,
    )
    val_pairs = None
    if args.val_groups:
        keep = set(args.val_groups.split(","))
        val_pairs = [p for p in pairs if p.group in keep]
        pairs = [p for p in pairs if p.group not in keep]
    ckpt = train_road(
        pairs,
        Path(args.out),
        settings,
        val_fraction=args.val_fraction,
        val_pairs=val_pairs,
        init_from=args.init,
    )
    if args.onnx:
        export_road_onnx(ckpt, ckpt.with_suffix(".onnx"))
    return 0


def cmd_road_pseudo(args) -> int:
    import cv2

    from training.road_pseudo import pseudo_mask_from_mot, write_pseudo_pairs

    if args.dataset:
        samples = []
        for spec in args.dataset:
            samples += parse_dataset_spec(spec)[1]
        pairs = write_pseudo_pairs(samples, args.out)
        log.info("%d pseudo-labelled image/mask pairs -> %s", len(pairs), args.out)
        return 0
    if not (args.tracks and args.size):
        raise ConfigError("give --tracks and --size, or --dataset KIND=PATH")

    w, h = (int(v) for v in args.size.lower().split("x"))
    mask = pseudo_mask_from_mot(
        args.tracks, (w, h), homographies=args.homographies, min_track_frames=args.min_frames
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(args.out), mask)
    log.info("pseudo road mask (%.1f %% of the frame) -> %s", 100 * (mask > 0).mean(), args.out)
    return 0


def register(subparsers) -> None:
    train = subparsers.add_parser(
        "train", help="build datasets, train and evaluate the detector and road models"
    )
    sub = train.add_subparsers(dest="train_command", metavar="WHAT", required=True)
    _register_detector_commands(sub)
    _register_road_commands(sub)


def _register_detector_commands(sub) -> None:
    """``dataset``, ``detector``, ``eval-detector``, ``export``, ``average``, ``bench-detector``."""
    p = sub.add_parser("dataset", help="convert annotations into a tiled ultralytics dataset")
    _add_dataset_args(p)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_dataset)

    p = sub.add_parser("detector", help="train the aerial vehicle detector (ultralytics YOLOv8n)")
    _add_dataset_args(p)
    p.add_argument("--data", help="an existing ultralytics data.yaml instead of --dataset")
    p.add_argument(
        "--init", default="coco-int8", help="coco-int8 (dequantised COCO YOLOv8n), scratch, an .onnx or a .pt"
    )
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--time-h", type=float, help="wall-clock budget in hours (overrides --epochs)")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--freeze", type=int, help="freeze the first N layers")
    p.add_argument("--degrees", type=float, default=10.0)
    p.add_argument("--lr0", type=float, help="initial learning rate (AdamW); default: ultralytics' choice")
    p.add_argument("--lrf", type=float, default=0.01, help="final learning rate as a fraction of lr0")
    p.add_argument(
        "--warmup-epochs", type=float, default=1.0, help="0 for fine-tuning (warm-up bias LR is 0.1)"
    )
    p.add_argument("--flipud", type=float, default=0.5, help="vertical flips (lower for oblique views)")
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="bf16: bfloat16 autocast, float32 weights (CPU too: ~2x faster where AVX512-BF16/AMX); "
        "auto (default): bf16 where the device has it natively, else fp32",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue OUT/NAME/weights/last.pt where a cut-off run stopped (same data and settings)",
    )
    p.add_argument("--plots", action="store_true")
    p.add_argument(
        "--checkpoint", choices=("last", "best"), default="last", help="which checkpoint to export"
    )
    p.add_argument(
        "--export",
        default="onnx,onnx-int8,openvino",
        help="formats to export after training, of onnx, onnx-int8, openvino, openvino-int8 (NNCF, calibrated on the train split); '' for none",
    )
    p.add_argument(
        "--install",
        metavar="WEIGHTS_DIR",
        help="copy the exports (OpenVINO fp16 / int8, int8 ONNX, the fp16 .pt) there under the shipped names",
    )
    p.add_argument("--out", default="runs/detector")
    p.add_argument("--name", default="aerial")
    p.set_defaults(func=cmd_detector)

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

    p = sub.add_parser("export", help="export a trained detector checkpoint (.pt)")
    p.add_argument("--weights", required=True, help="a .pt checkpoint (e.g. a run's last_fp16.pt)")
    p.add_argument("--formats", default="openvino,openvino-int8", help="as train detector --export")
    p.add_argument("--data", help="data.yaml whose train split calibrates openvino-int8")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--install", help="copy the exports under the shipped names into this folder")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser(
        "average",
        help="interpolate two checkpoints of one detector in weight space (WiSE-FT): (1-w) BASE + w TUNED",
    )
    p.add_argument("--base", required=True, help="the checkpoint fine-tuning started from (.pt)")
    p.add_argument("--tuned", required=True, help="the fine-tuned checkpoint (.pt)")
    p.add_argument("--weight", type=float, required=True, help="share of TUNED, 0..1")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_average)

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


def _register_road_commands(sub) -> None:
    """``eval-road``, ``road``, ``road-pseudo``."""
    p = sub.add_parser(
        "eval-road",
        help="road mask on annotated frames: share of vehicles kept vs share of the frame covered",
    )
    p.add_argument("--weights", type=Path, help="road checkpoint (default: the shipped one under weights/)")
    p.add_argument("--dataset", action="append", default=[], metavar="KIND=PATH", required=True)
    p.add_argument("--groups", help="only these videos/flights (comma-separated)")
    p.add_argument("--threshold", help="probability thresholds, comma-separated (default: the checkpoint's)")
    p.add_argument(
        "--dilate", help="mask dilations in px, comma-separated (default: the engine's road.dilate_px)"
    )
    p.add_argument("--min-overlap", type=float, help="default: the engine's road.min_overlap")
    p.add_argument("--json", help="also write the results here")
    p.set_defaults(func=cmd_eval_road)

    p = sub.add_parser("road", help="train the U-Net road-mask model (segmentation-models-pytorch)")
    p.add_argument(
        "--pairs",
        action="append",
        default=[],
        metavar="IMAGES_DIR:MASKS_DIR",
        help="image/mask folders (same file names)",
    )
    p.add_argument(
        "--flights", action="append", default=[], help="simulated flight folders (video.mp4 + road_mask/)"
    )
    p.add_argument("--encoder", default=ROAD_ENCODER)
    p.add_argument("--decoder-channels", default=",".join(str(c) for c in ROAD_DECODER_CHANNELS))
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--height", type=int, default=288)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--time-s", type=float, help="stop after this many seconds")
    p.add_argument("--steps-per-epoch", type=int, help="default: one pass over the training images")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--val-fraction", type=float, default=0.2)
    p.add_argument(
        "--val-groups",
        help="validate on these images / flights (comma-separated) instead of a random group split",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--init", help="fine-tune this road checkpoint (same encoder / decoder)")
    p.add_argument("--onnx", action="store_true", help="also export ONNX next to the checkpoint")
    p.add_argument("--out", default="runs/road/road_unet.pt")
    p.set_defaults(func=cmd_road)

    p = sub.add_parser(
        "road-pseudo", help="road mask from the footprints of tracked vehicles (MOT tracks file)"
    )
    p.add_argument("--tracks", help="MOT tracks (e.g. the tracks file of `airpatrol process`)")
    p.add_argument("--size", help="frame size WxH")
    p.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="KIND=PATH",
        help="annotated frames of hovering flights -> image/mask pairs in --out (a folder)",
    )
    p.add_argument("--homographies", help="per-frame ego homographies (JSON / .npy) into the reference frame")
    p.add_argument("--min-frames", type=int, default=5, help="ignore tracks seen in fewer frames")
    p.add_argument("--out", required=True, help="mask PNG (with --tracks) or output folder (with --dataset)")
    p.set_defaults(func=cmd_road_pseudo)
