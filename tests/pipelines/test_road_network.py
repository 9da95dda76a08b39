"""The road network: U-Net segmenter (torch and other backends), checkpoints and weights."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import supervision as sv
import torch
from shared_material import shared_path

from pipelines.base_layer import RoadMaskLayer, filter_by_mask
from pipelines.config import RoadConfig
from pipelines.errors import WeightsError
from pipelines.road_network import (
    CHECKPOINT_FORMAT,
    RoadSegmenter,
    UNetSegmenter,
    build_unet,
    load_unet,
    preprocess,
    read_checkpoint,
    round_input_size,
    save_checkpoint,
)
from pipelines.types import EgoMotion, Frame


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """On the shared 2-core machine two intra-op threads spin against other jobs (10-20x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny_unet() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_unet("resnet18").eval()


@pytest.mark.parametrize(
    "size, expected",
    [((512, 288), (512, 288)), ((500, 280), (512, 288)), ((10, 33), (32, 64)), ((1024, 576), (1024, 576))],
)
def test_round_input_size(size: tuple[int, int], expected: tuple[int, int]) -> None:
    assert round_input_size(size) == expected


def test_preprocess_normalises_imagenet_rgb() -> None:
    img = np.zeros((10, 20, 3), np.uint8)
    img[..., 2] = 255  # red in BGR
    x = preprocess(img, (64, 32))
    assert x.shape == (1, 3, 32, 64) and x.dtype == np.float32
    assert x[0, 0].mean() == pytest.approx((1.0 - 0.485) / 0.229, rel=1e-5)  # R channel first
    assert x[0, 2].mean() == pytest.approx((0.0 - 0.406) / 0.225, rel=1e-5)


# ------------------------------------------------------------------------------------------
# UNetSegmenter with a real (untrained) smp U-Net, and a non-torch backend
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("frame_wh, input_size", [((100, 80), (64, 64)), ((90, 50), (70, 40))])
def test_unet_segmenter_shapes(tiny_unet: torch.nn.Module, frame_wh: tuple, input_size: tuple) -> None:
    seg = UNetSegmenter(tiny_unet, input_size=input_size)
    assert isinstance(seg, RoadSegmenter)
    img = np.random.default_rng(0).integers(0, 255, (frame_wh[1], frame_wh[0], 3), dtype=np.uint8)
    prob = seg(img)
    assert prob.shape == (frame_wh[1], frame_wh[0]) and prob.dtype == np.float32
    assert np.all((prob >= 0) & (prob <= 1))
    layer = RoadMaskLayer(RoadConfig(every_n_frames=2), seg)
    mask = layer.update(Frame(0, 0.0, img), EgoMotion.identity())
    assert mask.shape == prob.shape and mask.dtype == bool


def test_unet_segmenter_accepts_any_logits_backend() -> None:
    calls = []

    def backend(batch: np.ndarray) -> np.ndarray:  # e.g. an ONNX Runtime or OpenVINO session
        calls.append(batch.shape)
        logits = np.full((1, 1, batch.shape[2], batch.shape[3]), -4.0, np.float32)
        logits[..., : batch.shape[3] // 2] = 4.0
        return logits

    prob = UNetSegmenter(backend, input_size=(64, 32))(np.zeros((60, 120, 3), np.uint8))
    assert calls == [(1, 3, 32, 64)]
    assert prob.shape == (60, 120) and prob[:, :50].min() > 0.98 and prob[:, 70:].max() < 0.02

    with pytest.raises(ValueError, match="logits"):
        UNetSegmenter(lambda b: np.zeros((1, 2, 32, 64), np.float32), (64, 32))(
            np.zeros((60, 120, 3), np.uint8)
        )


# ------------------------------------------------------------------------------------------
# Checkpoints
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, tiny_unet: torch.nn.Module) -> dict:
    d = tmp_path_factory.mktemp("weights")
    ckpt = save_checkpoint(d / "road.pt", tiny_unet, "resnet18", (64, 64), extra={"val_iou": 0.5})
    bare = d / "bare.pth"
    torch.save({f"module.{k}": v for k, v in tiny_unet.state_dict().items()}, bare)
    return {"ckpt": ckpt, "bare": bare, "dir": d}


@pytest.mark.parametrize("which", ["ckpt", "bare"])
def test_load_unet_round_trip(saved: dict, tiny_unet: torch.nn.Module, which: str) -> None:
    model = load_unet(saved[which], "resnet18")
    assert not model.training
    x = torch.from_numpy(preprocess(np.full((64, 64, 3), 90, np.uint8), (64, 64)))
    with torch.inference_mode():
        assert torch.allclose(model(x), tiny_unet(x))


def test_checkpoint_metadata(saved: dict) -> None:
    obj = torch.load(saved["ckpt"], weights_only=True)
    assert obj["format"] == CHECKPOINT_FORMAT and obj["encoder"] == "resnet18"
    ck = read_checkpoint(saved["ckpt"])
    assert ck.encoder == "resnet18" and ck.input_size == (64, 64) and ck.extra == {"val_iou": 0.5}
    assert read_checkpoint(saved["bare"]).encoder is None


@pytest.mark.parametrize(
    "which, encoder, match",
    [
        ("missing", "resnet18", "not found: .*nope.pt"),
        ("ckpt", "resnet34", "trained with encoder 'resnet18'.*road.encoder: resnet18"),
        ("bare", "resnet34", "expects encoder 'resnet18'"),
        ("garbage", "resnet18", "cannot read"),
    ],
)
def test_load_unet_errors(saved: dict, which: str, encoder: str, match: str) -> None:
    path = {"missing": saved["dir"] / "nope.pt", "garbage": saved["dir"] / "garbage.pt"}.get(
        which, saved.get(which)
    )
    if which == "garbage":
        path.write_bytes(b"not a torch file")
    with pytest.raises(WeightsError, match=match):
        load_unet(path, encoder)


# ------------------------------------------------------------------------------------------
# Real aerial tile (Massachusetts Roads): runs end to end on 1500 x 1500 (shape / dtype only)
# ------------------------------------------------------------------------------------------


@pytest.mark.shared
def test_unet_on_massachusetts_tile(tiny_unet: torch.nn.Module) -> None:
    images = sorted(shared_path("massachusetts_roads_subset", "images").glob("*.png"))
    assert images, "no tiles in massachusetts_roads_subset/images"
    img = cv2.imread(str(images[0]), cv2.IMREAD_COLOR)
    truth = cv2.imread(str(images[0].parent.parent / "masks" / images[0].name), cv2.IMREAD_GRAYSCALE)
    assert img.shape == (1500, 1500, 3) and truth.shape == (1500, 1500)
    seg = UNetSegmenter(tiny_unet, input_size=(256, 256))
    layer = RoadMaskLayer(RoadConfig(every_n_frames=2, dilate_px=3, lag_frames=0), seg)
    masks = [
        layer.update(
            Frame(i, i / 30, img),
            EgoMotion(np.array([[1.0, 0.0, 2.0 * i], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])),
        )
        for i in range(3)
    ]
    assert all(m.shape == (1500, 1500) and m.dtype == bool for m in masks)
    assert layer.n_runs == 2  # frames 0 and 2; frame 1 is the warped mask
    det = sv.Detections(xyxy=np.array([[700, 700, 720, 712], [10, 10, 20, 20]], float))
    assert len(filter_by_mask(det, masks[-1], 0.3)) <= 2


def test_openvino_backend_matches_torch_and_is_used_by_the_segmenter():
    import segmentation_models_pytorch as smp

    from pipelines.road_network import OpenVINOBackend, TorchBackend, UNetSegmenter, preprocess

    torch.manual_seed(0)
    model = smp.Unet("resnet18", encoder_weights=None, classes=1).eval()
    image = np.random.default_rng(0).integers(0, 255, (180, 320, 3), dtype=np.uint8)
    batch = preprocess(image, (128, 96))
    ref = TorchBackend(model)(batch)
    exact = OpenVINOBackend(model, (128, 96), precision="f32")(batch)
    assert exact.shape == ref.shape == (1, 1, 96, 128)
    np.testing.assert_allclose(exact, ref, atol=1e-4)
    fast = OpenVINOBackend(model, (128, 96))(batch)  # bf16 where the CPU has it
    assert np.mean((fast > 0) == (ref > 0)) > 0.97, "thresholded masks agree"
    prob = UNetSegmenter(OpenVINOBackend(model, (128, 96)), input_size=(128, 96))(image)
    assert prob.shape == (180, 320) and 0.0 <= prob.min() <= prob.max() <= 1.0


class _HeldLogits:
    """A logits backend that holds its first run until released and records each run's batch."""

    def __init__(self) -> None:
        import threading

        self.batches: list[int] = []
        self.release = threading.Event()

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.batches.append(len(batch))
        if len(self.batches) == 1:
            self.release.wait(10)
        return batch[:, :1] * 2.0  # each input's first channel, doubled: whose it is shows


def test_batched_backend_runs_the_streams_waiting_inputs_together_each_gets_its_own():
    import threading
    import time

    from pipelines.road_network import BatchedBackend

    held = _HeldLogits()
    backend = BatchedBackend(held, max_batch=4)
    inputs = [np.full((1, 3, 8, 16), float(k), np.float32) for k in range(4)]
    inputs.append(np.full((1, 3, 16, 16), 9.0, np.float32))  # another size: never in their batch
    out: dict[int, np.ndarray] = {}

    def ask(k: int) -> None:
        out[k] = backend(inputs[k])

    threads = [threading.Thread(target=ask, args=(0,))]
    threads[0].start()
    deadline = time.monotonic() + 10
    while not held.batches:
        assert time.monotonic() < deadline
        time.sleep(0.002)
    for k in range(1, 5):
        threads.append(threading.Thread(target=ask, args=(k,)))
        threads[-1].start()
        while backend.batcher.pending < k:
            assert time.monotonic() < deadline
            time.sleep(0.002)
    held.release.set()
    for t in threads:
        t.join(10)
    assert held.batches == [1, 3, 1]  # the lone first run, the three of its shape, the other shape
    for k, x in enumerate(inputs):
        np.testing.assert_array_equal(out[k], x[:, :1] * 2.0)
    stats = backend.stats()
    assert stats["calls"] == 5 and stats["batch_sizes"] == {"1": 2, "3": 1}
    backend.close()


def test_a_batch_through_the_unet_gives_each_frame_what_it_gives_alone(tiny_unet: torch.nn.Module):
    from pipelines.road_network import BatchedBackend, TorchBackend

    torch_backend = TorchBackend(tiny_unet)
    rng = np.random.default_rng(3)
    inputs = [preprocess(rng.integers(0, 255, (90, 160, 3), dtype=np.uint8), (128, 64)) for _ in range(3)]
    alone = [torch_backend(x) for x in inputs]
    together = BatchedBackend(torch_backend, max_batch=4)._run(inputs[0].shape, inputs)
    for a, b in zip(alone, together, strict=True):
        assert b.shape == a.shape == (1, 1, 64, 128)
        np.testing.assert_allclose(b, a, atol=1e-4)


def test_streams_with_a_torch_road_network_share_its_batches():
    """road.backend torch (a CUDA device's): every stream's segmenter asks one batched network."""
    from pipelines.builder import build_road_segmenter
    from pipelines.road_network import BatchedBackend

    cfg = RoadConfig(backend="torch", device="cpu")
    (a, _, _), (b, _, _) = build_road_segmenter(cfg), build_road_segmenter(cfg)
    assert isinstance(a.backend, BatchedBackend) and a.backend is b.backend
    image = np.random.default_rng(0).integers(0, 255, (144, 256, 3), dtype=np.uint8)
    calls = a.backend.stats()["calls"]
    prob = a(image)
    assert prob.shape == (144, 256) and 0.0 <= prob.min() <= prob.max() <= 1.0
    assert a.backend.stats()["calls"] == calls + 1
