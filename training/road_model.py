"""The road U-Net: building, checkpoint saving / loading, ONNX export, input tensors and inference.

The checkpoint is written in the engine's format (:func:`pipelines.road_network.save_checkpoint`)
plus a top-level ``decoder_channels`` entry (also in ``extra``): the small models shipped here use
a reduced U-Net decoder, so the loader must build ``smp.Unet(encoder, decoder_channels=...)``.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import cv2
import numpy as np

from training.defaults import ROAD_DECODER_CHANNELS as DEFAULT_DECODER_CHANNELS
from training.defaults import ROAD_ENCODER as DEFAULT_ENCODER

log = logging.getLogger(__name__)


def build_road_model(
    encoder: str = DEFAULT_ENCODER, decoder_channels: Sequence[int] = DEFAULT_DECODER_CHANNELS
):
    from pipelines.road_network import build_unet

    return build_unet(encoder, decoder_channels=decoder_channels)


def save_road_checkpoint(
    path: str | Path,
    model,
    encoder: str,
    decoder_channels: Sequence[int],
    input_size: tuple[int, int],
    extra: Mapping | None = None,
    half: bool = True,
) -> Path:
    """The engine's checkpoint format with the decoder it was built with; fp16 by default."""
    from pipelines.road_network import save_checkpoint

    return save_checkpoint(
        path, model, encoder, input_size, extra, decoder_channels=decoder_channels, half=half
    )


def load_road_model(path: str | Path):
    """``(model, RoadCheckpoint)``: exactly what the engine loads (:func:`pipelines.road_network.load_road_model`)."""
    from pipelines.road_network import load_road_model as engine_load

    return engine_load(path)


def export_road_onnx(
    ckpt_path: str | Path, out: str | Path, input_size: tuple[int, int] | None = None
) -> Path:
    """ONNX (opset 17, fixed input size) of a road checkpoint: 1x3xHxW normalised RGB -> logits."""
    import torch

    model, ckpt = load_road_model(ckpt_path)
    w, h = input_size or ckpt.input_size or (512, 288)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the legacy exporter: no onnxscript needed
        torch.onnx.export(
            model,
            torch.zeros(1, 3, h, w),
            str(out),
            input_names=["images"],
            output_names=["logits"],
            opset_version=17,
            dynamo=False,
        )
    log.info("road model exported to %s", out)
    return Path(out)


def to_tensor_batch(images: Sequence[np.ndarray]) -> np.ndarray:
    """BGR uint8 images -> N x 3 x H x W float32, RGB, ImageNet-normalised (as the engine does)."""
    from pipelines.road_network import IMAGENET_MEAN_RGB, IMAGENET_STD_RGB

    x = (
        np.stack([cv2.cvtColor(np.ascontiguousarray(i), cv2.COLOR_BGR2RGB) for i in images]).astype(
            np.float32
        )
        / 255.0
    )
    x = (x - IMAGENET_MEAN_RGB) / IMAGENET_STD_RGB
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def predict_prob(model, image_bgr: np.ndarray, input_size: tuple[int, int]) -> np.ndarray:
    import torch

    x = to_tensor_batch([cv2.resize(image_bgr, input_size, interpolation=cv2.INTER_AREA)])
    with torch.inference_mode():
        logits = model(torch.from_numpy(x)).float().numpy()[0, 0]
    prob = 1.0 / (1.0 + np.exp(-logits))
    return cv2.resize(prob, (image_bgr.shape[1], image_bgr.shape[0]), interpolation=cv2.INTER_LINEAR)
