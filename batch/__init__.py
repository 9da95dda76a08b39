"""Batches: many recorded flights (or evaluation sequences) through one job, in this process or
fanned out to a Ray cluster, one task per item.

What lives here:

* :mod:`~batch.discovery`: :func:`~batch.discovery.discover_flights` turns folders, globs and list
  files into :class:`~batch.discovery.Flight` items.
* :mod:`~batch.jobs`: a job is a callable ``job(item, out_dir) -> dict`` that writes an item's
  outputs into a fresh folder and returns a small JSON summary (``airpatrol process``:
  :class:`~batch.jobs.ProcessJob`; ``airpatrol eval``: ``eval.batch.SequenceJob``); models are
  loaded once per worker process (:func:`~batch.jobs.worker_detector`).
* :mod:`~batch.commit`: one item run exactly once, whatever dies (the protocol is in its
  docstring): fingerprints, records, the commit by rename, the tasks' frame reports.
* :mod:`~batch.run`: :func:`~batch.run.run_batch` runs the items not already done, with
  :class:`~batch.executors.LocalExecutor` (:mod:`~batch.executors`: one after another, the default)
  or :class:`~batch.ray_executor.RayExecutor` (:mod:`~batch.ray_executor`: ``--ray``), tracks
  their :mod:`~batch.progress` and returns a :class:`~batch.report.BatchReport` (also written as
  ``batch.json`` and ``batch.md``).
* :mod:`~batch.cli`: the ``airpatrol process`` command (one flight, or a batch) and the batch
  options ``airpatrol eval`` shares.

Above the engine: it imports :mod:`pipelines` (never the other way round) and nothing of the web
server, the client or the evaluation; ``eval`` (``airpatrol eval --ray``) and the ``airpatrol``
command import it. Nothing here imports Ray unless a :class:`~batch.ray_executor.RayExecutor` is used.
"""
