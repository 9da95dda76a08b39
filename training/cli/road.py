"""``airpatrol train eval-road | road | road-pseudo``: the road-mask model scored on annotated frames,
its training (U-Net), and pseudo road masks from tracked vehicles."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pipelines.config import ConfigError
from training.cli.dataset import parse_dataset_spec
from training.defaults import ROAD_DECODER_CHANNELS, ROAD_ENCODER

log = logging.getLogger(__name__)


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


def register_road_commands(sub) -> None:
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
