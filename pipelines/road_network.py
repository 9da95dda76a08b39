"""The road network: a U-Net (segmentation_models_pytorch) from checkpoint to road probabilities.

:class:`UNetSegmenter` turns a frame into a road probability map through a :class:`LogitsBackend`
(:class:`TorchBackend`, or :class:`OpenVINOBackend` on CPU); :func:`load_road_model` reads a
checkpoint. The base layer (:mod:`pipelines.base_layer`) decides when the network runs.

Road checkpoint format (written by :func:`save_checkpoint`, read by :func:`read_checkpoint`)::

    {
        "format": "airpatrol.road_unet/1",
        "state_dict": {...},            # smp.Unet(encoder, classes=1).state_dict(), fp32 or fp16
        "encoder": "resnet18",          # smp encoder name the weights were trained with
        "decoder_channels": [...],      # optional; smp's default (256, 128, 64, 32, 16) when absent
        "input_size": [512, 288],       # (width, height) the network was trained at, or None
        "classes": 1,
        "extra": {...},                 # free-form: "threshold" (the recommended operating point),
    }                                   # metrics, dataset, training history ...

A checkpoint describes itself: with ``road.encoder``, ``road.input_size`` and ``road.threshold``
left unset (null), the engine takes them from the file.

A bare ``state_dict`` (optionally prefixed ``model.`` or ``module.`` as Lightning / DataParallel
write it) or a dict with only a ``"state_dict"`` key is accepted as well.

Models are loaded only through :func:`load_road_model`, which the builder calls; the segmenters and the
layer receive ready models.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import cv2
import numpy as np
import segmentation_models_pytorch as smp
import torch

from pipelines.batching import Batcher
from pipelines.errors import WeightsError
from pipelines.types import Frame

logger = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "airpatrol.road_unet/1"
IMAGENET_MEAN_RGB = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD_RGB = np.array([0.229, 0.224, 0.225], dtype=np.float32)
UNET_STRIDE = 32  # smp U-Net with encoder_depth=5 needs sides divisible by 2**5

# Encoders tried (in this order) when a bare state dict does not fit the requested one.
_GUESS_ENCODERS: tuple[str, ...] = (
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "mobilenet_v2",
    "efficientnet-b0",
    "efficientnet-b1",
    "efficientnet-b2",
    "efficientnet-b3",
    "timm-efficientnet-b0",
    "mobileone_s0",
    "mit_b0",
    "vgg16_bn",
    "densenet121",
    "resnext50_32x4d",
)


# --------------------------------------------------------------------------------------------
# Segmenters
# --------------------------------------------------------------------------------------------


@runtime_checkable
class RoadSegmenter(Protocol):
    """What the base layer calls when the mask is due: the frame in, a float32 road probability map
    (H x W) out. Image-only segmenters derive from :class:`ImageSegmenter`; frame-aware ones (the
    evaluator's exact masks of a simulated flight) implement ``segment`` themselves."""

    def segment(self, frame: Frame) -> np.ndarray: ...


class ImageSegmenter:
    """Base of segmenters that only need the image: ``segment(frame)`` is ``self(frame.image)``."""

    def __call__(self, image_bgr: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def segment(self, frame: Frame) -> np.ndarray:
        return self(frame.image)


class LogitsBackend(Protocol):
    """Inference engine of a segmenter: NCHW float32 (normalised RGB) -> N x 1 x h x w logits.

    :class:`TorchBackend` wraps a ``torch.nn.Module``; an ONNX Runtime or OpenVINO compiled model
    only needs a ``__call__`` with this signature to plug into :class:`UNetSegmenter`.
    """

    def __call__(self, batch: np.ndarray) -> np.ndarray: ...


class TorchBackend:
    """Runs a ``torch.nn.Module`` in eval mode under ``torch.inference_mode``."""

    def __init__(self, model: torch.nn.Module, device: str | torch.device = "cpu") -> None:
        self.device = torch.device(device)
        self.model = model.to(self.device).eval()

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(batch)).to(self.device)
            return self.model(x).float().cpu().numpy()


class OpenVINOBackend:
    """Runs the same network through OpenVINO on the CPU (converted in memory, nothing written).

    On the 2-core edge CPU this is several times faster than torch for the U-Net, and it keeps its
    own thread pool (``num_threads``), so it does not fight the detector for cores.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        input_size: tuple[int, int],
        num_threads: int | None = 1,
        precision: str | None = None,
    ) -> None:
        """``precision`` None lets OpenVINO pick (bf16 on CPUs with AMX/AVX512-BF16: about 2x
        faster than f32, logits within a few per cent); "f32" reproduces torch exactly."""
        import openvino as ov

        w, h = round_input_size(input_size)
        example = torch.zeros(1, 3, h, w)
        with warnings.catch_warnings():  # OpenVINO traces with torch.jit, which torch now calls deprecated
            warnings.simplefilter("ignore", FutureWarning)
            ov_model = ov.convert_model(model.cpu().eval(), example_input=example)
        config = {"PERFORMANCE_HINT": "LATENCY"}
        if num_threads:
            config["INFERENCE_NUM_THREADS"] = int(num_threads)
        if precision:
            config["INFERENCE_PRECISION_HINT"] = precision
        self._compiled = ov.Core().compile_model(ov_model, "CPU", config)
        self._request = self._compiled.create_infer_request()

    def fork(self) -> OpenVINOBackend:
        """A backend sharing this compiled network with an infer request of its own: one per
        stream, so concurrent streams neither convert the model again nor share a request."""
        twin = object.__new__(OpenVINOBackend)
        twin._compiled = self._compiled
        twin._request = self._compiled.create_infer_request()
        return twin

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        result = self._request.infer({0: np.ascontiguousarray(batch, dtype=np.float32)})
        return np.asarray(next(iter(result.values())))


class BatchedBackend:
    """One road network serving every stream of a process, their runs batched per step
    (:class:`~pipelines.batching.Batcher`): the runs waiting with the same input shape go through
    the network together, one alone as without a batcher. For torch: a GPU above all, where one
    512 x 288 frame leaves the device idle (on the CPU batches of 2 at most: larger ones cost more
    an image). OpenVINO's compiled network takes a batch of one, and each stream keeps an infer
    request of its own (:meth:`OpenVINOBackend.fork`: 16 ms a run on the 2-core dev VM, once every
    30-60 frames a stream, and no memory to speak of per request)."""

    def __init__(self, backend: LogitsBackend, max_batch: int = 1, name: str = "road-batch") -> None:
        self.backend = backend
        self.device = getattr(backend, "device", "cpu")
        self.batcher: Batcher[np.ndarray, np.ndarray] = Batcher(self._run, max_batch=max_batch, name=name)

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        """A ``1 x 3 x h x w`` input's logits, run with the other streams' inputs of that shape."""
        return self.batcher(tuple(batch.shape), batch)

    def stats(self) -> dict[str, Any]:
        return {"device": str(self.device), **self.batcher.stats()}

    def close(self) -> None:
        self.batcher.close()

    def _run(self, key: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if len(inputs) == 1:
            return [self.backend(inputs[0])]
        logits = np.asarray(self.backend(np.concatenate(inputs)))
        return [logits[k : k + 1] for k in range(len(inputs))]


def round_input_size(size: tuple[int, int], stride: int = UNET_STRIDE) -> tuple[int, int]:
    """Round (width, height) up to multiples of ``stride`` (at least one stride each)."""
    w, h = (max(stride, int(-(-int(v) // stride) * stride)) for v in size)
    return w, h


def preprocess(image_bgr: np.ndarray, input_size: tuple[int, int]) -> np.ndarray:
    """BGR uint8 H x W x 3 -> 1 x 3 x h x w float32: resized, RGB, ImageNet-normalised."""
    if image_bgr.ndim != 3 or image_bgr.shape[2] != 3:
        raise ValueError(f"expected an H x W x 3 BGR image, got shape {image_bgr.shape}")
    w, h = input_size
    src_h, src_w = image_bgr.shape[:2]
    interp = cv2.INTER_AREA if (w < src_w and h < src_h) else cv2.INTER_LINEAR
    resized = cv2.resize(image_bgr, (w, h), interpolation=interp) if (src_w, src_h) != (w, h) else image_bgr
    rgb = cv2.cvtColor(resized, cv2.COLOR_BGR2RGB).astype(np.float32)
    rgb *= 1.0 / 255.0
    rgb -= IMAGENET_MEAN_RGB
    rgb /= IMAGENET_STD_RGB
    return rgb.transpose(2, 0, 1)[None]


def sigmoid(x: np.ndarray) -> np.ndarray:
    """Numerically stable logistic function (float32)."""
    x = np.asarray(x, dtype=np.float32)
    return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)


class UNetSegmenter(ImageSegmenter):
    """Road probability from a binary-segmentation network (smp U-Net or any :class:`LogitsBackend`).

    The frame is resized to ``input_size`` (width, height; rounded up to multiples of 32),
    ImageNet-normalised, run once, passed through a sigmoid and resized back to the frame size.
    """

    def __init__(
        self,
        model: torch.nn.Module | LogitsBackend,
        input_size: tuple[int, int] = (512, 288),
        device: str = "cpu",
    ) -> None:
        self.backend: LogitsBackend = (
            TorchBackend(model, device) if isinstance(model, torch.nn.Module) else model
        )
        self.input_size = round_input_size(input_size)
        if self.input_size != tuple(input_size):
            logger.info(
                "road segmenter input size %s rounded up to %s (multiples of 32)", input_size, self.input_size
            )
        self.device = device

    def __call__(self, image_bgr: np.ndarray) -> np.ndarray:
        h, w = image_bgr.shape[:2]
        logits = np.asarray(self.backend(preprocess(image_bgr, self.input_size)))
        if logits.ndim != 4 or logits.shape[:2] != (1, 1):
            raise ValueError(f"road model must return 1 x 1 x h x w logits, got shape {logits.shape}")
        prob = sigmoid(logits[0, 0])
        if prob.shape != (h, w):
            prob = cv2.resize(prob, (w, h), interpolation=cv2.INTER_LINEAR)
        return prob


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class RoadCheckpoint:
    """Contents of a road checkpoint file (see the module docstring for the format)."""

    state_dict: dict[str, torch.Tensor]
    encoder: str | None = None
    input_size: tuple[int, int] | None = None
    classes: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    decoder_channels: tuple[int, ...] | None = None

    @property
    def threshold(self) -> float | None:
        """The probability threshold the checkpoint recommends (``extra.threshold``), if any."""
        value = self.extra.get("threshold")
        return float(value) if isinstance(value, int | float) and 0.0 <= value <= 1.0 else None


def build_unet(
    encoder: str = "resnet18", classes: int = 1, decoder_channels: Sequence[int] | None = None
) -> torch.nn.Module:
    """An untrained ``smp.Unet`` (never downloads encoder weights); smp's decoder unless given."""
    kwargs = {} if decoder_channels is None else {"decoder_channels": tuple(int(c) for c in decoder_channels)}
    return smp.Unet(encoder_name=encoder, encoder_weights=None, classes=classes, **kwargs)


def save_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    encoder: str,
    input_size: tuple[int, int] | None = None,
    extra: Mapping[str, Any] | None = None,
    *,
    decoder_channels: Sequence[int] | None = None,
    half: bool = False,
) -> Path:
    """Write ``model`` in the road checkpoint format (used by the trainer); returns the path.

    ``decoder_channels`` must be given when the model was built with a non-default decoder;
    ``half`` stores floating-point tensors in fp16 (half the file; loading casts them back).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        k: (v.detach().cpu().half() if half and v.is_floating_point() else v.detach().cpu())
        for k, v in model.state_dict().items()
    }
    obj: dict[str, Any] = {
        "format": CHECKPOINT_FORMAT,
        "state_dict": state,
        "encoder": encoder,
        "input_size": None if input_size is None else [int(input_size[0]), int(input_size[1])],
        "classes": 1,
        "extra": dict(extra or {}),
    }
    if decoder_channels is not None:
        obj["decoder_channels"] = [int(c) for c in decoder_channels]
    torch.save(obj, path)
    return path


def _strip_prefixes(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = dict(state)
    for prefix in ("module.", "model.", "net."):
        if out and all(k.startswith(prefix) for k in out):
            out = {k[len(prefix) :]: v for k, v in out.items()}
    return out


def read_checkpoint(path: str | Path) -> RoadCheckpoint:
    """Read a road checkpoint or a bare state dict; raises :class:`WeightsError` when unusable."""
    path = Path(path)
    if not path.is_file():
        raise WeightsError(
            f"road segmentation weights not found: {path} "
            "(set road.weights to a U-Net checkpoint, or remove it to run without a road mask)"
        )
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # corrupt file, not a torch file, pickled classes
        raise WeightsError(f"cannot read road segmentation weights {path}: {exc}") from exc
    if not isinstance(obj, Mapping):
        raise WeightsError(f"road segmentation weights {path} hold a {type(obj).__name__}, not a state dict")
    if "state_dict" in obj:
        state = obj["state_dict"]
        encoder = obj.get("encoder")
        size = obj.get("input_size")
        classes = int(obj.get("classes", 1) or 1)
        extra = dict(obj.get("extra") or {})
        decoder = obj.get("decoder_channels") or extra.get("decoder_channels")
    else:
        state, encoder, size, classes, extra, decoder = obj, None, None, 1, {}, None
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightsError(f"road segmentation weights {path}: 'state_dict' is not a mapping of tensors")
    input_size = None if size is None else (int(size[0]), int(size[1]))
    decoder_channels = None if not decoder else tuple(int(c) for c in decoder)
    return RoadCheckpoint(_strip_prefixes(state), encoder, input_size, classes, extra, decoder_channels)


def _shapes(state: Mapping[str, torch.Tensor]) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in state.items()}


def guess_encoder(
    state_dict: Mapping[str, torch.Tensor], candidates: Sequence[str] = _GUESS_ENCODERS
) -> str | None:
    """Name of the smp encoder whose parameters match the ``encoder.*`` entries, or None."""
    import segmentation_models_pytorch as smp

    want = {k[len("encoder.") :]: s for k, s in _shapes(state_dict).items() if k.startswith("encoder.")}
    if not want:
        return None
    for name in candidates:
        try:
            with torch.device("meta"):
                enc = smp.encoders.get_encoder(name, weights=None)
        except Exception:  # encoder not available in this smp / timm version
            continue
        if _shapes(enc.state_dict()) == want:
            return name
    return None


def load_road_model(
    weights: str | Path, encoder: str | None = None, device: str = "cpu"
) -> tuple[torch.nn.Module, RoadCheckpoint]:
    """Build the U-Net a road checkpoint describes and load it; returns ``(model, checkpoint)``.

    ``encoder`` None takes the checkpoint's own (or, for a bare state dict, the smp encoder whose
    shapes match). Raises :class:`WeightsError` when the file is missing or unreadable, or when
    it was trained with another architecture (the message names the encoder it expects).
    """
    ckpt = read_checkpoint(weights)
    if ckpt.classes != 1:
        raise WeightsError(
            f"road checkpoint {weights} has {ckpt.classes} output classes; the road mask needs 1"
        )
    if encoder is None:
        encoder = ckpt.encoder or guess_encoder(ckpt.state_dict)
        if encoder is None:
            raise WeightsError(
                f"road checkpoint {weights} does not name its encoder and matches none of the usual "
                "smp encoders: set road.encoder"
            )
    elif ckpt.encoder is not None and ckpt.encoder != encoder:
        raise WeightsError(
            f"road checkpoint {weights} was trained with encoder '{ckpt.encoder}', "
            f"but the config asks for '{encoder}' (set road.encoder: {ckpt.encoder}, or leave it unset)"
        )
    try:
        model = build_unet(encoder, decoder_channels=ckpt.decoder_channels)
    except Exception as exc:
        raise WeightsError(f"cannot build a U-Net with encoder '{encoder}': {exc}") from exc
    try:
        model.load_state_dict(ckpt.state_dict, strict=True)  # fp16 tensors are cast to the model's fp32
    except RuntimeError as exc:
        expected = ckpt.encoder or guess_encoder(ckpt.state_dict)
        if expected is not None and expected != encoder:
            hint = f"it expects encoder '{expected}' (set road.encoder: {expected})"
        else:
            hint = (
                "it does not match an smp U-Net with 1 class (first error: "
                + str(exc).splitlines()[0][:200]
                + ")"
            )
        raise WeightsError(
            f"road checkpoint {weights} does not fit a U-Net with encoder '{encoder}': {hint}"
        ) from exc
    logger.info("loaded road U-Net (%s) from %s", encoder, weights)
    return model.to(torch.device(device)).eval(), ckpt


def load_unet(weights: str | Path, encoder: str | None = None, device: str = "cpu") -> torch.nn.Module:
    """The model of :func:`load_road_model` alone."""
    return load_road_model(weights, encoder, device)[0]


__all__ = [
    "CHECKPOINT_FORMAT",
    "IMAGENET_MEAN_RGB",
    "IMAGENET_STD_RGB",
    "UNET_STRIDE",
    "build_unet",
    "guess_encoder",
    "ImageSegmenter",
    "load_road_model",
    "load_unet",
    "LogitsBackend",
    "OpenVINOBackend",
    "preprocess",
    "read_checkpoint",
    "RoadCheckpoint",
    "RoadSegmenter",
    "round_input_size",
    "save_checkpoint",
    "sigmoid",
    "TorchBackend",
    "UNetSegmenter",
]
