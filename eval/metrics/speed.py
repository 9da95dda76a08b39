"""Speed accuracy: predictions are matched to ground truth per frame by IoU (Hungarian, >= 0.5); for
matched pairs with a speed estimate the error is predicted minus true speed (km/h).
:class:`SpeedSamples` holds those pairs; :func:`summarize_speed` their errors (overall, trusted
only, by true-speed and altitude bins) and :func:`sigma_calibration` how honest the reported
sigmas are (with :func:`vehicle_interval`, a cluster bootstrap over vehicles)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from eval.groundtruth import GtSpeeds
from eval.metrics.matching import MatchedSequence
from eval.metrics.predictions import PredTracks

SPEED_BINS_KMH = (0.0, 30.0, 50.0, 70.0, 90.0, float("inf"))
ALTITUDE_BINS_M = (0.0, 40.0, 80.0, 120.0, 160.0, float("inf"))


@dataclass(frozen=True, slots=True, eq=False)
class SpeedSamples:
    """One row per matched (frame, vehicle) with a true speed; ``pred_kmh`` NaN when not estimated."""

    sequence: np.ndarray  # (N,) object
    frames: np.ndarray
    gt_ids: np.ndarray
    track_ids: np.ndarray
    gt_kmh: np.ndarray
    pred_kmh: np.ndarray
    altitude_m: np.ndarray
    pitch_deg: np.ndarray
    sigma_kmh: np.ndarray  # the engine's reported one-sigma of pred_kmh (NaN when unknown)
    trusted: np.ndarray  # bool: the speed stage stood behind pred_kmh
    # sigma_kmh without its altitude term (speed.altitude_sigma_frac x speed, in quadrature): the
    # measurement's own uncertainty, the part a flight with exact altitude (a simulation) can check
    measurement_sigma_kmh: np.ndarray
    # (N,) str: the scale source the speed was measured with (pipelines.height; "" where unknown)
    scale_source: np.ndarray

    @staticmethod
    def concat(items: Sequence[SpeedSamples]) -> SpeedSamples:
        if not items:
            z = np.zeros(0)
            return SpeedSamples(
                np.zeros(0, dtype=object),
                z.astype(int),
                z.astype(int),
                z.astype(int),
                z,
                z,
                z,
                z,
                z,
                z.astype(bool),
                z,
                np.zeros(0, dtype=object),
            )
        return SpeedSamples(*(np.concatenate([getattr(s, f) for s in items]) for f in SpeedSamples.__slots__))

    def __len__(self) -> int:
        return len(self.frames)

    @property
    def error(self) -> np.ndarray:
        return self.pred_kmh - self.gt_kmh


def speed_samples(
    sequence: str,
    matched: MatchedSequence,
    pred: PredTracks,
    gt_speeds: GtSpeeds,
    altitude_m: float | None = None,
    pitch_deg: float | None = None,
    altitude_sigma_frac: float = 0.0,
) -> SpeedSamples:
    """The matched (frame, vehicle) pairs with a true speed. The scale's relative sigma the engine
    reported with each speed (``speed_scale_frac``; else ``altitude_sigma_frac``, the
    configuration's fallback) is taken out of the reported sigma for ``measurement_sigma_kmh``."""
    lookup = gt_speeds.lookup()
    sigmas, trust, fracs, sources = pred.sigmas(), pred.trust(), pred.scale_fracs(), pred.scale_sources()
    rows, row_sources = [], []
    for f, gid, prow, _ in matched.pairs:
        true = lookup.get((f, gid))
        if true is None:
            continue
        rows.append(
            (
                f,
                gid,
                int(pred.ids[prow]),
                true,
                float(pred.speed_kmh[prow]),
                float(sigmas[prow]),
                float(trust[prow]),
                float(fracs[prow]),
            )
        )
        row_sources.append(sources[prow])
    n = len(rows)
    a = np.array(rows, dtype=float).reshape(n, 8)
    frac = np.where(np.isfinite(a[:, 7]), a[:, 7], altitude_sigma_frac)  # the engine's own, where it said
    with np.errstate(invalid="ignore"):
        measurement = np.sqrt(np.maximum(a[:, 5] ** 2 - (frac * a[:, 4]) ** 2, 0.0))
    return SpeedSamples(
        np.full(n, sequence, dtype=object),
        a[:, 0].astype(int),
        a[:, 1].astype(int),
        a[:, 2].astype(int),
        a[:, 3],
        a[:, 4],
        np.full(n, np.nan if altitude_m is None else altitude_m),
        np.full(n, np.nan if pitch_deg is None else pitch_deg),
        a[:, 5],
        a[:, 6].astype(bool),
        measurement,
        np.array(row_sources, dtype=object).reshape(n),
    )


def _error_stats(gt: np.ndarray, pred: np.ndarray) -> dict[str, float | int]:
    ok = np.isfinite(pred) & np.isfinite(gt)
    err = pred[ok] - gt[ok]
    if err.size == 0:
        return {"n": 0}
    abs_err = np.abs(err)
    fast = gt[ok] > 5.0
    pct = abs_err[fast] / gt[ok][fast] * 100.0
    return {
        "n": int(err.size),
        "mae_kmh": float(abs_err.mean()),
        "rmse_kmh": float(np.sqrt(np.mean(err**2))),
        "p95_abs_kmh": float(np.percentile(abs_err, 95)),
        "bias_kmh": float(err.mean()),
        "median_abs_kmh": float(np.median(abs_err)),
        "mape_pct": float(pct.mean()) if pct.size else float("nan"),
        "p95_abs_pct": float(np.percentile(pct, 95)) if pct.size else float("nan"),
    }


def _bin_label(lo: float, hi: float, unit: str) -> str:
    return f"{lo:g}+ {unit}" if not np.isfinite(hi) else f"{lo:g}-{hi:g} {unit}"


def sigma_calibration(
    gt: np.ndarray, pred: np.ndarray, sigma: np.ndarray, vehicles: np.ndarray | None = None
) -> dict[str, float | int | list[float]]:
    """How honest the reported sigmas are: the share of errors within 1 and 2 sigma (a Gaussian
    gives 68 % and 95 %), over the estimates that carry a finite sigma, and their median sigma.
    With ``vehicles`` (one key per sample: which true vehicle it is), also how many vehicles
    that is and the 90 % interval of the 1-sigma share over them (:func:`vehicle_interval`)."""
    ok = np.isfinite(gt) & np.isfinite(pred) & np.isfinite(sigma)
    if not ok.any():
        return {"n_with_sigma": 0}
    z = np.abs(pred[ok] - gt[ok]) / np.maximum(sigma[ok], 1e-9)
    out: dict[str, float | int | list[float]] = {
        "n_with_sigma": int(ok.sum()),
        "within_1sigma": float((z <= 1.0).mean()),
        "within_2sigma": float((z <= 2.0).mean()),
        "median_sigma_kmh": float(np.median(sigma[ok])),
    }
    if vehicles is not None:
        keys = np.asarray(vehicles)[ok]
        out["vehicles"] = int(len(np.unique(keys)))
        out["within_1sigma_90"] = list(vehicle_interval(z <= 1.0, keys))
    return out


def vehicle_interval(
    hits: np.ndarray, vehicles: np.ndarray, level: float = 0.90, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """The ``level`` interval of the share of ``hits`` when the vehicles, not the samples, are
    drawn again (a cluster bootstrap, ``resamples`` draws, seeded: the same figures every run).
    One vehicle's samples are frames of one track, its errors alike from frame to frame: a cell of
    15 vehicles measures a share to a few points, however many frames it has."""
    _, group = np.unique(vehicles, return_inverse=True)
    n = np.bincount(group).astype(float)
    k = np.bincount(group, weights=np.asarray(hits, float))
    rng = np.random.default_rng(seed)
    shares = np.empty(resamples)
    for start in range(0, resamples, 100):  # 100 draws at a time: a long flight has thousands of vehicles
        draws = rng.integers(0, len(n), (min(100, resamples - start), len(n)))
        shares[start : start + len(draws)] = k[draws].sum(axis=1) / n[draws].sum(axis=1)
    lo, hi = np.percentile(shares, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def summarize_speed(samples: SpeedSamples) -> dict:
    """MAE / RMSE / p95 in km/h and %, coverage, sigma calibration, and the errors by true-speed
    and altitude bins."""
    out: dict = _error_stats(samples.gt_kmh, samples.pred_kmh)
    out["matched"] = int(len(samples))
    out["coverage"] = float(np.isfinite(samples.pred_kmh).mean()) if len(samples) else 0.0
    vehicles = np.char.add(np.char.add(samples.sequence.astype(str), "#"), samples.gt_ids.astype(str))
    out["sigma"] = sigma_calibration(samples.gt_kmh, samples.pred_kmh, samples.sigma_kmh, vehicles)
    out["measurement_sigma"] = sigma_calibration(
        samples.gt_kmh, samples.pred_kmh, samples.measurement_sigma_kmh, vehicles
    )
    reported = np.isfinite(samples.pred_kmh)
    untrusted = reported & ~samples.trusted
    out["untrusted_share"] = float(untrusted.sum() / reported.sum()) if reported.any() else 0.0
    out["trusted"] = _error_stats(samples.gt_kmh, np.where(untrusted, np.nan, samples.pred_kmh))
    by_speed = {}
    for lo, hi in zip(SPEED_BINS_KMH[:-1], SPEED_BINS_KMH[1:], strict=True):
        sel = (samples.gt_kmh >= lo) & (samples.gt_kmh < hi)
        if sel.any():
            by_speed[_bin_label(lo, hi, "km/h")] = _error_stats(samples.gt_kmh[sel], samples.pred_kmh[sel])
    out["by_speed"] = by_speed
    by_alt = {}
    for lo, hi in zip(ALTITUDE_BINS_M[:-1], ALTITUDE_BINS_M[1:], strict=True):
        sel = (samples.altitude_m >= lo) & (samples.altitude_m < hi)
        if sel.any():
            by_alt[_bin_label(lo, hi, "m")] = _error_stats(samples.gt_kmh[sel], samples.pred_kmh[sel])
    out["by_altitude"] = by_alt
    return out
