"""Train, export and initialise the aerial vehicle detector (ultralytics YOLOv8).

Offline-safe: :func:`pipelines.ultralytics_env.prepare_ultralytics` runs before ultralytics is
imported, its fp16 AMP is off (its check downloads a model on CUDA), and plots are off unless asked
for. ``precision="bf16"`` (``"auto"`` picks it where the hardware has native bfloat16) trains under
bfloat16 autocast instead, on CUDA through ultralytics' own ``amp="bf16"`` and on the CPU (which
ultralytics refuses) by :func:`_cpu_bf16_autocast`: weights, gradients and optimizer stay float32.
Measured on the 2-core AMD EPYC dev VM (avx512_bf16): a YOLOv8n forward + backward of 8 tiles of
640 px takes 0.56 s in bf16 against 1.11 s in fp32.

Initialisation (``init``):

* ``"coco-int8"`` / a path to an int8 (or float) YOLOv8 ONNX: the weights are dequantised
  (:mod:`training.dequant`) into ``yolov8n.yaml`` with our 5 classes; the class head rows start
  from COCO car/car/truck/bus/motorcycle.
* a ``.pt`` checkpoint (ultralytics): fine-tune it (class head re-initialised when the classes
  differ).
* ``"scratch"``: random weights from ``yolov8n.yaml``.

Augmentation fit for nadir views: rotations (``degrees``), both flips, scale jitter, mosaic,
plus offline random transposes (90-degree rotations without loosening boxes) and copy-paste of
vehicle crops when the dataset is built by :func:`training.yolo_dataset.build_yolo_dataset`.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipelines.config import ConfigError
from pipelines.ultralytics_env import prepare_ultralytics
from training.datasets import IMAGE_EXTS
from training.defaults import PRECISIONS
from training.dequant import load_into_yolo, read_quantized_onnx
from training.samples import CLASSES

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("AIRPATROL_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
COCO_INT8_ONNX = SHARED_DATA / "yolov8n_coco_int8" / "yolov8n_int8.onnx"
COCO_NAMES_FOR_CLASSES = {"car": 2, "van": 2, "truck": 7, "bus": 5, "motorcycle": 3}


@dataclass(frozen=True)
class TrainSettings:
    """Hyper-parameters passed to ``ultralytics`` ``model.train``; defaults suit a 2-core CPU."""

    epochs: int = 30
    time_h: float | None = None  # wall-clock budget in hours (overrides epochs, LR schedule fits it)
    imgsz: int = 640
    batch: int = 8
    nbs: int = 16  # nominal batch: few images -> keep optimizer steps frequent
    workers: int = 2
    device: str = "cpu"
    lr0: float | None = None
    lrf: float = 0.01
    optimizer: str = "auto"
    patience: int = 100
    degrees: float = 10.0  # larger rotations loosen axis-aligned boxes; 90-degree turns are offline
    flipud: float = 0.5
    fliplr: float = 0.5
    scale: float = 0.5
    translate: float = 0.1
    mosaic: float = 1.0
    close_mosaic: int = 2
    mixup: float = 0.0
    hsv_h: float = 0.015
    hsv_s: float = 0.5
    hsv_v: float = 0.4
    warmup_epochs: float = 1.0
    freeze: int | None = None
    cache: str | bool = "ram"
    plots: bool = False
    val: bool = True
    seed: int = 0
    threads: int | None = None  # torch CPU threads; None: every core (ultralytics would use cores - 1)
    precision: str = "auto"  # "fp32", "bf16" (autocast; float32 weights), "auto": bf16 where native


def native_bf16(device: str) -> bool:
    """Whether ``device`` computes bfloat16 natively (CPU: AVX512-BF16 or AMX; CUDA: Ampere on)."""
    import torch

    if device == "cpu":
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    if device == "mps" or not torch.cuda.is_available():
        return False
    return bool(torch.cuda.is_bf16_supported(including_emulation=False))  # "0", "cuda:0", ...


def resolve_precision(precision: str, device: str) -> str:
    """``"auto"`` -> ``"bf16"`` where :func:`native_bf16`, else ``"fp32"``; others as given."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    return precision


@contextmanager
def _cpu_bf16_autocast(enabled: bool) -> Iterator[None]:
    """Make ultralytics' training step run under ``torch.autocast("cpu", bfloat16)``.

    Its trainer wraps the forward pass and the loss in ``ultralytics.engine.trainer.autocast``,
    which raises for bfloat16 off CUDA; for the duration of the run that name answers a CPU
    device with a bfloat16 autocast (no gradient scaler: bf16 has float32's range). Validation
    keeps float32 (its own autocast call is not touched).
    """
    if not enabled:
        yield
        return
    import torch
    import ultralytics.engine.trainer as trainer_module

    original = getattr(trainer_module, "autocast", None)
    if original is None:
        raise ConfigError(
            "this ultralytics version has no trainer autocast hook: train with --precision fp32"
        )

    def autocast(enabled_or_dtype, device: str = "cuda"):
        if device == "cpu":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return original(enabled_or_dtype, device=device)

    trainer_module.autocast = autocast
    try:
        yield
    finally:
        trainer_module.autocast = original


def _ultralytics():
    prepare_ultralytics()
    import ultralytics
    from ultralytics import YOLO

    return ultralytics, YOLO


def save_checkpoint(model, path: str | Path, names: dict[int, str] | None = None) -> Path:
    """Save a ``DetectionModel`` as an ultralytics ``.pt`` checkpoint (loadable by ``YOLO(path)``)."""
    import torch

    ultralytics, _ = _ultralytics()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if names is not None:
        model.names = dict(names)
    ckpt = {
        "model": model,
        "epoch": -1,
        "train_args": {"task": "detect", "imgsz": 640},
        "version": ultralytics.__version__,
        "license": "AGPL-3.0 (Ultralytics YOLOv8 architecture and COCO weights)",
    }
    torch.save(ckpt, path)
    return path


def build_init_checkpoint(init: str | Path, out_path: str | Path, classes: tuple[str, ...] = CLASSES) -> Path:
    """Return an ultralytics ``.pt`` to start training from (see the module doc for ``init``)."""
    from ultralytics.nn.tasks import DetectionModel

    _ultralytics()
    names = dict(enumerate(classes))
    init_s = str(init)
    if init_s == "scratch":
        model = DetectionModel("yolov8n.yaml", nc=len(classes), verbose=False)
        return save_checkpoint(model, out_path, names)
    if init_s == "coco-int8":
        init = COCO_INT8_ONNX
    init = Path(init)
    if not init.exists():
        from pipelines.errors import WeightsError

        raise WeightsError(f"initial weights not found: {init}")
    if init.suffix == ".onnx":
        weights = read_quantized_onnx(init)
        model = DetectionModel("yolov8n.yaml", nc=len(classes), verbose=False)
        src_names = {v: k for k, v in weights.names.items()}
        rows = [src_names.get(c, src_names.get(_coco_alias(c), 0)) for c in classes] if src_names else None
        stats = load_into_yolo(model, weights, class_rows=rows)
        if stats["skipped"]:
            log.warning("%d convolutions kept random initial weights", stats["skipped"])
        return save_checkpoint(model, out_path, names)
    if init.suffix == ".pt":
        return Path(shutil.copyfile(init, out_path))
    from pipelines.errors import WeightsError

    raise WeightsError(f"cannot initialise from {init}: expected 'scratch', 'coco-int8', an .onnx or a .pt")


def _coco_alias(name: str) -> str:
    return {"van": "car"}.get(name, name)


def train_detector(
    data_yaml: str | Path,
    init: str | Path,
    project: str | Path,
    name: str = "detector",
    settings: TrainSettings = TrainSettings(),
    pick: str = "last",
    resume: bool = False,
) -> Path:
    """Train and return ``<project>/<name>/weights/<pick>.pt``.

    ``pick="last"`` (default) takes the end of the learning-rate schedule; ``"best"`` takes
    ultralytics' choice by validation fitness (selected on the validation videos, so its
    validation metrics are optimistic).
    """
    _, YOLO = _ultralytics()
    project = Path(project).resolve()
    run_dir = project / name
    last = run_dir / "weights" / "last.pt"
    if resume:
        if not last.exists():
            from pipelines.errors import WeightsError

            raise WeightsError(f"nothing to resume: {last} does not exist (start the run without --resume)")
        log.info("resuming %s from %s", name, last)
        model = YOLO(str(last), task="detect")
        _use_threads(model, settings.threads)
        with _cpu_bf16_autocast(
            _cpu_bf16(resolve_precision(settings.precision, settings.device), settings.device)
        ):
            model.train(resume=True)
        return _pick(run_dir, pick)
    init_pt = build_init_checkpoint(init, project / f"{name}_init.pt")
    model = YOLO(str(init_pt), task="detect")
    precision = resolve_precision(settings.precision, settings.device)
    args = dict(
        data=str(Path(data_yaml).resolve()),
        epochs=settings.epochs,
        imgsz=settings.imgsz,
        batch=settings.batch,
        nbs=settings.nbs,
        workers=settings.workers,
        device=settings.device,
        # ultralytics' "auto" optimizer ignores lr0: a given lr0 means AdamW at that rate
        optimizer="AdamW"
        if settings.lr0 is not None and settings.optimizer == "auto"
        else settings.optimizer,
        patience=settings.patience,
        degrees=settings.degrees,
        flipud=settings.flipud,
        fliplr=settings.fliplr,
        scale=settings.scale,
        translate=settings.translate,
        mosaic=settings.mosaic,
        close_mosaic=settings.close_mosaic,
        mixup=settings.mixup,
        hsv_h=settings.hsv_h,
        hsv_s=settings.hsv_s,
        hsv_v=settings.hsv_v,
        warmup_epochs=settings.warmup_epochs,
        cache=settings.cache,
        plots=settings.plots,
        val=settings.val,
        seed=settings.seed,
        # fp16 AMP stays off (its check downloads a model); bf16 needs no check and no scaler
        amp="bf16" if precision == "bf16" and settings.device != "cpu" else False,
        project=str(project),
        name=name,
        exist_ok=True,
        verbose=False,
        copy_paste=0.0,  # needs segments; box copy-paste happens when the dataset is built
    )
    if settings.time_h:
        args["time"] = settings.time_h
    if settings.lr0 is not None:
        args["lr0"] = settings.lr0
    if settings.freeze:
        args["freeze"] = settings.freeze
    args["lrf"] = settings.lrf
    _use_threads(model, settings.threads)
    log.info("training %s from %s on %s in %s", name, init, data_yaml, precision)
    with _cpu_bf16_autocast(_cpu_bf16(precision, settings.device)):
        model.train(**args)
    return _pick(run_dir, pick)


def _cpu_bf16(precision: str, device: str) -> bool:
    """Whether a run in the resolved ``precision`` on ``device`` needs the CPU bf16 autocast hook."""
    return device == "cpu" and precision == "bf16"


def _use_threads(model, threads: int | None) -> None:
    """ultralytics trains on ``cores - 1`` torch threads (one on a 2-core machine: half of it
    idle, measured 100 % CPU of 200 %); set the count once its trainer has picked the device."""
    import torch

    n = threads or os.cpu_count() or 1

    def _set(_trainer) -> None:
        torch.set_num_threads(n)
        log.info("training on %d torch threads", n)

    model.add_callback("on_train_start", _set)


def _pick(run_dir: Path, pick: str) -> Path:
    chosen = run_dir / "weights" / f"{pick}.pt"
    if not chosen.exists():
        chosen = run_dir / "weights" / "last.pt"
    log.info("trained: %s", chosen)
    return chosen


def strip_checkpoint(pt: str | Path, out: str | Path) -> Path:
    """A small fp16 inference checkpoint (no optimizer state / EMA copy)."""
    import torch

    ckpt = torch.load(str(pt), map_location="cpu", weights_only=False)
    model = (ckpt.get("ema") or ckpt["model"]).half()
    for p in model.parameters():
        p.requires_grad = False
    slim = {
        "model": model,
        "epoch": -1,
        "train_args": ckpt.get("train_args", {}),
        "train_metrics": ckpt.get("train_metrics"),
        "version": ckpt.get("version"),
        "license": "AGPL-3.0",
    }
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(slim, out)
    return out


def average_checkpoints(base: str | Path, tuned: str | Path, weight: float, out: str | Path) -> Path:
    """Interpolate two checkpoints of one network in weight space (WiSE-FT, Wortsman et al. 2022):
    ``(1 - weight) * base + weight * tuned`` for every float tensor (BatchNorm statistics included),
    integer buffers from ``tuned``; the rest of the checkpoint (names, train args) is ``tuned``'s.

    Fine-tuning that gains on its own data can lose elsewhere; a point between the two often keeps
    most of the gain and little of the loss. Detector v4 = 0.3 x v3 + 0.7 x its GPU chunk (measured
    in weights/airpatrol_vehicles_n.md: held-out VisDrone 0.565 -> 0.610 with UAVDT M1303 MOTA at
    0.440, where the chunk alone gave 0.618 and 0.384).
    """
    import copy

    import torch

    if not 0.0 <= weight <= 1.0:
        raise ConfigError(f"weight must be within [0, 1], not {weight}")
    a = torch.load(str(base), map_location="cpu", weights_only=False)
    b = torch.load(str(tuned), map_location="cpu", weights_only=False)
    model_a, model_b = (c.get("ema") or c["model"] for c in (a, b))
    sa, sb = model_a.state_dict(), model_b.state_dict()
    if sa.keys() != sb.keys() or any(sa[k].shape != sb[k].shape for k in sa):
        raise ConfigError(f"{base} and {tuned} are not the same network: cannot average them")
    mixed = {
        k: ((1.0 - weight) * sa[k].float() + weight * sb[k].float()).to(sb[k].dtype)
        if sb[k].is_floating_point()
        else sb[k]
        for k in sb
    }
    model = copy.deepcopy(model_b)
    model.load_state_dict(mixed)
    ckpt = {k: v for k, v in b.items() if k not in ("ema", "optimizer", "updates")}
    ckpt.update(model=model, epoch=-1)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(ckpt, out)
    log.info("averaged %.2f x %s + %.2f x %s -> %s", 1.0 - weight, base, weight, tuned, out)
    return out


def export_detector(
    pt: str | Path,
    formats: tuple[str, ...] = ("onnx", "openvino"),
    imgsz: int = 640,
    half: bool = True,
    dynamic: bool = True,
    calib_data: str | Path | None = None,
    calib_images: int = 300,
) -> dict[str, Path]:
    """Export a checkpoint; returns ``{format: path}``. OpenVINO gets fp16 weights (``half``).

    ``dynamic=True`` lets the exports take any input size (letterboxed to a multiple of 32), so one
    file serves imgsz 640, 1024 or 1280. ``openvino-int8`` is NNCF post-training quantisation
    (weights and activations) calibrated on ``calib_images`` images drawn at random (seeded) from the
    *train* split of ``calib_data`` (a data.yaml; never the held-out split, which scores it afterwards).
    """
    _, YOLO = _ultralytics()
    os.environ.setdefault("OPENVINO_TELEMETRY_DISABLE", "1")  # no network attempt on export
    out: dict[str, Path] = {}
    for fmt in formats:
        if fmt == "onnx-int8":
            fp32 = out.get("onnx") or export_detector(pt, ("onnx",), imgsz, half, dynamic)["onnx"]
            out[fmt] = quantize_onnx_int8(fp32, fp32.with_name(fp32.stem + "_int8.onnx"))
            continue
        if fmt == "openvino-int8":
            out[fmt] = _export_openvino_int8(pt, imgsz, dynamic, calib_data, calib_images)
            continue
        model = YOLO(str(pt), task="detect")
        kwargs = dict(format=fmt, imgsz=imgsz, dynamic=dynamic, device="cpu", verbose=False)
        if fmt == "openvino":
            kwargs["half"] = half
        if fmt == "onnx":
            kwargs["simplify"] = True
        path = model.export(**kwargs)
        out[fmt] = Path(path)
        log.info("exported %s -> %s", fmt, path)
    return out


def _export_openvino_int8(
    pt: str | Path, imgsz: int, dynamic: bool, calib_data: str | Path | None, calib_images: int
) -> Path:
    if calib_data is None:
        raise ConfigError("openvino-int8 needs calibration images: a data.yaml (its train split is used)")
    try:
        import nncf  # noqa: F401
    except ImportError as exc:  # ultralytics would try to pip-install it, which fails offline
        raise ConfigError("openvino-int8 needs NNCF: pip install nncf") from exc
    _, YOLO = _ultralytics()
    model = YOLO(str(pt), task="detect")
    with tempfile.TemporaryDirectory(prefix="airpatrol-calib-") as tmp, _nncf_export_settings():
        calib_yaml, n = calibration_split(calib_data, calib_images, Path(tmp))
        path = model.export(
            format="openvino",
            quantize=8,
            data=str(calib_yaml),
            split="train",
            batch=1,
            imgsz=imgsz,
            dynamic=dynamic,
            device="cpu",
            verbose=False,
        )
    _record_calibration(Path(path), calib_data, n)
    log.info("exported openvino-int8 (NNCF, %d calibration images) -> %s", n, path)
    return Path(path)


def _record_calibration(folder: Path, calib_data: str | Path, n: int) -> None:
    """The export's metadata names the temporary calibration list; name the data.yaml it came from."""
    import yaml

    meta = folder / "metadata.yaml"
    if not meta.exists():
        return
    data = yaml.safe_load(meta.read_text()) or {}
    args = data.setdefault("args", {})
    args.update(data=str(calib_data), calibration_images=n, calibration_seed=CALIBRATION_SEED)
    meta.write_text(yaml.safe_dump(data, sort_keys=False))


@contextmanager
def _nncf_export_settings() -> Iterator[None]:
    """Have ultralytics' OpenVINO int8 export run NNCF with two settings it does not expose.

    - Full bias correction (``fast_bias_correction=False``) instead of the fast default. Measured on
      detector v4 (weights/airpatrol_vehicles_n.md): the fast one cost 7 MOTA points on the demo
      flight against fp16 (precision 0.92 -> 0.85 on its frames); full correction, same calibration
      images, gave demo 0.710 -> 0.735, UAVDT M1303 0.434 -> 0.443, six flights 0.848 -> 0.862,
      altitude bands 0.811 -> 0.818, VisDrone held-out AP50 equal, for 12 s more of export.
    - The first convolution (the stem: its convolution, bias and activation) kept in float, added to
      the ignored scope ultralytics passes. The stem sees the raw pixels, and an int8 stem lost the
      demo's dark procedural vans: three exports each, demo MOTA 0.796 / 0.792 / 0.796 against
      0.748 / 0.732 / 0.729 with it int8, six flights 0.869 / 0.871 / 0.868 against 0.858 / 0.860 /
      0.860, same speed (the stem is 1 % of the network's multiply-adds).

    An explicit ``fast_bias_correction`` from the caller stands.
    """
    import nncf

    original = nncf.quantize

    def quantize(*args, **kwargs):
        kwargs.setdefault("fast_bias_correction", False)
        model = kwargs.get("model", args[0] if args else None)
        stem = _stem_op_names(model)
        if stem:
            scope = kwargs.get("ignored_scope") or nncf.IgnoredScope()
            kwargs["ignored_scope"] = nncf.IgnoredScope(
                names=[*scope.names, *(n for n in stem if n not in scope.names)],
                patterns=list(scope.patterns),
                types=list(scope.types),
                subgraphs=list(scope.subgraphs),
                validate=False,
            )
            log.info("NNCF: the first convolution stays in float (%d ops)", len(stem))
        return original(*args, **kwargs)

    nncf.quantize = quantize
    try:
        yield
    finally:
        nncf.quantize = original


def _stem_op_names(model) -> list[str]:
    """Friendly names of the ops of an OpenVINO model's first convolution's module (``__module.model.0``
    of an ultralytics export: the convolution, its bias add, its activation); [] for anything else."""
    if model is None or not hasattr(model, "get_ordered_ops"):
        return []
    names = [op.get_friendly_name() for op in model.get_ordered_ops()]
    types = [op.get_type_name() for op in model.get_ordered_ops()]
    first = next((n for n, t in zip(names, types, strict=True) if t == "Convolution"), None)
    if first is None or "/" not in first:
        return []
    module = first.split("/", 1)[0].rsplit(".conv", 1)[0]  # __module.model.0.conv -> __module.model.0
    return [n for n in names if n.startswith((f"{module}/", f"{module}."))]


CALIBRATION_SEED = 0


def split_images(data_yaml: str | Path, split: str = "train") -> list[Path]:
    """The image files of one split of an ultralytics data.yaml: a folder (searched recursively),
    a ``.txt`` list of paths, or a list of either; relative paths from the yaml's ``path``."""
    import yaml

    data_yaml = Path(data_yaml)
    data = yaml.safe_load(data_yaml.read_text()) or {}
    root = Path(data.get("path") or data_yaml.parent)
    if not root.is_absolute():
        root = data_yaml.parent / root
    entries = data.get(split)
    if entries is None:
        raise ConfigError(f"{data_yaml} has no {split!r} split")
    images: list[Path] = []
    for entry in entries if isinstance(entries, list) else [entries]:
        where = Path(entry) if Path(entry).is_absolute() else root / entry
        if where.is_dir():
            images += sorted(f for f in where.rglob("*") if f.suffix.lower() in IMAGE_EXTS)
        elif where.suffix == ".txt" and where.is_file():
            for line in where.read_text().splitlines():
                if line.strip():
                    f = Path(line.strip())
                    images.append(f if f.is_absolute() else where.parent / f)
        else:
            raise ConfigError(f"{data_yaml}: {split} entry {entry!r} is neither a folder nor a .txt list")
    return images


def calibration_split(
    data_yaml: str | Path, n: int, out_dir: Path, seed: int = CALIBRATION_SEED
) -> tuple[Path, int]:
    """A data.yaml whose ``train`` split is a seeded random sample of ``n`` of ``data_yaml``'s train
    images (all of them when fewer), for int8 calibration.

    ultralytics' own ``fraction=n`` takes the *first* n files in name order: on detector v3/v4's
    tiles that is 300 tiles of the first VisDrone clips (no nadir frame, no simulated flight, no
    night), a calibration set unlike the traffic the model runs on. Returns (yaml, images used).
    """
    import random

    import yaml

    images = split_images(data_yaml, "train")
    if not images:
        raise ConfigError(f"{data_yaml}: no training images to calibrate on")
    chosen = sorted(random.Random(seed).sample(images, n)) if n < len(images) else images
    out_dir.mkdir(parents=True, exist_ok=True)
    listing = out_dir / "calibration.txt"
    listing.write_text("".join(f"{p.resolve()}\n" for p in chosen))
    data = yaml.safe_load(Path(data_yaml).read_text()) or {}
    calib = {"path": str(out_dir), "train": str(listing), "val": str(listing), "names": data.get("names", {})}
    out = out_dir / "calibration.yaml"
    out.write_text(yaml.safe_dump(calib, sort_keys=False))
    return out, len(chosen)


def quantize_onnx_int8(src: str | Path, dst: str | Path) -> Path:
    """Dynamic int8 quantisation (onnxruntime: uint8 weights, per-tensor) keeping the ultralytics
    metadata (class names, stride, imgsz), so ``YOLO(dst)`` still knows its classes."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = Path(src), Path(dst)
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QUInt8)
    model = onnx.load(str(dst))
    meta = onnx.load(str(src), load_external_data=False).metadata_props
    del model.metadata_props[:]
    model.metadata_props.extend(meta)
    for prop in model.metadata_props:
        if prop.key == "description":
            prop.value += " (int8 dynamic quantisation, onnxruntime)"
    onnx.save(model, str(dst))
    log.info("int8 ONNX -> %s (%.1f MB)", dst, dst.stat().st_size / 1e6)
    return dst


SHIPPED_NAMES = {
    "openvino-int8": "airpatrol_vehicles_n_int8_openvino_model",  # the engine's default when present
    "openvino": "airpatrol_vehicles_n_openvino_model",
    "onnx-int8": "airpatrol_vehicles_n.onnx",
    "pt": "airpatrol_vehicles_n.pt",  # fp16: where the next fine-tuning starts
}


def install_detector(
    exports: dict[str, Path], weights_dir: str | Path, description: str | None = None
) -> dict[str, Path]:
    """Copy exports under the fixed names the builder looks for (see ``SHIPPED_NAMES``); an OpenVINO
    folder's IR becomes ``airpatrol_vehicles_n.xml``/``.bin`` whatever the checkpoint was called."""
    import yaml

    weights_dir = Path(weights_dir)
    weights_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for fmt, path in exports.items():
        if fmt not in SHIPPED_NAMES:
            continue
        dst = weights_dir / SHIPPED_NAMES[fmt]
        if Path(path).is_dir():
            if dst.exists():
                shutil.rmtree(dst)
            shutil.copytree(path, dst)
            for ir in [*dst.glob("*.xml"), *dst.glob("*.bin")]:  # stable names: model cards hash them
                ir.rename(ir.with_name("airpatrol_vehicles_n" + ir.suffix))
            meta = dst / "metadata.yaml"
            if description and meta.exists():
                data = yaml.safe_load(meta.read_text())
                data["description"] = description
                meta.write_text(yaml.safe_dump(data, sort_keys=False))
        else:
            shutil.copyfile(path, dst)
        out[fmt] = dst
        log.info("installed %s -> %s", path, dst)
    return out
