"""Defaults shared by the trainers and the CLI (no heavy imports here)."""

from __future__ import annotations

# Road U-Net: a small encoder and a reduced decoder keep the committed model at a few MB
# (resnet18 + the default decoder is ~56 MB).
ROAD_ENCODER = "tu-mobilenetv3_small_100"
ROAD_DECODER_CHANNELS: tuple[int, ...] = (128, 64, 32, 16, 8)

# training precision of the detector (training.detector.resolve_precision)
PRECISIONS = ("auto", "fp32", "bf16")
