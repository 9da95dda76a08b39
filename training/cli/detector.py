"""``airpatrol train detector | export | average``: train the aerial vehicle detector, export a
checkpoint, average two checkpoints in weight space."""

from __future__ import annotations

import logging
from pathlib import Path

from pipelines.config import ConfigError
from training.cli.dataset import add_dataset_args, build_dataset
from training.defaults import PRECISIONS

log = logging.getLogger(__name__)


def cmd_detector(args) -> int:
    from training.detector import TrainSettings, train_detector
    from training.detector_checkpoints import strip_checkpoint
    from training.detector_export import export_detector, install_detector

    project = Path(args.out)
    built = project / f"{args.name}_data" / "data.yaml"
    if args.data:
        data_yaml = Path(args.data)
    elif args.resume and built.exists():
        data_yaml = built  # the cut-off run's tiles
    elif args.dataset:
        data_yaml = build_dataset(args, project / f"{args.name}_data")
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
    from training.detector_checkpoints import average_checkpoints

    for path in (args.base, args.tuned):
        if not Path(path).is_file():
            raise ConfigError(f"no checkpoint at {path}")
    average_checkpoints(args.base, args.tuned, args.weight, args.out)
    return 0


def cmd_export(args) -> int:
    """Export a trained checkpoint (e.g. to try NNCF int8 after a run) and optionally install it."""
    from training.detector_export import export_detector, install_detector

    formats = tuple(f for f in args.formats.split(",") if f)
    exports = export_detector(args.weights, formats, imgsz=args.imgsz, calib_data=args.data)
    if args.install:
        install_detector(exports, args.install)
    for fmt, path in exports.items():
        log.info("%s: %s", fmt, path)
    return 0


def add_detector_parser(sub) -> None:
    """``airpatrol train detector``."""
    p = sub.add_parser("detector", help="train the aerial vehicle detector (ultralytics YOLOv8n)")
    add_dataset_args(p)
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


def add_export_parser(sub) -> None:
    """``airpatrol train export``."""
    p = sub.add_parser("export", help="export a trained detector checkpoint (.pt)")
    p.add_argument("--weights", required=True, help="a .pt checkpoint (e.g. a run's last_fp16.pt)")
    p.add_argument("--formats", default="openvino,openvino-int8", help="as train detector --export")
    p.add_argument("--data", help="data.yaml whose train split calibrates openvino-int8")
    p.add_argument("--imgsz", type=int, default=640)
    p.add_argument("--install", help="copy the exports under the shipped names into this folder")
    p.set_defaults(func=cmd_export)


def add_average_parser(sub) -> None:
    """``airpatrol train average``."""
    p = sub.add_parser(
        "average",
        help="interpolate two checkpoints of one detector in weight space (WiSE-FT): (1-w) BASE + w TUNED",
    )
    p.add_argument("--base", required=True, help="the checkpoint fine-tuning started from (.pt)")
    p.add_argument("--tuned", required=True, help="the fine-tuned checkpoint (.pt)")
    p.add_argument("--weight", type=float, required=True, help="share of TUNED, 0..1")
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_average)
