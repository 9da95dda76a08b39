"""The streams benchmark with a process per stream: ``bench --streams`` as a server with
``engine_processes`` and ``engine_detector_service`` runs its streams.

:func:`pipelines.streams_bench.run_streams` runs N pipelines on threads of one process around one
batched detector: past a few streams their serial work shares one interpreter lock, which on a GPU
box with many cores is the limit before the GPU is. A server with engine processes runs each
stream's pipeline in a process of its own (:mod:`edge_server.engines`), the frames' pixels handed
over through shared memory, and with the detector service one process holds the detector (on a
GPU: one CUDA context) and batches every engine's frames. This runs exactly that machinery
(:class:`~edge_server.engines.supervisor.EngineProcesses`, the engines' pipes and frame slots, the
service) without receiving or decoding: the flight's frames decoded once in this process, each
stream's thread here handing them to its engine one after another, as fast as it answers. The
engines stay up from one count to the next (their models loaded), as a server keeps idle ones, and
each runs a few frames before the first count it is in (the networks' first runs are no count's).

The report is :func:`pipelines.streams_bench.run_streams`'s (``mode`` ``processes``): each
stream's fps, the cores of every process (this one, the engines, the service), the detector
service's batches over the count, and what holds the next count back.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from typing import Any

from pipelines.batching import stats_between
from pipelines.config import PipelineConfig
from pipelines.streams_bench import (
    PROCESSES,
    count_figures,
    default_prepare_ahead,
    gave_up,
    log_count,
    play,
    report_of,
    warm_up,
)
from pipelines.types import Frame


def run_streams_processes(
    config: PipelineConfig,
    frames: Sequence[Frame],
    counts: Sequence[int],
    *,
    target_fps: float = 30.0,
    max_batch: int | None = None,
    threads: int | None = None,
    detector_factory: Any = None,
    timeout_s: float = 60.0,
    start_timeout_s: float = 300.0,
    give_up_after: int | None = None,
    prepare_ahead: bool | None = None,
) -> dict[str, Any]:
    """For each stream count, that many engine processes (started as needed, then kept) over
    ``frames`` at once around one detector service. ``threads``: OpenCV's and the detector's
    threads in each process (``engine_threads``; None: theirs, every core); ``detector_factory``: an
    importable callable whose detector the service serves as the whole stage (as ``serve
    --detector-factory``), instead of the config's network; ``give_up_after``, ``prepare_ahead``
    (each engine's prepare thread, asked one frame ahead): as
    :func:`~pipelines.streams_bench.run_streams`'s."""
    from edge_server.engines.child import EngineSpec
    from edge_server.engines.detector_service import ServiceSpec
    from edge_server.engines.supervisor import EngineProcesses
    from pipelines.motion.shared_detector import default_batch

    if threads:
        config = config.with_overrides(detector={"threads": threads})
    engines = EngineProcesses(timeout_s=timeout_s, start_timeout_s=start_timeout_s, keep_idle=max(counts))
    engines.use_detector_service(
        ServiceSpec(
            config.detector, detector_factory, max_batch=max_batch, threads=threads, log_level=logging.WARNING
        )
    )
    spec = EngineSpec(config, detector_factory, threads=threads, log_level=logging.WARNING)
    ahead = default_prepare_ahead(prepare_ahead)
    runs, device = [], "?"
    try:
        for n in counts:
            new = [engines.start(spec) for _ in range(n)]  # the engines this count needs, warmed up
            try:
                warm_up(new, frames)
            finally:
                for p in new:
                    p.close()  # idle, its models loaded: the count's pipelines start there
            pipelines = [engines.start(spec) for _ in range(n)]
            try:
                service = engines.detector_service
                assert service is not None
                runs.append(_one_count(pipelines, frames, service, target_fps, ahead))
                device = runs[-1].pop("device")
            finally:
                for p in pipelines:
                    p.close()
            log_count(runs[-1])
            if gave_up(runs, give_up_after):
                break
    finally:
        engines.close()
    batch = default_batch(device, max_batch)
    report = report_of(runs, frames, device=device, target_fps=target_fps, max_batch=batch, mode=PROCESSES)
    return {**report, "prepare_ahead": ahead}


def _cpu_s(pids: Sequence[int]) -> float:
    """The CPU seconds (user + system) the processes ``pids`` have used so far (one gone counts 0)."""
    from pipelines.procfs import cpu_seconds

    return sum(cpu for pid in pids if not math.isnan(cpu := cpu_seconds(pid)))


def _one_count(
    pipelines: list[Any], frames: Sequence[Frame], service: Any, target_fps: float, prepare_ahead: bool
) -> dict[str, Any]:
    """Every engine over ``frames`` at once, each fed by a thread of this process; the CPU of every
    process (this one, the service, the engines) and the service's batches over the count."""
    before = service.stats()
    pids = [os.getpid(), before["pid"], *(p.pid for p in pipelines)]
    walls, wall, cpu, stages = play(pipelines, frames, lambda: _cpu_s(pids), prepare_ahead)
    after = service.stats()
    det = stats_between(before, after)
    return {
        **count_figures(len(frames), walls, wall, cpu, det, target_fps, stages),
        "device": after["device"],
    }


__all__ = ["run_streams_processes"]
