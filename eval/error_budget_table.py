"""The error budget's table (issue 39): what each telemetry error does to the speeds and the tickets,
and what each correction arm gives back, from the per-run records :mod:`eval.error_budget` writes.

One row per (scenario, arm), pooled over the flights of the grid:

* per-frame speeds (every matched frame with a speed): MAE (km/h), signed bias (% of the true
  speed, vehicles above 5 km/h), p95 |error| (km/h), and the share of errors within the reported
  1 sigma with its 90 % interval when the *flights* are drawn again (a flight's scale error is
  shared by all its vehicles and frames: a cluster bootstrap over flights,
  :func:`eval.metrics.speed.vehicle_interval`);
* tickets (:mod:`eval.metrics.tickets`): violations with a ticket speed, the enforceable ones, the
  share within the tolerance, the signed bias (% of the true speed over the base), wrong tickets,
  and the share within the ticket's 1 sigma;
* flights within 1 sigma: per flight, its scale error against the scale sigma the engine reported
  (``k/n`` flights within 1): from each violation's scale, the relative error its height above the
  road and its pitch (against the flight's true ones: ``altitude_m``, ``pitch_deg``; a simulated
  flight over a flat road) give a vehicle at the image's centre moving along the image's vertical
  (the simulated road's direction), over the sigma the scale's height, pitch and their covariance
  give it there (:func:`pipelines.height.scale_sigma_frac`); a flight's z is the median over its
  violations. Pooled over flights whose errors were drawn from a stated prior (the ``prior``
  scenario), this is the check that the scale sigma holds, counting each flight's shared error once.
  Neither a flight's speed errors nor its tickets' can stand for it: its per-frame median averages
  out every part of the scale error that changes across the image, which a violation's sigma
  rightly holds (until 2026-11-29 it was that median against the violations' median sigma: 0.95 of
  flights within it where the tickets were 0.87), and a ticket's sigma also holds its own vehicle's
  (the point height's, the fit's), which the median over a flight's tickets averages out (their
  median z spread 0.37 at 30 m, 0.73 at 150 m);
* the median scale sigma (%), the measured base's median |height error| (%), and the frames the
  detector would have run at another input size than the cache recorded (GSD from wrong telemetry).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from eval.bands import format_table
from eval.metrics.speed import vehicle_interval
from eval.metrics.tickets import TicketSamples, summarize_tickets
from pipelines.height import centre_pitch_frac_per_deg, scale_sigma_frac

MIN_TRUE_KMH = 5.0  # relative errors only above this true speed


@dataclass(frozen=True)
class BudgetRow:
    """A (scenario, arm) cell over its flights."""

    scenario: str
    arm: str
    flights: int
    failed: int
    summary: dict


def _speed_arrays(runs: Sequence[Mapping]) -> dict[str, np.ndarray]:
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("gt", "pred", "sigma", "flight")}
    for i, r in enumerate(runs):
        s = r.get("speed") or {}
        gt = np.asarray(s.get("gt_kmh", ()), float)
        parts["gt"].append(gt)
        parts["pred"].append(np.asarray(s.get("pred_kmh", ()), float))
        parts["sigma"].append(
            np.asarray([math.nan if v is None else v for v in s.get("sigma_kmh", ())], float)
        )
        parts["flight"].append(np.full(len(gt), i))
    return {k: np.concatenate(v) if v else np.zeros(0) for k, v in parts.items()}


def _scale_z(scale: Mapping, true_height_m: float, true_pitch_deg: float) -> float:
    """One violation's scale error at the image's centre (a vehicle along the image's vertical) over
    its sigma there (see the module docstring); NaN where the scale says too little."""
    try:
        h, sh = float(scale["height_above_road_m"]), float(scale["height_sigma_m"])
        pitch, sp = float(scale["pitch_deg"]), float(scale["pitch_sigma_deg"])
        cov = scale.get("height_pitch_cov")
        # recorded before scales carried it: the reference's correlation, the scale's own sigmas
        corr = (scale.get("reference") or {}).get("height_pitch_corr") or 0.0
        cov = float(corr) * sh * sp if cov is None else float(cov)
    except (KeyError, TypeError, ValueError):
        return math.nan
    per_deg = centre_pitch_frac_per_deg(pitch)
    error = (h - true_height_m) / true_height_m + per_deg * (pitch - true_pitch_deg)
    sigma = float(scale_sigma_frac(h, sh, sp, per_deg, cov))
    return error / sigma if sigma > 0 else math.nan


def _flight_z(run: Mapping) -> float:
    """The median over the flight's violations of their :func:`_scale_z` (NaN: no truth, no scale)."""
    truth = run.get("altitude_m"), run.get("pitch_deg")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in truth):
        return math.nan
    z = [_scale_z(v, float(truth[0]), float(truth[1])) for v in run.get("scale") or () if v]
    z = [v for v in z if math.isfinite(v)]
    return float(np.median(z)) if z else math.nan


def _engine_scale_sigma(run: Mapping) -> float:
    """The median relative scale sigma the engine reported on the flight's violations (NaN: none)."""
    fracs = [v["sigma_pct"] / 100.0 for v in run.get("scale") or () if v and v.get("sigma_pct") is not None]
    return float(np.median(fracs)) if fracs else math.nan


def summarize_runs(runs: Sequence[Mapping]) -> dict:
    """The figures of one row (see the module docstring) over the successful runs ``runs``."""
    a = _speed_arrays(runs)
    ok = np.isfinite(a["pred"]) & np.isfinite(a["gt"])
    err = a["pred"][ok] - a["gt"][ok]
    fast = a["gt"][ok] > MIN_TRUE_KMH
    out: dict = {"frames": int(ok.sum())}
    if ok.any():
        out |= {
            "mae_kmh": float(np.mean(np.abs(err))),
            "bias_pct": float(100.0 * np.mean(err[fast] / a["gt"][ok][fast])) if fast.any() else math.nan,
            "p95_abs_kmh": float(np.percentile(np.abs(err), 95)),
        }
    with_sigma = ok & np.isfinite(a["sigma"])
    if with_sigma.any():
        hits = np.abs(a["pred"][with_sigma] - a["gt"][with_sigma]) <= a["sigma"][with_sigma]
        out["within_1sigma"] = float(hits.mean())
        out["within_1sigma_90"] = list(vehicle_interval(hits, a["flight"][with_sigma]))
    tickets = TicketSamples.concat(TicketSamples.from_json(r["tickets"]) for r in runs if r.get("tickets"))
    t = summarize_tickets(tickets)
    scored = [
        r for r in tickets.records if r.has_ticket and r.gt_id is not None and math.isfinite(r.true_kmh)
    ]
    t["bias_pct"] = float(100.0 * np.mean([r.error_kmh / r.true_kmh for r in scored])) if scored else math.nan
    out["tickets"] = t
    judged = [z for z in map(_flight_z, runs) if math.isfinite(z)]
    out["flights_within_1sigma"] = [sum(1 for z in judged if abs(z) <= 1.0), len(judged)]
    from_engine = [s for s in map(_engine_scale_sigma, runs) if math.isfinite(s)]
    out["scale_sigma_pct"] = float(100.0 * np.median(from_engine)) if from_engine else math.nan
    base = [r["arm_record"]["base"] for r in runs if (r.get("arm_record") or {}).get("base")]
    out["base_height_error_pct"] = (
        float(100.0 * np.median([abs(b["height_error_m"]) / b["true_height_m"] for b in base]))
        if base
        else math.nan
    )
    out["size_mismatch_frames"] = int(
        sum((r.get("detection_cache") or {}).get("size_mismatch_frames") or 0 for r in runs)
    )
    return out


def budget_rows(
    runs: Iterable[Mapping], scenarios: Sequence[str] = (), arms: Sequence[str] = ()
) -> list[BudgetRow]:
    """One row per (scenario, arm), scenarios and arms in the given order (others after, as met)."""
    groups: dict[tuple[str, str], list[Mapping]] = {}
    for r in runs:
        groups.setdefault((r["scenario"], r["arm"]), []).append(r)
    s_order = {s: i for i, s in enumerate(dict.fromkeys([*scenarios, *(k[0] for k in groups)]))}
    a_order = {a: i for i, a in enumerate(dict.fromkeys([*arms, *(k[1] for k in groups)]))}
    rows = []
    for key in sorted(groups, key=lambda k: (s_order[k[0]], a_order[k[1]])):
        group = groups[key]
        good = [r for r in group if r.get("status") == "ok"]
        rows.append(BudgetRow(key[0], key[1], len(good), len(group) - len(good), summarize_runs(good)))
    return rows


COLUMNS = (
    "scenario", "arm", "flights", "frames", "MAE km/h", "bias %", "p95 |err|", "1σ frames",
    "1σ 90 % (flights)", "tickets", "enforceable", "within tol.", "ticket bias %", "wrong",
    "1σ tickets", "1σ flights", "scale σ %", "base |h err| %", "size mismatch",
)  # fmt: skip


def _f(v: float | None, digits: int = 2, signed: bool = False) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"


def _cells(r: BudgetRow) -> list[str]:
    s, t = r.summary, r.summary.get("tickets", {})
    te = t.get("ticket_error", {})
    lo_hi = s.get("within_1sigma_90")
    k, n = s.get("flights_within_1sigma", (0, 0))
    return [
        r.scenario,
        r.arm,
        f"{r.flights}" + (f" ({r.failed} failed)" if r.failed else ""),
        str(s.get("frames", 0)),
        _f(s.get("mae_kmh")),
        _f(s.get("bias_pct"), 2, signed=True),
        _f(s.get("p95_abs_kmh")),
        _f(s.get("within_1sigma"), 3),
        f"{lo_hi[0]:.2f}-{lo_hi[1]:.2f}" if lo_hi else "-",
        str(t.get("with_ticket_speed", 0)),
        str(t.get("enforceable", 0)),
        _f(te.get("within_tolerance"), 3),
        _f(t.get("bias_pct"), 2, signed=True),
        str(t.get("wrong_tickets", 0)),
        _f(te.get("within_1sigma"), 3),
        f"{k}/{n}",
        _f(s.get("scale_sigma_pct")),
        _f(s.get("base_height_error_pct")),
        str(s.get("size_mismatch_frames", 0)),
    ]


def format_rows(rows: Iterable[BudgetRow], markdown: bool = False) -> str:
    """The rows as a Markdown table, or aligned plain text."""
    return format_table(COLUMNS, [_cells(r) for r in rows], markdown)


__all__ = ["COLUMNS", "MIN_TRUE_KMH", "BudgetRow", "budget_rows", "format_rows", "summarize_runs"]
