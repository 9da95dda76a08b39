"""Road U-Net training on tiny pairs, ONNX export, and the checkpoint format the engine loads."""

from __future__ import annotations

import cv2
import numpy as np

from training.road_data import pairs_from_folders
from training.road_model import (
    build_road_model,
    export_road_onnx,
    load_road_model,
    predict_prob,
    save_road_checkpoint,
)
from training.road_train import RoadTrainSettings, train_road


def _pairs(tmp_path, n=4):
    img_dir, mask_dir = tmp_path / "images", tmp_path / "masks"
    img_dir.mkdir()
    mask_dir.mkdir()
    rng = np.random.default_rng(0)
    for k in range(n):
        img = rng.integers(60, 160, (96, 128, 3), dtype=np.uint8)
        mask = np.zeros((96, 128), np.uint8)
        y = 20 + 15 * k
        mask[y : y + 20] = 255
        img[mask > 0] = (40, 40, 40)
        cv2.imwrite(str(img_dir / f"tile{k}.png"), img)
        cv2.imwrite(str(mask_dir / f"tile{k}.png"), mask)
    return pairs_from_folders(img_dir, mask_dir)


def test_tiny_road_train_and_checkpoint(tmp_path):
    pairs = _pairs(tmp_path)
    settings = RoadTrainSettings(
        encoder="tu-mobilenetv3_small_100",
        decoder_channels=(16, 16, 8, 8, 8),
        input_size=(64, 64),
        epochs=2,
        steps_per_epoch=2,
        batch=2,
        dilate_px=0,
    )
    ckpt = train_road(pairs, tmp_path / "road.pt", settings, val_fraction=0.25)
    model, raw = load_road_model(ckpt)
    assert raw.encoder == "tu-mobilenetv3_small_100"
    assert raw.decoder_channels == (16, 16, 8, 8, 8) and raw.input_size == (64, 64)
    assert "history" in raw.extra and len(raw.extra["history"]) == 2
    assert next(iter(raw.state_dict.values())).dtype.itemsize == 2  # stored in half
    prob = predict_prob(model, cv2.imread(str(pairs[0].image)), (64, 64))
    assert prob.shape == (96, 128) and 0 <= prob.min() <= prob.max() <= 1
    onnx_path = export_road_onnx(ckpt, tmp_path / "road.onnx")
    import onnxruntime as ort

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    out = sess.run(None, {"images": np.zeros((1, 3, 64, 64), np.float32)})[0]
    assert out.shape == (1, 1, 64, 64)


def test_checkpoint_loads_in_the_engine(tmp_path):
    """A trained checkpoint with a reduced decoder runs in the engine unchanged: same logits."""
    import torch

    from pipelines import road_network

    model = build_road_model("tu-mobilenetv3_small_100", (16, 16, 8, 8, 8)).eval()
    path = save_road_checkpoint(
        tmp_path / "r.pt", model, "tu-mobilenetv3_small_100", (16, 16, 8, 8, 8), (64, 64), half=False
    )
    loaded, ckpt = road_network.load_road_model(path)  # encoder and decoder from the file
    assert ckpt.encoder == "tu-mobilenetv3_small_100" and ckpt.decoder_channels == (16, 16, 8, 8, 8)
    x = torch.rand(1, 3, 64, 64)
    with torch.inference_mode():
        assert torch.allclose(loaded(x), model(x))
