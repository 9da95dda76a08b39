"""Dequantising the shared int8 COCO YOLOv8n ONNX into a float ultralytics model."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from shared_material import shared_path

pytestmark = pytest.mark.shared


@pytest.fixture(scope="module")
def int8_onnx():
    return shared_path("yolov8n_coco_int8", "yolov8n_int8.onnx")


@pytest.fixture(scope="module")
def uavdt_frame():
    clip = shared_path("uavdt_M1303_overlay_clip", "demo_M1303.mp4")
    cap = cv2.VideoCapture(str(clip))
    cap.set(cv2.CAP_PROP_POS_FRAMES, 10)
    ok, frame = cap.read()
    cap.release()
    assert ok
    return frame


def test_every_conv_is_recovered(int8_onnx):
    from ultralytics.nn.tasks import DetectionModel

    from pipelines.ultralytics_env import prepare_ultralytics
    from training.dequant import load_into_yolo, read_quantized_onnx

    prepare_ultralytics()
    w = read_quantized_onnx(int8_onnx)
    assert len(w.weights) == 64 and len(w.names) == 80 and w.names[2] == "car"
    model = DetectionModel("yolov8n.yaml", nc=80, verbose=False)
    stats = load_into_yolo(model, w)
    assert stats == {
        "by_name": 63,
        "by_order": 0,
        "class_rows": 0,
        "sliced": 0,
        "skipped": 0,
    }  # 64th: fixed DFL
    # 5-class model: the class branch is narrower; its convs are sliced, the last one takes COCO rows
    small = DetectionModel("yolov8n.yaml", nc=5, verbose=False)
    stats5 = load_into_yolo(small, w, class_rows=[2, 2, 7, 5, 3])
    assert stats5["skipped"] == 0 and stats5["class_rows"] == 3
    np.testing.assert_allclose(
        small.model[-1].cv3[0][2].weight.detach().numpy()[0], w.weights["model.22.cv3.0.2"][2, :64], rtol=1e-6
    )


def test_float_model_reproduces_int8_detections(int8_onnx, uavdt_frame, tmp_path):
    """The dequantised float model finds the int8 model's vehicles on a UAVDT frame (IoU >= 0.5)."""
    from ultralytics import YOLO
    from ultralytics.nn.tasks import DetectionModel

    from training.dequant import load_into_yolo, read_quantized_onnx
    from training.detector_checkpoints import save_checkpoint
    from training.evaluate import box_iou

    w = read_quantized_onnx(int8_onnx)
    model = DetectionModel("yolov8n.yaml", nc=80, verbose=False)
    load_into_yolo(model, w)
    pt = save_checkpoint(model.eval(), tmp_path / "coco_float.pt", names=w.names)
    fl = YOLO(str(pt)).predict(uavdt_frame, imgsz=640, conf=0.25, classes=[2, 5, 7], verbose=False)[0]
    q = YOLO(str(int8_onnx), task="detect").predict(
        uavdt_frame, imgsz=640, conf=0.25, classes=[2, 5, 7], verbose=False
    )[0]
    fq, qq = fl.boxes.xyxy.numpy(), q.boxes.xyxy.numpy()
    assert len(qq) >= 5
    iou = box_iou(qq, fq)
    found = (iou.max(axis=1) >= 0.5).mean()
    assert found >= 0.8, f"float model found {found:.0%} of the int8 detections"
    # and the same class for the matched boxes
    j = iou.argmax(axis=1)
    same = (q.boxes.cls.numpy() == fl.boxes.cls.numpy()[j])[iou.max(axis=1) >= 0.5].mean()
    assert same >= 0.8
