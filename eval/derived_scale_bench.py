"""How good the vehicles' own scale is where there is no altitude (the ``vehicles`` source,
:mod:`pipelines.ground`): the height above the road that makes the cars their fleet's size (and
the lanes their width), on the scale-check bench's recorded flights (``python -m
eval.scale_check_bench pool``: rendered with realistic car sizes, vans labelled as cars, 3D
vehicles, detected and tracked by the shipped engine).

On flat ground a scale error of ``k`` is the same ``k`` on every distance and every speed, so the
scale check's ratio at the right scale (k = 1) *is* the error the vehicles' own scale would carry:
the rulers read through the true altitude, combined as the engine combines them where they are the
scale (:func:`pipelines.scale_judge.combine` with ``fleet_sigma``). Scored two ways:

* each recorded flight alone (a 20 s session of about 45 vehicles): its height's error and the
  error over the sigma the engine would report with it;
* sessions drawn from a cell's flights (whole tracked vehicles resampled, the lane frames too, one
  error for the session's lanes drawn from the lane width's sigma): after one minute of traffic and
  after 30; whether the height is known to ``derive_max_sigma`` (speeds are measured), its error,
  and how often that error is within one and two of its sigmas.

The view test (:func:`pipelines.scale_judge.view_check`) is not replayed: the flights' pitch is
the true one.

    python -m eval.derived_scale_bench /work/bench/scale_check --sessions 60
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from eval.scale_check_bench import (
    CELLS,
    draw_lanes,
    kept_rows,
    lane_values,
    recorded_projector,
    track_values,
    value_table,
    variant_tables,
)
from pipelines.config import ScaleCheckConfig
from pipelines.pitch_fit import PitchFinder
from pipelines.scale_judge import Estimate, combine
from pipelines.scale_session import prior_of

log = logging.getLogger(__name__)

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "cars": ("the cars alone (the shipped margin, 1.4 px)", {"lanes": False}),
    "cars_lanes": ("cars and lanes (a region's lane width: sigma 0.2 m)", {}),
    "cars_site_lanes": ("cars and the site's lanes (sigma 0.05 m)", {"lane_width_sigma_m": 0.05}),
}
SESSION_MINUTES = (1.0, 30.0)


def height_error(values: np.ndarray, lanes: np.ndarray | None, cfg: ScaleCheckConfig) -> tuple[float, float]:
    """(the relative error of the height the rulers give, its reported relative sigma); NaN, NaN
    where they give none. The height is the true one over exp(mu): its log error is -mu."""
    est = combine(values, cfg, lambda n: "too few", lanes, fleet_sigma=cfg.fleet_sigma)
    if not isinstance(est, Estimate):
        return math.nan, math.nan
    return math.expm1(-est.mu), est.se


def score_flights(records: list[dict], cfg: ScaleCheckConfig) -> list[dict[str, Any]]:
    """Each recorded flight alone, as one session: its vehicles and lane frames."""
    out = []
    for rec in records:
        arr, counted = value_table(list(track_values(rec, cfg, 1.0).values()), cfg)
        lanes = lane_values([rec], cfg, 1.0) if cfg.lanes else None
        err, sigma = height_error(arr[counted], lanes, cfg)
        out.append(
            {
                "flight": f"{rec['cell']}_s{rec['seed']:02d}",
                "n": int(counted.sum()),
                "error": err,
                "sigma": sigma,
            }
        )
    return out


def score_sessions(
    records: list[dict], cfg: ScaleCheckConfig, sessions: int, seed: int = 0
) -> dict[str, Any]:
    """Sessions drawn from a cell's flights (whole vehicles resampled at the flights' traffic rate,
    lane frames one every ``lane_every`` frames at 30 fps with one error for the session's lanes
    from the lane width's sigma), scored after each of ``SESSION_MINUTES``."""
    rng = np.random.default_rng(seed)
    tracks = [v for r in records for v in track_values(r, cfg, 1.0).values()]
    arr, counted = value_table(tracks, cfg)
    rate = len(tracks) / (sum(r["duration_s"] for r in records) / 60.0)
    pool_lanes = lane_values(records, cfg, 1.0) if cfg.lanes else np.zeros(0)
    lanes_a_minute = 60.0 * 30.0 / cfg.lane_every
    out: dict[str, Any] = {"pool_vehicles": len(tracks), "vehicles_per_min": round(rate, 1)}
    for minutes in SESSION_MINUTES:
        errors, sigmas = [], []
        for _ in range(sessions):
            order = rng.integers(0, len(tracks), max(int(rate * minutes), 1))
            lanes = (
                draw_lanes(rng, pool_lanes, int(lanes_a_minute * minutes), cfg) if len(pool_lanes) else None
            )
            err, sigma = height_error(arr[order][counted[order]], lanes, cfg)
            errors.append(err)
            sigmas.append(sigma)
        out[f"{minutes:g}min"] = summarize(np.array(errors), np.array(sigmas), cfg.derive_max_sigma)
    return out


def summarize(errors: np.ndarray, sigmas: np.ndarray, max_sigma: float) -> dict[str, float]:
    """Sessions' height errors and sigmas: the share with a height, the share known to
    ``max_sigma`` (speeds measured), and of those the median and 95th-percentile absolute error and
    the shares within one and two sigmas (log errors over the log sigma)."""
    has = np.isfinite(errors)
    known = has & (sigmas <= max_sigma)
    e, s = errors[known], sigmas[known]
    z = np.abs(np.log1p(e)) / s if len(e) else np.zeros(0)
    return {
        "with_height": round(float(has.mean()), 3),
        "known": round(float(known.mean()), 3),
        "median_abs_error": round(float(np.median(np.abs(e))), 4) if len(e) else math.nan,
        "p95_abs_error": round(float(np.percentile(np.abs(e), 95)), 4) if len(e) else math.nan,
        "median_sigma": round(float(np.median(s)), 4) if len(s) else math.nan,
        "within_1_sigma": round(float(np.mean(z <= 1.0)), 3) if len(z) else math.nan,
        "within_2_sigma": round(float(np.mean(z <= 2.0)), 3) if len(z) else math.nan,
    }


def flight_pitch(record: dict, cfg: ScaleCheckConfig) -> dict[str, Any]:
    """The pitch the cars of a recorded flight give (:class:`pipelines.pitch_fit.PitchFinder` fed the
    boxes the check compares, in frame order, as the engine feeds it), against the true one."""
    kept = kept_rows(record, cfg)
    out: dict[str, Any] = {"flight": f"{record['cell']}_s{record['seed']:02d}", "fitted": None, "sigma": None}
    if not kept.keep.any():
        return out | {"true": None}
    cam = kept.cameras[kept.keep][0]
    proj = recorded_projector(cam)
    finder = PitchFinder(prior_of(cfg), cfg.box_margin_px, cfg.z, cfg.min_vehicles)
    k = kept.keep
    finder.add(proj, kept.xyxy[k], kept.ids[k], kept.velocities[k])
    fit = finder.refit(0)
    out["true"] = float(cam[7])
    if fit is not None:
        out |= {"fitted": round(fit.pitch_deg, 2), "sigma": round(fit.sigma_deg, 2), "n": fit.n}
    return out


def score(folder: Path, sessions: int) -> dict[str, Any]:
    records = {
        cell: [json.loads(p.read_text()) for p in sorted((folder / "records").glob(f"{cell}_s*.json"))]
        for cell in CELLS
    }
    table: dict[str, Any] = {}
    for key, (_, overrides) in VARIANTS.items():
        cfg = ScaleCheckConfig(**overrides)
        table[key] = {
            cell: {"flights": score_flights(recs, cfg), "sessions": score_sessions(recs, cfg, sessions)}
            for cell, recs in records.items()
            if recs
        }
        log.info("%s scored", key)
    cfg = ScaleCheckConfig()
    table["pitch"] = {cell: [flight_pitch(r, cfg) for r in recs] for cell, recs in records.items() if recs}
    return table


def format_table(table: dict[str, Any]) -> str:
    def row(cell: str, r: dict) -> str:
        flights = ", ".join(
            f"{100 * f['error']:+.1f} % ({math.log1p(f['error']) / f['sigma']:+.1f})"
            if math.isfinite(f["error"])
            else "none"
            for f in r["flights"]
        )
        cols = []
        for minutes in SESSION_MINUTES:
            s = r["sessions"][f"{minutes:g}min"]
            cols.append(
                f"{s['known']:.2f}, {100 * s['median_abs_error']:.1f} / {100 * s['p95_abs_error']:.1f} %, "
                f"{s['within_1_sigma']:.2f} / {s['within_2_sigma']:.2f} (sigma {100 * s['median_sigma']:.1f} %)"
            )
        return f"| {cell} | {flights} | " + " | ".join(cols) + " |"

    header = (
        "| cell | flights alone: height error (error / sigma) | 1 min: known, median / p95 error, "
        "within 1 / 2 sigma | 30 min: the same |"
    )
    lines = variant_tables(table, VARIANTS, header, row)
    if table.get("pitch"):
        lines += [
            "### the pitch the cars give (no pitch known)",
            "| cell | true | fitted +- sigma (error in sigmas) |",
            "|---|---|---|",
        ]
        for cell, flights in table["pitch"].items():
            fits = ", ".join(
                f"{f['fitted']:.1f} +- {f['sigma']:.1f} ({(f['fitted'] - f['true']) / f['sigma']:+.1f})"
                if f["fitted"] is not None
                else "none"
                for f in flights
            )
            lines.append(f"| {cell} | {flights[0]['true']} | {fits} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m eval.derived_scale_bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "folder", type=Path, help="the scale-check bench's pool (python -m eval.scale_check_bench pool)"
    )
    p.add_argument("--sessions", type=int, default=60, help="per cell and session length")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not (args.folder / "records").is_dir():
        sys.stderr.write(
            f"error: no recorded flights in {args.folder / 'records'} (run eval.scale_check_bench pool)\n"
        )
        return 2
    table = score(args.folder, args.sessions)
    (args.folder / "derived_scores.json").write_text(json.dumps(table, indent=1))
    sys.stdout.write(format_table(table) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
