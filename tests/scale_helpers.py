"""Recordings of the scale check's inputs for the benches' tests (eval.scale_check_bench,
eval.derived_scale_bench): the projected shapes of varied cars, as the bench records them."""

from __future__ import annotations

import math

import numpy as np

from pipelines.geometry import GroundProjector
from pipelines.scale_check import CAR_PRIORS, predicted_boxes
from pipelines.types import Intrinsics

K = Intrinsics(1400.0, 1400.0, 960.0, 540.0, 1920, 1080)


def scale_record(
    seed: int, vehicles: int = 40, pitch: float = -60.0, frames_each: int = 10, gt: list | None = None
) -> dict:
    """A recording as eval.scale_check_bench.Recording keeps it: one vehicle per frame, cars of the
    prior's spread (and a truck now and then, which the check leaves out), their boxes 1.4 px a
    side larger than the vehicles' outlines (``gt``: those, as MOT rows)."""
    rng = np.random.default_rng(seed)
    proj = GroundProjector.create(K, 60.0, pitch)
    prior = CAR_PRIORS["eu"]
    rows, frame = [], 0
    for vid in range(vehicles):
        label = "truck" if vid % 10 == 9 else "car"
        dims = prior.mean + prior.sd * np.clip(rng.normal(size=4), -2, 2)
        angle = rng.uniform(0, math.pi)
        heading = np.array([math.cos(angle), math.sin(angle)])
        start = proj.to_ground(np.array([[rng.uniform(500, 1400), rng.uniform(350, 800)]]))[0]
        for step in range(frames_each):
            centre = start + heading * 0.4 * step
            outline = predicted_boxes(proj, centre[None], heading[None], dims)[0]
            box = outline + [-1.4, -1.4, 1.4, 1.4]
            if gt is not None:
                x0, y0, x1, y1 = outline
                gt.append(
                    f"{frame + 1},{vid},{x0},{y0},{x1 - x0},{y1 - y0},1,{1 if label == 'car' else 3},1.0"
                )
            rows.append(
                {
                    "id": vid,
                    "xyxy": [float(v) for v in box + rng.normal(0, 0.7, 4)],
                    "label": label,
                    "carried": step == 3,  # a frame carried by optical flow: not compared
                    "velocity": [float(v) for v in heading * 12.0],
                    "camera": [K.fx, K.fy, K.cx, K.cy, K.width, K.height, 60.0, pitch],
                    "frame": frame,
                }
            )
            frame += 1
    return {"cell": "test", "seed": seed, "duration_s": 30.0, "rows": rows}
