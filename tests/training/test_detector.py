"""A tiny detector training + export run, evaluation matcher, and the `airpatrol train` CLI."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
from shared_material import shared_path

from training.datasets import read_yolo_folder
from training.evaluate import average_precision, match
from training.samples import CLASSES, split_by_group
from training.yolo_dataset import build_yolo_dataset


def _tiny_dataset(tmp_path):
    rng = np.random.default_rng(0)
    src = tmp_path / "src"
    src.mkdir()
    for g in ("vidA", "vidB"):
        for k in range(2):
            img = np.full((128, 128, 3), 70, np.uint8)
            lines = []
            for _ in range(3):
                x, y = rng.integers(10, 100, 2)
                cv2.rectangle(img, (int(x), int(y)), (int(x) + 16, int(y) + 9), (220, 220, 220), -1)
                lines.append(f"0 {(x + 8) / 128:.4f} {(y + 4.5) / 128:.4f} {16 / 128:.4f} {9 / 128:.4f}")
            cv2.imwrite(str(src / f"{g}-{k:04d}.jpg"), img)
            (src / f"{g}-{k:04d}.txt").write_text("\n".join(lines) + "\n")
    split = split_by_group(read_yolo_folder(src), val_groups=["vidB"])
    return build_yolo_dataset(split, tmp_path / "data", tile=None)


def test_one_epoch_train_and_export(tmp_path):
    import yaml

    from training.detector import TrainSettings, train_detector
    from training.detector_checkpoints import strip_checkpoint
    from training.detector_export import export_detector, install_detector
    from training.evaluate import evaluate_detector

    data_yaml = _tiny_dataset(tmp_path)
    settings = TrainSettings(epochs=1, imgsz=64, batch=4, workers=0, cache=False, mosaic=0.0, val=False)
    best = train_detector(data_yaml, "scratch", tmp_path / "runs", "tiny", settings)
    assert best.exists()
    slim = strip_checkpoint(best, tmp_path / "tiny_fp16.pt")
    assert slim.stat().st_size < 7_000_000  # fp16, no optimizer state
    out = export_detector(slim, ("onnx", "onnx-int8", "openvino"), imgsz=64)
    assert out["onnx"].exists() and (out["openvino"] / "metadata.yaml").exists()
    assert out["onnx-int8"].stat().st_size < out["onnx"].stat().st_size
    installed = install_detector(out, tmp_path / "weights", description="tiny")
    assert sorted(p.name for p in installed.values()) == [
        "airpatrol_vehicles_n.onnx",
        "airpatrol_vehicles_n_openvino_model",
    ]
    samples = read_yolo_folder(tmp_path / "src")
    for path in (slim, *installed.values()):
        m = evaluate_detector(path, samples[:1], imgsz=64)
        assert m.images == 1 and m.gt == 3

    # NNCF post-training int8, calibrated on the train split: weights and activations quantised
    q = export_detector(slim, ("openvino-int8",), imgsz=64, calib_data=data_yaml, calib_images=2)
    xml = next(q["openvino-int8"].glob("*.xml")).read_text()
    assert "FakeQuantize" in xml or "FakeConvert" in xml or 'element_type="i8"' in xml
    m = evaluate_detector(q["openvino-int8"], samples[:1], imgsz=64)
    assert m.images == 1 and m.gt == 3
    meta = yaml.safe_load((q["openvino-int8"] / "metadata.yaml").read_text())["args"]
    assert (meta["data"], meta["calibration_images"]) == (str(data_yaml), 2)  # not the temporary list
    installed = install_detector({**q, "pt": slim}, tmp_path / "weights")
    assert {p.name for p in installed.values()} == {
        "airpatrol_vehicles_n_int8_openvino_model",  # the engine's first choice
        "airpatrol_vehicles_n.pt",
    }
    ir = installed["openvino-int8"]
    assert sorted(p.name for p in ir.iterdir()) == [
        "airpatrol_vehicles_n.bin", "airpatrol_vehicles_n.xml", "metadata.yaml",
    ]  # fmt: skip
    from pipelines.motion.detector import find_default_weights

    assert find_default_weights(tmp_path / "weights") == installed["openvino-int8"]


@pytest.mark.parametrize(
    "precision, expected",
    [("fp32", "torch.float32"), ("bf16", "torch.bfloat16")],
)
def test_training_step_precision(tmp_path, monkeypatch, precision, expected):
    """The training forward pass really runs in the asked precision (bf16 on the CPU too, which
    ultralytics itself refuses), the checkpoint's weights stay float, and the hook is undone."""
    import torch
    import ultralytics.engine.trainer as trainer_module
    from ultralytics.utils.callbacks import base

    from training.detector import TrainSettings, train_detector

    seen: list[str] = []

    def record_dtype(trainer):
        conv = trainer.model.model[0].conv
        conv.register_forward_hook(lambda _m, _i, out: seen.append(str(out.dtype)) if conv.training else None)

    monkeypatch.setitem(base.default_callbacks, "on_train_start", [record_dtype])
    original = trainer_module.autocast
    data_yaml = _tiny_dataset(tmp_path)
    settings = TrainSettings(
        epochs=1, imgsz=64, batch=4, workers=0, cache=False, mosaic=0.0, val=False, precision=precision
    )
    last = train_detector(data_yaml, "scratch", tmp_path / "runs", "tiny", settings)
    assert seen and set(seen) == {expected}
    assert trainer_module.autocast is original
    ckpt = torch.load(last, map_location="cpu", weights_only=False)
    assert all(p.dtype in (torch.float16, torch.float32) for p in (ckpt["ema"] or ckpt["model"]).parameters())


@pytest.mark.parametrize(
    "precision, native, expected",
    [
        ("fp32", True, "fp32"),
        ("bf16", False, "bf16"),
        ("auto", True, "bf16"),
        ("auto", False, "fp32"),
    ],
)
def test_resolve_precision(monkeypatch, precision, native, expected):
    import training.detector as detector

    monkeypatch.setattr(detector, "native_bf16", lambda device: native)
    assert detector.resolve_precision(precision, "cpu") == expected


def test_resolve_precision_refuses_unknown():
    from pipelines.config import ConfigError
    from training.detector import resolve_precision

    with pytest.raises(ConfigError, match="precision must be one of"):
        resolve_precision("fp8", "cpu")


def test_openvino_int8_needs_calibration_data(tmp_path):
    from pipelines.config import ConfigError
    from training.detector_export import export_detector

    with pytest.raises(ConfigError, match="calibration images"):
        export_detector(tmp_path / "none.pt", ("openvino-int8",))


@pytest.mark.shared
def test_coco_int8_init_checkpoint(tmp_path):
    shared_path("yolov8n_coco_int8", "yolov8n_int8.onnx")
    from ultralytics import YOLO

    from training.detector_checkpoints import build_init_checkpoint

    pt = build_init_checkpoint("coco-int8", tmp_path / "init.pt")
    model = YOLO(str(pt))
    assert model.names == dict(enumerate(CLASSES))
    r = model.predict(np.zeros((64, 64, 3), np.uint8), imgsz=64, verbose=False)[0]
    assert r.boxes is not None


def test_matcher_and_ap():
    gt = np.array([[0, 0, 10, 10], [20, 20, 30, 30]], float)
    pred = np.array([[0, 0, 10, 10], [0, 0, 10, 11], [50, 50, 60, 60], [20, 20, 30, 31]], float)
    conf = np.array([0.9, 0.8, 0.7, 0.6])
    tp = match(pred, conf, gt)
    assert tp.tolist() == [True, False, False, True]  # duplicates are false positives
    assert average_precision(conf, tp, 2) == pytest.approx(0.5 * 1.0 + 0.5 * 0.5)
    assert average_precision(np.array([0.9, 0.8]), np.array([True, True]), 2) == pytest.approx(1.0)


def test_cli_registers_train_commands():
    from airpatrol.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(
        ["train", "detector", "--dataset", "aerial-cars=/x", "--val-groups", "DJI-00760"]
    )
    assert args.func.__name__ == "cmd_detector" and args.init == "coco-int8"
    args = parser.parse_args(["train", "road", "--pairs", "a:b"])
    assert args.func.__name__ == "cmd_road" and args.encoder == "tu-mobilenetv3_small_100"


def test_cli_refuses_noncommercial_training(tmp_path):
    from airpatrol.cli import main

    (tmp_path / "images").mkdir()
    (tmp_path / "annotations.json").write_text('{"annotations": []}')
    rc = main(["train", "dataset", "--dataset", f"auair={tmp_path}", "--out", str(tmp_path / "o")])
    assert rc == 2


def _checkpoint(path, seed: int, scale: str = "n"):
    import torch
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(seed)
    model = DetectionModel(f"yolov8{scale}.yaml", nc=len(CLASSES), verbose=False)
    for m in model.modules():  # distinct BatchNorm statistics, so they are averaged too
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.num_batches_tracked.fill_(seed)
    model.names = dict(enumerate(CLASSES))
    torch.save({"model": model.half(), "epoch": -1, "train_args": {"seed": seed}}, path)
    return model


@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
def test_average_checkpoints(tmp_path, weight):
    import torch

    from training.detector_checkpoints import average_checkpoints

    a = _checkpoint(tmp_path / "a.pt", 1).state_dict()
    b = _checkpoint(tmp_path / "b.pt", 2).state_dict()
    out = average_checkpoints(tmp_path / "a.pt", tmp_path / "b.pt", weight, tmp_path / "mix.pt")
    ckpt = torch.load(out, weights_only=False)
    mixed = ckpt["model"].state_dict()
    assert ckpt["train_args"] == {"seed": 2} and ckpt["model"].names == dict(enumerate(CLASSES))
    for key in ("model.0.conv.weight", "model.22.cv3.2.2.bias", "model.0.bn.running_mean"):
        want = (1 - weight) * a[key].float() + weight * b[key].float()
        assert mixed[key].dtype == torch.float16
        assert torch.allclose(mixed[key].float(), want.half().float(), atol=1e-3), key
    assert int(mixed["model.0.bn.num_batches_tracked"]) == 2  # integers: the tuned model's


def test_average_refuses_other_networks_and_weights(tmp_path):
    from pipelines.config import ConfigError
    from training.detector_checkpoints import average_checkpoints

    _checkpoint(tmp_path / "n.pt", 1)
    _checkpoint(tmp_path / "s.pt", 2, scale="s")
    with pytest.raises(ConfigError, match="not the same network"):
        average_checkpoints(tmp_path / "n.pt", tmp_path / "s.pt", 0.5, tmp_path / "x.pt")
    with pytest.raises(ConfigError, match=r"within \[0, 1\]"):
        average_checkpoints(tmp_path / "n.pt", tmp_path / "n.pt", 1.5, tmp_path / "x.pt")


def test_cli_average_writes_a_loadable_detector(tmp_path, capsys):
    from ultralytics import YOLO

    from airpatrol.cli import main

    _checkpoint(tmp_path / "a.pt", 1)
    _checkpoint(tmp_path / "b.pt", 2)
    out = tmp_path / "mix.pt"
    args = ["train", "average", "--base", str(tmp_path / "a.pt"), "--tuned", str(tmp_path / "b.pt")]
    assert main([*args, "--weight", "0.7", "--out", str(out)]) == 0
    model = YOLO(str(out), task="detect")
    assert model.names == dict(enumerate(CLASSES))
    assert model.predict(np.zeros((64, 64, 3), np.uint8), imgsz=64, verbose=False)[0].boxes is not None
    assert (
        main([*args[:3], str(tmp_path / "missing.pt"), *args[4:], "--weight", "0.7", "--out", str(out)]) != 0
    )
    assert "no checkpoint at" in capsys.readouterr().err


def _yolo_tree(root, names):
    (root / "images" / "train").mkdir(parents=True)
    (root / "images" / "val").mkdir(parents=True)
    for name in names:
        cv2.imwrite(str(root / "images" / "train" / f"{name}.jpg"), np.zeros((8, 8, 3), np.uint8))
    (root / "data.yaml").write_text(f"path: {root}\ntrain: images/train\nval: images/val\nnames:\n  0: car\n")
    return root / "data.yaml"


def test_calibration_split_is_a_seeded_sample_of_the_whole_train_split(tmp_path):
    """ultralytics' fraction=N calibrates on the first N files by name (one clip's tiles); ours
    samples the whole split, the same sample every time."""
    import yaml

    from training.detector_export import calibration_split, split_images

    names = [f"clip{c}_{k:02d}" for c in "ABCDE" for k in range(20)]  # 100 tiles of 5 clips, sorted
    data = _yolo_tree(tmp_path / "ds", names)
    first, n = calibration_split(data, 30, tmp_path / "c1")
    again, _ = calibration_split(data, 30, tmp_path / "c2")
    listed = (tmp_path / "c1" / "calibration.txt").read_text().split()
    assert n == 30 == len(set(listed)) and listed == (tmp_path / "c2" / "calibration.txt").read_text().split()
    assert {Path(p).name[:5] for p in listed} == {f"clip{c}" for c in "ABCDE"}  # every clip, not the first
    cfg = yaml.safe_load(first.read_text())
    assert cfg["train"] == str(tmp_path / "c1" / "calibration.txt") and cfg["names"] == {0: "car"}
    assert split_images(first) == [Path(p) for p in listed]  # the written split reads back
    _, everything = calibration_split(data, 500, tmp_path / "c3")
    assert everything == 100


def test_calibration_split_refuses_what_it_cannot_read(tmp_path):
    from pipelines.config import ConfigError
    from training.detector_export import calibration_split

    data = _yolo_tree(tmp_path / "ds", ["a"])
    with pytest.raises(ConfigError, match="no 'test' split"):
        from training.detector_export import split_images

        split_images(data, "test")
    data.write_text(f"path: {tmp_path / 'ds'}\ntrain: nowhere\nnames: {{0: car}}\n")
    with pytest.raises(ConfigError, match="neither a folder nor a .txt list"):
        calibration_split(data, 10, tmp_path / "c")
    empty = _yolo_tree(tmp_path / "empty", [])
    with pytest.raises(ConfigError, match="no training images"):
        calibration_split(empty, 10, tmp_path / "c")


def _ov_conv_chain(names: list[str]):
    """An OpenVINO model of 3x3 convolutions (+ bias add + Swish) whose ops carry ultralytics' names."""
    import numpy as np
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([1, 3, 32, 32], np.float32, name="images")
    y, c_in = x, 3
    for module in names:
        w = ops.constant(np.full((8, c_in, 3, 3), 0.01, np.float32))
        conv = ops.convolution(y, w, [1, 1], [1, 1], [1, 1], [1, 1])
        conv.set_friendly_name(f"{module}.conv/aten::_convolution/Convolution")
        add = ops.add(conv, ops.constant(np.zeros((1, 8, 1, 1), np.float32)))
        add.set_friendly_name(f"{module}.conv/aten::_convolution/Add")
        act = ops.swish(add)
        act.set_friendly_name(f"{module}.act/aten::silu_/Swish")
        y, c_in = act, 8
    return ov.Model([y], [x], "chain")


def test_int8_export_asks_nncf_for_full_bias_correction_and_a_float_stem(monkeypatch):
    nncf = pytest.importorskip("nncf")
    from training.detector_export import _nncf_export_settings

    seen = []
    monkeypatch.setattr(nncf, "quantize", lambda *a, **k: seen.append(k) or "q")
    stub = nncf.quantize
    model = _ov_conv_chain(["__module.model.0", "__module.model.1", "__module.model.10"])
    head = nncf.IgnoredScope(names=["__module.model.1.act/aten::silu_/Swish"], types=["Sigmoid"])
    with _nncf_export_settings():
        assert nncf.quantize(model=model, preset="mixed", ignored_scope=head) == "q"
        nncf.quantize(model=None, fast_bias_correction=True)  # an explicit choice stands; no model: no scope
    assert nncf.quantize is stub  # restored
    first, second = seen
    assert first["fast_bias_correction"] is False and first["preset"] == "mixed"
    scope = first["ignored_scope"]
    assert sorted(scope.names) == [  # ultralytics' own ignored names kept, the stem's three added
        "__module.model.0.act/aten::silu_/Swish",
        "__module.model.0.conv/aten::_convolution/Add",
        "__module.model.0.conv/aten::_convolution/Convolution",
        "__module.model.1.act/aten::silu_/Swish",
    ]
    assert scope.types == ["Sigmoid"]
    assert second == {"model": None, "fast_bias_correction": True}


@pytest.mark.parametrize(
    ("modules", "stem"),
    [
        (["__module.model.0", "__module.model.1"], "__module.model.0"),
        # the first convolution's module, whatever its name
        (["__module.backbone.stem", "__module.model.0"], "__module.backbone.stem"),
    ],
)
def test_the_float_stem_is_the_first_convolutions_module_only(modules, stem):
    pytest.importorskip("openvino")
    from training.detector_export import _stem_op_names

    names = _stem_op_names(_ov_conv_chain(modules))
    assert len(names) == 3 and all(n.startswith(f"{stem}.") for n in names)
    assert _stem_op_names(None) == [] and _stem_op_names(object()) == []
