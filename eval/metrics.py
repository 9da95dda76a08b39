"""Tracking, speed and violation metrics.

Tracking metrics come from TrackEval's metric classes (HOTA, CLEAR, Identity), fed in memory:
per frame we build the ground-truth and tracker id arrays and the IoU similarity matrix that
``eval_sequence`` expects (the MOTChallenge dataset class would need its folder layout).

Preprocessing per frame, as the benchmarks do it:

* ignore regions (UAVDT, VisDrone): ground truth and predictions with at least half of their box
  inside the union of the frame's ignore regions are removed (UAVDT devkit ``dropObjectsInIgr``);
* distractors (zero-marked or non-scored classes, low visibility): predictions matched to one at
  IoU >= 0.5 (Hungarian) are removed, then the distractors themselves (TrackEval's MOTChallenge rule).

Speed accuracy: predictions are matched to ground truth per frame by IoU (Hungarian, >= 0.5); for
matched pairs with a speed estimate the error is predicted minus true speed (km/h).
Violations: a predicted violation matches a ground-truth one when its track was matched to that
vehicle in at least one frame and their time spans overlap (with ``slack_s``); one-to-one, greedy by
the number of frames the track and the vehicle were matched.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import cv2
import numpy as np
from scipy.optimize import linear_sum_assignment

from eval.groundtruth import GroundTruth, GtSpeeds, GtViolations
from pipelines.types import Violation

log = logging.getLogger(__name__)

IOU_THRESHOLD = 0.5
IGNORE_COVERAGE = 0.5
SPEED_BINS_KMH = (0.0, 30.0, 50.0, 70.0, 90.0, float("inf"))
ALTITUDE_BINS_M = (0.0, 40.0, 80.0, 120.0, 160.0, float("inf"))


# --------------------------------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class PredTracks:
    """Tracked boxes of one sequence as flat arrays (frames 1-based, like MOT files)."""

    frames: np.ndarray  # (N,) int
    ids: np.ndarray  # (N,) int
    xyxy: np.ndarray  # (N, 4)
    speed_kmh: np.ndarray  # (N,) float, NaN while unknown
    class_names: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object))
    sigma_kmh: np.ndarray | None = None  # (N,) the engine's reported one-sigma; None: not collected
    trusted: np.ndarray | None = None  # (N,) bool, the speed stage's trust flag; None: not collected

    def trust(self) -> np.ndarray:
        """(N,) trust flags (True where not collected)."""
        if self.trusted is None or len(self.trusted) != len(self):
            return np.ones(len(self), dtype=bool)
        return self.trusted

    def sigmas(self) -> np.ndarray:
        """(N,) reported sigmas (NaN where unknown or not collected)."""
        if self.sigma_kmh is None or len(self.sigma_kmh) != len(self):
            return np.full(len(self), np.nan)
        return self.sigma_kmh

    @staticmethod
    def empty() -> PredTracks:
        return PredTracks(np.zeros(0, int), np.zeros(0, int), np.zeros((0, 4)), np.zeros(0))

    def __len__(self) -> int:
        return len(self.frames)

    def by_frame(self) -> dict[int, np.ndarray]:
        """1-based frame -> row indices."""
        out: dict[int, list[int]] = {}
        for i, f in enumerate(self.frames.tolist()):
            out.setdefault(int(f), []).append(i)
        return {f: np.asarray(v, int) for f, v in out.items()}

    def of_classes(self, names: Iterable[str] | None) -> PredTracks:
        """The rows whose class is one of ``names`` (all rows for ``None``)."""
        if names is None:
            return self
        if len(self.class_names) != len(self):  # scoring by class needs every row's class
            raise ValueError(f"{len(self)} tracked boxes but {len(self.class_names)} class names")
        keep = np.isin(self.class_names.astype(str), list(names))
        return PredTracks(
            self.frames[keep],
            self.ids[keep],
            self.xyxy[keep],
            self.speed_kmh[keep],
            self.class_names[keep],
            self.sigmas()[keep],
            self.trust()[keep],
        )

    def to_mot_lines(self) -> list[str]:
        lines = []
        for f, i, b in zip(self.frames, self.ids, self.xyxy, strict=True):
            lines.append(f"{f},{i},{b[0]:.2f},{b[1]:.2f},{b[2] - b[0]:.2f},{b[3] - b[1]:.2f},1,-1,-1,-1")
        return lines


class TrackCollector:
    """Accumulates ``FrameResult`` detections into :class:`PredTracks`."""

    def __init__(self) -> None:
        self._frames: list[np.ndarray] = []
        self._ids: list[np.ndarray] = []
        self._xyxy: list[np.ndarray] = []
        self._speed: list[np.ndarray] = []
        self._sigma: list[np.ndarray] = []
        self._trusted: list[np.ndarray] = []
        self._cls: list[np.ndarray] = []

    def add(self, frame_index: int, detections) -> None:
        n = len(detections)
        if n == 0 or detections.tracker_id is None:
            return
        self._frames.append(np.full(n, frame_index + 1, int))
        self._ids.append(np.asarray(detections.tracker_id, int))
        self._xyxy.append(np.asarray(detections.xyxy, float))
        sp = detections.data.get("speed_kmh")
        self._speed.append(np.asarray(sp, float) if sp is not None else np.full(n, np.nan))
        sg = detections.data.get("speed_sigma_kmh")
        self._sigma.append(np.asarray(sg, float) if sg is not None else np.full(n, np.nan))
        tr = detections.data.get("speed_trusted")
        self._trusted.append(np.asarray(tr, bool) if tr is not None else np.ones(n, bool))
        cl = detections.data.get("class_name")
        self._cls.append(
            np.asarray(cl, dtype=object) if cl is not None else np.full(n, "vehicle", dtype=object)
        )

    def result(self) -> PredTracks:
        if not self._frames:
            return PredTracks.empty()
        return PredTracks(
            np.concatenate(self._frames),
            np.concatenate(self._ids),
            np.concatenate(self._xyxy),
            np.concatenate(self._speed),
            np.concatenate(self._cls),
            np.concatenate(self._sigma),
            np.concatenate(self._trusted),
        )


# --------------------------------------------------------------------------------------------------
# Matching helpers
# --------------------------------------------------------------------------------------------------


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix of (N, 4) and (M, 4) xyxy boxes."""
    a = np.asarray(a, float).reshape(-1, 4)
    b = np.asarray(b, float).reshape(-1, 4)
    if len(a) == 0 or len(b) == 0:
        return np.zeros((len(a), len(b)))
    ix = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = ix * iy
    area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def match_iou(a: np.ndarray, b: np.ndarray, threshold: float = IOU_THRESHOLD) -> list[tuple[int, int, float]]:
    """Hungarian matching on IoU; pairs (i, j, iou) with iou >= threshold."""
    iou = box_iou(a, b)
    if iou.size == 0:
        return []
    rows, cols = linear_sum_assignment(-iou)
    return [
        (int(r), int(c), float(iou[r, c])) for r, c in zip(rows, cols, strict=True) if iou[r, c] >= threshold
    ]


def ignore_coverage(boxes: np.ndarray, regions: np.ndarray, image_size: tuple[int, int] | None) -> np.ndarray:
    """Share of each box's area inside the union of ``regions`` (rasterised like the UAVDT devkit)."""
    boxes = np.asarray(boxes, float).reshape(-1, 4)
    if len(boxes) == 0 or len(regions) == 0:
        return np.zeros(len(boxes))
    if image_size is None:
        w = int(np.ceil(max(boxes[:, 2].max(), regions[:, 2].max()))) + 1
        h = int(np.ceil(max(boxes[:, 3].max(), regions[:, 3].max()))) + 1
    else:
        w, h = image_size
    mask = np.zeros((h, w), np.uint8)
    for x0, y0, x1, y1 in np.round(regions).astype(int):
        mask[max(0, y0) : max(0, min(h, y1 + 1)), max(0, x0) : max(0, min(w, x1 + 1))] = 1
    integral = cv2.integral(mask)
    bx = np.round(boxes).astype(int)
    x0 = np.clip(bx[:, 0], 0, w)
    y0 = np.clip(bx[:, 1], 0, h)
    x1 = np.clip(bx[:, 2], 0, w)
    y1 = np.clip(bx[:, 3], 0, h)
    inside = integral[y1, x1] - integral[y0, x1] - integral[y1, x0] + integral[y0, x0]
    area = np.maximum((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]), 1.0)
    return inside / area


@dataclass(frozen=True, slots=True, eq=False)
class MatchedSequence:
    """A sequence after preprocessing: TrackEval's data dict and the per-frame matches."""

    data: dict
    pairs: list[tuple[int, int, int, int]]  # (frame, gt_id, pred_row, gt_row) matched at IoU >= 0.5
    n_frames: int


def prepare_sequence(
    gt: GroundTruth,
    pred: PredTracks,
    n_frames: int,
    image_size: tuple[int, int] | None = None,
) -> MatchedSequence:
    """Apply ignore regions and distractors, then build TrackEval's per-frame arrays."""
    gt_scored = ~gt.distractor
    gt_rows = {f: np.asarray(v, int) for f, v in _rows_by_frame(gt.frames, gt_scored).items()}
    distractors = gt.distractors_by_frame()
    ignores = gt.ignore_by_frame()
    pred_rows = pred.by_frame()

    gt_id_map: dict[int, int] = {}
    tr_id_map: dict[int, int] = {}
    gt_ids_t, tr_ids_t, sims = [], [], []
    pairs: list[tuple[int, int, int, int]] = []
    n_gt = n_tr = 0
    for f in range(1, n_frames + 1):
        g = gt_rows.get(f, np.zeros(0, int))
        p = pred_rows.get(f, np.zeros(0, int))
        if f in ignores and (len(g) or len(p)):
            reg = ignores[f]
            if len(g):
                g = g[ignore_coverage(gt.xyxy[g], reg, image_size) < IGNORE_COVERAGE]
            if len(p):
                p = p[ignore_coverage(pred.xyxy[p], reg, image_size) < IGNORE_COVERAGE]
        if f in distractors and len(p):
            drop = {j for _, j, _ in match_iou(distractors[f], pred.xyxy[p])}
            if drop:
                p = np.array([r for k, r in enumerate(p) if k not in drop], int)
        gids = np.array([gt_id_map.setdefault(int(i), len(gt_id_map)) for i in gt.ids[g]], int)
        tids = np.array([tr_id_map.setdefault(int(i), len(tr_id_map)) for i in pred.ids[p]], int)
        sim = box_iou(gt.xyxy[g], pred.xyxy[p])
        gt_ids_t.append(gids)
        tr_ids_t.append(tids)
        sims.append(sim)
        n_gt += len(g)
        n_tr += len(p)
        for i, j, _ in match_iou(gt.xyxy[g], pred.xyxy[p]):
            pairs.append((f, int(gt.ids[g[i]]), int(p[j]), int(g[i])))
    data = {
        "num_timesteps": n_frames,
        "num_gt_ids": len(gt_id_map),
        "num_tracker_ids": len(tr_id_map),
        "num_gt_dets": n_gt,
        "num_tracker_dets": n_tr,
        "gt_ids": gt_ids_t,
        "tracker_ids": tr_ids_t,
        "similarity_scores": sims,
    }
    return MatchedSequence(data, pairs, n_frames)


def _rows_by_frame(frames: np.ndarray, sel: np.ndarray) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i in np.nonzero(sel)[0]:
        out.setdefault(int(frames[i]), []).append(int(i))
    return out


# --------------------------------------------------------------------------------------------------
# Tracking metrics (TrackEval)
# --------------------------------------------------------------------------------------------------


def _metric_objects():
    from trackeval.metrics import CLEAR, HOTA, Identity  # slow to import; only scoring needs it

    return (
        HOTA(),
        CLEAR({"THRESHOLD": IOU_THRESHOLD, "PRINT_CONFIG": False}),
        Identity({"THRESHOLD": IOU_THRESHOLD, "PRINT_CONFIG": False}),
    )


def raw_tracking_results(matched: MatchedSequence) -> dict[str, dict]:
    """TrackEval's per-sequence result dicts (kept for combining sequences)."""
    hota, clear, identity = _metric_objects()
    return {
        "HOTA": hota.eval_sequence(matched.data),
        "CLEAR": clear.eval_sequence(matched.data),
        "Identity": identity.eval_sequence(matched.data),
    }


def combine_tracking_results(per_seq: Mapping[str, Mapping[str, dict]]) -> dict[str, dict]:
    hota, clear, identity = _metric_objects()
    out = {}
    for name, metric in (("HOTA", hota), ("CLEAR", clear), ("Identity", identity)):
        out[name] = metric.combine_sequences({seq: res[name] for seq, res in per_seq.items()})
    return out


def summarize_tracking(raw: Mapping[str, dict]) -> dict[str, float]:
    """Headline numbers (HOTA family averaged over its alpha thresholds, as TrackEval reports)."""
    h, c, i = raw["HOTA"], raw["CLEAR"], raw["Identity"]
    return {
        "HOTA": float(np.mean(h["HOTA"])),
        "DetA": float(np.mean(h["DetA"])),
        "AssA": float(np.mean(h["AssA"])),
        "LocA": float(np.mean(h["LocA"])),
        "MOTA": float(c["MOTA"]),
        "MOTP": float(c["MOTP"]),
        "IDF1": float(i["IDF1"]),
        "IDP": float(i["IDP"]),
        "IDR": float(i["IDR"]),
        "IDSW": int(c["IDSW"]),
        "FP": int(c["CLR_FP"]),
        "FN": int(c["CLR_FN"]),
        "TP": int(c["CLR_TP"]),
        "MT": int(c["MT"]),
        "ML": int(c["ML"]),
        "Frag": int(c["Frag"]),
        "recall": float(c["CLR_Re"]),
        "precision": float(c["CLR_Pr"]),
    }


# --------------------------------------------------------------------------------------------------
# Speed accuracy
# --------------------------------------------------------------------------------------------------


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
    """The matched (frame, vehicle) pairs with a true speed. ``altitude_sigma_frac``: the
    configuration's ``speed.altitude_sigma_frac``, taken out of the reported sigma for
    ``measurement_sigma_kmh``."""
    lookup = gt_speeds.lookup()
    sigmas, trust = pred.sigmas(), pred.trust()
    rows = []
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
            )
        )
    n = len(rows)
    a = np.array(rows, dtype=float).reshape(n, 7)
    with np.errstate(invalid="ignore"):
        measurement = np.sqrt(np.maximum(a[:, 5] ** 2 - (altitude_sigma_frac * a[:, 4]) ** 2, 0.0))
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


# --------------------------------------------------------------------------------------------------
# Violations
# --------------------------------------------------------------------------------------------------


def association_counts(matched: MatchedSequence, pred: PredTracks) -> Counter:
    """(track_id, gt_id) -> number of frames where they were matched."""
    return Counter((int(pred.ids[prow]), gid) for _, gid, prow, _ in matched.pairs)


def violation_metrics(
    predicted: Iterable[Violation],
    truth: GtViolations,
    assoc: Mapping[tuple[int, int], int],
    slack_s: float = 1.0,
    max_time_s: float | None = None,
) -> dict:
    """Precision / recall of speeding events. ``max_time_s`` (time of the last processed frame, for
    runs cut with --max-frames) drops ground truth that had not yet lasted the rule's minimum
    duration by then: no pipeline could have reported it."""
    preds = list(predicted)
    gts = [
        g
        for g in truth.violations
        if max_time_s is None or g.start_time_s + truth.min_duration_s <= max_time_s + 1e-9
    ]
    candidates = []
    for pi, p in enumerate(preds):
        for gi, g in enumerate(gts):
            n = assoc.get((int(p.track_id), g.id), 0)
            overlap = min(p.end_time_s + slack_s, g.end_time_s) - max(
                p.start_time_s - slack_s, g.start_time_s
            )
            if n > 0 and overlap >= 0:
                candidates.append((n, pi, gi))
    candidates.sort(reverse=True)
    used_p: set[int] = set()
    used_g: set[int] = set()
    matches = []
    for n, pi, gi in candidates:
        if pi in used_p or gi in used_g:
            continue
        used_p.add(pi)
        used_g.add(gi)
        matches.append((pi, gi, n))
    duplicates = sum(
        1 for pi in range(len(preds)) if pi not in used_p and any(c[1] == pi for c in candidates)
    )
    tp = len(matches)
    fp = len(preds) - tp
    fn = len(gts) - tp
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = (
        2 * precision * recall / (precision + recall)
        if tp
        else (0.0 if (tp + fp) and (tp + fn) else float("nan"))
    )
    peak_err = [preds[pi].peak_speed_kmh - gts[gi].peak_speed_kmh for pi, gi, _ in matches]
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "duplicates": duplicates,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "n_pred": len(preds),
        "n_gt": len(gts),
        "peak_speed_mae_kmh": float(np.mean(np.abs(peak_err))) if peak_err else float("nan"),
        "matches": [
            {"track_id": int(preds[pi].track_id), "gt_id": gts[gi].id, "frames_matched": int(n)}
            for pi, gi, n in matches
        ],
    }


def combine_violation_metrics(items: Iterable[Mapping]) -> dict:
    tp = fp = fn = 0
    for m in items:
        tp += m["tp"]
        fp += m["fp"]
        fn += m["fn"]
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * precision * recall / (precision + recall) if tp else float("nan")
    return {"tp": tp, "fp": fp, "fn": fn, "precision": precision, "recall": recall, "f1": f1}
