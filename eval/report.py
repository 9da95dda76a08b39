"""Evaluation outputs: metrics.json, report.md, PNG plots and the predicted tracks (MOT format)."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from eval.metrics import SpeedSamples, prepare_sequence
from eval.results import EvalReport, SequenceResult, results_json
from eval.variants import OracleOptions
from pipelines.config import PipelineConfig

log = logging.getLogger(__name__)


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "-" if not math.isfinite(v) else f"{v:.{digits}f}"
    return str(v)


def write_report(
    report: EvalReport,
    out: Path,
    *,
    base: PipelineConfig | None = None,
    oracle: OracleOptions | None = None,
    max_frames: int | None = None,
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "max_frames": max_frames,
        "oracle": None
        if oracle is None
        else {"jitter_px": oracle.jitter_px, "drop_rate": oracle.drop_rate, "seed": oracle.seed},
        "detector": None if base is None else _detector_label(base),
        "detector_classes": None if base is None else base.detector.classes,
    }
    (out / "metrics.json").write_text(results_json(report, **meta))
    tracks_dir = out / "tracks"
    for r in report.results:
        d = tracks_dir / _safe(r.variant)
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{_safe(r.sequence)}.txt").write_text("\n".join(r.tracks.to_mot_lines()) + "\n")
        if r.speed_samples is not None and len(r.speed_samples):
            d = out / "speeds" / _safe(r.variant)
            d.mkdir(parents=True, exist_ok=True)
            write_speed_samples(r.speed_samples, d / f"{_safe(r.sequence)}.csv")
    plots = write_plots(report, out / "plots")
    (out / "report.md").write_text(render_markdown(report, plots, meta))
    log.info("evaluation report written to %s", out)


SAMPLE_COLUMNS = (
    "frame,gt_id,track_id,true_kmh,speed_kmh,error_kmh,sigma_kmh,measurement_sigma_kmh,trusted,track_frames"
)


def write_speed_samples(samples: SpeedSamples, path: Path) -> None:
    """Every matched (frame, vehicle) with a true speed, one CSV row each (``SAMPLE_COLUMNS``;
    frames 1-based as in the ground truth; speed columns empty where none was reported):
    what a grid cell's MAE, p95, coverage and sigma calibration are computed from, to look into
    one. ``track_frames``: frames since the track was first matched (its age, near enough)."""
    order = np.lexsort((samples.frames, samples.track_ids))
    first: dict[int, int] = {}
    for k in order:
        first.setdefault(int(samples.track_ids[k]), int(samples.frames[k]))
    lines = [SAMPLE_COLUMNS]

    def num(v: float) -> str:
        return f"{v:.3f}" if math.isfinite(v) else ""

    for k in np.lexsort((samples.gt_ids, samples.frames)):
        pred = samples.pred_kmh[k]
        reported = math.isfinite(pred)
        lines.append(
            ",".join(
                [
                    str(int(samples.frames[k])),
                    str(int(samples.gt_ids[k])),
                    str(int(samples.track_ids[k])),
                    num(samples.gt_kmh[k]),
                    num(pred),
                    num(pred - samples.gt_kmh[k]) if reported else "",
                    num(samples.sigma_kmh[k]) if reported else "",
                    num(samples.measurement_sigma_kmh[k]) if reported else "",
                    (("1" if samples.trusted[k] else "0") if reported else ""),
                    str(int(samples.frames[k]) - first[int(samples.track_ids[k])]),
                ]
            )
        )
    path.write_text("\n".join(lines) + "\n")


def _detector_label(base: PipelineConfig) -> str:
    """The base detector as run: explicit weights, or the shipped default the builder resolves."""
    from pipelines.motion.detector import find_default_weights  # loads torch

    if base.detector.weights is not None:
        return str(base.detector.weights)
    return f"default: {find_default_weights()}"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in name)


def render_markdown(report: EvalReport, plots: list[Path], meta: dict) -> str:
    lines = [f"# Evaluation: {report.dataset}", ""]
    if meta.get("max_frames"):
        lines.append(f"Runs cut at {meta['max_frames']} frames per sequence.")
    if meta.get("oracle"):
        o = meta["oracle"]
        lines.append(
            f"Oracle detector: jitter {o['jitter_px']} px, drop rate {o['drop_rate']}, seed {o['seed']}."
        )
    lines += ["", "## Configurations (all sequences combined)", ""]
    lines.append(
        "| configuration | frames | fps | HOTA | MOTA | IDF1 | IDSW | speed MAE km/h | RMSE | p95 | MAPE % | "
        "coverage | viol. P | viol. R |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for v in report.variants:
        c = report.combined.get(v.name, {})
        t = c.get("tracking") or {}
        s = c.get("speed") or {}
        vi = c.get("violations") or {}
        lines.append(
            f"| {v.name} | {c.get('frames', 0)} | {_fmt(c.get('fps'), 1)} | {_fmt(t.get('HOTA'))} | "
            f"{_fmt(t.get('MOTA'))} | {_fmt(t.get('IDF1'))} | {_fmt(t.get('IDSW'))} | {_fmt(s.get('mae_kmh'), 2)} | "
            f"{_fmt(s.get('rmse_kmh'), 2)} | {_fmt(s.get('p95_abs_kmh'), 2)} | {_fmt(s.get('mape_pct'), 1)} | "
            f"{_fmt(s.get('coverage'), 2)} | {_fmt(vi.get('precision'), 2)} | {_fmt(vi.get('recall'), 2)} |"
        )
    lines += ["", "## Per sequence", ""]
    lines.append(
        "| configuration | sequence | alt m | pitch | detector | mask | frames | HOTA | MOTA | MOTP | IDF1 | FP | FN | "
        "speed MAE | p95 | viol. TP/FP/FN | notes |"
    )
    lines.append("|---|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in report.results:
        t = r.tracking or {}
        s = r.speed or {}
        vi = r.violations
        vtxt = f"{vi['tp']}/{vi['fp']}/{vi['fn']}" if vi else "-"
        lines.append(
            f"| {r.variant} | {r.sequence} | {_fmt(r.altitude_m, 0)} | {_fmt(r.pitch_deg, 0)} | "
            f"{Path(str(r.pipeline.get('detector', '-'))).name} | {r.mask_source} | "
            f"{r.frames} | {_fmt(t.get('HOTA'))} | {_fmt(t.get('MOTA'))} | {_fmt(t.get('MOTP'))} | "
            f"{_fmt(t.get('IDF1'))} | {_fmt(t.get('FP'))} | {_fmt(t.get('FN'))} | {_fmt(s.get('mae_kmh'), 2)} | "
            f"{_fmt(s.get('p95_abs_kmh'), 2)} | {vtxt} | {'; '.join(r.notes)} |"
        )
    speed_variants = [(v, report.combined[v.name].get("speed")) for v in report.variants]
    if any(s for _, s in speed_variants):
        lines += ["", "## Speed error by true speed and altitude", ""]
        lines.append("| configuration | bin | n | MAE km/h | RMSE | p95 | bias | MAPE % |")
        lines.append("|---|---|---:|---:|---:|---:|---:|---:|")
        for v, s in speed_variants:
            if not s:
                continue
            for group in ("by_speed", "by_altitude"):
                for label, b in s.get(group, {}).items():
                    lines.append(
                        f"| {v.name} | {label} | {b.get('n', 0)} | {_fmt(b.get('mae_kmh'), 2)} | "
                        f"{_fmt(b.get('rmse_kmh'), 2)} | {_fmt(b.get('p95_abs_kmh'), 2)} | "
                        f"{_fmt(b.get('bias_kmh'), 2)} | {_fmt(b.get('mape_pct'), 1)} |"
                    )
    lines += _ticket_lines(report)
    lines += _ego_lines(report)
    if plots:
        lines += ["", "## Plots", ""]
        lines += [f"![{p.stem}](plots/{p.name})" for p in plots]
    lines += [
        "",
        "Metrics: HOTA/CLEAR/Identity from TrackEval (IoU 0.5 for MOTA/IDF1; HOTA averaged over its alphas). "
        "Speed errors are predicted minus true instantaneous speed for boxes matched at IoU >= 0.5. "
        "Violations match by track association and overlapping time (1 s slack).",
        "",
    ]
    return "\n".join(lines)


def _ticket_lines(report: EvalReport) -> list[str]:
    """The ticket table (eval.metrics.tickets): configurations with true speeds, all sequences."""
    rows = [(v.name, report.combined.get(v.name, {}).get("tickets")) for v in report.variants]
    rows = [(name, t) for name, t in rows if t]
    if not rows:
        return []
    lines = [
        "",
        "## Tickets (the number on the ticket against the truth)",
        "",
        "Wrong ticket: enforceable, the vehicle never above the limit (per 1,000 vehicles at or below "
        "it; 95 % upper bound). Missed: a vehicle at least limit + tolerance + 5 km/h over a base "
        "length without an enforceable violation. Errors: ticket speed - true speed over its base; peak: "
        "highest per-frame estimate - highest true speed.",
        "",
        "| configuration | at/below limit | wrong | per 1,000 | upper 95 % | unmatched | enforceable | "
        "within tol. | median err | p95 abs | peak median | clear speeders | missed | lower-bound wrong |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in rows:
        e, p, lb = t.get("ticket_error") or {}, t.get("peak_error") or {}, t.get("lower_bound") or {}
        lines.append(
            f"| {name} | {t['at_or_below_limit']} | {t['wrong_tickets']} | {_fmt(t['wrong_per_1000'], 2)} | "
            f"{_fmt(t['wrong_per_1000_upper95'], 2)} | {t['unmatched_tickets']} | {t['enforceable']} | "
            f"{_fmt(e.get('within_tolerance'))} | {_fmt(e.get('median_kmh'), 2)} | {_fmt(e.get('p95_abs_kmh'), 2)} | "
            f"{_fmt(p.get('median_kmh'), 2)} | {t['clear_speeders']} | {t['missed_violations']} | "
            f"{_fmt(lb.get('wrong_share'))} |"
        )
    return lines


def _ego_lines(report: EvalReport) -> list[str]:
    """The ego-motion error table: sequences with exact camera truth (simulated flights)."""
    rows = [r for r in report.results if r.egomotion]
    if not rows:
        return []
    lines = [
        "",
        "## Ego-motion error (exact simulator camera)",
        "",
        "RMS distance, full-resolution px, between a grid of points moved by the estimated and by the "
        "exact frame-to-frame homography, per frame pair; true motion: median camera motion px/frame.",
        "",
        "| configuration | sequence | alt m | pitch | pairs | mean px | p95 px | max px | true motion px | "
        "flagged |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        e = r.egomotion
        lines.append(
            f"| {r.variant} | {r.sequence} | {_fmt(r.altitude_m, 0)} | {_fmt(r.pitch_deg, 0)} | {e['pairs']} | "
            f"{_fmt(e['mean_px'])} | {_fmt(e['p95_px'])} | {_fmt(e['max_px'])} | {_fmt(e['true_median_px'])} | "
            f"{e['invalid']} |"
        )
    return lines


def write_plots(report: EvalReport, out: Path) -> list[Path]:
    """PNG plots of the report in ``out``: metrics per configuration, speed errors, a track timeline."""
    import matplotlib  # heavy; only the plots need it

    matplotlib.use("Agg")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    names = [v.name for v in report.variants]
    bars = _plot_configurations(report, names, out / "metrics_by_configuration.png")
    if bars is not None:
        written.append(bars)
    per_variant = _speed_errors(report, names)
    if per_variant:
        written += _plot_speed_errors(per_variant, out)
    first = next((r for r in report.results if r.gt is not None), None)
    if first is not None:
        written.append(_plot_track_timeline(first, out / "track_timeline.png"))
    return written


def _plot_configurations(report: EvalReport, names: list[str], path: Path) -> Path | None:
    """Tracking metrics and speed errors, one group of bars per configuration."""
    import matplotlib.pyplot as plt

    keys = ("HOTA", "MOTA", "IDF1")
    vals = np.array(
        [[(report.combined[n].get("tracking") or {}).get(k, np.nan) for k in keys] for n in names], float
    )
    if not np.isfinite(vals).any():
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(len(names))
    width = 0.8 / len(keys)
    for i, k in enumerate(keys):
        axes[0].bar(x + i * width - 0.4 + width / 2, np.nan_to_num(vals[:, i]), width, label=k)
    axes[0].set_xticks(x, names, rotation=20, ha="right")
    axes[0].set_ylim(min(0.0, np.nanmin(vals) - 0.05), 1.0)
    axes[0].set_title("tracking")
    axes[0].legend()
    mae = [(report.combined[n].get("speed") or {}).get("mae_kmh", np.nan) for n in names]
    p95 = [(report.combined[n].get("speed") or {}).get("p95_abs_kmh", np.nan) for n in names]
    axes[1].bar(x - 0.2, np.nan_to_num(mae), 0.4, label="MAE")
    axes[1].bar(x + 0.2, np.nan_to_num(p95), 0.4, label="p95 |error|")
    axes[1].set_xticks(x, names, rotation=20, ha="right")
    axes[1].set_ylabel("km/h")
    axes[1].set_title("speed error")
    axes[1].legend()
    fig.tight_layout()
    return _save(fig, path)


SpeedErrors = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # variant -> (true, error, altitude)


def _speed_errors(report: EvalReport, names: list[str]) -> SpeedErrors:
    """Per configuration, the speed samples that have a prediction."""
    per_variant: SpeedErrors = {}
    for n in names:
        ss = [r.speed_samples for r in report.results if r.variant == n and r.speed_samples is not None]
        if ss:
            s = SpeedSamples.concat(ss)
            ok = np.isfinite(s.pred_kmh)
            if ok.any():
                per_variant[n] = (s.gt_kmh[ok], s.error[ok], s.altitude_m[ok])
    return per_variant


def _plot_speed_errors(per_variant: SpeedErrors, out: Path) -> list[Path]:
    """A histogram of the speed errors, and the errors against true speed and altitude."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    all_err = np.concatenate([e for _, e, _ in per_variant.values()])
    lim = max(1.0, float(np.percentile(np.abs(all_err), 99)))
    bins = np.linspace(-lim, lim, 61)
    for n, (_, e, _) in per_variant.items():
        ax.hist(e, bins=bins, histtype="step", label=n, linewidth=1.5)
    ax.set_xlabel("speed error (predicted - true), km/h")
    ax.set_ylabel("samples (frames)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written = [_save(fig, out / "speed_error_hist.png")]

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for n, (g, e, a) in per_variant.items():
        axes[0].scatter(g, e, s=3, alpha=0.3, label=n)
        alts = np.unique(a[np.isfinite(a)])
        if len(alts):
            means = [np.mean(np.abs(e[a == al])) for al in alts]
            p95s = [np.percentile(np.abs(e[a == al]), 95) for al in alts]
            axes[1].plot(alts, means, "o-", label=f"{n} MAE")
            axes[1].plot(alts, p95s, "x--", label=f"{n} p95")
    axes[0].axhline(0, color="k", linewidth=0.8)
    axes[0].set_xlabel("true speed, km/h")
    axes[0].set_ylabel("error, km/h")
    axes[0].set_title("error vs speed")
    axes[0].legend(fontsize=8, markerscale=4)
    axes[1].set_xlabel("altitude, m")
    axes[1].set_ylabel("|error|, km/h")
    axes[1].set_title("error vs altitude")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    written.append(_save(fig, out / "speed_error_vs_speed_altitude.png"))
    return written


def _plot_track_timeline(first: SequenceResult, path: Path) -> Path:
    """Ground-truth vehicles over time (grey) and the track ids matched to them (colours)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    gt = first.gt
    scored = ~gt.distractor
    gids = np.unique(gt.ids[scored])
    row_of = {int(g): i for i, g in enumerate(gids)}
    for g in gids:
        fr = gt.frames[scored & (gt.ids == g)]
        ax.plot(fr, np.full(len(fr), row_of[int(g)]), "|", color="0.75", markersize=4)
    matched = prepare_sequence(gt, first.tracks, first.frames)
    cmap = plt.get_cmap("tab20")
    for f, gid, prow, _ in matched.pairs:
        tid = int(first.tracks.ids[prow])
        ax.plot([f], [row_of.get(gid, -1)], "|", color=cmap(tid % 20), markersize=6)
    ax.set_xlabel("frame")
    ax.set_ylabel("ground-truth vehicle")
    ax.set_title(f"{first.variant} / {first.sequence}: grey = ground truth, colour = matched track id")
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
