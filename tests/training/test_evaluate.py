"""Detector scoring: per-view AP / precision / recall from one pass, ``imgsz="auto"``, group sets."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from pipelines.config import ConfigError
from training.cli.dataset import expand_groups
from training.cli.detector_eval import iou_arg
from training.evaluate import FOUR_WHEEL, evaluate_by_view, evaluate_detector, input_size_for
from training.samples import CLASSES, Sample


class _Arr:
    def __init__(self, a) -> None:
        self.a = np.asarray(a, np.float32)

    def cpu(self):
        return self

    def numpy(self):
        return self.a


class _FakeModel:
    """Returns the boxes given per image name (a real model's output shape), records input sizes."""

    names = dict(enumerate(CLASSES))

    def __init__(self, outputs: dict[int, list[tuple[float, ...]]]) -> None:
        self.outputs = outputs  # image width (our key) -> [(x1, y1, x2, y2, conf[, class])]
        self.sizes: list[int] = []

    def predict(self, img, imgsz, classes=None, **_):
        self.sizes.append(imgsz)
        rows = [r if len(r) == 6 else (*r, 0) for r in self.outputs.get(img.shape[1], [])]
        rows = np.asarray(rows, np.float32).reshape(-1, 6)
        if classes is not None:  # as ultralytics: only these class ids
            rows = rows[np.isin(rows[:, 5].astype(int), classes)]
        return [SimpleNamespace(boxes=SimpleNamespace(xyxy=_Arr(rows[:, :4]), conf=_Arr(rows[:, 4])))]


def _sample(tmp_path: Path, width: int, group: str, boxes) -> Sample:
    """Boxes ``(x1, y1, x2, y2)`` (cars) or ``(class, x1, y1, x2, y2)``."""
    path = tmp_path / f"{group}_{width}.png"
    cv2.imwrite(str(path), np.zeros((100, width, 3), np.uint8))
    rows = [b if len(b) == 5 else (0, *b) for b in boxes]
    return Sample(path, np.array(rows, np.float32).reshape(-1, 5), group)


def test_scores_per_view_from_one_pass(tmp_path):
    gt = [(10, 10, 30, 30), (50, 10, 70, 30)]
    samples = [_sample(tmp_path, 200, "a", gt), _sample(tmp_path, 300, "b", gt)]
    model = _FakeModel(
        {
            200: [(10, 10, 30, 30, 0.9), (50, 10, 70, 30, 0.8)],  # both found
            300: [(10, 10, 30, 30, 0.9), (120, 10, 140, 30, 0.7)],  # one found, one false
        }
    )
    views = {"a": ("nadir", "day"), "b": ("oblique", "night")}
    out = evaluate_by_view(model, samples, lambda s: views[s.group], imgsz=640)
    assert model.sizes == [640, 640]  # one pass, not one per view
    assert set(out) == {"all", "nadir", "day", "oblique", "night"}
    assert (out["nadir"].tp, out["nadir"].fp, out["nadir"].ap50) == (2, 0, pytest.approx(1.0))
    assert (out["night"].tp, out["night"].fp, out["night"].fn) == (1, 1, 1)
    assert (out["all"].tp, out["all"].fp, out["all"].gt) == (3, 1, 4)
    assert out["all"].recall == pytest.approx(0.75)


MOTO = CLASSES.index("motorcycle")


@pytest.mark.parametrize(
    ("only", "tp", "fp", "gt"),
    [
        (None, 2, 1, 2),  # every vehicle: the motorcycle is a vehicle, the "car" on it a false positive
        (FOUR_WHEEL, 1, 0, 1),  # four-wheel: the motorcycle is ignored, so is anything found on it
    ],
)
def test_four_wheel_subset_ignores_motorcycles(tmp_path, only, tp, fp, gt):
    sample = _sample(tmp_path, 200, "a", [(10, 10, 30, 30), (MOTO, 100, 10, 110, 30)])
    model = _FakeModel(
        {200: [(10, 10, 30, 30, 0.9, 0), (100, 10, 110, 30, 0.8, MOTO), (99, 9, 111, 31, 0.5, 0)]}
    )
    m = evaluate_detector(model, [sample], imgsz=640, only=only)
    assert (m.tp, m.fp, m.gt) == (tp, fp, gt)


@pytest.mark.parametrize(
    ("drop_contained", "front_conf", "tp", "fp"),
    [
        (None, 0.4, 1, 1),  # the engine's default: the bus's front, boxed again, is a false positive
        (0.8, 0.4, 1, 0),  # dropped, as the engine drops it with detector.drop_contained
        (0.8, 0.9, 1, 1),  # surer than the bus box: kept
    ],
)
def test_parts_of_a_vehicle_scored_as_the_engine_drops_them(tmp_path, drop_contained, front_conf, tp, fp):
    bus = (20, 20, 140, 60)
    samples = [_sample(tmp_path, 200, "a", [(3, *bus)])]
    model = _FakeModel({200: [(*bus, 0.6, 3), (100, 22, 138, 58, front_conf, 3)]})
    m = evaluate_detector(model, samples, imgsz=640, drop_contained=drop_contained)
    assert (m.tp, m.fp) == (tp, fp)


@pytest.mark.parametrize(
    ("imgsz", "width", "expected"), [(640, 1920, 640), ("auto", 1920, 960), ("auto", 800, 800)]
)
def test_input_size_for_still_images_follows_the_engine_rule(imgsz, width, expected):
    assert input_size_for(imgsz, np.zeros((100, width, 3), np.uint8)) == expected


def test_expand_groups():
    samples = [SimpleNamespace(group=f"{i:07d}") for i in range(86)]
    held = expand_groups("@visdrone-det", {"visdrone-det": samples})
    assert held and len(held) < 30
    assert expand_groups("DJI-00760,@visdrone-det", {"visdrone-det": samples}) == ["DJI-00760", *held]
    assert expand_groups("", {}) is None
    with pytest.raises(ConfigError, match="needs a --dataset visdrone-det"):
        expand_groups("@visdrone-det", {"aerial-cars": []})
    with pytest.raises(ConfigError, match="unknown group set"):
        expand_groups("@nothing", {})


SHIPPED_INT8 = Path(__file__).resolve().parents[2] / "weights" / "airpatrol_vehicles_n_int8_openvino_model"


def test_openvino_modes_benchmark_runs_the_shipped_network_each_way() -> None:
    """bench-detector --openvino-modes: images/s and CPU per image of the shipped int8 network, one
    call at a time, with requests in flight and batched (small input, one round: it must run, the
    figures come from the benchmark itself)."""
    from training.evaluate import benchmark_openvino_modes

    modes = (("LATENCY", 1, 1), ("THROUGHPUT", 2, 1), ("LATENCY", 1, 2))
    rows = benchmark_openvino_modes(SHIPPED_INT8, imgsz=160, runs=1, modes=modes)
    assert [(r["hint"], r["requests"], r["batch"]) for r in rows] == list(modes)
    assert all(r["images_per_s"] > 0 and r["cpu_ms_per_image"] > 0 and r["cpu_streams"] >= 1 for r in rows)


def test_bench_detector_cli_openvino_modes(capsys, tmp_path) -> None:
    import json

    from airpatrol.cli import main

    weights = str(SHIPPED_INT8)
    assert (
        main(
            [
                "train",
                "bench-detector",
                "--weights",
                weights,
                "--openvino-modes",
                "--imgsz",
                "160",
                "--runs",
                "1",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert [(r["hint"], r["requests"], r["batch"]) for r in out[f"{weights}@160"]] == [
        ("LATENCY", 1, 1),
        ("THROUGHPUT", 2, 1),
        ("THROUGHPUT", 4, 1),
        ("LATENCY", 1, 4),
    ]
    # a folder that is no OpenVINO export, and no --image without --openvino-modes: clear errors
    assert main(["train", "bench-detector", "--weights", str(tmp_path), "--openvino-modes"]) != 0
    assert "not an OpenVINO export folder" in capsys.readouterr().err
    assert main(["train", "bench-detector", "--weights", weights]) != 0
    assert "needs --image" in capsys.readouterr().err


@pytest.mark.parametrize(("iou", "tp"), [(0.5, 0), (0.3, 1)])
def test_a_looser_match_shows_what_a_loose_label_costs(tmp_path, iou, tp):
    """A labelled box twice the size of the car in it (as AU-AIR's often are): the detector's tight
    box overlaps it by IoU 0.44 - a false positive and a miss at 0.5, a match at 0.3."""
    samples = [_sample(tmp_path, 200, "a", [(10, 10, 40, 40)])]
    model = _FakeModel({200: [(10, 10, 30, 30, 0.9)]})  # 400 / 900 of the label
    m = evaluate_by_view(model, samples, lambda s: (), imgsz=640, iou_thr=iou)["all"]
    assert (m.tp, m.fp, m.iou) == (tp, 1 - tp, iou)
    assert m.as_dict()["iou"] == iou


@pytest.mark.parametrize("text", ["0", "1.5", "-0.2", "half"])
def test_eval_detector_rejects_an_iou_out_of_range(text):
    with pytest.raises(argparse.ArgumentTypeError, match="IoU in"):
        iou_arg(text)
