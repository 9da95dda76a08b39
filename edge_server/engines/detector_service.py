"""One detector for every engine process: the detector service (``settings.engine_detector_service``).

With engine processes each stream's engine loaded a detector of its own: a copy of the network per
stream (memory), four inferences at once contending for the same cores (OpenVINO sizes each for
all of them), and nothing to batch. The service is one more process, started from the engines' fork
server, that holds the one network, as a threaded server's :class:`~pipelines.motion.shared_detector.SharedDetector`
does: one run at a time, the frames that wait batched by input size and frame shape. Engines connect
to it over a Unix socket (a random key: only this server's engines); a frame's pixels go through a
:class:`~edge_server.engines.slots.FrameSlot` of the engine's, read in place by the service while
the engine waits for the answer.

Faults: a service that dies or does not answer within ``timeout_s`` costs each engine one slow
frame, never its stream: the engine loads a detector of its own then and goes on with it. The
server starts a new service for the streams that start after (counted in ``/healthz``).

Engine side: :class:`RemoteModel` (what the engine's pipeline runs instead of a loaded network).
Server side: :class:`DetectorService` (the process, its control pipe, its figures). The service's
process: :func:`main`. Nothing here imports the engine at the top: the server stays without torch.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Client, Listener, arbitrary_address
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edge_server.engine_link import describe_exit
from edge_server.engines.slots import FrameSlot, open_slot, to_slot
from edge_server.priority import setup_worker_process

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.context import BaseContext

    from pipelines.config import DetectorConfig
    from pipelines.types import Frame

log = logging.getLogger(__name__)


class DetectorServiceError(RuntimeError):
    """The service could not start (missing weights, a bad config) or is gone."""


@dataclass(frozen=True)
class ServiceSpec:
    """What the service loads: the live config's detector (or, where the server was given one, an
    importable factory of a detector served as it is), how it batches, its threads and logging."""

    detector: DetectorConfig
    detector_factory: Any = None
    max_batch: int | None = None  # None: 8 on CUDA, 4 on the CPU (as settings.detector_batch)
    wait_ms: float = 0.0
    threads: int | None = None
    log_level: int = logging.INFO
    nice: int = 0  # as the engines' (settings.engine_nice): receiving the streams comes first


@dataclass(frozen=True)
class ServiceAddress:
    """How an engine reaches the service (sent to it with its spec)."""

    address: str
    authkey: bytes
    info: dict[str, Any]  # the served model: weights, imgsz, device
    timeout_s: float = 5.0  # an answer later than this: the service is taken as lost
    # ... the first at an input size and frame size (the network compiles for a new shape then)
    first_timeout_s: float = 60.0


# ------------------------------------------------------------------------------------------------
# the engine's side


class RemoteModel:
    """The detector network as an engine process sees it with the service: ``detect_at`` /
    ``detect`` / ``__call__`` answered by the service (a loaded model's interface, so the pipeline's
    input sizing wraps it as it would a network of its own). Where the service is lost, ``fallback()``
    gives a detector of this process's own, used from then on."""

    def __init__(self, where: ServiceAddress, fallback: Any) -> None:
        self.where = where
        self.weights = Path(where.info["weights"])
        self.imgsz = int(where.info["imgsz"])
        self.device = str(where.info["device"])
        self._fallback = fallback
        self.own: Any = None  # this process's detector, once the service was lost
        self._lock = threading.Lock()
        self._slot: FrameSlot | None = None
        self._seen: set[tuple] = set()  # (op, shape, input size) answered once
        self._conn: Connection | None = None
        try:
            self._conn = Client(where.address, "AF_UNIX", authkey=where.authkey)
        except OSError as exc:  # gone since the server started this engine
            self._lose(exc)

    def detect_at(self, frame: Frame, imgsz: int) -> Any:
        return self._ask("detect_at", frame, int(imgsz))

    def detect(self, frame: Frame) -> Any:
        return self._ask("detect", frame)

    def __call__(self, image: np.ndarray) -> Any:
        from pipelines.types import Frame

        return self._ask("call", Frame(0, 0.0, image))

    def _ask(self, op: str, frame: Frame, *args: Any) -> Any:
        with self._lock:
            if self.own is None:
                try:
                    answer = self._request(op, frame, *args)
                except (EOFError, OSError, TimeoutError) as exc:
                    self._lose(exc)
                else:
                    if answer[0] == "ok":
                        return answer[1]
                    raise RuntimeError(f"the detector service failed: {answer[2]}")
        from pipelines.motion.shared_detector import ask

        return ask(self.own, op, frame, *args)

    def _request(self, op: str, frame: Frame, *args: Any) -> tuple:
        if self._conn is None:
            raise OSError("not connected")
        self._slot, meta = to_slot(self._slot, frame)
        self._conn.send((op, meta, *args))
        key = (op, meta.shape, *args)
        timeout = self.where.timeout_s if key in self._seen else self.where.first_timeout_s
        if not self._conn.poll(timeout):
            raise TimeoutError(f"no answer in {timeout:g} s")
        self._seen.add(key)
        return self._conn.recv()

    def _lose(self, exc: BaseException) -> None:
        log.warning(
            "the detector service is lost (%s: %s): this engine loads a detector of its own",
            type(exc).__name__,
            exc,
        )
        self.close()
        self.own = self._fallback()

    def close(self) -> None:
        """Disconnect and remove this engine's frame slot."""
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()
            self._conn = None
        if self._slot is not None:
            self._slot.unlink()
            self._slot = None


# ------------------------------------------------------------------------------------------------
# the service's process


def _error(exc: BaseException) -> tuple[str, str, str]:
    from pipelines.errors import is_user_error

    kind = "user" if is_user_error(exc) else type(exc).__name__
    return ("error", kind, str(exc) or type(exc).__name__)


def _load(spec: ServiceSpec) -> tuple[Any, dict[str, Any]]:
    """The served detector (a SharedDetector) and what engines are told of it."""
    from pipelines.builder import build_detector_model
    from pipelines.motion.shared_detector import SharedDetector, default_batch

    if spec.detector_factory is not None:
        detector = spec.detector_factory()
        info = {"weights": type(detector).__name__, "imgsz": 640, "device": "cpu"}
        return SharedDetector(detector, max_batch=1), info
    model = build_detector_model(spec.detector)
    batch = default_batch(model.device, spec.max_batch)
    info = {"weights": str(model.weights), "imgsz": model.imgsz, "device": model.device}
    return SharedDetector(model, max_batch=batch, wait_ms=spec.wait_ms), info


def _serve(conn: Connection, shared: Any) -> None:
    """One engine's requests, each answered once its batch has run."""
    from pipelines.motion.shared_detector import ask
    from pipelines.types import Frame

    slots: dict[str, FrameSlot] = {}
    try:
        while True:
            try:
                op, meta, *args = conn.recv()
            except (EOFError, OSError):
                return
            try:
                image = open_slot(slots, meta).view(meta.shape)  # in place: the engine waits for the answer
                answer: tuple = (
                    "ok",
                    ask(shared, op, Frame(meta.index, meta.timestamp_s, image, meta.telemetry), *args),
                )
            except Exception as exc:  # noqa: BLE001 - told to the engine, which raises it
                log.warning("detector request failed: %s: %s", type(exc).__name__, exc)
                answer = _error(exc)
            try:
                conn.send(answer)
            except (OSError, ValueError):
                return
    finally:
        for slot in slots.values():
            slot.close()
        conn.close()


PROCESS_NAME = b"ap-detector"  # its /proc/PID/comm (at most 15 bytes; serve-bench names its role by it)


def _name_process() -> None:
    """Name the process (Linux ``prctl(PR_SET_NAME)``; elsewhere it keeps its name)."""
    import ctypes
    import ctypes.util

    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(15, ctypes.c_char_p(PROCESS_NAME), 0, 0, 0)  # 15: PR_SET_NAME


def _setup(spec: ServiceSpec) -> None:
    _name_process()
    setup_worker_process("detector-service", spec.log_level, spec.nice, spec.threads)


def main(spec: ServiceSpec, address: str, authkey: bytes, control: Connection) -> None:
    """The service: load the detector, listen, say ready; answer the server's ``stats`` on the
    control pipe; leave on ``exit`` or when the server is gone."""
    _setup(spec)
    try:
        shared, info = _load(spec)
        listener = Listener(address, "AF_UNIX", authkey=authkey)
    except BaseException as exc:  # noqa: BLE001 - told to the server, which says it to the user
        control.send(_error(exc))
        return
    control.send(("ready", {"pid": os.getpid(), **info}))

    def accept() -> None:
        while True:
            try:
                conn = listener.accept()
            except (OSError, EOFError):
                return
            except Exception as exc:  # noqa: BLE001 - a client with the wrong key: refused, go on
                log.warning("a connection was refused: %s: %s", type(exc).__name__, exc)
                continue
            threading.Thread(target=_serve, args=(conn, shared), name="engine-conn", daemon=True).start()

    threading.Thread(target=accept, name="accept", daemon=True).start()
    while True:
        try:
            op, *_ = control.recv()
        except (EOFError, OSError):
            break
        if op == "stats":
            control.send(("ok", {"pid": os.getpid(), **shared.stats()}))
        elif op == "exit":
            control.send(("ok", None))
            break
    listener.close()


# ------------------------------------------------------------------------------------------------
# the server's side


class DetectorService:
    """The server's handle on its detector service: :meth:`ensure` starts one where none runs (again
    after a loss) and says how engines reach it; :meth:`stats` for ``/healthz``; :meth:`stop`."""

    def __init__(
        self,
        spec: ServiceSpec,
        ctx: BaseContext,
        *,
        start_timeout_s: float,
        timeout_s: float,
        first_timeout_s: float,
    ) -> None:
        """``timeout_s``: an engine takes the service as lost when a frame's answer is later than
        this (``first_timeout_s`` for the first frame at an input size and frame size)."""
        self.spec, self._ctx = spec, ctx
        self.start_timeout_s, self.timeout_s, self.first_timeout_s = (
            start_timeout_s,
            timeout_s,
            first_timeout_s,
        )
        self._lock = threading.Lock()
        self._proc: Any = None
        self._control: Connection | None = None
        self._where: ServiceAddress | None = None
        self.started = 0
        self.lost = 0
        self.last_lost: str | None = None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def ensure(self) -> ServiceAddress:
        """The running service's address; a new service started when there is none or it was lost
        (:class:`DetectorServiceError` when it cannot start)."""
        with self._lock:
            if self._where is not None and self.alive and self._answers():
                return self._where
            if self._proc is not None:  # it was running: lost
                self.lost += 1
                how = describe_exit(self._proc.exitcode) if not self._proc.is_alive() else "hung"
                self.last_lost = f"detector service {self._proc.pid} {how}"
                log.warning("%s: starting another", self.last_lost)
                self._kill()
                self._close_control()
            self._where = self._start()
            return self._where

    def _answers(self) -> bool:
        """Whether the service answers its control pipe (a hung one does not)."""
        return self._figures() is not None

    def _figures(self, timeout_s: float = 2.0) -> dict[str, Any] | None:
        """The service's own figures over its control pipe (under ``_lock``); None without an answer."""
        try:
            if self._control is not None:
                self._control.send(("stats",))
                if self._control.poll(timeout_s):
                    return self._control.recv()[1]
        except (EOFError, OSError):
            pass
        return None

    def _start(self) -> ServiceAddress:
        address = arbitrary_address("AF_UNIX")
        authkey = secrets.token_bytes(32)
        here, there = self._ctx.Pipe()
        self._proc = self._ctx.Process(  # type: ignore[attr-defined]
            target=main, args=(self.spec, address, authkey, there), name="detector-service", daemon=True
        )
        self._proc.start()
        there.close()
        self._control = here
        deadline = time.monotonic() + self.start_timeout_s
        while not here.poll(0.25):
            if not self._proc.is_alive() or time.monotonic() > deadline:
                self._kill()
                raise DetectorServiceError(
                    f"the detector service did not start ({describe_exit(self._proc.exitcode)})"
                )
        try:
            answer = here.recv()
        except (EOFError, OSError):
            self._kill()
            raise DetectorServiceError("the detector service exited while starting") from None
        if answer[0] != "ready":
            self._kill()
            raise DetectorServiceError(f"the detector service could not start: {answer[2]}")
        self.started += 1
        info = {k: answer[1][k] for k in ("weights", "imgsz", "device")}
        log.info("detector service %d ready: %s", self._proc.pid, info)
        return ServiceAddress(
            address, authkey, info, timeout_s=self.timeout_s, first_timeout_s=self.first_timeout_s
        )

    def stats(self) -> dict[str, Any]:
        """What ``/healthz`` says of it: running, pid, started and lost, and the batcher's figures."""
        out: dict[str, Any] = {
            "running": self.alive,
            "started": self.started,
            "lost": self.lost,
            "last_lost": self.last_lost,
        }
        with self._lock:
            figures = self._figures() if self.alive else None
        return out | (figures or {})

    def stop(self) -> None:
        """Ask the service to leave (killed where it does not)."""
        with self._lock:
            if self._proc is None:
                return
            if self._proc.is_alive() and self._control is not None:
                try:
                    self._control.send(("exit",))
                    self._control.poll(5.0)
                except (EOFError, OSError):
                    pass
            self._proc.join(5.0)
            self._kill()
            self._close_control()
            self._proc, self._where = None, None

    def _kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join(5.0)

    def _close_control(self) -> None:
        if self._control is not None:
            with contextlib.suppress(OSError):
                self._control.close()
            self._control = None


__all__ = ["DetectorService", "DetectorServiceError", "RemoteModel", "ServiceAddress", "ServiceSpec", "main"]
