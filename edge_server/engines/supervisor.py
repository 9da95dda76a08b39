"""The server's engine processes: :class:`EngineProcesses` starts one per stream
(``settings.engine_processes``), counts the ones lost (died, hung) in the metrics, and reports
them all in ``/healthz``: how many run, their memory, what was lost last and why.

Processes start from a fork server that has imported the engine (torch, OpenCV, the detector's
runtime: ``edge_server.engines.preload``) once, so a stream's process starts in well under a second
plus its models' load, and shares those libraries' memory with the others until it writes to it.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import logging
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from edge_server.engine_link import EngineLost
from edge_server.engines.child import EngineSpec
from edge_server.engines.detector_service import DetectorService, DetectorServiceError, ServiceSpec
from edge_server.engines.remote import EngineProcess, EngineStartError, RemotePipeline
from edge_server.engines.slots import sweep_stale
from edge_server.settings import SettingsError
from pipelines.procfs import memory_mb

if TYPE_CHECKING:
    from edge_server.metrics import Metrics
    from edge_server.settings import ServerSettings
    from pipelines.config import PipelineConfig

log = logging.getLogger(__name__)

PRELOAD = ["edge_server.engines.preload"]


# How long an engine's memory figures in /healthz may be old. Reading them (smaps_rollup) walks
# every mapping of the process: 22-37 ms for an engine (1,600 mappings) on the 2-core VM, so a
# /healthz of five engines took 342 ms, and four publishers asking it every second (their liveness
# check) cost the server about half a core during a four-stream run.
MEMORY_MAX_AGE_S = 15.0


def context() -> multiprocessing.context.BaseContext:
    """The fork server where the platform has one (Linux, macOS), else spawn."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = _ForkServerContext()
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


if "forkserver" in multiprocessing.get_all_start_methods():
    from multiprocessing import popen_forkserver

    class _Popen(popen_forkserver.Popen):
        """A fork-server child whose exit status is read by one thread at a time. The fork server
        sends a child's status once and then closes the pipe: of two threads reading it at once
        (a stream's two pipes' threads, or ``Process.start`` sweeping the other children), the
        second meets the closed pipe and overwrites the status with 255, so an engine killed by
        SIGKILL read as "exited with code 255" (4 of 30 kills with six threads polling, CPython
        3.11)."""

        def __init__(self, process_obj: Any) -> None:
            self._poll_lock = threading.Lock()
            super().__init__(process_obj)

        def poll(self, flag: int = os.WNOHANG) -> int | None:
            with self._poll_lock:
                return super().poll(flag)

    class _ForkServerProcess(multiprocessing.context.ForkServerProcess):
        @staticmethod
        def _Popen(process_obj: Any) -> _Popen:
            return _Popen(process_obj)

    class _ForkServerContext(multiprocessing.context.ForkServerContext):
        Process = _ForkServerProcess


class EngineProcesses:
    """Every engine process of this server (thread-safe: streams start from worker threads). A
    stream takes an idle process when there is one (its models loaded: it builds the stream's
    pipeline in a fraction of a second), else starts one; at the stream's end a process that is
    well goes back to the idle ones, up to ``keep_idle`` of them (the others are stopped)."""

    def __init__(
        self, *, timeout_s: float, start_timeout_s: float, keep_idle: int = 1, metrics: Metrics | None = None
    ) -> None:
        self.timeout_s, self.start_timeout_s = timeout_s, start_timeout_s
        self.keep_idle = keep_idle
        self.metrics = metrics
        self._ctx = context()
        self._lock = threading.Lock()
        self._all: dict[int, EngineProcess] = {}
        self._idle: list[EngineProcess] = []
        self.started = 0
        self.lost: collections.Counter[str] = collections.Counter()
        self.last_lost: dict[str, Any] | None = None
        self._closing = False
        self.detector_service: DetectorService | None = None  # use_detector_service
        self._memory: dict[int, tuple[float, dict[str, float]]] = {}  # pid -> (read at, figures)
        sweep_stale()  # a server killed before it could remove its engines' slots

    def use_detector_service(self, spec: ServiceSpec) -> None:
        """Engines started from now on ask one detector service (started with the first of them)
        instead of loading a detector each (settings.engine_detector_service)."""
        self.detector_service = DetectorService(
            spec,
            self._ctx,
            start_timeout_s=self.start_timeout_s,
            timeout_s=0.6 * self.timeout_s,  # the engine then still answers within its own watchdog's
            first_timeout_s=0.9 * self.timeout_s,  # a new input size: the network compiles for it
        )

    def start(self, spec: EngineSpec) -> RemotePipeline:
        """A pipeline for a new stream in an idle engine process, or a new one; returns once it is
        built (:class:`~edge_server.engines.remote.EngineStartError` when it cannot be)."""
        where = None
        if self.detector_service is not None:  # running, or started again after a loss
            try:
                where = self.detector_service.ensure()
            except DetectorServiceError as exc:
                raise EngineStartError(str(exc)) from exc
        while True:
            with self._lock:
                engine = self._idle.pop() if self._idle else None
            if engine is None:
                break
            if not engine.alive:
                self._forget(engine)
                continue
            try:
                metadata = engine.build(where)
            except (EngineLost, EngineStartError) as exc:
                log.warning("engine process %d could not build a new pipeline: %s", engine.pid, exc)
                engine.stop()
                self._forget(engine)
                continue
            return RemotePipeline(engine, spec.config, metadata, self._give_back)
        if where is not None:
            spec = dataclasses.replace(spec, detector_service=where)
        engine = EngineProcess(
            spec,
            self._ctx,
            timeout_s=self.timeout_s,
            start_timeout_s=self.start_timeout_s,
            on_lost=self._on_lost,
        )
        with self._lock:
            self._all[engine.pid] = engine
            self.started += 1
        self._gauge()
        return RemotePipeline(engine, spec.config, engine.metadata, self._give_back)

    def _give_back(self, engine: EngineProcess) -> None:
        """A stream's pipeline was closed: its process waits for the next stream, or is stopped."""
        with self._lock:
            keep = engine.alive and not self._closing and len(self._idle) < self.keep_idle
            if keep:
                self._idle.append(engine)
        if not keep:
            engine.stop()
            self._forget(engine)

    def _forget(self, engine: EngineProcess) -> None:
        with self._lock:
            self._all.pop(engine.pid, None)
        self._gauge()

    def _on_lost(self, engine: EngineProcess, cause: str, message: str) -> None:
        with self._lock:
            self.lost[cause] += 1
            self.last_lost = {"pid": engine.pid, "cause": cause, "reason": message, "at": time.time()}
        if self.metrics is not None:
            self.metrics.engines_lost.labels(cause).inc()

    def _gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.engine_processes.set(len(self._all))

    def close(self) -> None:
        """The server shuts down: every idle process is stopped (the streams' ones end with them)."""
        with self._lock:
            self._closing = True
            idle, self._idle = self._idle, []
        for engine in idle:
            engine.stop()
            self._forget(engine)
        if self.detector_service is not None:
            self.detector_service.stop()

    def _memory_of(self, pid: int, now: float | None = None) -> dict[str, float]:
        """The process's memory figures, read again once they are :data:`MEMORY_MAX_AGE_S` old."""
        now = time.monotonic() if now is None else now
        with self._lock:
            cached = self._memory.get(pid)
            if cached is not None and now - cached[0] < MEMORY_MAX_AGE_S:
                return cached[1]
        figures = memory_mb(pid) or {}
        with self._lock:
            self._memory = {p: m for p, m in self._memory.items() if p in self._all}
            self._memory[pid] = (now, figures)
        return figures

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` says of the engines: each process with its memory and whether it serves
        a stream, started and lost so far, the last one lost and why."""
        with self._lock:
            engines = list(self._all.values())
            idle = {e.pid for e in self._idle}
        processes = [
            {"pid": e.pid, "alive": e.alive, "idle": e.pid in idle, **self._memory_of(e.pid)} for e in engines
        ]
        return {
            "mode": "process",
            "running": sum(p["alive"] for p in processes),
            "processes": processes,
            "started": self.started,
            "lost": dict(self.lost),
            "last_lost": self.last_lost,
            "detector_service": self.detector_service.stats() if self.detector_service is not None else None,
        }


def engine_factory(
    config: PipelineConfig,
    settings: ServerSettings,
    engines: EngineProcesses,
    detector_factory: Any = None,
    segmenter_factory: Any = None,
) -> Callable[[], RemotePipeline]:
    """The server's pipeline factory with engine processes: each call starts one, building the
    live ``config`` with the given model factories (which must be importable: they are sent to
    the process by name)."""
    if settings.engine_threads:
        config = config.with_overrides(detector={"threads": settings.engine_threads})
    spec = EngineSpec(
        config,
        detector_factory,
        segmenter_factory,
        threads=settings.engine_threads,
        nice=settings.engine_nice,
        log_level=logging.getLogger("edge_server").getEffectiveLevel(),
    )
    try:
        pickle.dumps(spec)
    except Exception as exc:  # noqa: BLE001 - a lambda, a closure, a local class
        raise SettingsError(
            "engine_processes: the detector and segmenter factories must be importable callables "
            f"(a module's function or class) to reach the engine processes: {exc}"
        ) from exc
    if settings.engine_detector_service:
        engines.use_detector_service(
            ServiceSpec(
                config.detector,
                detector_factory,
                max_batch=settings.detector_batch,
                wait_ms=settings.detector_batch_wait_ms,
                threads=settings.engine_threads,
                log_level=spec.log_level,
                nice=settings.engine_nice,
            )
        )
    numbers = itertools.count(1)
    return lambda: engines.start(dataclasses.replace(spec, name=f"engine-{next(numbers)}"))


__all__ = ["EngineProcesses", "context", "engine_factory"]
