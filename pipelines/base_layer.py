"""Base layer: where the road is.

A U-Net (segmentation_models_pytorch) turns a frame into a road probability map. It is too slow to
run on every frame on an edge CPU, so :class:`RoadMaskLayer` runs it every ``every_n_frames``
frames (or early when the camera has moved a lot since the last run, or when the ego-motion is
unknown) and, in between, warps the last mask onto the current frame with the accumulated
ego-motion homography. A site polygon (image pixels) can replace, extend or restrict the mask.
:func:`filter_by_mask` then drops detections that are not on the road.

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
import supervision as sv
import torch

from pipelines.config import RoadConfig
from pipelines.errors import WeightsError
from pipelines.types import EgoMotion, Frame

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
    import segmentation_models_pytorch as smp

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


# --------------------------------------------------------------------------------------------
# Mask layer
# --------------------------------------------------------------------------------------------


def homography_displacement_px(h: np.ndarray, width: int, height: int) -> float:
    """Largest displacement (pixels) that ``h`` applies to the frame's four corners and centre."""
    pts = np.array(
        [
            [0, 0],
            [width - 1, 0],
            [0, height - 1],
            [width - 1, height - 1],
            [(width - 1) / 2, (height - 1) / 2],
        ],
        dtype=np.float64,
    )
    homog = np.column_stack([pts, np.ones(len(pts))]) @ np.asarray(h, dtype=np.float64).T
    w = homog[:, 2]
    if np.any(np.abs(w) < 1e-9):
        return float("inf")
    moved = homog[:, :2] / w[:, None]
    d = np.linalg.norm(moved - pts, axis=1)
    return float(np.max(d)) if np.all(np.isfinite(d)) else float("inf")


def rasterize_polygon(polygon: Sequence[tuple[float, float]], width: int, height: int) -> np.ndarray:
    """Bool H x W mask of a polygon given in image pixels."""
    mask = np.zeros((height, width), dtype=np.uint8)
    pts = np.round(np.asarray(polygon, dtype=np.float64)).astype(np.int32).reshape(-1, 1, 2)
    if len(pts) >= 3:
        cv2.fillPoly(mask, [pts], 1)
    return mask.astype(bool)


def threshold_and_dilate(prob: np.ndarray, threshold: float, dilate_px: int) -> np.ndarray:
    """Road probability -> uint8 {0, 1} mask grown by ``dilate_px`` (elliptic kernel)."""
    mask = (np.asarray(prob) >= threshold).astype(np.uint8)
    if dilate_px > 0:
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * dilate_px + 1, 2 * dilate_px + 1))
        mask = cv2.dilate(mask, k)
    return mask


class RoadMaskLayer:
    """Road mask per frame: scheduled segmentation, ego-motion warping and the site polygon.

    ``update(frame, ego)`` returns a bool H x W mask, or None when the layer is disabled (no
    segmenter and no polygon, or ``road.enabled: false``). ``ego.homography`` maps the previous
    frame onto the current one. The segmenter runs on the first frame, when ``every_n_frames``
    frames (by frame index) have passed since the last run, when the accumulated camera motion
    since the last run moves a frame corner or the centre by more than ``motion_threshold_px``,
    when the ego-motion is invalid, or when the frame size changes; early runs (motion, invalid
    ego-motion) come at most every ``min_early_gap_frames`` frames, so a long ego-motion outage
    does not run the network on every frame (the last mask is kept unwarped meanwhile; default 1:
    no limit). In between, the mask from the last run is warped with the product of the
    homographies since that run (one nearest-neighbour warp from the original, so rounding errors
    do not accumulate); parts of the frame the last run did not see are "not road" until the next
    run.
    """

    def __init__(
        self, cfg: RoadConfig, segmenter: RoadSegmenter | None, *, min_early_gap_frames: int = 1
    ) -> None:
        self.cfg = cfg.resolved()
        self.min_early_gap_frames = max(1, int(min_early_gap_frames))
        self.polygon = list(cfg.polygon) if cfg.polygon and len(cfg.polygon) >= 3 else None
        if cfg.polygon is not None and self.polygon is None:
            logger.warning("road.polygon has fewer than 3 points; ignored")
        use_net = (
            cfg.enabled and segmenter is not None and not (self.polygon and cfg.polygon_mode == "override")
        )
        self.segmenter: RoadSegmenter | None = segmenter if use_net else None
        self.last_run_frame: int | None = None
        self.n_runs = 0
        self._base: np.ndarray | None = None  # uint8 {0,1} mask of the last run (thresholded, dilated)
        self._acc = np.eye(3)  # last run frame -> current frame
        self._size: tuple[int, int] | None = None
        self._poly_cache: tuple[tuple[int, int], np.ndarray] | None = None

        if not cfg.enabled:
            self.status = "disabled in config"
        elif self.segmenter is None and self.polygon is None:
            self.status = "disabled: no road weights"
        elif self.segmenter is None:
            self.status = "polygon only"
            if segmenter is None and cfg.polygon_mode != "override":
                logger.info(
                    "no road segmenter: polygon_mode '%s' falls back to the polygon only", cfg.polygon_mode
                )
        elif self.polygon is None:
            self.status = f"unet every {cfg.every_n_frames} frames"
        else:
            self.status = f"unet every {cfg.every_n_frames} frames, {cfg.polygon_mode} polygon"
        logger.info("road mask: %s", self.status)

    @property
    def enabled(self) -> bool:
        return self.cfg.enabled and (self.segmenter is not None or self.polygon is not None)

    def reset(self) -> None:
        """Forget the last mask (next update runs the segmenter)."""
        self.last_run_frame = None
        self._base = None
        self._acc = np.eye(3)
        self._size = None

    def _polygon_mask(self, width: int, height: int) -> np.ndarray:
        if self._poly_cache is None or self._poly_cache[0] != (width, height):
            assert self.polygon is not None
            self._poly_cache = ((width, height), rasterize_polygon(self.polygon, width, height))
        return self._poly_cache[1]

    def _needs_run(self, frame: Frame, ego: EgoMotion, size: tuple[int, int]) -> str | None:
        if self._base is None or self.last_run_frame is None:
            return "first frame"
        if size != self._size:
            return "frame size changed"
        if frame.index < self.last_run_frame:
            return "frame index went back"
        since = frame.index - self.last_run_frame
        if since >= self.cfg.every_n_frames:
            return "schedule"
        if since < self.min_early_gap_frames:
            return None
        if not ego.valid:
            return "ego-motion invalid"
        moved = homography_displacement_px(self._acc, *size)
        if moved > self.cfg.motion_threshold_px:
            return f"camera moved {moved:.0f} px"
        return None

    def _network_mask(self, frame: Frame, ego: EgoMotion) -> np.ndarray:
        assert self.segmenter is not None
        size = (frame.width, frame.height)
        if self._base is not None and ego.valid:
            self._acc = np.asarray(ego.homography, dtype=np.float64) @ self._acc
        reason = self._needs_run(frame, ego, size)
        if reason is not None:
            prob = np.asarray(self.segmenter.segment(frame), dtype=np.float32)
            if prob.shape != (frame.height, frame.width):
                prob = cv2.resize(prob, size, interpolation=cv2.INTER_LINEAR)
            self._base = threshold_and_dilate(prob, self.cfg.threshold, self.cfg.dilate_px)
            self._acc = np.eye(3)
            self._size = size
            self.last_run_frame = frame.index
            self.n_runs += 1
            logger.debug("road segmenter ran on frame %d (%s)", frame.index, reason)
            return self._base.astype(bool)
        assert self._base is not None
        if homography_displacement_px(self._acc, *size) < 0.25:
            return self._base.astype(bool)
        warped = cv2.warpPerspective(
            self._base,
            self._acc,
            size,
            flags=cv2.INTER_NEAREST,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=0,
        )
        return warped.astype(bool)

    def update(self, frame: Frame, ego: EgoMotion) -> np.ndarray | None:
        if not self.enabled:
            return None
        if self.segmenter is None:
            return self._polygon_mask(frame.width, frame.height).copy()
        mask = self._network_mask(frame, ego)
        if self.polygon is None:
            return mask
        poly = self._polygon_mask(frame.width, frame.height)
        return mask | poly if self.cfg.polygon_mode == "union" else mask & poly


# --------------------------------------------------------------------------------------------
# Detection filter
# --------------------------------------------------------------------------------------------


def lower_half_overlap(xyxy: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Share (0..1) of each box's lower half (clipped to the image) that lies on ``mask``.

    One ``cv2.integral`` per call, then four lookups per box. Boxes entirely outside get 0.
    """
    boxes = np.asarray(xyxy, dtype=np.float64).reshape(-1, 4)
    h, w = mask.shape[:2]
    integral = cv2.integral(np.ascontiguousarray(mask, dtype=np.uint8))
    x0 = np.clip(np.floor(boxes[:, 0]), 0, w).astype(np.int64)
    x1 = np.clip(np.ceil(boxes[:, 2]), 0, w).astype(np.int64)
    y0 = np.clip(np.floor((boxes[:, 1] + boxes[:, 3]) / 2.0), 0, h).astype(np.int64)
    y1 = np.clip(np.ceil(boxes[:, 3]), 0, h).astype(np.int64)
    area = (x1 - x0).clip(min=0) * (y1 - y0).clip(min=0)
    on = integral[y1, x1] - integral[y0, x1] - integral[y1, x0] + integral[y0, x0]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(area > 0, on / np.maximum(area, 1), 0.0)
    return frac.astype(np.float64)


def filter_by_mask(detections: sv.Detections, mask: np.ndarray | None, min_overlap: float) -> sv.Detections:
    """Keep detections whose lower box half lies on the mask for at least ``min_overlap`` of its area."""
    if mask is None or len(detections) == 0:
        return detections
    keep = lower_half_overlap(detections.xyxy, mask != 0) >= min_overlap
    return detections if keep.all() else detections[keep]


__all__ = [
    "CHECKPOINT_FORMAT",
    "LogitsBackend",
    "OpenVINOBackend",
    "RoadCheckpoint",
    "RoadMaskLayer",
    "ImageSegmenter",
    "RoadSegmenter",
    "TorchBackend",
    "UNetSegmenter",
    "build_unet",
    "filter_by_mask",
    "guess_encoder",
    "homography_displacement_px",
    "load_road_model",
    "load_unet",
    "lower_half_overlap",
    "preprocess",
    "rasterize_polygon",
    "read_checkpoint",
    "save_checkpoint",
    "threshold_and_dilate",
]
