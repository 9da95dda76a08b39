"""pipelines.devices: ``device: auto`` is a CUDA GPU where torch sees one, else the CPU, and the
models follow (the detector's weights for that device, the U-Net's backend)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from pipelines import devices
from pipelines.config import DEFAULT_WEIGHTS_DIR, ConfigError, DetectorConfig, RoadConfig
from pipelines.devices import is_cuda, resolve_device
from pipelines.motion.detector import YoloDetector, resolve_weights


@pytest.fixture
def gpus(monkeypatch):
    """Set how many CUDA devices torch reports (and their name)."""
    import torch

    def set_count(n: int) -> None:
        monkeypatch.setattr(devices, "cuda_device_count", lambda: n)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H200")

    return set_count


@pytest.mark.parametrize(
    ("device", "gpu_count", "expected"),
    [
        ("auto", 0, "cpu"),
        ("AUTO", 0, "cpu"),
        ("auto", 1, "cuda:0"),
        ("auto", 4, "cuda:0"),
        ("cpu", 2, "cpu"),  # said outright: as it is
        ("cuda:1", 0, "cuda:1"),  # refused where the model loads, with what to set
        ("intel:cpu", 1, "intel:cpu"),
    ],
)
def test_resolve_device(gpus, caplog, device: str, gpu_count: int, expected: str) -> None:
    gpus(gpu_count)
    with caplog.at_level(logging.INFO, logger="pipelines.devices"):
        assert resolve_device(device, "the detector") == expected
    if device.lower() == "auto":
        assert ("on CUDA: NVIDIA H200" if gpu_count else "on the CPU") in caplog.text


@pytest.mark.parametrize(
    ("device", "cuda"),
    [("cuda", True), ("cuda:0", True), ("0", True), ("0,1", True), ("cpu", False), ("intel:cpu", False)],
)
def test_is_cuda(device: str, cuda: bool) -> None:
    assert is_cuda(device) is cuda


@pytest.mark.parametrize(
    ("present", "cuda", "expected"),
    [
        (
            ["airpatrol_vehicles_n_int8_openvino_model/m.xml", "airpatrol_vehicles_n.pt"],
            False,
            "airpatrol_vehicles_n_int8_openvino_model",
        ),
        (
            ["airpatrol_vehicles_n_int8_openvino_model/m.xml", "airpatrol_vehicles_n.pt"],
            True,
            "airpatrol_vehicles_n.pt",
        ),
        (
            ["airpatrol_vehicles_n_int8_openvino_model/m.xml"],
            True,
            "airpatrol_vehicles_n_int8_openvino_model",
        ),
        (["detector.pt", "detector_openvino_model/m.xml"], True, "detector.pt"),
    ],
)
def test_the_default_weights_follow_the_device(
    tmp_path: Path, present: list[str], cuda: bool, expected: str
) -> None:
    for rel in present:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    assert resolve_weights(None, tmp_path, cuda=cuda) == tmp_path / expected


def test_auto_on_a_box_without_a_gpu_runs_the_shipped_models_on_the_cpu() -> None:
    """The default configuration on a CPU-only box (as CI's): the int8 OpenVINO detector and the U-Net
    through OpenVINO, as before ``auto`` existed."""
    if devices.cuda_device_count():
        pytest.skip("this box has a CUDA GPU: auto is not the CPU here")
    from pipelines.builder import build_detector_model, build_road_segmenter

    assert DetectorConfig().device == "auto" and RoadConfig().device == "auto"
    detector = build_detector_model(DetectorConfig())
    assert detector.device == "cpu" and detector.half is False
    assert detector.weights == DEFAULT_WEIGHTS_DIR / "airpatrol_vehicles_n_int8_openvino_model"
    built = build_road_segmenter(RoadConfig())
    assert built is not None
    segmenter, rcfg, _ = built
    assert rcfg.device == "cpu" and segmenter.device == "cpu"
    assert type(segmenter.backend).__name__ == "OpenVINOBackend"


def test_a_gpu_asked_for_on_a_box_without_one_is_refused_with_what_to_set() -> None:
    if devices.cuda_device_count():
        pytest.skip("this box has a CUDA GPU")
    with pytest.raises(
        ConfigError, match="no CUDA device is available; set detector.device to 'auto' or 'cpu'"
    ):
        YoloDetector(DEFAULT_WEIGHTS_DIR / "airpatrol_vehicles_n.pt", device="cuda:0")
