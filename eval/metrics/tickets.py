"""Ticket metrics (issue 38): the number on the ticket against the truth, as an officer sees it.

Each predicted violation is given its vehicle: the ground-truth id its track was matched to (IoU,
:func:`~eval.metrics.matching.prepare_sequence`) in the most frames of its measuring base, else of
the violation's whole span (:func:`vehicle_of`), else the vehicle under its box on its snapshot's
frame at IoU >= 0.3 (:func:`vehicle_under`: a motorcycle boxed larger than its gt box). Per violation (:class:`TicketRecord`), with the
vehicle's true speeds (the simulator's ``gt/speeds.csv``):

* the true speed over the same base (the mean of the per-frame true speeds over its frames: at a
  constant frame rate, the time-weighted mean, the speed a fit over the base measures), the
  ticket's signed error (ticket - true), whether its size is within the tolerance at the ticket
  speed (:func:`pipelines.ticket.tolerance_at`, the violation's own ``tolerance_kmh`` where set),
  and error / ticket sigma (the sigma's check: share within 1 and within 1.645 sigma);
* a **wrong ticket**: enforceable, and the vehicle's true speed never exceeded the limit over the
  frames it was visible (a driver who was not speeding; a vehicle between the limit and the limit +
  tolerance may be ticketed or not: no wrong ticket). An enforceable violation with no vehicle is an
  **unmatched ticket**, counted apart;
* the peak's signed error (the highest per-frame estimate against the vehicle's highest true speed
  over the violation's frames): the upward bias the ticket speed removed;
* a **lower-bound ticket**: ticket - k sigma > limit (the lower-bound rule with tolerance 0, applied
  offline whatever rule the engine ran), wrong when the true speed over its base is at most the
  limit.

Per vehicle (:class:`VehicleCounts`): those whose true speed stayed at or below the limit (the
wrong tickets' denominator: per 1,000 such vehicles, with the exact one-sided 95 % upper bound,
:func:`binomial_upper`), and the **clear speeders** - at or above limit + tolerance + 5 km/h
throughout a window of at least ``base_min_s`` and ``base_min_m`` while visible - a clear speeder
without an enforceable violation being a **missed violation**.

:class:`TicketSamples` holds both and concatenates over sequences; :func:`summarize_tickets` gives
the figures (``metrics.json``: ``tickets``, and the records under ``ticket_records`` so that
benchmarks, :mod:`eval.ticket_grid`, pool them).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields

import numpy as np

from eval.groundtruth import GroundTruth, GtSpeeds
from eval.metrics.matching import MatchedSequence, box_iou
from eval.metrics.predictions import PredTracks
from pipelines.config import RulesConfig
from pipelines.ticket import Tolerance, tolerance_at
from pipelines.types import Violation

MISSED_MARGIN_KMH = 5.0  # a clear speeder: at least limit + tolerance + this
ACCELERATING_KMH = 0.5  # true speed change across a base above which the vehicle accelerated
UPPER_CONFIDENCE = 0.95  # of the wrong-ticket rate's one-sided upper bound
SIGMA_K = 1.645  # the second sigma check: one-sided 95 %
# a violation whose track was never matched (IoU 0.5) is the vehicle under its snapshot's box at
# this IoU (the looser matching of loose boxes, as AU-AIR is scored at 0.3)
SNAPSHOT_MATCH_IOU = 0.3


@dataclass(frozen=True, slots=True)
class TicketRules:
    """What the tickets are judged against: the limit in force, the tolerance, the base minimum."""

    speed_limit_kmh: float
    tolerance: Tolerance = Tolerance()
    base_min_s: float = 1.0
    base_min_m: float = 15.0

    @staticmethod
    def of(rules: RulesConfig, speed_limit_kmh: float) -> TicketRules:
        return TicketRules(float(speed_limit_kmh), Tolerance.of(rules), rules.base_min_s, rules.base_min_m)

    def clear_threshold(self, speed_kmh: np.ndarray) -> np.ndarray:
        """The true speed at or above which a vehicle is a clear speeder, at each speed."""
        tol = np.array([tolerance_at(float(s), self.tolerance) for s in np.atleast_1d(speed_kmh)])
        return self.speed_limit_kmh + tol + MISSED_MARGIN_KMH


@dataclass(frozen=True, slots=True)
class TicketRecord:
    """One predicted violation and the truth of its vehicle; NaN where unknown (no ticket speed, no
    vehicle, no true speed in the frames)."""

    sequence: str
    track_id: int
    gt_id: int | None  # its vehicle; None: unmatched
    status: str
    speed_limit_kmh: float  # the limit it is judged against (the sequence's)
    ticket_kmh: float
    sigma_kmh: float
    k: float
    tolerance_kmh: float  # at the ticket speed
    peak_kmh: float
    true_kmh: float  # the vehicle's mean true speed over the base
    true_change_kmh: float  # its true speed at the base's last frame minus the first
    true_max_kmh: float  # its highest true speed over every frame it was visible
    peak_true_kmh: float  # its highest true speed over the violation's frames
    scale_source: str = ""  # the scale its ticket rests on (pipelines.height): flight, site, lrf ...
    status_reason: str = ""  # why it is not enforceable ("" when it is)

    @property
    def enforceable(self) -> bool:
        return self.status == "enforceable"

    @property
    def has_ticket(self) -> bool:
        return math.isfinite(self.ticket_kmh)

    @property
    def error_kmh(self) -> float:
        return self.ticket_kmh - self.true_kmh

    @property
    def z(self) -> float:
        """Error in ticket sigmas (NaN without a positive sigma)."""
        return self.error_kmh / self.sigma_kmh if self.sigma_kmh > 0 else float("nan")

    @property
    def within_tolerance(self) -> bool:
        return abs(self.error_kmh) <= self.tolerance_kmh + 1e-9

    @property
    def accelerating(self) -> bool:
        return abs(self.true_change_kmh) > ACCELERATING_KMH

    @property
    def peak_error_kmh(self) -> float:
        return self.peak_kmh - self.peak_true_kmh

    @property
    def wrong(self) -> bool:
        """Enforceable, but its vehicle never exceeded the limit."""
        return self.enforceable and self.gt_id is not None and self.true_max_kmh <= self.speed_limit_kmh

    @property
    def lower_bound_ticket(self) -> bool:
        """ticket - k sigma above the limit (the lower-bound rule, tolerance 0)."""
        return self.ticket_kmh - self.k * self.sigma_kmh > self.speed_limit_kmh

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: Mapping) -> TicketRecord:
        """From :meth:`to_dict` after a JSON round trip (null numbers: NaN)."""
        values = {}
        for f in fields(TicketRecord):
            v = d.get(f.name)
            if f.name in ("sequence", "status", "scale_source", "status_reason"):
                values[f.name] = str(v or "")
            elif f.name in ("track_id", "gt_id"):
                values[f.name] = None if v is None else int(v)
            else:
                values[f.name] = float("nan") if v is None else float(v)
        return TicketRecord(**values)


@dataclass(frozen=True, slots=True)
class VehicleCounts:
    """Vehicles of one or more sequences (counted per sequence: ids are a sequence's own)."""

    vehicles: int = 0  # with true speeds in a visible frame
    at_or_below_limit: int = 0  # true speed never above the limit while visible
    wrongly_ticketed: int = 0  # of those, vehicles with an enforceable violation
    clear_speeders: int = 0
    missed: int = 0  # clear speeders without an enforceable violation

    def __add__(self, other: VehicleCounts) -> VehicleCounts:
        return VehicleCounts(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


@dataclass(frozen=True, slots=True)
class TicketSamples:
    records: tuple[TicketRecord, ...]
    vehicles: VehicleCounts

    @staticmethod
    def concat(items: Iterable[TicketSamples]) -> TicketSamples:
        items = list(items)
        total = VehicleCounts()
        for s in items:
            total = total + s.vehicles
        return TicketSamples(tuple(r for s in items for r in s.records), total)

    def to_json(self) -> dict:
        return {"vehicles": asdict(self.vehicles), "violations": [r.to_dict() for r in self.records]}

    @staticmethod
    def from_json(d: Mapping) -> TicketSamples:
        counts = {f.name: int((d.get("vehicles") or {}).get(f.name) or 0) for f in fields(VehicleCounts)}
        records = tuple(TicketRecord.from_dict(r) for r in d.get("violations") or ())
        return TicketSamples(records, VehicleCounts(**counts))


@dataclass(frozen=True, slots=True, eq=False)
class _VehicleTruth:
    """One vehicle's true speeds, frames ascending; ``visible``: the frame counts as seen."""

    frames: np.ndarray
    time_s: np.ndarray
    speed_kmh: np.ndarray
    visible: np.ndarray

    def between(self, first: int, last: int) -> np.ndarray:
        return self.speed_kmh[(self.frames >= first) & (self.frames <= last)]

    def max_seen(self) -> float:
        s = self.speed_kmh[self.visible] if self.visible.any() else self.speed_kmh
        return float(s.max()) if len(s) else float("nan")


def track_gt_frames(matched: MatchedSequence, pred: PredTracks) -> dict[int, list[tuple[int, int]]]:
    """track_id -> its (frame, gt_id) matches, per frame."""
    out: dict[int, list[tuple[int, int]]] = {}
    for frame, gid, prow, _ in matched.pairs:
        out.setdefault(int(pred.ids[prow]), []).append((int(frame), int(gid)))
    return out


def vehicle_of(v: Violation, track_frames: Mapping[int, Sequence[tuple[int, int]]]) -> int | None:
    """The gt id the violation's track was matched to in the most frames of its measuring base,
    else of the violation's span (ties: the lower id); None when it was matched to none there."""
    spans = [(v.start_frame, v.end_frame)]
    if v.base is not None:
        spans.insert(0, (v.base.start_frame, v.base.end_frame))
    pairs = track_frames.get(int(v.track_id), ())
    for first, last in spans:
        counts = Counter(gid for f, gid in pairs if first <= f <= last)
        if counts:
            return min(counts, key=lambda g: (-counts[g], g))
    return None


def vehicle_under(v: Violation, gt: GroundTruth | None) -> int | None:
    """The scored gt vehicle under the violation's box on the frame its snapshot was taken from
    (``base.snapshot_frame``), when they overlap by IoU >= ``SNAPSHOT_MATCH_IOU``; None otherwise.
    The fallback of :func:`vehicle_of` for a track the IoU-0.5 matching never matched: a small
    vehicle whose box the detector draws larger than its gt box (a motorcycle labelled a car)."""
    frame = None if v.base is None else v.base.snapshot_frame
    if gt is None or frame is None:
        return None
    return vehicle_at(gt, frame, v.bbox_xyxy)


def vehicle_at(gt: GroundTruth, frame: int, bbox: Sequence[float]) -> int | None:
    """The scored gt vehicle whose box on ``frame`` overlaps ``bbox`` the most, when by IoU >=
    ``SNAPSHOT_MATCH_IOU``; None otherwise (also :mod:`eval.live_tickets`'s match)."""
    rows = np.flatnonzero((gt.frames == frame) & ~gt.distractor)
    if not len(rows):
        return None
    iou = box_iou(np.asarray(bbox, dtype=np.float64), gt.xyxy[rows])[0]
    best = int(np.argmax(iou))
    return int(gt.ids[rows[best]]) if iou[best] >= SNAPSHOT_MATCH_IOU else None


def _truths(
    gt_speeds: GtSpeeds,
    visible: set[tuple[int, int]] | None,
    n_frames: int | None,
    fps: float | None,
) -> dict[int, _VehicleTruth]:
    keep = np.ones(len(gt_speeds.frames), bool) if n_frames is None else gt_speeds.frames <= n_frames
    frames, ids = gt_speeds.frames[keep], gt_speeds.ids[keep]
    speed, t = gt_speeds.speed_kmh[keep], np.asarray(gt_speeds.time_s, float)[keep]
    if fps:
        t = np.where(np.isfinite(t), t, (frames - 1) / fps)
    out = {}
    for gid in np.unique(ids):
        sel = np.nonzero(ids == gid)[0]
        sel = sel[np.argsort(frames[sel], kind="stable")]
        seen = (
            np.ones(len(sel), bool)
            if visible is None
            else np.array([(int(f), int(gid)) in visible for f in frames[sel]], bool)
        )
        out[int(gid)] = _VehicleTruth(frames[sel], t[sel], speed[sel], seen)
    return out


def _runs(flags: np.ndarray, frames: np.ndarray) -> list[slice]:
    """The runs of True ``flags`` over consecutive ``frames``."""
    out: list[slice] = []
    start = None
    for i, on in enumerate(flags.tolist()):
        if on and start is not None and frames[i] != frames[i - 1] + 1:
            out.append(slice(start, i))
            start = None
        if on and start is None:
            start = i
        elif not on and start is not None:
            out.append(slice(start, i))
            start = None
    if start is not None:
        out.append(slice(start, len(flags)))
    return out


def clear_speeder(truth: _VehicleTruth, rules: TicketRules) -> bool:
    """At or above the clear threshold throughout consecutive visible frames spanning at least
    ``base_min_s`` and ``base_min_m`` (distance: the true speed integrated over time)."""
    over = truth.visible & (truth.speed_kmh >= rules.clear_threshold(truth.speed_kmh))
    for run in _runs(over, truth.frames):
        t, v = truth.time_s[run], truth.speed_kmh[run] / 3.6
        if len(t) < 2:
            continue
        dist = float(np.sum(0.5 * (v[1:] + v[:-1]) * np.diff(t)))
        if t[-1] - t[0] >= rules.base_min_s - 1e-9 and dist >= rules.base_min_m - 1e-9:
            return True
    return False


def _record(
    sequence: str, v: Violation, gid: int | None, truth: _VehicleTruth | None, rules: TicketRules
) -> TicketRecord:
    nan = float("nan")
    ticket = nan if v.ticket_speed_kmh is None else float(v.ticket_speed_kmh)
    tol = v.tolerance_kmh if v.tolerance_kmh is not None else tolerance_at(ticket, rules.tolerance)
    true = change = true_max = peak_true = nan
    if truth is not None:
        true_max = truth.max_seen()
        span = truth.between(v.start_frame, v.end_frame)
        peak_true = float(span.max()) if len(span) else nan
        if v.base is not None:
            on_base = truth.between(v.base.start_frame, v.base.end_frame)
            if len(on_base):
                true, change = float(on_base.mean()), float(on_base[-1] - on_base[0])
    return TicketRecord(
        sequence=sequence,
        track_id=int(v.track_id),
        gt_id=gid,
        status=v.status,
        speed_limit_kmh=rules.speed_limit_kmh,
        ticket_kmh=ticket,
        sigma_kmh=nan if v.ticket_sigma_kmh is None else float(v.ticket_sigma_kmh),
        k=nan if v.confidence_k is None else float(v.confidence_k),
        tolerance_kmh=float(tol),
        peak_kmh=float(v.peak_speed_kmh),
        true_kmh=true,
        true_change_kmh=change,
        true_max_kmh=true_max,
        peak_true_kmh=peak_true,
        scale_source="" if v.scale is None else v.scale.source,
        status_reason=v.status_reason,
    )


def ticket_samples(
    sequence: str,
    predicted: Iterable[Violation],
    matched: MatchedSequence,
    pred: PredTracks,
    gt_speeds: GtSpeeds,
    rules: TicketRules,
    *,
    visible: set[tuple[int, int]] | None = None,
    fps: float | None = None,
    gt: GroundTruth | None = None,
) -> TicketSamples:
    """The ticket records and vehicle counts of one sequence. ``visible``: the (frame, gt id) pairs
    where a vehicle was seen (scored ground truth; None: wherever it has a true speed); true speeds
    after the last matched frame (``matched.n_frames``) are left out; ``fps`` times the rows of a
    speeds file without ``time_s``; ``gt``: the boxes :func:`vehicle_under` falls back on."""
    truths = _truths(gt_speeds, visible, matched.n_frames, fps)
    track_frames = track_gt_frames(matched, pred)
    records = []
    for v in predicted:
        gid = vehicle_of(v, track_frames)
        if gid is None:
            gid = vehicle_under(v, gt)
        records.append(_record(sequence, v, gid, truths.get(gid) if gid is not None else None, rules))
    ticketed = {r.gt_id for r in records if r.enforceable and r.gt_id is not None}
    seen = {gid: t for gid, t in truths.items() if t.visible.any()}
    below = {gid for gid, t in seen.items() if t.max_seen() <= rules.speed_limit_kmh}
    clear = {gid for gid, t in seen.items() if clear_speeder(t, rules)}
    counts = VehicleCounts(
        vehicles=len(seen),
        at_or_below_limit=len(below),
        wrongly_ticketed=len(below & ticketed),
        clear_speeders=len(clear),
        missed=len(clear - ticketed),
    )
    return TicketSamples(tuple(records), counts)


def binomial_upper(k: int, n: int, confidence: float = UPPER_CONFIDENCE) -> float:
    """Exact (Clopper-Pearson) one-sided upper confidence bound of a rate of ``k`` events in ``n``
    trials (k = 0: 1 - (1 - confidence)^(1/n), about 3 / n at 95 %); NaN for n = 0."""
    if n <= 0:
        return float("nan")
    if k >= n:
        return 1.0
    from scipy.stats import beta

    return float(beta.ppf(confidence, k + 1, n - k))


def _per(k: int, n: int, scale: float = 1000.0) -> float:
    return scale * k / n if n else float("nan")


def _errors(values: Sequence[float], signed_max: bool = True) -> dict:
    e = np.asarray(values, float)
    if not len(e):
        return {"n": 0}
    out = {
        "n": len(e),
        "median_kmh": float(np.median(e)),
        "mean_kmh": float(np.mean(e)),
        "median_abs_kmh": float(np.median(np.abs(e))),
        "p95_abs_kmh": float(np.percentile(np.abs(e), 95)),
        "max_abs_kmh": float(np.max(np.abs(e))),
    }
    if signed_max:
        out["max_kmh"] = float(np.max(e))
    return out


def _ticket_errors(scored: Sequence[TicketRecord]) -> dict:
    """The ticket speed's error over the violations with a ticket speed and a true one."""
    out = _errors([r.error_kmh for r in scored])
    if scored:
        z = np.array([r.z for r in scored])
        z = z[np.isfinite(z)]
        out["within_tolerance"] = float(np.mean([r.within_tolerance for r in scored]))
        out["within_1sigma"] = float(np.mean(np.abs(z) <= 1.0)) if len(z) else float("nan")
        out["within_1645sigma"] = float(np.mean(np.abs(z) <= SIGMA_K)) if len(z) else float("nan")
    return out


def reason_kind(reason: str) -> str:
    """What kind of reason a violation's ``status_reason`` is: its lead clause ("within the
    tolerance", "measuring base too short", "uncertainty too large"; a hold with its cause, "held
    for review: scale check suspect"); "" for none."""
    parts = [p.strip() for p in str(reason or "").split(":")]
    if parts[0] == "held for review" and len(parts) > 1:
        return f"held for review: {parts[1]}"
    return parts[0]


def not_enforceable_why(records: Iterable[TicketRecord]) -> dict[str, int]:
    """How many violations were not enforceable for each kind of reason (:func:`reason_kind`),
    most first; "(no reason recorded)" for records from before reasons were kept."""
    kinds = Counter(
        reason_kind(r.status_reason) or "(no reason recorded)" for r in records if not r.enforceable
    )
    return dict(kinds.most_common())


def format_why(why: Mapping[str, int]) -> str:
    """:func:`not_enforceable_why`'s counts on a line: "within the tolerance 3, ..."; "" for none."""
    return ", ".join(f"{kind} {n}" for kind, n in why.items())


def summarize_tickets(samples: TicketSamples) -> dict:
    """The figures of :mod:`eval.metrics.tickets` (module docstring) over ``samples``."""
    recs = samples.records
    c = samples.vehicles
    enforceable = [r for r in recs if r.enforceable]
    matched_enf = [r for r in enforceable if r.gt_id is not None]
    scored = [r for r in recs if r.has_ticket and r.gt_id is not None and math.isfinite(r.true_kmh)]
    lower = [r for r in recs if r.has_ticket and r.lower_bound_ticket]
    lower_scored = [r for r in lower if r.gt_id is not None and math.isfinite(r.true_kmh)]
    lower_wrong = sum(1 for r in lower_scored if r.true_kmh <= r.speed_limit_kmh)
    wrong = [r for r in enforceable if r.wrong]
    return {
        "violations": len(recs),
        "with_ticket_speed": sum(1 for r in recs if r.has_ticket),
        "enforceable": len(enforceable),
        "unmatched_tickets": len(enforceable) - len(matched_enf),
        "vehicles": c.vehicles,
        "at_or_below_limit": c.at_or_below_limit,
        "wrong_tickets": len(wrong),
        "wrongly_ticketed_vehicles": c.wrongly_ticketed,
        "wrong_per_1000": _per(c.wrongly_ticketed, c.at_or_below_limit),
        "wrong_per_1000_upper95": 1000.0 * binomial_upper(c.wrongly_ticketed, c.at_or_below_limit),
        "wrong_share": len(wrong) / len(matched_enf) if matched_enf else float("nan"),
        "clear_speeders": c.clear_speeders,
        "missed_violations": c.missed,
        "missed_per_1000": _per(c.missed, c.clear_speeders),
        "missed_share": c.missed / c.clear_speeders if c.clear_speeders else float("nan"),
        "ticket_error": _ticket_errors(scored),
        "ticket_error_accelerating": _errors([r.error_kmh for r in scored if r.accelerating]),
        "ticket_error_steady": _errors([r.error_kmh for r in scored if not r.accelerating]),
        "peak_error": _errors([r.peak_error_kmh for r in scored if math.isfinite(r.peak_true_kmh)]),
        "not_enforceable": not_enforceable_why(recs),
        "lower_bound": {
            "tickets": len(lower),
            "unmatched": len(lower) - len(lower_scored),
            "wrong": lower_wrong,
            "wrong_share": lower_wrong / len(lower_scored) if lower_scored else float("nan"),
        },
    }


__all__ = [
    "ACCELERATING_KMH",
    "MISSED_MARGIN_KMH",
    "TicketRecord",
    "TicketRules",
    "TicketSamples",
    "VehicleCounts",
    "binomial_upper",
    "clear_speeder",
    "format_why",
    "not_enforceable_why",
    "reason_kind",
    "summarize_tickets",
    "ticket_samples",
    "track_gt_frames",
    "vehicle_of",
]
