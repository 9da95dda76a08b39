"""The engine process's side: one stream's pipeline, served over two pipes.

:func:`main` builds the pipeline from the :class:`EngineSpec` it was started with, says it is ready
(or why it is not), then serves requests until the server closes it or goes away: the *prepare*
pipe (a frame's grey image and camera motion, ahead of processing; its own thread, as in the
server) and the *process* pipe (the frames, the stream's rules and height reference, its summary,
the end). A request is a tuple ``(op, *args)``; the answer is ``("ok", value)`` or
``("error", kind, message)``. Frame pixels come through the pipe's :class:`~.slots.FrameSlot`.

This module imports the engine (torch, the models) only inside :func:`main`: the server imports it
to name the process's target and stays without them. ``edge_server.engines.preload`` imports them
once in the fork server, so each engine process starts with them already loaded.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from edge_server.engines.slots import FrameMeta, FrameSlot, open_slot
from edge_server.priority import lower_thread_priority, setup_worker_process

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from pipelines.config import PipelineConfig
    from pipelines.pipeline import Pipeline, Prepared
    from pipelines.types import Frame, FrameResult

log = logging.getLogger(__name__)

PREPARE_NICE = 5  # the prepare thread's nice value above the processing thread's (as in the server)
_EMPTY = np.zeros((0, 0, 3), np.uint8)


@dataclass(frozen=True)
class EngineSpec:
    """What an engine process builds: the live pipeline config and, where the server was given
    them, the factories of its detector and road segmenter (picklable: importable callables)."""

    config: PipelineConfig
    detector_factory: Any = None
    segmenter_factory: Any = None
    threads: int | None = None  # OpenCV's, torch's and BLAS's threads in the process (None: theirs)
    # the process's nice value above the server's (Linux; settings.engine_nice): the cores go to
    # receiving and decoding the streams first, what is left to processing them
    nice: int = 0
    # the server's detector service (settings.engine_detector_service): the detector is asked there
    detector_service: Any = None  # edge_server.engines.detector_service.ServiceAddress
    log_level: int = logging.INFO
    name: str = "engine"  # in its log lines


@dataclass(frozen=True)
class PreparedRef:
    """The server's handle on a frame prepared in the engine (its pixels and camera motion stay there)."""

    index: int
    ms: float
    ego_valid: bool


def _setup(spec: EngineSpec) -> None:
    setup_worker_process(spec.name, spec.log_level, spec.nice, spec.threads)


_models: dict[str, Any] = {}  # this process's detector network, loaded once for stream after stream


def _build(spec: EngineSpec) -> Pipeline:
    """A stream's pipeline; the detector network (when the config names it) and the road U-Net
    (the builder's cache) are loaded by the first and kept for the next streams of this process."""
    from pipelines.builder import build_pipeline

    segmenter = spec.segmenter_factory() if spec.segmenter_factory is not None else None
    if spec.detector_service is not None:
        remote = _remote(spec)
        if spec.detector_factory is not None:  # the served detector is the whole stage
            return build_pipeline(spec.config, detector=remote, segmenter=segmenter)
        return build_pipeline(spec.config, segmenter=segmenter, model=remote)
    detector = spec.detector_factory() if spec.detector_factory is not None else None
    model = _own_model(spec) if detector is None else None
    return build_pipeline(spec.config, detector=detector, segmenter=segmenter, model=model)


def _own_model(spec: EngineSpec) -> Any:
    from pipelines.builder import build_detector_model

    if "detector" not in _models:
        _models["detector"] = build_detector_model(spec.config.detector)
    return _models["detector"]


def _remote(spec: EngineSpec) -> Any:
    """The detector service's model, connected once for the streams of this process; where the
    service was lost, this process's own detector."""
    from edge_server.engines.detector_service import RemoteModel

    remote = _models.get("remote")
    if remote is None:
        own = spec.detector_factory if spec.detector_factory is not None else (lambda: _own_model(spec))
        remote = _models["remote"] = RemoteModel(spec.detector_service, own)
    return remote


def _error(exc: BaseException) -> tuple[str, str, str]:
    from pipelines.errors import is_user_error

    kind = "user" if is_user_error(exc) else type(exc).__name__
    return ("error", kind, str(exc) or type(exc).__name__)


class _Engine:
    """The pipeline and what the two pipes share: the slots, the frames prepared ahead."""

    def __init__(self, spec: EngineSpec, pipeline: Pipeline) -> None:
        self.spec = spec
        self.pipeline = pipeline
        self._slots: dict[str, FrameSlot] = {}
        self._prepared: dict[int, tuple[Frame, Prepared]] = {}
        self._sent_mask: np.ndarray | None = None
        self.done = threading.Event()

    def build(self, detector_service: Any = None) -> dict:
        """The next stream's pipeline (the last one was closed), asking ``detector_service`` where the
        server has one (a new service after a loss: this process connects to it)."""
        if not self.pipeline.closed:
            self.pipeline.close()
        self._prepared.clear()
        self._sent_mask = None
        if detector_service is not None and detector_service != self.spec.detector_service:
            self.spec = dataclasses.replace(self.spec, detector_service=detector_service)
            old = _models.pop("remote", None)
            if old is not None:
                old.close()
        self.pipeline = _build(self.spec)
        return self.pipeline.metadata

    def frame(self, meta: FrameMeta) -> Frame:
        from pipelines.types import Frame

        return Frame(
            meta.index, meta.timestamp_s, open_slot(self._slots, meta).read(meta.shape), meta.telemetry
        )

    def prepare(self, meta: FrameMeta) -> PreparedRef:
        frame = self.frame(meta)
        prepared = self.pipeline.prepare(frame)
        self._prepared[frame.index] = (frame, prepared)
        return PreparedRef(frame.index, prepared.ms, prepared.ego.valid)

    def process(self, meta: FrameMeta | None, ref: PreparedRef | None, backlog: int) -> tuple:
        if ref is not None:
            frame, prepared = self._prepared.pop(ref.index)
            for index in [i for i in self._prepared if i < ref.index]:  # prepared, never processed
                del self._prepared[index]
        else:
            assert meta is not None
            frame, prepared = self.frame(meta), None
        result = self.pipeline.process(frame, backlog=backlog, prepared=prepared)
        return self._lite(result)

    def _lite(self, result: FrameResult) -> tuple:
        """The result without the frame's pixels (the server has them) and with the road mask only
        when it is not the one sent last (keyframes reuse a mask for several frames)."""
        from pipelines.types import Frame

        mask = result.road_mask
        if mask is None or mask is self._sent_mask:
            new_mask = None
        else:
            new_mask = self._sent_mask = mask
        f = result.frame
        lite = dataclasses.replace(
            result, frame=Frame(f.index, f.timestamp_s, _EMPTY, f.telemetry), road_mask=None
        )
        return lite, mask is not None, new_mask, self.pipeline.timestamps.problem

    def call(self, op: str, args: tuple) -> Any:
        p = self.pipeline
        if op == "prepare":
            return self.prepare(*args)
        if op == "process":
            return self.process(*args)
        if op == "finish":  # with the state the session record keeps, final now
            return p.finish(), p.metadata, p.summary()
        if op == "set_rules":
            return p.rules.set_rules(*args)
        if op == "set_height_reference":
            return p.set_height_reference(*args)
        if op == "set_effort":
            return p.set_effort(*args)
        if op == "summary":
            return p.summary()
        if op == "metadata":
            return p.metadata
        if op == "close":  # the stream ended; the process waits for the next (build) or its exit
            p.close()
            self._prepared.clear()
            return None
        if op == "build":
            return self.build(*args)
        if op == "exit":
            if not p.closed:
                p.close()
            self.done.set()
            return None
        raise ValueError(f"unknown engine request {op!r}")

    def serve(self, conn: Connection) -> None:
        """Answer requests on ``conn`` until the server closes it (or this engine)."""
        while not self.done.is_set():
            try:
                op, *args = conn.recv()
            except (EOFError, OSError):  # the server is gone: nothing to answer to
                self.done.set()
                return
            try:
                answer: tuple = ("ok", self.call(op, tuple(args)))
            except Exception as exc:  # noqa: BLE001 - the server decides what an error ends
                log.warning("%s failed: %s: %s", op, type(exc).__name__, exc, exc_info=op != "prepare")
                answer = _error(exc)
            try:
                conn.send(answer)
            except (OSError, ValueError):
                self.done.set()
                return

    def close_slots(self) -> None:
        for slot in self._slots.values():
            slot.close()


def _serve_prepare(engine: _Engine, conn: Connection) -> None:
    lower_thread_priority(PREPARE_NICE)
    engine.serve(conn)


def main(spec: EngineSpec, prepare_conn: Connection, process_conn: Connection) -> None:
    """The engine process: build, say ready, serve both pipes (stream after stream); leave when told
    to or when the server is gone."""
    _setup(spec)
    try:
        pipeline = _build(spec)
    except BaseException as exc:  # noqa: BLE001 - told to the server, which says it to the user
        process_conn.send(_error(exc))
        return
    process_conn.send(("ready", {"pid": os.getpid(), "metadata": pipeline.metadata}))
    engine = _Engine(spec, pipeline)
    threading.Thread(target=_serve_prepare, args=(engine, prepare_conn), name="prepare", daemon=True).start()
    engine.serve(process_conn)
    if not engine.pipeline.closed:  # the server went away without closing: release before leaving
        engine.pipeline.close()
    engine.close_slots()
    log.debug("engine process %d done", os.getpid())


__all__ = ["EngineSpec", "FrameMeta", "PreparedRef", "main"]
