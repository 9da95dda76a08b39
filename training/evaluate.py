"""Detector evaluation on annotated frames: precision / recall at a confidence, and AP50.

One matcher for every model (ours and the COCO baseline): class-agnostic "vehicle" boxes, greedy
matching in descending confidence at IoU >= 0.5, each ground-truth box matched at most once.
Detections whose centre lies in an ignore region are dropped before matching. AP50 is the
all-point interpolated area under the precision/recall curve of the detections above
``ap_conf`` (0.001).

The COCO baseline uses the classes named in ``shared/data/*/SOURCE.md`` (car, bus, truck).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from pipelines.ultralytics_env import prepare_ultralytics
from training.samples import Sample, iter_loaded

log = logging.getLogger(__name__)

COCO_VEHICLES = (2, 5, 7)  # car, bus, truck: the baseline procedure of the SOURCE.md files


@dataclass
class DetectionMetrics:
    images: int
    gt: int
    tp: int
    fp: int
    fn: int
    precision: float
    recall: float
    ap50: float
    conf: float
    imgsz: int
    ms_per_image: float

    def as_dict(self) -> dict:
        return asdict(self)


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix of (N,4) and (M,4) xyxy boxes."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


def match(
    pred_xyxy: np.ndarray, pred_conf: np.ndarray, gt_xyxy: np.ndarray, iou_thr: float = 0.5
) -> np.ndarray:
    """Greedy matching by descending confidence; returns a TP flag per prediction (input order)."""
    pred_xyxy = np.asarray(pred_xyxy).reshape(-1, 4)
    tp = np.zeros(len(pred_xyxy), bool)
    if len(pred_xyxy) == 0 or len(gt_xyxy) == 0:
        return tp
    iou = box_iou(pred_xyxy, gt_xyxy)
    taken = np.zeros(len(gt_xyxy), bool)
    for i in np.argsort(-np.asarray(pred_conf), kind="stable"):
        cand = np.where(~taken & (iou[i] >= iou_thr))[0]
        if len(cand):
            j = cand[np.argmax(iou[i, cand])]
            taken[j] = True
            tp[i] = True
    return tp


def average_precision(conf: np.ndarray, tp: np.ndarray, n_gt: int) -> float:
    """All-point interpolated AP from pooled detections (confidences, TP flags) over ``n_gt`` boxes."""
    if n_gt == 0 or len(conf) == 0:
        return 0.0
    order = np.argsort(-conf, kind="stable")
    tps = np.cumsum(tp[order])
    fps = np.cumsum(~tp[order])
    recall = tps / n_gt
    precision = tps / np.maximum(tps + fps, 1e-9)
    mrec = np.concatenate([[0.0], recall, [recall[-1]]])
    mpre = np.concatenate([[1.0], precision, [0.0]])
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    idx = np.where(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[idx + 1] - mrec[idx]) * mpre[idx + 1]))


def _in_regions(xyxy: np.ndarray, regions: np.ndarray) -> np.ndarray:
    if len(regions) == 0 or len(xyxy) == 0:
        return np.zeros(len(xyxy), bool)
    cx = (xyxy[:, 0] + xyxy[:, 2]) / 2
    cy = (xyxy[:, 1] + xyxy[:, 3]) / 2
    r = regions
    return (
        (cx[:, None] >= r[None, :, 0])
        & (cx[:, None] <= r[None, :, 2])
        & (cy[:, None] >= r[None, :, 1])
        & (cy[:, None] <= r[None, :, 3])
    ).any(1)


def load_model(path: str | Path):
    prepare_ultralytics()
    from ultralytics import YOLO

    return YOLO(str(path), task="detect")


def vehicle_classes(model) -> list[int] | None:
    """Class ids to keep: COCO car/bus/truck for an 80-class model, every class otherwise."""
    names = getattr(model, "names", None) or {}
    if len(names) == 80 and names.get(2) == "car":
        return list(COCO_VEHICLES)
    return None


def evaluate_detector(
    model_or_path,
    samples: Sequence[Sample],
    imgsz: int = 1280,
    conf: float = 0.25,
    iou_thr: float = 0.5,
    classes: Sequence[int] | None = None,
    ap_conf: float = 0.001,
    nms_iou: float = 0.5,
) -> DetectionMetrics:
    """Run the model on every sample and score it (see the module doc for the procedure)."""
    model = load_model(model_or_path) if isinstance(model_or_path, (str, Path)) else model_or_path
    if classes is None:
        classes = vehicle_classes(model)
    all_conf, all_tp = [], []
    tp_n = fp_n = n_gt = 0
    times = []
    for s, img in iter_loaded(samples):
        t0 = time.perf_counter()
        r = model.predict(
            img, imgsz=imgsz, conf=ap_conf, iou=nms_iou, classes=classes, verbose=False, max_det=300
        )[0]
        times.append((time.perf_counter() - t0) * 1000)
        xyxy = r.boxes.xyxy.cpu().numpy().reshape(-1, 4)
        cf = r.boxes.conf.cpu().numpy().reshape(-1)
        keep = ~_in_regions(xyxy, s.ignore)
        xyxy, cf = xyxy[keep], cf[keep]
        gt = s.boxes[:, 1:5]
        n_gt += len(gt)
        tp_all = match(xyxy, cf, gt, iou_thr)
        all_conf.append(cf)
        all_tp.append(tp_all)
        hi = cf >= conf
        tp_hi = match(xyxy[hi], cf[hi], gt, iou_thr)
        tp_n += int(tp_hi.sum())
        fp_n += int((~tp_hi).sum())
    conf_all = np.concatenate(all_conf) if all_conf else np.zeros(0)
    tp_flags = np.concatenate(all_tp) if all_tp else np.zeros(0, bool)
    m = DetectionMetrics(
        images=len(samples),
        gt=n_gt,
        tp=tp_n,
        fp=fp_n,
        fn=n_gt - tp_n,
        precision=tp_n / max(tp_n + fp_n, 1),
        recall=tp_n / max(n_gt, 1),
        ap50=average_precision(conf_all, tp_flags, n_gt),
        conf=conf,
        imgsz=imgsz,
        ms_per_image=statistics.median(times) if times else 0.0,
    )
    log.info("evaluated %s: %s", getattr(model, "ckpt_path", None) or model_or_path, m)
    return m


def benchmark(
    model_or_path, image: np.ndarray, imgsz: int = 640, runs: int = 20, warmup: int = 3
) -> dict[str, float]:
    """Median / p90 milliseconds of ``model.predict`` (pre + inference + NMS) on one image."""
    model = load_model(model_or_path) if isinstance(model_or_path, (str, Path)) else model_or_path
    for _ in range(warmup):
        model.predict(image, imgsz=imgsz, verbose=False)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        model.predict(image, imgsz=imgsz, verbose=False)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"median_ms": statistics.median(times), "p90_ms": times[int(0.9 * (len(times) - 1))], "runs": runs}
