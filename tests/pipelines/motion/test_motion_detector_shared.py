"""Detector on real material: the shared int8 COCO OpenVINO model on a real UAVDT drone frame."""

from __future__ import annotations

import logging
from pathlib import Path

import cv2
import numpy as np
import pytest

from pipelines.config import DetectorConfig
from pipelines.motion.detector import CANONICAL_CLASSES, YoloDetector


def _uavdt_frame(clip_dir: Path, index: int = 10) -> np.ndarray:
    cap = cv2.VideoCapture(str(clip_dir / "demo_M1303.mp4"))
    try:
        cap.set(cv2.CAP_PROP_POS_FRAMES, index)
        ok, frame = cap.read()
    finally:
        cap.release()
    assert ok, "could not decode the UAVDT clip"
    return frame


@pytest.mark.shared
def test_openvino_coco_model_finds_cars_on_uavdt(coco_openvino: Path, uavdt_clip: Path, caplog) -> None:
    frame = _uavdt_frame(uavdt_clip)
    with caplog.at_level(logging.WARNING, logger="pipelines.motion.detector"):
        det = YoloDetector.from_config(DetectorConfig(weights=coco_openvino, imgsz=1024, classes="auto"))
    if det.input_size is not None and max(det.input_size) != 1024:
        assert "fixed input size" in caplog.text  # the shared export is a static 640x640 model
    out = det(frame)
    names = list(out.data["class_name"])
    assert names.count("car") >= 3, names
    assert set(names) <= set(CANONICAL_CLASSES)
    assert det.kept_class_ids == [2, 3, 5, 7]
    assert out.xyxy.dtype == np.float32
    h, w = frame.shape[:2]
    assert (out.xyxy[:, [0, 2]] >= -1).all() and (out.xyxy[:, [0, 2]] <= w + 1).all()
    assert (out.xyxy[:, [1, 3]] >= -1).all() and (out.xyxy[:, [1, 3]] <= h + 1).all()
