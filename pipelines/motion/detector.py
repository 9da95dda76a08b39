"""Vehicle detector: a thin adapter over ``ultralytics.YOLO`` that speaks canonical vehicle classes.

Any format ultralytics loads works (``.pt``, ``.onnx``, an OpenVINO ``*_openvino_model`` folder,
``.engine``). The model's own class ids are mapped onto :data:`CANONICAL_CLASSES` through a class
table (built-in, inferred from the model's ``names``, or an explicit ``{id: name}`` dict); classes
the table does not map are dropped, and only the mapped ids are passed to ultralytics' ``classes=``
so NMS never spends work on them.

Output: ``sv.Detections`` with float32 ``xyxy``, ``confidence``, ``class_id`` = canonical index and
``data["class_name"]`` = canonical name (``data["source_class_id"]`` keeps the model's own id).

Weights are loaded from an explicit path only; nothing is ever downloaded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import supervision as sv

from pipelines.config import DEFAULT_WEIGHTS_DIR, ConfigError, DetectorConfig
from pipelines.devices import is_cuda, resolve_device
from pipelines.errors import WeightsError
from pipelines.types import Frame
from pipelines.ultralytics_env import precision_args, prepare_ultralytics

log = logging.getLogger(__name__)

CANONICAL_CLASSES: tuple[str, ...] = ("car", "van", "truck", "bus", "motorcycle")
CANONICAL_INDEX: dict[str, int] = {name: i for i, name in enumerate(CANONICAL_CLASSES)}

# Model class name (normalised: lower case, '-'/'_' -> ' ') -> canonical class. Anything not
# here (pedestrian, bicycle, tricycle, trailer, ...) is dropped.
NAME_ALIASES: dict[str, str] = {
    "car": "car",
    "cars": "car",
    "sedan": "car",
    "suv": "car",
    "vehicle": "car",
    "van": "van",
    "minibus": "van",
    "mini bus": "van",
    "minivan": "van",
    "truck": "truck",
    "lorry": "truck",
    "pickup": "truck",
    "pickup truck": "truck",
    "bus": "bus",
    "motorcycle": "motorcycle",
    "motorbike": "motorcycle",
    "motor": "motorcycle",
    "moped": "motorcycle",
    "scooter": "motorcycle",
}

# Built-in tables: model class id -> canonical name. Ids not listed are dropped.
CLASS_TABLES: dict[str, dict[int, str]] = {
    # COCO-80: 2 car, 3 motorcycle, 5 bus, 7 truck.
    "coco": {2: "car", 3: "motorcycle", 5: "bus", 7: "truck"},
    # VisDrone-DET (10 classes, 0-based): 0 pedestrian, 1 people, 2 bicycle, 3 car, 4 van, 5 truck,
    # 6 tricycle, 7 awning-tricycle, 8 bus, 9 motor. Tricycles are dropped (no canonical class).
    "visdrone": {3: "car", 4: "van", 5: "truck", 8: "bus", 9: "motorcycle"},
    # UAVDT (categories 1 car, 2 truck, 3 bus, 0-based as trained).
    "uavdt": {0: "car", 1: "truck", 2: "bus"},
    # jekhor aerial-cars: 0 car, 1 truck, 2 bus, 3 minibus, 4 cyclist (dropped).
    "aerial": {0: "car", 1: "truck", 2: "bus", 3: "van"},
    # AU-AIR: 0 Human, 1 Car, 2 Truck, 3 Van, 4 Motorbike, 5 Bicycle, 6 Bus, 7 Trailer.
    # Trailers are dropped: the towing truck is labelled on its own, a trailer box would double count.
    "auair": {1: "car", 2: "truck", 3: "van", 4: "motorcycle", 6: "bus"},
}

WEIGHT_SUFFIXES: tuple[str, ...] = (".pt", ".onnx", ".engine")
_PROVIDE_HINT = (
    "pass --detector PATH (or detector.weights in the site config) pointing at a YOLO .pt, .onnx, "
    ".engine file or an OpenVINO *_openvino_model folder, or put one under {weights_dir}/"
)


@runtime_checkable
class Detector(Protocol):
    """What the motion layer calls once per frame: the frame (image, index, timestamp, telemetry)
    in, canonical vehicle detections out. Image-only detectors derive from :class:`ImageDetector`;
    frame-aware ones (the evaluator's ground-truth oracle) implement ``detect`` themselves."""

    def detect(self, frame: Frame) -> sv.Detections: ...


class ImageDetector:
    """Base of detectors that only need the image: ``detect(frame)`` is ``self(frame.image)``."""

    def __call__(self, image_bgr: np.ndarray) -> sv.Detections:
        raise NotImplementedError

    def detect(self, frame: Frame) -> sv.Detections:
        return self(frame.image)


# --------------------------------------------------------------------------------------------
# class mapping (pure)
# --------------------------------------------------------------------------------------------


class _ClosedDetector:
    """A closed pipeline's detector: any call says so (the model it held is released)."""

    def detect(self, frame: Frame) -> sv.Detections:
        raise RuntimeError("the pipeline is closed")


CLOSED_DETECTOR = _ClosedDetector()


def _normalise_name(name: str) -> str:
    return " ".join(str(name).strip().lower().replace("-", " ").replace("_", " ").split())


def canonical_name(name: str) -> str | None:
    """Canonical class for a model class name, or ``None`` when it is not a vehicle we track."""
    return NAME_ALIASES.get(_normalise_name(name))


def _names_dict(names: Mapping[int, str] | Sequence[str] | None) -> dict[int, str]:
    if names is None:
        return {}
    if isinstance(names, Mapping):
        return {int(k): str(v) for k, v in names.items()}
    return dict(enumerate(str(v) for v in names))


def resolve_class_map(
    spec: str | Mapping[int, str],
    model_names: Mapping[int, str] | Sequence[str] | None = None,
) -> dict[int, str]:
    """Model class id -> canonical name, from a table name, ``"auto"`` or an explicit dict.

    ``"auto"`` looks every model class name up in :data:`NAME_ALIASES`. An explicit dict may use
    canonical names or aliases (``{3: "minibus"}``). Raises :class:`ConfigError` for an unknown
    table, an unknown target name, or a mapping that keeps no class at all.
    """
    names = _names_dict(model_names)
    if isinstance(spec, str):
        key = spec.strip().lower()
        if key == "auto":
            if not names:
                raise ConfigError(
                    "detector.classes is 'auto' but the model carries no class names; "
                    f"set detector.classes to one of {sorted(CLASS_TABLES)} or an {{id: name}} dict"
                )
            mapping = {i: c for i, n in names.items() if (c := canonical_name(n)) is not None}
            if not mapping:
                raise ConfigError(
                    f"none of the model's classes {sorted(set(names.values()))[:20]} is a vehicle class "
                    f"({', '.join(CANONICAL_CLASSES)}); set detector.classes to a table "
                    f"({', '.join(sorted(CLASS_TABLES))}) or an {{id: name}} dict"
                )
            return mapping
        if key not in CLASS_TABLES:
            raise ConfigError(
                f"unknown detector class table {spec!r}; use 'auto', one of {sorted(CLASS_TABLES)} "
                "or an {id: name} dict"
            )
        mapping = dict(CLASS_TABLES[key])
        _warn_on_name_mismatch(key, mapping, names)
        return mapping

    mapping = {}
    for raw_id, raw_name in spec.items():
        target = raw_name if raw_name in CANONICAL_INDEX else canonical_name(raw_name)
        if target is None:
            raise ConfigError(
                f"detector.classes maps class {raw_id} to {raw_name!r}, which is not a vehicle class; "
                f"use one of {', '.join(CANONICAL_CLASSES)} (or an alias such as 'minibus'), "
                "and leave out classes to drop"
            )
        mapping[int(raw_id)] = target
    if not mapping:
        raise ConfigError("detector.classes is an empty dict; it must map at least one class id")
    return mapping


def _warn_on_name_mismatch(table: str, mapping: Mapping[int, str], names: Mapping[int, str]) -> None:
    """Log when a built-in table obviously disagrees with the model's own names (wrong table)."""
    if not names:
        return
    wrong = [
        f"{i}:{names[i]!r}->{c}"
        for i, c in mapping.items()
        if i in names and (own := canonical_name(names[i])) is not None and own != c
    ]
    missing = [i for i in mapping if names and i not in names]
    if wrong or missing:
        log.warning(
            "class table %r does not match the model's names (%s%s); is it the right table?",
            table,
            ", ".join(wrong[:5]),
            f"; ids not in model: {missing[:5]}" if missing else "",
        )


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "cpu"):
        x = x.cpu()
    if hasattr(x, "numpy"):
        x = x.numpy()
    return np.asarray(x)


def empty_detections() -> sv.Detections:
    det = sv.Detections(
        xyxy=np.empty((0, 4), dtype=np.float32),
        confidence=np.empty(0, dtype=np.float32),
        class_id=np.empty(0, dtype=int),
    )
    det.data = {"class_name": np.empty(0, dtype="<U10"), "source_class_id": np.empty(0, dtype=int)}
    return det


def detections_from_result(result: Any, class_map: Mapping[int, str]) -> sv.Detections:
    """Canonical detections from one ultralytics-like result (``result.boxes.{xyxy,conf,cls}``).

    Rows whose class is not in ``class_map`` are dropped. Works with torch tensors or numpy arrays,
    so tests can pass a plain stand-in object.
    """
    boxes = getattr(result, "boxes", None)
    if boxes is None or len(_to_numpy(boxes.cls).reshape(-1)) == 0:
        return empty_detections()
    xyxy = _to_numpy(boxes.xyxy).reshape(-1, 4).astype(np.float32)
    conf = _to_numpy(boxes.conf).reshape(-1).astype(np.float32)
    src = _to_numpy(boxes.cls).reshape(-1).astype(int)
    keep = np.array([int(c) in class_map for c in src], dtype=bool)
    if not keep.any():
        return empty_detections()
    src = src[keep]
    names = np.array([class_map[int(c)] for c in src])
    det = sv.Detections(
        xyxy=xyxy[keep],
        confidence=conf[keep],
        class_id=np.array([CANONICAL_INDEX[n] for n in names], dtype=int),
    )
    det.data = {"class_name": names, "source_class_id": src}
    return det


CONTAINED_AREA_RATIO = 1.5  # a container at least this much larger than the box inside it


def contained_boxes(
    xyxy: np.ndarray,
    share: float,
    area_ratio: float = CONTAINED_AREA_RATIO,
    containers: np.ndarray | None = None,
    confidence: np.ndarray | None = None,
) -> np.ndarray:
    """(N,) bool: the boxes with at least ``share`` of their area inside another box at least
    ``area_ratio`` times larger - a part of a vehicle boxed again beside the whole (the front of a
    bus, the cab of a truck, a car's roof). ``containers`` (N,) bool: the boxes that may contain
    others (default: all). ``confidence`` (N,): a box is only dropped for a container that scores
    at least as high (an oversized box around a vehicle, less sure than the vehicle's own box, is
    the one that is wrong). NMS keeps such pairs: their IoU is at most 1 / ``area_ratio``."""
    b = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    n = len(b)
    if n < 2:
        return np.zeros(n, dtype=bool)
    area = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    w = np.clip(np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0]), 0, None)
    h = np.clip(np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1]), 0, None)
    inside = (w * h) >= share * area[:, None]  # [i, j]: box i mostly inside box j
    inside &= area[None, :] >= area_ratio * np.maximum(area[:, None], 1e-9)
    if containers is not None:
        inside &= np.asarray(containers, dtype=bool)[None, :]
    if confidence is not None:
        c = np.asarray(confidence, dtype=np.float64).reshape(-1)
        inside &= c[None, :] >= c[:, None]
    np.fill_diagonal(inside, False)
    return inside.any(axis=1)


# --------------------------------------------------------------------------------------------
# weights
# --------------------------------------------------------------------------------------------


def _looks_like_weights(path: Path) -> bool:
    if path.is_dir():
        return path.name.endswith("_openvino_model") and any(path.glob("*.xml"))
    return path.is_file() and path.suffix.lower() in WEIGHT_SUFFIXES


# Preferred names under weights/ (the project's own vehicle model first: its NNCF int8 OpenVINO
# export, then fp16, then the fp16 PyTorch checkpoint), then any loadable model.
DEFAULT_WEIGHT_NAMES: tuple[str, ...] = (
    "airpatrol_vehicles_n_int8_openvino_model",
    "airpatrol_vehicles_n_openvino_model",
    "airpatrol_vehicles_n.onnx",
    "airpatrol_vehicles_n.pt",
    "detector_openvino_model",
    "detector.onnx",
    "detector.pt",
    "detector.engine",
)


# ... on a CUDA device: the PyTorch checkpoint (OpenVINO's exports run on the CPU)
CUDA_WEIGHT_NAMES: tuple[str, ...] = ("airpatrol_vehicles_n.pt", "detector.pt", "detector.engine")


def find_default_weights(weights_dir: Path = DEFAULT_WEIGHTS_DIR, *, cuda: bool = False) -> Path | None:
    """The detector under ``weights_dir``: a :data:`DEFAULT_WEIGHT_NAMES` entry first (for ``cuda``,
    a :data:`CUDA_WEIGHT_NAMES` one before those), else the alphabetically first loadable model
    there. ``None`` when there is none."""
    if not weights_dir.is_dir():
        return None
    for name in (CUDA_WEIGHT_NAMES if cuda else ()) + DEFAULT_WEIGHT_NAMES:
        if _looks_like_weights(weights_dir / name):
            return weights_dir / name
    found = sorted(p for p in weights_dir.iterdir() if _looks_like_weights(p))
    return found[0] if found else None


def resolve_weights(
    weights: str | Path | None, weights_dir: Path = DEFAULT_WEIGHTS_DIR, *, cuda: bool = False
) -> Path:
    """An existing weights path (unset: the default for the device, ``cuda`` or not), or
    :class:`WeightsError` saying what to provide."""
    hint = _PROVIDE_HINT.format(weights_dir=weights_dir)
    if weights is None:
        found = find_default_weights(weights_dir, cuda=cuda)
        if found is None:
            raise WeightsError(f"no detector weights configured and none found under {weights_dir}; {hint}")
        log.info("using detector weights %s", found)
        return found
    path = Path(weights).expanduser()
    if not path.exists():
        raise WeightsError(f"detector weights not found: {path}; {hint}")
    if path.is_dir() and not any(path.glob("*.xml")):
        raise WeightsError(f"detector weights folder {path} holds no OpenVINO .xml model; {hint}")
    return path


# --------------------------------------------------------------------------------------------
# adapter
# --------------------------------------------------------------------------------------------


def _ultralytics_backend(model: Any) -> Any:
    """The inference backend of a loaded ultralytics model once it has predicted (OpenVINO's holds
    the compiled network), or None."""
    return getattr(getattr(getattr(model, "predictor", None), "model", None), "backend", None)


def _limit_openvino_threads(model: Any, weights: Path, threads: int) -> int | None:
    """Recompile a loaded ultralytics OpenVINO model to run on ``threads`` CPU threads; returns the
    count the compiled network reports (None for other backends: torch's is set by the caller).

    ultralytics compiles OpenVINO models with its own ``ov.Core`` and no thread setting, so each
    would use every core of the process: several batch workers on one box would then contend for
    the same cores. This recompiles with ``INFERENCE_NUM_THREADS`` added to ultralytics' own
    compile settings (its LATENCY hint kept)."""
    import functools

    backend = _ultralytics_backend(model)
    compile_fn = getattr(backend, "compile_model", None)
    compiled = getattr(backend, "ov_compiled_model", None)
    if not isinstance(compile_fn, functools.partial) or compiled is None:
        if type(backend).__name__.lower().startswith("openvino"):
            log.warning("cannot set the OpenVINO detector's threads on this ultralytics version")
        return None
    config = {**compile_fn.keywords.get("config", {}), "INFERENCE_NUM_THREADS": int(threads)}
    backend.compile_model = functools.partial(compile_fn.func, **{**compile_fn.keywords, "config": config})
    xml = weights if weights.is_file() else next(weights.glob("*.xml"))
    core = compile_fn.func.__self__  # the ov.Core ultralytics made
    backend.ov_compiled_model = backend.compile_model(core.read_model(str(xml), str(xml.with_suffix(".bin"))))
    return int(backend.ov_compiled_model.get_property("INFERENCE_NUM_THREADS"))


def honour_input_size(model: Any) -> bool:
    """Let an int8 OpenVINO export made with ``dynamic=True`` run at the size asked for on CPUs with
    AMX (Intel Sapphire Rapids and newer). Returns True when it had to.

    On such CPUs ultralytics compiles a static model per input shape instead of the dynamic one
    (OpenVINO's CPU plugin crashes on dynamic int8 models there: openvinotoolkit/openvino#37577) and
    marks the model not dynamic; its predictor then runs every image at the export's ``imgsz`` (640)
    whatever the caller asks, so ``detector.imgsz: auto``'s 960 or 1280 for far vehicles silently
    became 640 (VisDrone held-out AP50 0.612 -> 0.501). The per-shape compile takes any size: marked
    dynamic again, each new input shape compiles once (a video's frames share one)."""
    backend = _ultralytics_backend(model)
    if backend is None or getattr(backend, "read_model", None) is None or getattr(backend, "dynamic", True):
        return False
    if not getattr(backend, "metadata", {}).get("dynamic"):
        return False  # a fixed-size export runs at its size (_check_input_size says so)
    backend.dynamic = True
    log.info("OpenVINO int8 model on an AMX CPU: compiled per input size, so that imgsz is honoured")
    return True


class YoloDetector(ImageDetector):
    """``Detector`` over ``ultralytics.YOLO(path, task="detect")``.

    Fixed-size exports (ONNX/OpenVINO without ``dynamic=True``) run at their export size whatever
    ``imgsz`` says — ultralytics silently overrides it; this adapter logs a warning once and reports
    the size really used in :attr:`input_size`.
    """

    def __init__(
        self,
        weights: str | Path,
        *,
        classes: str | Mapping[int, str] = "auto",
        imgsz: int = 640,  # ``detector.imgsz: auto`` wraps this in an AutoSizedDetector
        conf: float = 0.25,
        iou: float = 0.5,
        device: str = "cpu",
        half: bool | None = None,
        max_det: int = 300,
        agnostic_nms: bool = True,
        threads: int | None = None,
        drop_contained: float | None = None,
    ) -> None:
        """``half`` None: fp16 on CUDA devices, fp32 elsewhere. ``agnostic_nms``: one box per
        object whatever its class (a vehicle scored both car and van must not become two tracks).
        ``drop_contained``: drop the boxes with this share of their area inside a box 1.5x larger
        or more that scores at least as high (:func:`contained_boxes`); None: keep them."""
        device = resolve_device(device, "the detector")
        self.weights = resolve_weights(weights, cuda=is_cuda(device))
        self.imgsz = int(imgsz)
        self.conf = float(conf)
        self.iou = float(iou)
        self.max_det = int(max_det)
        self.agnostic_nms = bool(agnostic_nms)
        self.drop_contained = None if drop_contained is None else float(drop_contained)
        self.device = device
        self.half = is_cuda(device) if half is None else bool(half)
        if is_cuda(device):
            import torch

            if not torch.cuda.is_available():
                raise ConfigError(
                    f"detector.device is {device!r} but no CUDA device is available; set detector.device to 'auto' or 'cpu'"
                )
        elif self.half:
            log.warning("detector half=True ignored on device %r (fp16 only on CUDA)", device)
            self.half = False

        self.input_size: tuple[int, int] | None = None  # (h, w) really fed to the network
        self._model = self._load(self.weights)
        self.threads = _limit_openvino_threads(self._model, self.weights, threads) if threads else None
        self._check_input_size()
        self.class_map: dict[int, str] = resolve_class_map(classes, self.names)
        self.kept_class_ids: list[int] = sorted(self.class_map)
        log.info(
            "detector %s: imgsz %d, device %s%s, classes %s",
            self.weights,
            self.imgsz,
            device,
            " fp16" if self.half else "",
            {i: self.class_map[i] for i in self.kept_class_ids},
        )

    def _load(self, path: Path) -> Any:
        """Load the model and run it once on a blank image, so a broken file fails here (as a
        WeightsError) rather than on the first frame, and the backend is compiled only once."""
        prepare_ultralytics()
        from ultralytics import YOLO

        try:
            model = YOLO(str(path), task="detect")
            model.predict(
                np.zeros((64, 64, 3), dtype=np.uint8),
                imgsz=self.imgsz,
                device=self.device,
                verbose=False,
                **precision_args(self.half),
            )
            _ = model.names
            honour_input_size(model)
        except Exception as exc:  # noqa: BLE001 - any loader failure is a weights problem for the user
            raise WeightsError(
                f"could not load detector weights {path}: {type(exc).__name__}: {exc}; "
                + _PROVIDE_HINT.format(weights_dir=DEFAULT_WEIGHTS_DIR)
            ) from exc
        return model

    @classmethod
    def from_config(cls, cfg: DetectorConfig, weights_dir: Path = DEFAULT_WEIGHTS_DIR) -> YoloDetector:
        device = resolve_device(cfg.device, "the detector")
        weights = resolve_weights(cfg.weights, weights_dir, cuda=is_cuda(device))
        return cls(
            weights,
            classes=cfg.classes,
            imgsz=cfg.auto_size.fallback if cfg.imgsz == "auto" else cfg.imgsz,
            conf=cfg.conf,
            iou=cfg.iou,
            device=device,
            half=cfg.half,
            max_det=cfg.max_det,
            agnostic_nms=cfg.agnostic_nms,
            threads=cfg.threads,
            drop_contained=cfg.drop_contained,
        )

    @property
    def names(self) -> dict[int, str]:
        return _names_dict(getattr(self._model, "names", None))

    def predict_raw(self, image_bgr: np.ndarray, imgsz: int | None = None) -> Any:
        """The ultralytics ``Results`` for one image (restricted to the mapped classes), at
        ``imgsz`` (default: :attr:`imgsz`)."""
        return self._predict(image_bgr, imgsz)[0]

    def detect_many(self, images: Sequence[np.ndarray], imgsz: int | None = None) -> list[sv.Detections]:
        """Detections of several images in one batch (a server's streams, :mod:`pipelines.batching`):
        each the same as alone where the images share one shape (each letterboxed as it would be)."""
        results = self._predict(list(images), imgsz)
        return [self._without_parts(detections_from_result(r, self.class_map)) for r in results]

    def _predict(self, source: np.ndarray | list[np.ndarray], imgsz: int | None) -> list[Any]:
        return self._model.predict(
            source,
            imgsz=imgsz or self.imgsz,
            conf=self.conf,
            iou=self.iou,
            classes=self.kept_class_ids,
            max_det=self.max_det,
            agnostic_nms=self.agnostic_nms,
            device=self.device,
            verbose=False,
            **precision_args(self.half),
        )

    def _check_input_size(self) -> None:
        predictor = getattr(self._model, "predictor", None)
        size = getattr(predictor, "imgsz", None)
        if size is None:
            return
        self.input_size = (int(size[0]), int(size[1]))
        if abs(max(self.input_size) - self.imgsz) >= 32:  # not just rounding to the stride
            log.warning(
                "detector %s has a fixed input size %dx%d; imgsz=%d is ignored (re-export it with "
                "imgsz=%d or dynamic=True to run at that size)",
                self.weights,
                self.input_size[1],
                self.input_size[0],
                self.imgsz,
                self.imgsz,
            )

    def __call__(self, image_bgr: np.ndarray) -> sv.Detections:
        return self._without_parts(detections_from_result(self.predict_raw(image_bgr), self.class_map))

    def detect_at(self, frame: Frame, imgsz: int) -> sv.Detections:
        """Detections of one frame at a given input size (``detector.imgsz: auto``)."""
        return self._without_parts(
            detections_from_result(self.predict_raw(frame.image, imgsz), self.class_map)
        )

    def _without_parts(self, det: sv.Detections) -> sv.Detections:
        if self.drop_contained is None or len(det) < 2:
            return det
        parts = contained_boxes(det.xyxy, self.drop_contained, confidence=det.confidence)
        return det[~parts] if parts.any() else det

    def warmup(self, shape: tuple[int, int] = (540, 960), runs: int = 2) -> None:
        """Run on blank frames so one-off allocations do not land on the first real frame."""
        for _ in range(runs):
            self(np.zeros((*shape, 3), dtype=np.uint8))
