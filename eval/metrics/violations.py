"""Violation metrics: a predicted violation matches a ground-truth one when its track was matched to
that vehicle in at least one frame and their time spans overlap (with ``slack_s``); one-to-one,
greedy by the number of frames the track and the vehicle were matched."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np

from eval.groundtruth import GtViolations
from eval.metrics.matching import MatchedSequence
from eval.metrics.predictions import PredTracks
from pipelines.types import Violation


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
        # signed: the largest of many noisy per-frame estimates is biased upward (eval.metrics.tickets
        # sets the ticket speed's error beside it)
        "peak_speed_bias_kmh": float(np.mean(peak_err)) if peak_err else float("nan"),
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
