"""Export and install a trained detector: ONNX (float and dynamic int8), OpenVINO fp16, and OpenVINO
int8 by NNCF post-training quantisation calibrated on a seeded sample of the train split
(:func:`calibration_split`), with full bias correction and a float stem (:func:`_nncf_export_settings`);
:func:`install_detector` copies the exports under the names the engine's builder looks for.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pipelines.config import ConfigError
from training.datasets import IMAGE_EXTS
from training.detector_checkpoints import import_ultralytics

log = logging.getLogger(__name__)


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
    _, YOLO = import_ultralytics()
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
    _, YOLO = import_ultralytics()
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
