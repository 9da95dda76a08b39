"""How the detector's boxes differ from the labelled ones: the scale check's box calibration.

The scale check (pipelines.scale_check) measures vehicles by their boxes: a detector that draws
boxes a few pixels looser than the vehicle (its shadow, a margin it learned) makes every car look
larger, and the telemetry's scale look too large. This bench runs the detector on labelled images
(VisDrone-DET's held-out clips, the aerial-cars nadir frames, AU-AIR, a simulated flight's frames),
matches its boxes to the labels (IoU >= 0.5, greedy by confidence) and prints, per source and class,
the median ratio of the detected width and height to the labelled one and the median difference in
pixels per side, with bootstrap 90 % intervals; ``--json`` writes them.

    python -m eval.box_bias --visdrone ../shared/data/visdrone_det --aerial-cars ../shared/data/aerial_cars_dji_frames
    python -m eval.box_bias --flight runs/sim/flight_0 --every 30
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

import cv2
import numpy as np

from pipelines.builder import build_detector_model
from pipelines.config import DetectorConfig
from pipelines.types import Frame
from training.datasets import read_aerial_cars, read_auair, read_visdrone_det, visdrone_det_heldout_among
from training.evaluate import box_iou, matched_pairs
from training.samples import CLASSES

log = logging.getLogger(__name__)


def _images(args: argparse.Namespace) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(source, BGR image, labels (N, 5): class id, x1, y1, x2, y2) of every image asked for."""
    if args.visdrone:
        samples = read_visdrone_det(args.visdrone)
        held = set(visdrone_det_heldout_among({s.group for s in samples}))
        for s in samples:
            if s.group in held:
                yield "visdrone-heldout", s.load(), s.boxes
    if args.aerial_cars:
        for s in read_aerial_cars(args.aerial_cars):
            yield "aerial-cars", s.load(), s.boxes
    if args.auair:
        for s in read_auair(args.auair):
            yield "auair", s.load(), s.boxes
    for flight in args.flight or ():
        yield from _flight_frames(Path(flight), args.every)


def _flight_frames(folder: Path, every: int) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Every ``every``-th frame of a simulated flight with its ground-truth boxes (gt/gt.txt)."""
    rows = np.loadtxt(folder / "gt" / "gt.txt", delimiter=",", ndmin=2)
    cap = cv2.VideoCapture(str(folder / "video.mp4"))
    k = 0
    try:
        while True:
            ok, img = cap.read()
            if not ok:
                break
            k += 1
            if (k - 1) % every:
                continue
            r = rows[rows[:, 0] == k]
            sim_to_canonical = {1: 0, 2: 1, 3: 2, 4: 3, 5: 4}  # eval.simulate.SIM_CLASS_IDS order
            boxes = np.column_stack(
                [
                    [sim_to_canonical.get(int(c), -1) for c in r[:, 7]],
                    r[:, 2],
                    r[:, 3],
                    r[:, 2] + r[:, 4],
                    r[:, 3] + r[:, 5],
                ]
            )
            yield f"sim:{folder.name}", img, boxes.reshape(-1, 5)
    finally:
        cap.release()


def collect(
    images: Iterable[tuple[str, np.ndarray, np.ndarray]], detector, iou_thr: float = 0.5
) -> dict[tuple[str, str], list[tuple[float, float, float, float, float]]]:
    """(source, class) -> rows (labelled w, h, detected w, h in px, and IoU) of matched boxes."""
    out: dict[tuple[str, str], list] = defaultdict(list)
    for n, (source, img, labels) in enumerate(images):
        dets = detector.detect(Frame(n, n / 30.0, img))
        names = dets.data.get("class_name")
        conf = dets.confidence if dets.confidence is not None else np.ones(len(dets))
        for i, j in matched_pairs(dets.xyxy, conf, labels[:, 1:5], iou_thr):
            cls = int(labels[j, 0])
            if cls < 0 or (names is not None and str(names[i]) != CLASSES[cls]):
                continue
            g, d = labels[j, 1:5], dets.xyxy[i]
            iou = float(box_iou(d[None], g[None])[0, 0])
            out[(source, CLASSES[cls])].append((g[2] - g[0], g[3] - g[1], d[2] - d[0], d[3] - d[1], iou))
    return out


def _ci(values: np.ndarray, rng: np.random.Generator, n: int = 400) -> tuple[float, float]:
    boots = [float(np.median(rng.choice(values, len(values)))) for _ in range(n)]
    return float(np.percentile(boots, 5)), float(np.percentile(boots, 95))


def summarise(rows: dict[tuple[str, str], list], min_n: int = 10) -> list[dict[str, object]]:
    """Per (source, class): matched boxes, median width and height ratios (detected over labelled)
    with 90 % intervals, median difference per side (px), median labelled size."""
    rng = np.random.default_rng(0)
    table = []
    for (source, cls), r in sorted(rows.items()):
        a = np.asarray(r, dtype=float)
        if len(a) < min_n:
            continue
        w_ratio, h_ratio = a[:, 2] / a[:, 0], a[:, 3] / a[:, 1]
        table.append(
            {
                "source": source,
                "class": cls,
                "n": len(a),
                "width_ratio": round(float(np.median(w_ratio)), 4),
                "width_ratio_90": [round(v, 4) for v in _ci(w_ratio, rng)],
                "height_ratio": round(float(np.median(h_ratio)), 4),
                "height_ratio_90": [round(v, 4) for v in _ci(h_ratio, rng)],
                "width_side_px": round(float(np.median(a[:, 2] - a[:, 0])) / 2, 2),
                "height_side_px": round(float(np.median(a[:, 3] - a[:, 1])) / 2, 2),
                "label_w_px": round(float(np.median(a[:, 0])), 1),
                "label_h_px": round(float(np.median(a[:, 1])), 1),
                "iou": round(float(np.median(a[:, 4])), 3),
            }
        )
    return table


def format_table(table: list[dict[str, object]]) -> str:
    head = "| source | class | n | width ratio (90 %) | height ratio (90 %) | px/side w, h | label w x h px | IoU |"
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for t in table:
        lo_w, hi_w = t["width_ratio_90"]
        lo_h, hi_h = t["height_ratio_90"]
        lines.append(
            f"| {t['source']} | {t['class']} | {t['n']} | {t['width_ratio']:.3f} ({lo_w:.3f}-{hi_w:.3f}) "
            f"| {t['height_ratio']:.3f} ({lo_h:.3f}-{hi_h:.3f}) | {t['width_side_px']:+.1f}, "
            f"{t['height_side_px']:+.1f} | {t['label_w_px']:.0f} x {t['label_h_px']:.0f} | {t['iou']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m eval.box_bias", description=__doc__.split("\n\n")[0])
    p.add_argument("--visdrone", help="VisDrone-DET folder (its held-out clips are used)")
    p.add_argument("--aerial-cars", help="aerial-cars frames folder (YOLO labels)")
    p.add_argument("--auair", help="AU-AIR folder (annotations.json + images)")
    p.add_argument("--flight", action="append", help="a simulated flight folder (repeatable)")
    p.add_argument("--every", type=int, default=30, help="a flight's frames: every N-th")
    p.add_argument("--detector", help="weights (default: the shipped detector)")
    p.add_argument("--imgsz", type=int, default=960)
    p.add_argument("--json", help="write the table here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    detector = build_detector_model(DetectorConfig(weights=args.detector, imgsz=args.imgsz))
    table = summarise(collect(_images(args), detector))
    print(format_table(table))  # noqa: T201 - a bench prints its table
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
