"""Dataset specs shared by every ``airpatrol train`` command (``--dataset KIND=PATH``, ``--groups``
with ``@visdrone-det``, the options that build a tiled dataset), and the ``dataset`` command."""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path

from pipelines.cli import positive_int
from pipelines.config import ConfigError

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


def build_dataset(args, out_dir: Path) -> Path:
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


def add_dataset_args(p: argparse.ArgumentParser) -> None:
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
    path = build_dataset(args, Path(args.out))
    log.info("dataset written: %s", path)
    return 0


def add_dataset_parser(sub) -> None:
    """``airpatrol train dataset``."""
    p = sub.add_parser("dataset", help="convert annotations into a tiled ultralytics dataset")
    add_dataset_args(p)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_dataset)
