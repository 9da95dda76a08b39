"""Issue 39's lens and shutter bench: what a wide lens's distortion and a rolling shutter do to the
speeds, and what knowing them gives back.

Each *cell* is a simulated flight (1080p, 8 s, 60 m, the drone hovering unless said) re-rendered
with an optical error (:class:`eval.simulate.FlightSpec` ``lens_distortion`` / ``readout_ms``):

* ``lens-nadir`` / ``lens-oblique`` (-90 / -45 deg): radial distortion k1 = -0.1 (a wide lens's
  barrel), the road across the image, so that every vehicle drives from one edge to the other;
  ``lens-drift``: the same at nadir with the drone drifting 1.6 m/s and yawing 2 deg/s (the
  camera's own motion then is measured on distorted images);
* ``shutter-nadir`` / ``shutter-oblique``: a 30 ms readout, the road along the image (vehicles
  up and down it); ``shutter-drift``: the same at nadir with the drone drifting and yawing.

Each flight is run twice through ``airpatrol eval``'s :func:`~eval.runner.run_sequence` with the
shipped detector (:func:`eval.error_budget.run_grid`: one detection pass per video): ``pinhole``, the
engine not told (today's engine), and ``known``, the flight's lens and readout in its configuration
(``camera.lens``, ``camera.readout_ms``: a known camera profile). Both know the road's level (the
pilot took off on it). The table prints the error budget's figures per cell and arm
(:mod:`eval.error_budget_table`) and the issue's targets: in a lens cell the bias of speeds measured
in the outer sixths of the frame's width against the middle third's (target: within 0.5 % of the
centre's), in a shutter cell the bias of vehicles moving down and up the image (target: within
0.3 %); each with its 90 % interval when the vehicles are drawn again.

    python -m eval.optics_bench run --out /work/bench/optics [--cells ...] [--seeds 2] [--jobs 2]
    python -m eval.optics_bench table /work/bench/optics [--markdown]
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eval.bands import format_table
from eval.error_budget import Job, load_runs, parse_names, run_grid, with_recorders
from eval.error_budget_table import budget_rows, format_rows
from eval.simulate import FlightSpec, TelemetryErrors, derive_flight, simulate_flight
from pipelines.errors import AirPatrolError

log = logging.getLogger(__name__)

K1 = -0.1
READOUT_MS = 30.0
LENS = (K1, 0.0, 0.0, 0.0, 0.0)
CELLS: dict[str, dict[str, Any]] = {
    "lens-nadir": {"pitch_deg": -90.0, "road_heading_deg": 90.0, "lens_distortion": LENS},
    "lens-oblique": {"pitch_deg": -45.0, "road_heading_deg": 90.0, "lens_distortion": LENS},
    "lens-drift": {
        "pitch_deg": -90.0,
        "road_heading_deg": 90.0,
        "lens_distortion": LENS,
        "drift_mps": (1.5, 0.5),
        "yaw_rate_dps": 2.0,
    },
    "shutter-nadir": {"pitch_deg": -90.0, "road_heading_deg": 0.0, "readout_ms": READOUT_MS},
    "shutter-oblique": {"pitch_deg": -45.0, "road_heading_deg": 0.0, "readout_ms": READOUT_MS},
    "shutter-drift": {
        "pitch_deg": -90.0,
        "road_heading_deg": 0.0,
        "readout_ms": READOUT_MS,
        "drift_mps": (1.5, 0.5),
        "yaw_rate_dps": 2.0,
    },
}
ARMS = ("pinhole", "known")
# the ticket grid's near-limit traffic (eval/examples/ticket_grid.sh), hovering at 60 m
BASE_SPEC: dict[str, Any] = {
    "duration_s": 8.0,
    "width": 1920,
    "height": 1080,
    "altitude_m": 60.0,
    "drift_mps": (0.0, 0.0),
    "yaw_deg": 0.0,
    "yaw_rate_dps": 0.0,
    "layout": "straight",
    "lanes_per_direction": 2,
    "n_vehicles": 20,
    "speed_limit_kmh": 50.0,
    "normal_speed_kmh": (45.0, 50.0),
    "speeding_speed_kmh": (50.0, 55.0),
    "fast_speed_kmh": (58.0, 75.0),
    "speeding_fraction": 0.3,
    "fast_fraction": 0.2,
    "accel_sigma_mps2": 0.0,
}
SPRITE_VIDEO = "DJI-00760"  # held out from the detector's training (the ticket grid's sprites)
MIN_TRUE_KMH = 5.0
EDGE_TARGET_PCT = 0.5
SHUTTER_TARGET_PCT = 0.3


def sprites_folder(out: Path, shared: Path | None) -> str | None:
    """A folder of links to the held-out aerial-cars frames (None: procedural vehicles only)."""
    frames = None if shared is None else shared / "aerial_cars_dji_frames" / "dji_video_frames"
    if frames is None or not frames.is_dir():
        log.warning("no aerial-cars frames (../shared/data): vehicles are procedural")
        return None
    folder = out / f"sprites-{SPRITE_VIDEO}"
    folder.mkdir(parents=True, exist_ok=True)
    for f in frames.glob(f"{SPRITE_VIDEO}-*"):
        link = folder / f.name
        if not link.exists():
            link.symlink_to(f.resolve())
    return str(folder)


def cell_spec(cell: str, seed: int, sprites: str | None, **changes: Any) -> FlightSpec:
    return FlightSpec(**(BASE_SPEC | CELLS[cell] | {"seed": seed, "sprites_dir": sprites} | changes))


def arm_config(arm: str, spec: FlightSpec) -> dict[str, dict[str, Any]]:
    """What the engine is told: the road's level always; the lens and readout in the ``known`` arm."""
    camera: dict[str, Any] = {"takeoff_above_road_m": 0.0}
    if arm == "known":
        if spec.lens_distortion is not None:
            k1, k2, p1, p2, k3 = spec.lens_distortion
            camera["lens"] = {"k1": k1, "k2": k2, "p1": p1, "p2": p2, "k3": k3, "source": "the flight's"}
        if spec.readout_ms:
            camera["readout_ms"] = spec.readout_ms
    return {"camera": camera}


def build(
    out: Path, cells: Sequence[str], seeds: int, *, shared: Path | None, seed0: int = 3900, **changes: Any
) -> list[Job]:
    """Simulate each cell's flights (kept when already there) and derive each arm's; the runs to do."""
    sprites = sprites_folder(out, shared)
    jobs: list[Job] = []
    for cell in cells:
        for s in range(seeds):
            name = f"{cell}_s{s:02d}"
            src = out / "sims" / name
            # the cell's place in CELLS, not in this run's list: a flight is the same in any run
            spec = cell_spec(cell, seed0 + 100 * list(CELLS).index(cell) + s, sprites, **changes)
            if not (src / "gt" / "gt.txt").is_file():
                log.info("simulating %s", name)
                simulate_flight(spec, src, progress=False)
            for arm in ARMS:
                dest = out / "flights" / cell / arm / name
                derive_flight(
                    src, dest, TelemetryErrors(), config=arm_config(arm, spec), label=f"{cell}/{arm}",
                    extra={"scenario": cell, "arm": arm, "flight": name, "source_flight": str(src)},
                )  # fmt: skip
                jobs.append(Job(name, cell, arm, str(dest), str(out / "runs" / cell / arm / f"{name}.json")))
    return with_recorders(jobs)


def gt_positions(flight_dir: Path) -> dict[tuple[int, int], tuple[float, float, float]]:
    """(frame, id) -> (box centre u, v, the centre's vertical motion per frame) from ``gt/gt.txt``."""
    boxes: dict[tuple[int, int], tuple[float, float]] = {}
    with (flight_dir / "gt" / "gt.txt").open() as fh:
        for row in csv.reader(fh):
            f, i, x, y, w, h = int(row[0]), int(row[1]), *map(float, row[2:6])
            boxes[(f, i)] = (x + w / 2, y + h / 2)
    out = {}
    for (f, i), (u, v) in boxes.items():
        a, b = boxes.get((f - 1, i), (u, v)), boxes.get((f + 1, i), (u, v))
        out[(f, i)] = (u, v, (b[1] - a[1]) / 2.0)
    return out


def _samples(run: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The run's per-frame relative errors (%) with each sample's image position and motion."""
    speed = run.get("speed") or {}
    gt = np.asarray(speed.get("gt_kmh", ()), float)
    pred = np.asarray(speed.get("pred_kmh", ()), float)
    frames, ids = speed.get("frame", ()), speed.get("gt_id", ())
    where = gt_positions(Path(run["flight_dir"]))
    pos = np.array([where.get((int(f), int(i)), (np.nan,) * 3) for f, i in zip(frames, ids, strict=True)])
    pos = pos.reshape(-1, 3)
    ok = (gt > MIN_TRUE_KMH) & np.isfinite(pred) & np.isfinite(pos).all(axis=1)
    vehicle = np.array([f"{run['flight']}/{i}" for i in ids], dtype=object)
    return {
        "err_pct": 100.0 * (pred[ok] / gt[ok] - 1.0),
        "u": pos[ok, 0],
        "vy": pos[ok, 2],
        "vehicle": vehicle[ok] if len(vehicle) else np.zeros(0, object),
    }


def _bias_interval(err: np.ndarray, vehicle: np.ndarray, draws: int = 400) -> tuple[float, float, float]:
    """Mean relative error (%) and its 90 % interval when the vehicles are drawn again."""
    if not len(err):
        return np.nan, np.nan, np.nan
    keys, inv = np.unique(vehicle, return_inverse=True)
    sums, counts = np.bincount(inv, err), np.bincount(inv)
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(keys), (draws, len(keys)))
    boot = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    return float(err.mean()), float(np.percentile(boot, 5)), float(np.percentile(boot, 95))


def _split(cell: str, s: dict[str, np.ndarray], width: int) -> dict[str, np.ndarray]:
    if cell.startswith("lens"):
        off = np.abs(s["u"] - width / 2.0) / width
        return {"centre": off < 1 / 6, "edge": off > 1 / 3}
    return {"down": s["vy"] > 0.5, "up": s["vy"] < -0.5}


def split_rows(runs: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """Per (cell, arm): the bias of each part of the frame (lens) or direction (shutter)."""
    rows = []
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in runs:
        if r.get("status") == "ok":
            groups.setdefault((r["scenario"], r["arm"]), []).append(r)
    for (cell, arm), group in sorted(groups.items()):
        parts = [_samples(r) for r in group]
        s = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
        width = int(FlightSpec.from_yaml(Path(group[0]["flight_dir"]) / "flight.yaml").width)
        masks = _split(cell, s, width)
        figures = {k: _bias_interval(s["err_pct"][m], s["vehicle"][m]) for k, m in masks.items()}
        cells = [cell, arm, str(len(group))]
        for k, (mean, lo, hi) in figures.items():
            cells.append(f"{k} {mean:+.2f} [{lo:+.2f}, {hi:+.2f}] (n={int(masks[k].sum())})")
        if cell.startswith("lens"):
            gap = figures["edge"][0] - figures["centre"][0]
            cells.append(f"edge-centre {gap:+.2f}{' !' if abs(gap) > EDGE_TARGET_PCT else ''}")
        else:
            worst = max(abs(figures["down"][0]), abs(figures["up"][0]))
            cells.append(f"worst {worst:.2f}{' !' if worst > SHUTTER_TARGET_PCT else ''}")
        rows.append(cells)
    return rows


def render(out: Path, markdown: bool = False) -> str:
    runs = load_runs(out)
    budget = format_rows(budget_rows(runs), markdown=markdown)
    header = ["cell", "arm", "flights", "bias % (90 % interval) a", "bias % b", "target"]
    split = format_table(header, split_rows(runs), markdown=markdown)
    note = (
        f"targets: lens, edge (outer sixths) within {EDGE_TARGET_PCT} % of the centre (middle third); "
        f"shutter, up and down within {SHUTTER_TARGET_PCT} %; ! = missed"
    )
    return f"{budget}\n\n{split}\n{note}"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eval.optics_bench", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate the cells' flights and run both arms")
    run.add_argument("--out", required=True, type=Path)
    run.add_argument("--cells", help=f"comma-separated, of {', '.join(CELLS)} (default: all)")
    run.add_argument("--seeds", type=int, default=2, help="flights per cell")
    run.add_argument("--jobs", type=int, default=1, help="runs at a time")
    run.add_argument("--size", default=None, help="WxH of the flights (default 1920x1080)")
    run.add_argument("--duration", type=float, default=None, help="seconds (default 8)")
    run.add_argument("--force", action="store_true", help="run again what is recorded")
    add_shared_and_table(run, sub)
    return p


def add_shared_and_table(run: argparse.ArgumentParser, sub: Any) -> None:
    """A simulating bench's ``--shared`` (the sprites' ../shared/data) and its ``table`` command."""
    shared = os.environ.get(
        "AIRPATROL_SHARED_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    run.add_argument("--shared", type=Path, default=Path(shared), help="../shared/data (sprites)")
    table = sub.add_parser("table", help="print the table of a run's records")
    table.add_argument("out", type=Path)
    table.add_argument("--markdown", action="store_true")


def print_table(out: Path, render_fn: Any, module: str, markdown: bool) -> int:
    """A bench's ``table`` command: its records under ``out`` as a table, or what to run first."""
    if not (out / "runs").is_dir():
        raise SystemExit(f"no runs under {out}: run `python -m {module} run --out {out}`")
    sys.stdout.write(render_fn(out, markdown) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.command == "table":
        return print_table(args.out, render, "eval.optics_bench", args.markdown)
    changes: dict[str, Any] = {}
    if args.size:
        w, _, h = args.size.partition("x")
        changes |= {"width": int(w), "height": int(h)}
    if args.duration:
        changes["duration_s"] = args.duration
    cells = parse_names(args.cells, list(CELLS), list(CELLS), "cells")
    try:
        jobs = build(args.out, cells, args.seeds, shared=args.shared, **changes)
    except AirPatrolError as exc:
        raise SystemExit(f"optics bench: {exc}") from None
    run_grid(jobs, args.out / "detection_cache", workers=args.jobs, force=args.force)
    sys.stdout.write(render(args.out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
