"""Tracking metrics: TrackEval's metric classes (HOTA, CLEAR, Identity), fed in memory with a
:class:`~eval.metrics.matching.MatchedSequence` (the MOTChallenge dataset class would need its
folder layout); TrackEval is imported only when scoring."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from eval.metrics.matching import IOU_THRESHOLD, MatchedSequence


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
