"""Ego-motion benchmark: the estimator alone on small simulated flights, error and cost per frame.

``python -m eval.bench_egomotion [--size 1920x1080] [--duration 2] [--set key=value ...]
[--baseline before --repeat 3]``

For every cell of altitude x gimbal pitch x camera motion (hovering; drifting and yawing; flying
forward at 10 m/s) it simulates a short flight (kept in ``--flights`` and re-used while its spec is
unchanged), decodes the H.264 video as the pipeline does, feeds each grey frame with the exact
vehicle boxes (the oracle detector's) to :class:`pipelines.motion.egomotion.EgoMotionEstimator`
and scores the estimates against the flight's exact camera (:mod:`eval.egomotion`). It prints, per
cell, the mean / p95 / max RMS error and the true camera motion (px/frame), and the milliseconds
per ``update`` call (median over the frames; the first frame of each flight left out). ``--set``
overrides ``EgoMotionConfig`` fields (``--set scale=1.0``). ``--baseline`` adds a second
configuration (``before``: the estimator before issue 10) run on the same decoded frames,
alternately with the first, ``--repeat`` times each: timings are wall-clock on whatever machine runs
it, so only such back-to-back runs compare.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import yaml

from eval.egomotion import ego_errors, summarize_ego
from eval.groundtruth import CameraTruth, load_camera_truth, load_mot_gt
from eval.simulate import FlightSpec, simulate_flight
from pipelines.config import EgoMotionConfig
from pipelines.motion.egomotion import EgoMotionEstimator
from pipelines.sources import open_source

log = logging.getLogger(__name__)

BEFORE = {"corners": "global", "smooth_window": 0, "max_features": 600}  # the estimator before issue 10
MOTIONS: dict[str, dict] = {
    "hover": {"drift_mps": (0.0, 0.0), "yaw_rate_dps": 0.0},
    "drift_yaw": {"drift_mps": (1.0, 0.5), "yaw_rate_dps": 3.0},
    "forward10": {"drift_mps": (0.0, 10.0), "yaw_rate_dps": 0.0},  # heading north (yaw 0)
}


def cell_spec(
    altitude: float, pitch: float, motion: str, size: tuple[int, int], duration: float
) -> FlightSpec:
    return FlightSpec(
        seed=5,
        duration_s=duration,
        fps=30.0,
        width=size[0],
        height=size[1],
        altitude_m=altitude,
        pitch_deg=pitch,
        yaw_deg=0.0,
        layout="straight",
        n_vehicles=10,
        mask_every=0,
        **MOTIONS[motion],
    )


def flight_dir(root: Path, spec: FlightSpec, name: str) -> Path:
    """The flight of ``spec`` under ``root / name``, simulated unless an identical one is there."""
    out = root / name
    spec_file = out / "flight.yaml"
    fresh = spec_file.is_file() and (out / "gt" / "camera.csv").is_file()
    if fresh and yaml.safe_load(spec_file.read_text()) == spec.to_dict():
        return out
    simulate_flight(spec, out)
    return out


def load_cell(out: Path) -> tuple[list[tuple[np.ndarray, np.ndarray | None]], CameraTruth, int, int]:
    """A flight's grey frames (decoded as the pipeline decodes them) with their exact vehicle boxes
    (the oracle detector's), its camera truth and frame size."""
    boxes = load_mot_gt(out / "gt" / "gt.txt").by_frame(include_distractors=False)
    frames = []
    source = open_source(out / "video.mp4")
    try:
        for frame in source:
            b = boxes.get(frame.index + 1)
            xyxy = b.xyxy if b is not None and len(b.xyxy) else None
            frames.append((cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY), xyxy))
        w, h = source.size
    finally:
        source.close()
    return frames, load_camera_truth(out / "gt" / "camera.csv"), w, h


def run_frames(
    frames: list[tuple[np.ndarray, np.ndarray | None]],
    truth: CameraTruth,
    w: int,
    h: int,
    cfg: EgoMotionConfig,
) -> tuple[dict, list[float]]:
    """The estimator over one flight: error summary and the ms of each update (first frame left out)."""
    est = EgoMotionEstimator(cfg)
    estimates, valid, ms = {}, {}, []
    for k, (gray, xyxy) in enumerate(frames):
        t0 = time.perf_counter()
        ego = est.update(gray, xyxy)
        ms.append((time.perf_counter() - t0) * 1e3)
        estimates[k] = ego.homography
        valid[k] = ego.valid
    return summarize_ego(ego_errors(estimates, truth, w, h, valid)), ms[1:]


def _out(line: str) -> None:
    """A benchmark prints its table (stdout), line by line as cells finish."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _value(text: str):
    return yaml.safe_load(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m eval.bench_egomotion", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--flights", type=Path, default=Path("/tmp/airpatrol-ego-bench"), help="flight cache folder"
    )
    p.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT")
    p.add_argument("--duration", type=float, default=2.0, help="seconds per flight (30 fps)")
    p.add_argument("--altitudes", default="30,60,100,150")
    p.add_argument("--pitches", default="-90,-45")
    p.add_argument("--motions", default=",".join(MOTIONS))
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="EgoMotionConfig field")
    p.add_argument(
        "--baseline",
        action="append",
        metavar="KEY=VALUE",
        help="compare with this configuration (EgoMotionConfig fields; 'before' = the estimator before "
        "issue 10: corners=global, smooth_window=0, max_features=600): both run on the same decoded frames, alternately",
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per configuration and cell (timings)")
    p.add_argument("--json", type=Path, help="write the per-cell results here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    size = tuple(int(v) for v in args.size.lower().split("x"))
    configs = {"config": _config(args.set)}
    if args.baseline:
        configs = {"baseline": _config(args.baseline), **configs}
    cells = itertools.product(
        [float(a) for a in args.altitudes.split(",")],
        [float(a) for a in args.pitches.split(",")],
        args.motions.split(","),
    )
    for label, cfg in configs.items():
        _out(f"{label}: {cfg.model_dump()}")
    _out(f"size {size[0]}x{size[1]}, {args.duration:g} s per cell, {args.repeat} run(s) per configuration")
    cols = "".join(f" | {'mean px':>8} {'p95 px':>8} {'max px':>8} {'flag':>4} {'ms':>6}" for _ in configs)
    _out(f"{'cell':<24} {'pairs':>5} {'true px':>8}{cols}")
    results = []
    all_ms: dict[str, list[float]] = {label: [] for label in configs}
    for alt, pitch, motion in cells:
        name = f"alt{alt:g}_p{abs(pitch):g}_{motion}"
        out = flight_dir(args.flights, cell_spec(alt, pitch, motion, size, args.duration), name)
        frames, truth, w, h = load_cell(out)
        summaries: dict[str, dict] = {}
        ms: dict[str, list[float]] = {label: [] for label in configs}
        for _ in range(max(1, args.repeat)):
            for label, cfg in configs.items():  # alternately: both see the same machine load
                summary, times = run_frames(frames, truth, w, h, cfg)
                summaries.setdefault(label, summary)
                ms[label] += times
        row = {"cell": name, "altitude_m": alt, "pitch_deg": pitch, "motion": motion}
        line = f"{name:<24} {summaries['config']['pairs']:>5} {summaries['config']['true_median_px']:>8.3f}"
        for label in configs:
            s = summaries[label] | {"ms_median": float(np.median(ms[label]))}
            all_ms[label] += ms[label]
            row[label] = s
            line += (
                f" | {s['mean_px']:>8.4f} {s['p95_px']:>8.4f} {s['max_px']:>8.4f} {s['invalid']:>4} "
                f"{s['ms_median']:>6.2f}"
            )
        results.append(row)
        _out(line)
    for label in configs:
        worst_mean = max(r[label]["mean_px"] for r in results)
        worst_p95 = max(r[label]["p95_px"] for r in results)
        _out(
            f"{label}: worst mean {worst_mean:.4f} px/frame, worst p95 {worst_p95:.4f}; estimator "
            f"{np.median(all_ms[label]):.2f} ms/frame median, {np.mean(all_ms[label]):.2f} mean"
        )
    if args.json:
        data = {"configs": {k: c.model_dump() for k, c in configs.items()}, "size": size, "cells": results}
        args.json.write_text(json.dumps(data, indent=2))
    return 0


def _config(pairs: list[str]) -> EgoMotionConfig:
    values: dict = {}
    for kv in pairs:
        if kv == "before":
            values |= BEFORE
        else:
            key, value = kv.split("=", 1)
            values[key] = _value(value)
    return EgoMotionConfig(**values)


if __name__ == "__main__":
    raise SystemExit(main())
