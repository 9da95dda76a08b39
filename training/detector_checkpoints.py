"""Checkpoints of the aerial vehicle detector: the one training starts from, and the ones made
from a trained run (a slim fp16 copy, a weight-space average of two).

Initialisation (``init`` of :func:`build_init_checkpoint`):

* ``"coco-int8"`` / a path to an int8 (or float) YOLOv8 ONNX: the weights are dequantised
  (:mod:`training.dequant`) into ``yolov8n.yaml`` with our 5 classes; the class head rows start
  from COCO car/car/truck/bus/motorcycle.
* a ``.pt`` checkpoint (ultralytics): fine-tune it (class head re-initialised when the classes
  differ).
* ``"scratch"``: random weights from ``yolov8n.yaml``.

:func:`import_ultralytics` is the one way this package imports ultralytics (offline-safe:
:func:`pipelines.ultralytics_env.prepare_ultralytics` runs first).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from pipelines.config import ConfigError
from pipelines.ultralytics_env import prepare_ultralytics
from training.dequant import load_into_yolo, read_quantized_onnx
from training.samples import CLASSES

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("AIRPATROL_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))
COCO_INT8_ONNX = SHARED_DATA / "yolov8n_coco_int8" / "yolov8n_int8.onnx"
COCO_NAMES_FOR_CLASSES = {"car": 2, "van": 2, "truck": 7, "bus": 5, "motorcycle": 3}


def import_ultralytics():
    """(the ultralytics module, its ``YOLO`` class), imported offline-safe."""
    prepare_ultralytics()
    import ultralytics
    from ultralytics import YOLO

    return ultralytics, YOLO


def save_checkpoint(model, path: str | Path, names: dict[int, str] | None = None) -> Path:
    """Save a ``DetectionModel`` as an ultralytics ``.pt`` checkpoint (loadable by ``YOLO(path)``)."""
    import torch

    ultralytics, _ = import_ultralytics()
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

    import_ultralytics()
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
