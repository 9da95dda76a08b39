"""Issue 40's lane ruler bench (pipelines.lane_ruler): how well the painted lane lines give the lane
width, on simulated frames with exact telemetry and on real drone frames.

``sim``: frames of simulated flights (eval.simulate paints lane lines at the flight's
``lane_width_m``: dashed between lanes, solid at the edges, a double centre line) over a grid of
heights, pitches and lane widths, each measured through its exact camera and through one k times too
high: the ratio of the measured width to the true one (k x it), frame by frame.

``aerial-cars``: the real nadir DJI frames of ../shared/data/aerial_cars_dji_frames (Minsk
intersections; no telemetry). Their scale is unknown, so the lanes are measured in pixels (a nadir
pinhole at 5 cm a pixel: any scale would do) with the shipped road U-Net's mask, and compared with
the labelled cars' widths (the short side of the boxes of cars lying along an image axis) frame by
frame: how repeatable the lanes are on one road, and whether lane over car width is what lanes
and cars are (3.0-3.75 m over about 1.8 m: 1.6-2.1).

    python -m eval.lane_bench sim [--size 960x540]
    python -m eval.lane_bench aerial-cars ../shared/data/aerial_cars_dji_frames [--road weights/...pt]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pipelines.geometry import GroundProjector
from pipelines.lane_ruler import measure_frame
from pipelines.types import Intrinsics

SIM_GRID = [  # (altitude m, pitch deg, lane width m)
    (30.0, -90.0, 3.5),
    (30.0, -50.0, 3.0),
    (40.0, -60.0, 3.75),
    (50.0, -45.0, 3.25),
    (60.0, -90.0, 3.5),
    (60.0, -45.0, 3.0),
    (100.0, -60.0, 3.75),
    (100.0, -90.0, 3.25),
    (150.0, -45.0, 3.5),
    (150.0, -90.0, 3.5),
]
GSD_M = 0.05  # the aerial-cars frames measured as if 5 cm a pixel (their scale is unknown)


def sim_frame(altitude: float, pitch: float, lane: float, size: tuple[int, int], seed: int = 3) -> tuple:
    """A rendered simulated frame: grey image, exact road mask, the vehicles' true boxes, intrinsics."""
    import cv2

    from eval.simulate import FlightSpec, Scene

    spec = FlightSpec(
        width=size[0],
        height=size[1],
        duration_s=0.2,
        fps=10.0,
        mask_every=0,
        seed=seed,
        altitude_m=altitude,
        pitch_deg=pitch,
        lane_width_m=lane,
        n_vehicles=4,
    )
    scene = Scene(spec)
    img, rows = scene.render(0)
    xyxy = np.array([[x, y, x + w, y + h] for x, y, w, h in (r["xywh"] for r in rows)]).reshape(-1, 4)
    return cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), scene.road_mask(0) > 0, xyxy, scene.camera.intrinsics


def sim_table(
    size: tuple[int, int], ks: tuple[float, ...] = (1.0, 1.1), seeds: tuple[int, ...] = (3,)
) -> list[dict]:
    """Every cell of ``SIM_GRID``: the measured width over the true one through a camera ``k`` times
    too high (1.000: exact)."""
    out = []
    for altitude, pitch, lane in SIM_GRID:
        for seed in seeds:
            gray, mask, boxes, intr = sim_frame(altitude, pitch, lane, size, seed)
            for k in ks:
                proj = GroundProjector.create(intr, altitude * k, pitch)
                m = measure_frame(gray, mask, boxes, proj, 0.7 * lane * k, 1.4 * lane * k)
                out.append(
                    {
                        "altitude_m": altitude,
                        "pitch_deg": pitch,
                        "lane_m": lane,
                        "seed": seed,
                        "k": k,
                        "ratio": round(m.width_m / (lane * k), 4) if m.found else None,
                        "pairs": m.pairs,
                    }
                )
    return out


def aerial_cars(folder: Path, road_weights: Path, video: str | None = None) -> list[dict[str, Any]]:
    """Every aerial-cars frame (of ``video`` only when given): the lane width in pixels and the
    labelled cars' widths in pixels."""
    import cv2

    from pipelines.road_network import UNetSegmenter, load_road_model
    from training.datasets import read_aerial_cars
    from training.samples import CLASS_ID

    model, _ = load_road_model(road_weights)
    seg = UNetSegmenter(model, input_size=(960, 544))
    rows = []
    for sample in read_aerial_cars(folder):
        if video is not None and sample.group != video:
            continue
        img = sample.load()
        h, w = img.shape[:2]
        xyxy = sample.boxes[:, 1:].astype(float)
        cars = xyxy[sample.boxes[:, 0] == CLASS_ID["car"]]
        short = np.minimum(cars[:, 2] - cars[:, 0], cars[:, 3] - cars[:, 1])
        long = np.maximum(cars[:, 2] - cars[:, 0], cars[:, 3] - cars[:, 1])
        along_axis = long / np.maximum(short, 1e-9) >= 2.0  # a diagonal car's box is not its width
        car_px = float(np.median(short[along_axis])) if along_axis.sum() >= 3 else None
        intr = Intrinsics(1400.0, 1400.0, w / 2, h / 2, w, h)
        proj = GroundProjector.create(intr, 1400.0 * GSD_M, -90.0)
        gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
        m = measure_frame(gray, seg(img) > 0.5, xyxy, proj, 2.0, 4.5)  # 40-90 px: lanes of 2.5-5.5 m
        lane_px = m.width_m / GSD_M if m.found else None
        rows.append(
            {
                "frame": sample.name,
                "video": sample.group,
                "lane_px": None if lane_px is None else round(lane_px, 2),
                "pairs": m.pairs,
                "car_width_px": car_px,
                "cars": int(along_axis.sum()),
                "lane_over_car": None if lane_px is None or car_px is None else round(lane_px / car_px, 3),
            }
        )
    return rows


def format_aerial(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| video | frames | lanes found | lane px (median) | frame-to-frame sd | car width px | lane / car |",
        "|---|---|---|---|---|---|---|",
    ]
    for video in sorted({r["video"] for r in rows}):
        rs = [r for r in rows if r["video"] == video]
        lane = np.array([r["lane_px"] for r in rs if r["lane_px"] is not None])
        ratio = np.array([r["lane_over_car"] for r in rs if r["lane_over_car"] is not None])
        car = np.array([r["car_width_px"] for r in rs if r["car_width_px"] is not None])
        sd = f"{100 * np.std(lane) / np.median(lane):.1f} %" if len(lane) > 1 else "-"
        lines.append(
            f"| {video} | {len(rs)} | {len(lane)} | {np.median(lane):.1f} | {sd} | "
            f"{np.median(car) if len(car) else float('nan'):.1f} | "
            f"{np.median(ratio) if len(ratio) else float('nan'):.2f} |"
        )
    return "\n".join(lines)


def _sim(args: argparse.Namespace) -> int:
    w, h = (int(v) for v in args.size.split("x"))
    rows = sim_table((w, h))
    found = [r for r in rows if r["ratio"] is not None]
    sys.stdout.write(
        "| height m | pitch | lane m | k | measured / true | pairs |\n|---|---|---|---|---|---|\n"
    )
    for r in rows:
        sys.stdout.write(
            f"| {r['altitude_m']:.0f} | {r['pitch_deg']:.0f} | {r['lane_m']} | {r['k']} | {r['ratio']} | {r['pairs']} |\n"
        )
    err = np.abs(np.array([r["ratio"] for r in found]) - 1.0)
    sys.stdout.write(
        f"\n{len(found)} of {len(rows)} frames read; |error| median {100 * np.median(err):.2f} %, "
        f"max {100 * err.max():.2f} %\n"
    )
    return 0


def _aerial(args: argparse.Namespace) -> int:
    rows = aerial_cars(Path(args.folder), Path(args.road))
    sys.stdout.write(format_aerial(rows) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m eval.lane_bench", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("sim", help="simulated frames with exact telemetry")
    a.add_argument("--size", default="1920x1080")
    b = sub.add_parser("aerial-cars", help="real nadir DJI frames: lanes against the labelled cars")
    b.add_argument("folder")
    b.add_argument(
        "--road",
        default=str(Path(__file__).resolve().parents[1] / "weights" / "airpatrol_road_unet_mnv3s.pt"),
    )
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return {"sim": _sim, "aerial-cars": _aerial}[args.cmd](args)


if __name__ == "__main__":
    raise SystemExit(main())
