"""Ego-motion benchmark: the estimator alone on small simulated flights, error and cost per frame.

``python -m eval.bench_egomotion [--size 1920x1080] [--duration 2] [--set key=value ...]``

For every cell of altitude x gimbal pitch x camera motion (hovering; drifting and yawing; flying
forward at 10 m/s) it simulates a short flight (kept in ``--flights`` and re-used while its spec is
unchanged), decodes the H.264 video as the pipeline does, feeds each grey frame with the exact
vehicle boxes (the oracle detector's) to :class:`pipelines.motion.egomotion.EgoMotionEstimator`
and scores the estimates against the flight's exact camera (:mod:`eval.egomotion`). It prints, per
cell, the mean / p95 / max RMS error and the true camera motion (px/frame), and the milliseconds
per ``update`` call (median over the frames; the first frame of each flight left out). ``--set``
overrides ``EgoMotionConfig`` fields (``--set scale=1.0``). Timings are wall-clock on whatever
machine runs it: compare runs made back to back on the same machine.
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
from eval.groundtruth import load_camera_truth, load_mot_gt
from eval.simulate import FlightSpec, simulate_flight
from pipelines.config import EgoMotionConfig
from pipelines.motion.egomotion import EgoMotionEstimator
from pipelines.sources import open_source

log = logging.getLogger(__name__)

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


def run_cell(out: Path, cfg: EgoMotionConfig) -> dict:
    """Estimator over one flight: error summary and per-frame milliseconds."""
    gt = load_mot_gt(out / "gt" / "gt.txt")
    boxes = gt.by_frame(include_distractors=False)
    truth = load_camera_truth(out / "gt" / "camera.csv")
    est = EgoMotionEstimator(cfg)
    estimates, valid, ms = {}, {}, []
    source = open_source(out / "video.mp4")
    try:
        for frame in source:
            gray = cv2.cvtColor(frame.image, cv2.COLOR_BGR2GRAY)
            b = boxes.get(frame.index + 1)
            xyxy = b.xyxy if b is not None and len(b.xyxy) else None
            t0 = time.perf_counter()
            ego = est.update(gray, xyxy)
            ms.append((time.perf_counter() - t0) * 1e3)
            estimates[frame.index] = ego.homography
            valid[frame.index] = ego.valid
        w, h = source.size
    finally:
        source.close()
    summary = summarize_ego(ego_errors(estimates, truth, w, h, valid))
    summary["ms_median"] = float(np.median(ms[1:])) if len(ms) > 1 else None
    summary["ms"] = ms[1:]
    return summary


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
    p.add_argument("--json", type=Path, help="write the per-cell results here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    size = tuple(int(v) for v in args.size.lower().split("x"))
    overrides = dict(kv.split("=", 1) for kv in args.set)
    cfg = EgoMotionConfig(**{k: _value(v) for k, v in overrides.items()})
    cells = itertools.product(
        [float(a) for a in args.altitudes.split(",")],
        [float(a) for a in args.pitches.split(",")],
        args.motions.split(","),
    )
    results = []
    all_ms: list[float] = []
    header = f"{'cell':<24} {'pairs':>5} {'mean px':>8} {'p95 px':>8} {'max px':>8} {'true px':>8} {'flag':>4} {'ms':>6}"
    lines = [f"config: {cfg.model_dump()}  size {size[0]}x{size[1]}, {args.duration:g} s", header]
    _out(lines[0])
    _out(header)
    for alt, pitch, motion in cells:
        name = f"alt{alt:g}_p{abs(pitch):g}_{motion}"
        out = flight_dir(args.flights, cell_spec(alt, pitch, motion, size, args.duration), name)
        s = run_cell(out, cfg)
        all_ms += s.pop("ms")
        results.append({"cell": name, "altitude_m": alt, "pitch_deg": pitch, "motion": motion, **s})
        line = (
            f"{name:<24} {s['pairs']:>5} {s['mean_px']:>8.4f} {s['p95_px']:>8.4f} {s['max_px']:>8.4f} "
            f"{s['true_median_px']:>8.3f} {s['invalid']:>4} {s['ms_median']:>6.2f}"
        )
        _out(line)
    worst = max(r["p95_px"] for r in results)
    tail = f"all cells: worst p95 {worst:.4f} px/frame, worst mean {max(r['mean_px'] for r in results):.4f}, "
    tail += f"estimator median {np.median(all_ms):.2f} ms/frame (mean {np.mean(all_ms):.2f})"
    _out(tail)
    if args.json:
        args.json.write_text(
            json.dumps({"config": cfg.model_dump(), "size": size, "cells": results}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
