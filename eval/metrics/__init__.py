"""Tracking, speed and violation metrics of one evaluated sequence against its ground truth.

What lives here, from the bottom up (each module imports only the ones above it in this list):

* :mod:`~eval.metrics.predictions`: :class:`PredTracks` (a sequence's tracked boxes as flat
  arrays) and :class:`TrackCollector` (builds them from a pipeline's frame results).
* :mod:`~eval.metrics.matching`: IoU (:func:`box_iou`, Hungarian :func:`match_iou`), ignore regions
  (:func:`ignore_coverage`) and distractors, and :func:`prepare_sequence`, which applies them per
  frame into a :class:`MatchedSequence`.
* :mod:`~eval.metrics.tracking`: TrackEval's HOTA / CLEAR / Identity on a matched sequence
  (:func:`raw_tracking_results`, :func:`combine_tracking_results`, :func:`summarize_tracking`).
* :mod:`~eval.metrics.speed`: speed errors of the matched pairs (:class:`SpeedSamples`,
  :func:`summarize_speed`) and sigma calibration (:func:`sigma_calibration`,
  :func:`vehicle_interval`).
* :mod:`~eval.metrics.violations`: speeding events matched one-to-one through the track / vehicle
  matches (:func:`violation_metrics`, :func:`combine_violation_metrics`).
* :mod:`~eval.metrics.tickets`: the number on the ticket against the truth of its vehicle: ticket
  speed errors, wrong tickets per 1,000 vehicles at or below the limit (with an exact upper bound),
  missed clear speeders, the lower-bound rule offline (:func:`ticket_samples`,
  :func:`summarize_tickets`, :class:`TicketSamples`).

Imports only :mod:`eval.groundtruth`, :mod:`pipelines.types` and the ticket rule's tolerance
(:mod:`pipelines.ticket`, :mod:`pipelines.config`) of the project (TrackEval only when scoring); imported by the evaluator (:mod:`eval.runner`, :mod:`eval.results`,
:mod:`eval.report`), the demo (:mod:`airpatrol.demo`) and tests. This package re-exports the
public API; private helpers are imported from their module.
"""

from __future__ import annotations

from eval.metrics.matching import (
    IGNORE_COVERAGE,
    IOU_THRESHOLD,
    MatchedSequence,
    box_iou,
    ignore_coverage,
    match_iou,
    prepare_sequence,
)
from eval.metrics.predictions import PredTracks, TrackCollector
from eval.metrics.speed import (
    ALTITUDE_BINS_M,
    SPEED_BINS_KMH,
    SpeedSamples,
    sigma_calibration,
    speed_samples,
    summarize_speed,
    vehicle_interval,
)
from eval.metrics.tickets import TicketRules, TicketSamples, summarize_tickets, ticket_samples
from eval.metrics.tracking import combine_tracking_results, raw_tracking_results, summarize_tracking
from eval.metrics.violations import association_counts, combine_violation_metrics, violation_metrics

__all__ = [
    "ALTITUDE_BINS_M",
    "IGNORE_COVERAGE",
    "IOU_THRESHOLD",
    "SPEED_BINS_KMH",
    "MatchedSequence",
    "PredTracks",
    "SpeedSamples",
    "TicketRules",
    "TicketSamples",
    "TrackCollector",
    "association_counts",
    "box_iou",
    "combine_tracking_results",
    "combine_violation_metrics",
    "ignore_coverage",
    "match_iou",
    "prepare_sequence",
    "raw_tracking_results",
    "sigma_calibration",
    "speed_samples",
    "summarize_speed",
    "summarize_tickets",
    "summarize_tracking",
    "ticket_samples",
    "vehicle_interval",
    "violation_metrics",
]
