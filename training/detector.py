"""Train the aerial vehicle detector (ultralytics YOLOv8).

Offline-safe: :func:`pipelines.ultralytics_env.prepare_ultralytics` runs before ultralytics is
imported, its fp16 AMP is off (its check downloads a model on CUDA), and plots are off unless asked
for. ``precision="bf16"`` (``"auto"`` picks it where the hardware has native bfloat16) trains under
bfloat16 autocast instead, on CUDA through ultralytics' own ``amp="bf16"`` and on the CPU (which
ultralytics refuses) by :func:`_cpu_bf16_autocast`: weights, gradients and optimizer stay float32.
Measured on the 2-core AMD EPYC dev VM (avx512_bf16): a YOLOv8n forward + backward of 8 tiles of
640 px takes 0.56 s in bf16 against 1.11 s in fp32.

Initialisation (``init``: ``"coco-int8"``, an ``.onnx``, a ``.pt``, ``"scratch"``): see
:mod:`training.detector_checkpoints`, which also holds the slim and averaged checkpoints made from a
run; exports and installation: :mod:`training.detector_export`.

Augmentation fit for nadir views: rotations (``degrees``), both flips, scale jitter, mosaic,
plus offline random transposes (90-degree rotations without loosening boxes) and copy-paste of
vehicle crops when the dataset is built by :func:`training.yolo_dataset.build_yolo_dataset`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipelines.config import ConfigError
from training.defaults import PRECISIONS
from training.detector_checkpoints import build_init_checkpoint, import_ultralytics

log = logging.getLogger(__name__)


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
    _, YOLO = import_ultralytics()
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
    args = _train_args(data_yaml, project, name, settings, precision)
    _use_threads(model, settings.threads)
    log.info("training %s from %s on %s in %s", name, init, data_yaml, precision)
    with _cpu_bf16_autocast(_cpu_bf16(precision, settings.device)):
        model.train(**args)
    return _pick(run_dir, pick)


def _train_args(
    data_yaml: str | Path, project: Path, name: str, settings: TrainSettings, precision: str
) -> dict:
    """The keyword arguments of ultralytics' ``model.train`` for a fresh run of ``settings`` in the
    resolved ``precision``."""
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
    return args


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
