"""Detector evaluation on annotated frames: precision / recall at a confidence, and AP50.

One matcher for every model (ours and the COCO baseline): class-agnostic "vehicle" boxes, greedy
matching in descending confidence at IoU >= 0.5, each ground-truth box matched at most once.
Detections whose centre lies in an ignore region are dropped before matching. AP50 is the
all-point interpolated area under the precision/recall curve of the detections above
``ap_conf`` (0.001). NMS is class-agnostic, as in the engine (``detector.agnostic_nms``): one box
per object, so a vehicle a model scores as both car and van is not a false positive.

The COCO baseline uses the classes named in ``shared/data/*/SOURCE.md`` (car, bus, truck).

``only`` scores a subset of the canonical classes, e.g. :data:`FOUR_WHEEL` (car, van, truck, bus):
ground-truth boxes of the other classes become ignore regions (a motorcycle is then neither a miss
nor, when a model calls it a car, a false positive), and predictions of other classes are dropped.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from pipelines.config import DetectorConfig
from pipelines.ultralytics_env import prepare_ultralytics
from training.samples import CLASS_ID, Sample, iter_loaded

log = logging.getLogger(__name__)

COCO_VEHICLES = (2, 5, 7)  # car, bus, truck: the baseline procedure of the SOURCE.md files
FOUR_WHEEL = ("car", "van", "truck", "bus")
# parts of a vehicle boxed again: dropped as the engine drops them (detector.drop_contained)
ENGINE_DROP_CONTAINED = DetectorConfig().drop_contained
VEHICLE_SETS: dict[str, tuple[str, ...] | None] = {"all": None, "four-wheel": FOUR_WHEEL}


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
    imgsz: float  # the input size (the median one when ``imgsz="auto"`` chose several)
    ms_per_image: float
    iou: float = 0.5  # the IoU a detection needs to match a box (0.5: ``ap50`` is AP50)

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


def matched_pairs(
    pred_xyxy: np.ndarray, pred_conf: np.ndarray, gt_xyxy: np.ndarray, iou_thr: float = 0.5
) -> list[tuple[int, int]]:
    """(prediction, ground truth) index pairs: greedy by descending confidence, each ground-truth
    box once, to the prediction's best overlap of at least ``iou_thr``."""
    pred_xyxy = np.asarray(pred_xyxy).reshape(-1, 4)
    if len(pred_xyxy) == 0 or len(gt_xyxy) == 0:
        return []
    iou = box_iou(pred_xyxy, gt_xyxy)
    taken = np.zeros(len(gt_xyxy), bool)
    pairs = []
    for i in np.argsort(-np.asarray(pred_conf), kind="stable"):
        cand = np.where(~taken & (iou[i] >= iou_thr))[0]
        if len(cand):
            j = int(cand[np.argmax(iou[i, cand])])
            taken[j] = True
            pairs.append((int(i), j))
    return pairs


def match(
    pred_xyxy: np.ndarray, pred_conf: np.ndarray, gt_xyxy: np.ndarray, iou_thr: float = 0.5
) -> np.ndarray:
    """Greedy matching by descending confidence; returns a TP flag per prediction (input order)."""
    tp = np.zeros(len(np.asarray(pred_xyxy).reshape(-1, 4)), bool)
    for i, _ in matched_pairs(pred_xyxy, pred_conf, gt_xyxy, iou_thr):
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
    """The model at ``path``, run once on a blank image so that its backend exists and an int8
    OpenVINO export is run at the size asked for on every CPU (:func:`honour_input_size`)."""
    prepare_ultralytics()
    from ultralytics import YOLO

    from pipelines.motion.detector import honour_input_size  # the engine's pipelines.motion: not at import

    model = YOLO(str(path), task="detect")
    model.predict(np.zeros((64, 64, 3), dtype=np.uint8), verbose=False)
    honour_input_size(model)
    return model


def vehicle_classes(model) -> list[int] | None:
    """Class ids to keep: COCO car/bus/truck for an 80-class model, every class otherwise."""
    names = getattr(model, "names", None) or {}
    if len(names) == 80 and names.get(2) == "car":
        return list(COCO_VEHICLES)
    return None


@dataclass(frozen=True)
class ImageScore:
    """One image's detections, matched: what :func:`aggregate` sums over any subset of images."""

    sample: Sample
    conf: np.ndarray  # confidences of the detections above ``ap_conf`` (outside ignore regions)
    tp: np.ndarray  # their match flags (greedy over all of them, for AP)
    tp_at_conf: int  # matches among those above the operating confidence
    fp_at_conf: int
    gt: int
    imgsz: int
    ms: float


def input_size_for(imgsz: int | str, image: np.ndarray) -> int:
    """``imgsz`` as given, or for ``"auto"`` the engine's rule without a GSD (still images):
    :func:`pipelines.motion.input_size.size_for_gsd` with the default ``detector.auto_size``."""
    if imgsz != "auto":
        return int(imgsz)
    from pipelines.config import AutoSizeConfig
    from pipelines.motion.input_size import size_for_gsd

    return size_for_gsd(None, max(image.shape[:2]), AutoSizeConfig())


def score_images(
    model_or_path,
    samples: Sequence[Sample],
    imgsz: int | str = 1280,
    conf: float = 0.25,
    iou_thr: float = 0.5,
    classes: Sequence[int] | None = None,
    ap_conf: float = 0.001,
    nms_iou: float = 0.5,
    only: Sequence[str] | None = None,
    drop_contained: float | None = ENGINE_DROP_CONTAINED,
) -> list[ImageScore]:
    """Run the model on every sample and match its detections (see the module doc). As the engine
    does with ``detector.drop_contained`` set (default: not), a box with ``drop_contained`` of its
    area inside a box at least 1.5x larger that scores ``conf`` or more is dropped (None: kept)."""
    from pipelines.motion.detector import contained_boxes  # the engine's pipelines.motion: not at import

    model = load_model(model_or_path) if isinstance(model_or_path, (str, Path)) else model_or_path
    if classes is None:
        classes = vehicle_classes(model)
    if only is not None:
        names = getattr(model, "names", None) or {}
        classes = [i for i in (classes if classes is not None else names) if names.get(i) in only]
    out = []
    for s, img in iter_loaded(samples):
        s = restrict_to(s, only)
        size = input_size_for(imgsz, img)
        t0 = time.perf_counter()
        r = model.predict(
            img,
            imgsz=size,
            conf=ap_conf,
            iou=nms_iou,
            classes=classes,
            verbose=False,
            max_det=300,
            agnostic_nms=True,
        )[0]
        ms = (time.perf_counter() - t0) * 1000
        xyxy = r.boxes.xyxy.cpu().numpy().reshape(-1, 4)
        cf = r.boxes.conf.cpu().numpy().reshape(-1)
        keep = ~_in_regions(xyxy, s.ignore)
        if drop_contained is not None:
            keep &= ~contained_boxes(xyxy, drop_contained, containers=cf >= conf, confidence=cf)
        xyxy, cf = xyxy[keep], cf[keep]
        gt = s.boxes[:, 1:5]
        hi = cf >= conf
        tp_hi = match(xyxy[hi], cf[hi], gt, iou_thr)
        out.append(
            ImageScore(
                s, cf, match(xyxy, cf, gt, iou_thr), int(tp_hi.sum()), int((~tp_hi).sum()), len(gt), size, ms
            )
        )
    return out


def restrict_to(sample: Sample, only: Sequence[str] | None) -> Sample:
    """The sample with ground truth of the ``only`` classes; the other boxes become ignore regions."""
    if only is None:
        return sample
    keep = np.isin(sample.boxes[:, 0].astype(int), [CLASS_ID[c] for c in only])
    ignore = np.concatenate([sample.ignore.reshape(-1, 4), sample.boxes[~keep, 1:5]])
    return replace(sample, boxes=sample.boxes[keep], ignore=ignore)


def aggregate(scores: Sequence[ImageScore], conf: float = 0.25) -> DetectionMetrics:
    """Precision / recall at ``conf`` and AP50 over these images."""
    tp_n = sum(s.tp_at_conf for s in scores)
    fp_n = sum(s.fp_at_conf for s in scores)
    n_gt = sum(s.gt for s in scores)
    conf_all = np.concatenate([s.conf for s in scores]) if scores else np.zeros(0)
    tp_flags = np.concatenate([s.tp for s in scores]) if scores else np.zeros(0, bool)
    sizes = sorted({s.imgsz for s in scores})
    return DetectionMetrics(
        images=len(scores),
        gt=n_gt,
        tp=tp_n,
        fp=fp_n,
        fn=n_gt - tp_n,
        precision=tp_n / max(tp_n + fp_n, 1),
        recall=tp_n / max(n_gt, 1),
        ap50=average_precision(conf_all, tp_flags, n_gt),
        conf=conf,
        imgsz=sizes[0] if len(sizes) == 1 else (statistics.median(s.imgsz for s in scores) if sizes else 0),
        ms_per_image=statistics.median(s.ms for s in scores) if scores else 0.0,
    )


def evaluate_detector(
    model_or_path,
    samples: Sequence[Sample],
    imgsz: int | str = 1280,
    conf: float = 0.25,
    iou_thr: float = 0.5,
    classes: Sequence[int] | None = None,
    ap_conf: float = 0.001,
    nms_iou: float = 0.5,
    only: Sequence[str] | None = None,
    drop_contained: float | None = ENGINE_DROP_CONTAINED,
) -> DetectionMetrics:
    """Run the model on every sample and score it (see the module doc for the procedure)."""
    scores = score_images(
        model_or_path, samples, imgsz, conf, iou_thr, classes, ap_conf, nms_iou, only, drop_contained
    )
    m = replace(aggregate(scores, conf), iou=iou_thr)
    log.info("evaluated %s: %s", getattr(model_or_path, "ckpt_path", None) or model_or_path, m)
    return m


def evaluate_by_view(
    model_or_path,
    samples: Sequence[Sample],
    views: Callable[[Sample], Iterable[str]],
    imgsz: int | str = 1280,
    conf: float = 0.25,
    **kwargs,
) -> dict[str, DetectionMetrics]:
    """``{"all": ..., view: ...}``: one pass over the images, scored over all of them and over the
    images of each view tag ``views(sample)`` gives (e.g. ``nadir``, ``oblique``, ``night``)."""
    scores = score_images(model_or_path, samples, imgsz, conf, **kwargs)
    groups: dict[str, list[ImageScore]] = {"all": scores}
    for score in scores:
        for tag in views(score.sample):
            groups.setdefault(tag, []).append(score)
    iou = kwargs.get("iou_thr", 0.5)
    return {tag: replace(aggregate(group, conf), iou=iou) for tag, group in groups.items()}


# How a server could run one OpenVINO network for several streams: (hint, requests in flight, batch)
OPENVINO_MODES: tuple[tuple[str, int, int], ...] = (
    ("LATENCY", 1, 1),  # what the engine does: one image per call, calls serialised (SharedDetector)
    ("THROUGHPUT", 2, 1),  # asynchronous requests, one per CPU stream
    ("THROUGHPUT", 4, 1),
    ("LATENCY", 1, 4),  # a batch of four streams' frames per call
)


def benchmark_openvino_modes(
    model_dir: str | Path,
    imgsz: int = 640,
    runs: int = 20,
    modes: Sequence[tuple[str, int, int]] = OPENVINO_MODES,
) -> list[dict[str, float | int | str]]:
    """Raw network throughput of an OpenVINO export (its ``*.xml``) per way of running it for
    several streams: images per second and CPU milliseconds per image (this process's CPU time,
    all threads), over ``runs`` rounds of ``requests x batch`` images after a warm-up round.
    Pre- and post-processing are left out: they are the same per image whatever the mode."""
    import openvino as ov

    from pipelines.errors import WeightsError

    xml = next(Path(model_dir).glob("*.xml"), None) if Path(model_dir).is_dir() else None
    if xml is None:
        raise WeightsError(f"{model_dir} is not an OpenVINO export folder (no *.xml in it)")
    core = ov.Core()
    rows: list[dict[str, float | int | str]] = []
    for hint, requests, batch in modes:
        model = core.read_model(xml)
        model.reshape([batch, 3, imgsz, imgsz])
        compiled = core.compile_model(model, "CPU", {"PERFORMANCE_HINT": hint})
        x = np.random.default_rng(0).random((batch, 3, imgsz, imgsz), dtype=np.float32)
        infer = [compiled.create_infer_request() for _ in range(requests)]
        for r in infer:
            r.infer({0: x})
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(runs):
            for r in infer:
                r.start_async({0: x})
            for r in infer:
                r.wait()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        images = runs * requests * batch
        rows.append(
            {
                "hint": hint,
                "requests": requests,
                "batch": batch,
                "cpu_streams": int(compiled.get_property("NUM_STREAMS")),
                "images_per_s": images / wall,
                "cpu_ms_per_image": cpu / images * 1000,
            }
        )
        log.info("OpenVINO %s, %d requests, batch %d: %.1f images/s, %.1f ms CPU per image",
                 hint, requests, batch, rows[-1]["images_per_s"], rows[-1]["cpu_ms_per_image"])  # fmt: skip
    return rows


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
