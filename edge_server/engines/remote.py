"""The server's side of an engine process: :class:`EngineProcess` (the process, its pipes and
watchdog; it serves stream after stream) and :class:`RemotePipeline` (one stream's pipeline there).

A :class:`RemotePipeline` is a pipeline to the stream's worker (``prepare``, ``process``, ``finish``, the rules, the
height reference, ``summary``, ``metadata``, ``close``: what :class:`edge_server.worker.StreamWorker`
uses of :class:`pipelines.pipeline.Pipeline`), each call answered by the stream's engine process
(:mod:`edge_server.engines.child`). The worker's threads wait on the pipes with the interpreter
lock released, so four streams' engines run on every core instead of taking turns on one lock.

Two pipes, as the worker has two threads: ``prepare`` (its prepare thread) and ``process`` (the
worker itself: frames, rules, height reference, the end). A frame's pixels go through the pipe's
:class:`~edge_server.engines.slots.FrameSlot`; a prepared frame stays in the engine, the worker
holds a :class:`~edge_server.engines.child.PreparedRef`.

Watchdog: every call waits at most ``timeout_s`` (``start_timeout_s`` for the start and the first
frame, which loads what the models load lazily). A process that exits, is killed or crashes, and
one that does not answer in time (it is then killed), raise :class:`EngineLost` in the worker,
which ends that stream alone, as failed, with the reason, keeping what it stored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edge_server.engine_link import EngineLost, describe_exit
from edge_server.engines import child
from edge_server.engines.child import EngineSpec, PreparedRef
from edge_server.engines.slots import FrameMeta, FrameSlot, remove_slots_of, to_slot
from pipelines.errors import AirPatrolError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import BaseContext

    from pipelines.config import PipelineConfig, RulesConfig
    from pipelines.effort import Effort
    from pipelines.height import HeightReference
    from pipelines.types import Frame, FrameResult, Violation

log = logging.getLogger(__name__)

POLL_S = 0.25  # how often a waiting call looks whether the process is still there
# what the engine was asked, in a stream's end reason
ASKED = {"prepare": "a frame", "process": "a frame", "start": "its start"}


class EngineStartError(AirPatrolError):
    """The engine process could not build the stream's pipeline (missing weights, a bad config)."""


class EngineError(RuntimeError):
    """A request failed inside the engine (the engine lives on; the worker decides what it ends)."""


@dataclass
class _Channel:
    conn: Connection
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    slot: FrameSlot | None = None


class _Rules:
    """``pipeline.rules`` as the worker uses it: the rules in force and setting new ones."""

    def __init__(self, engine: RemotePipeline, cfg: RulesConfig) -> None:
        self._engine = engine
        self.cfg = cfg

    def set_rules(self, rules: RulesConfig) -> list[Violation]:
        closing = self._engine._call("process", "set_rules", rules)
        self.cfg = rules
        return closing


@dataclass
class _Clock:
    problem: str | None = None  # pipeline.timestamps.problem as of the last processed frame


class EngineProcess:
    """One engine process and its two pipes (started here; ready once it has built a pipeline).
    After a stream it can build the next stream's pipeline (:meth:`build`), its models loaded."""

    def __init__(
        self,
        spec: EngineSpec,
        ctx: BaseContext,
        *,
        timeout_s: float,
        start_timeout_s: float,
        on_lost: Callable[[EngineProcess, str, str], None] | None = None,
    ) -> None:
        self.timeout_s, self.start_timeout_s = timeout_s, start_timeout_s
        self.lost: EngineLost | None = None
        self.stopped = False
        self._on_lost = on_lost
        self._fail_lock = threading.Lock()
        prep_here, prep_there = ctx.Pipe()
        proc_here, proc_there = ctx.Pipe()
        self._proc = ctx.Process(  # type: ignore[attr-defined]
            target=child.main, args=(spec, prep_there, proc_there), name=spec.name, daemon=True
        )
        self._proc.start()
        prep_there.close()  # only the engine holds its ends: its death reads as the end of the pipe
        proc_there.close()
        self.pid: int = self._proc.pid
        self._channels = {"prepare": _Channel(prep_here), "process": _Channel(proc_here)}
        self.metadata = self._wait_ready()

    def _wait_ready(self) -> dict:
        try:
            answer = self._receive(self._channels["process"].conn, self.start_timeout_s, "start")
        except EngineLost as exc:
            self.stop()
            raise EngineStartError(f"the stream's engine could not start: {exc}") from exc
        if answer[0] != "ready":
            self.stop()
            raise EngineStartError(answer[2])
        log.info("engine process %d ready", self.pid)
        return answer[1]["metadata"]

    @property
    def alive(self) -> bool:
        return self.lost is None and not self.stopped and self._proc.is_alive()

    def build(self, detector_service: Any = None) -> dict:
        """A new pipeline in this process for the next stream (the last one closed), asking
        ``detector_service`` (a ``ServiceAddress``) where the server has one; its metadata."""
        try:
            return self.call("process", "build", detector_service, timeout=self.start_timeout_s)
        except EngineError as exc:
            raise EngineStartError(str(exc)) from exc

    def stop(self) -> None:
        """End the process (asked first when it still answers) and remove its frame slots."""
        if self.stopped:
            return
        if self.lost is None and self._proc.is_alive():
            with contextlib.suppress(EngineLost, EngineError, OSError):
                self.call("process", "exit", timeout=min(self.timeout_s, 10.0))
        self.stopped = True
        self._proc.join(5.0)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5.0)
        for ch in self._channels.values():
            with contextlib.suppress(OSError):
                ch.conn.close()
            if ch.slot is not None:
                ch.slot.unlink()
                ch.slot = None
        remove_slots_of(self.pid)  # the engine's own (its frames for the detector service)

    # -- requests -------------------------------------------------------------------------------

    def call(
        self, channel: str, op: str, *args: Any, frame: Frame | None = None, timeout: float | None = None
    ) -> Any:
        """``op`` answered by the process on ``channel`` (``frame``: its pixels through the slot,
        its description as the first argument): EngineLost when the process is gone or does not
        answer in ``timeout`` (default ``timeout_s``), EngineError when the request failed there."""
        ch = self._channels[channel]
        with ch.lock:
            if self.lost is not None:
                raise self.lost
            if self.stopped:
                raise EngineError("the engine process was stopped")
            if frame is not None:
                args = (self._to_slot(ch, frame), *args)
            try:
                ch.conn.send((op, *args))
            except (OSError, ValueError):
                raise self._fail("died", self._death()) from None
            answer = self._receive(ch.conn, timeout or self.timeout_s, op)
        if answer[0] == "ok":
            return answer[1]
        raise EngineError(answer[2] if answer[1] == "user" else f"{answer[1]}: {answer[2]}")

    @staticmethod
    def _to_slot(ch: _Channel, frame: Frame) -> FrameMeta:
        ch.slot, meta = to_slot(ch.slot, frame)
        return meta

    def _receive(self, conn: Connection, timeout: float, op: str) -> tuple:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if conn.poll(min(POLL_S, max(0.0, deadline - time.monotonic()))):
                    return conn.recv()
            except (EOFError, OSError):
                raise self._fail("died", self._death()) from None
            if self.lost is not None:  # the other pipe found it gone
                raise self.lost
            if not self._proc.is_alive():
                raise self._fail("died", self._death())
            if time.monotonic() >= deadline:
                self._proc.kill()
                raise self._fail(
                    "hung",
                    f"engine process {self.pid} hung: no answer to {ASKED.get(op, op)} in {timeout:.0f} s; it was stopped",
                )

    def _death(self) -> str:
        self._proc.join(1.0)
        return f"engine process {self.pid} {describe_exit(self._proc.exitcode)}"

    def _fail(self, cause: str, message: str) -> EngineLost:
        """The process is gone: remember why (the first reason found) and report it."""
        with self._fail_lock:
            if self.lost is not None:
                return self.lost
            self.lost = EngineLost(cause, message)
        log.warning("%s", message)
        if self._proc.is_alive():
            self._proc.kill()
        if self._on_lost is not None:
            self._on_lost(self, cause, message)
        return self.lost


class RemotePipeline:
    """One stream's pipeline in an engine process; closing it hands the process back (``on_closed``)."""

    def __init__(
        self,
        engine: EngineProcess,
        config: PipelineConfig,
        metadata: dict,
        on_closed: Callable[[EngineProcess], None] | None = None,
    ) -> None:
        self.engine = engine
        self.config = config
        self.rules = _Rules(self, config.rules)
        self.timestamps = _Clock()
        self.closed = False
        self._on_closed = on_closed
        self._metadata = metadata
        self._summary: dict[str, Any] = {}
        self._mask: np.ndarray | None = None
        self._first_frame = True

    @property
    def pid(self) -> int:
        return self.engine.pid

    @property
    def alive(self) -> bool:
        return not self.closed and self.engine.alive

    def _call(self, channel: str, op: str, *args: Any, **kwargs: Any) -> Any:
        return self.engine.call(channel, op, *args, **kwargs)

    # -- the pipeline, as the worker uses it ----------------------------------------------------

    def prepare(self, frame: Frame) -> PreparedRef:
        return self._call("prepare", "prepare", frame=frame)

    def process(self, frame: Frame, *, backlog: int = 0, prepared: PreparedRef | None = None) -> FrameResult:
        timeout = self.engine.start_timeout_s if self._first_frame else None
        if prepared is not None:
            answer = self._call("process", "process", None, prepared, backlog, timeout=timeout)
        else:  # the frame's pixels go through the slot; its description goes first, before the ref
            answer = self._call("process", "process", None, backlog, frame=frame, timeout=timeout)
        self._first_frame = False
        lite, has_mask, new_mask, problem = answer
        self.timestamps.problem = problem
        if new_mask is not None:
            self._mask = new_mask
        return dataclasses.replace(lite, frame=frame, road_mask=self._mask if has_mask else None)

    def finish(self) -> list[Violation]:
        closing, self._metadata, self._summary = self._call("process", "finish")
        return closing

    def set_height_reference(self, reference: HeightReference | None) -> None:
        self._call("process", "set_height_reference", reference)

    def set_effort(self, effort: Effort) -> None:
        self._call("process", "set_effort", effort)

    def summary(self) -> dict[str, Any]:
        """The engine's summary (:meth:`pipelines.pipeline.Pipeline.summary`); the last one it gave
        once the engine is gone."""
        if self.alive:
            with contextlib.suppress(EngineLost, EngineError):
                self._summary = self._call("process", "summary")
        return self._summary

    @property
    def metadata(self) -> dict:
        if self.alive:
            with contextlib.suppress(EngineLost, EngineError):
                self._metadata = self._call("process", "metadata")
        return self._metadata

    def close(self) -> None:
        """Release the stream's pipeline in the engine and hand the process back (it serves the next
        stream, or is stopped); harmless twice, never raises."""
        if self.closed:
            return
        self.closed = True
        if self.engine.alive:
            with contextlib.suppress(EngineLost, EngineError, OSError):
                self._call("process", "close", timeout=min(self.engine.timeout_s, 10.0))
        if self._on_closed is not None:
            self._on_closed(self.engine)
        else:
            self.engine.stop()


__all__ = ["EngineError", "EngineProcess", "EngineStartError", "RemotePipeline", "describe_exit"]
