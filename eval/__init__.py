"""Scoring the engine against ground truth, and flights with exact ground truth to score it on.

* ``simulate/`` - synthetic drone flights (video, DJI .SRT, MOT ground truth, per-frame speeds,
  violations, road masks), deterministic by seed (``airpatrol simulate``);
* ``datasets``, ``groundtruth``, ``oracle``, ``variants`` - what is scored and how (MOT folders,
  simulated flights, UAVDT; the oracle detector; ablations);
* ``runner`` - one sequence through ``pipelines.builder.build_pipeline`` (the live server's builder)
  and ``metrics/`` (HOTA/MOTA/IDF1 with TrackEval, speed errors and their sigma, violations);
* ``cli``, ``batch``, ``report``, ``results`` - ``airpatrol eval`` (a batch of sequences: the
  ``batch`` package's protocol), its metrics.json, report.md and plots;
* ``bands``, ``speed_grid``, ``egomotion``, ``bench_egomotion`` - tables of the benchmarks in
  ``eval/examples/`` (see eval/README.md and docs/RESULTS.md).

It imports ``pipelines`` and ``batch``; only the ``airpatrol`` command and the tests import it
(``training`` reads the simulator's flights from disk, not through imports).
"""
