"""Detector scoring: per-view AP / precision / recall from one pass, ``imgsz="auto"``, group sets."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from pipelines.config import ConfigError
from training.cli import expand_groups
from training.evaluate import evaluate_by_view, input_size_for
from training.samples import Sample


class _Arr:
    def __init__(self, a) -> None:
        self.a = np.asarray(a, np.float32)

    def cpu(self):
        return self

    def numpy(self):
        return self.a


class _FakeModel:
    """Returns the boxes given per image name (a real model's output shape), records input sizes."""

    names = {0: "car"}

    def __init__(self, outputs: dict[int, list[tuple[float, float, float, float, float]]]) -> None:
        self.outputs = outputs  # image width (our key) -> [(x1, y1, x2, y2, conf)]
        self.sizes: list[int] = []

    def predict(self, img, imgsz, **_):
        self.sizes.append(imgsz)
        rows = np.asarray(self.outputs.get(img.shape[1], []), np.float32).reshape(-1, 5)
        return [SimpleNamespace(boxes=SimpleNamespace(xyxy=_Arr(rows[:, :4]), conf=_Arr(rows[:, 4])))]


def _sample(tmp_path: Path, width: int, group: str, boxes) -> Sample:
    path = tmp_path / f"{group}_{width}.png"
    cv2.imwrite(str(path), np.zeros((100, width, 3), np.uint8))
    return Sample(path, np.array([[0, *b] for b in boxes], np.float32).reshape(-1, 5), group)


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
