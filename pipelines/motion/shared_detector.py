"""One loaded detector serving every stream of a server (threads of one process), their requests
batched per step (:mod:`pipelines.batching`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import supervision as sv

from pipelines.batching import Batcher
from pipelines.types import Frame


def ask(model: Any, op: str, frame: Frame, imgsz: int | None = None) -> sv.Detections:
    """One frame through ``model`` as ``op`` names the request: ``call`` (``model(image)``),
    ``detect`` or ``detect_at`` (at ``imgsz``); the same ops a server's streams, the detector service
    and its engines use."""
    if op == "call":
        return model(frame.image)
    if op == "detect":
        return model.detect(frame)
    if op == "detect_at":
        return model.detect_at(frame, imgsz)
    raise ValueError(f"unknown detector request {op!r}")


def default_batch(device: str, setting: int | None = None) -> int:
    """The largest batch: ``setting`` where given (``detector_batch``), else 8 on a CUDA device (one
    frame leaves most of a GPU idle) and 4 on the CPU (a frame then waits for one run instead of every
    run queued before it: docs/scale-out.md, "Many streams, one detector")."""
    from pipelines.devices import is_cuda

    return setting or (8 if is_cuda(device) else 4)


class _Model(Protocol):
    weights: Path
    imgsz: int

    def __call__(self, image_bgr: np.ndarray) -> sv.Detections: ...
    def detect(self, frame: Frame) -> sv.Detections: ...
    def detect_at(self, frame: Frame, imgsz: int) -> sv.Detections: ...


class SharedDetector:
    """One loaded model serving every stream of a server: one compiled network in memory, one
    inference at a time (instead of a model and a thread pool per stream contending for the cores),
    no model load when a stream starts, and on a GPU the streams' frames in one batch.

    Requests run on the :class:`~pipelines.batching.Batcher`'s thread, one batch at a time (an
    ultralytics predictor keeps per-call state; on two cores two concurrent inferences only take
    turns anyway, and ultralytics runs OpenVINO synchronously in LATENCY mode on purpose: its
    AsyncInferQueue can hang on Intel and AMD CPUs, ultralytics issue 25923). With ``max_batch`` > 1
    the frames waiting with the same input size and shape go through the network together
    (``inner.detect_many``); one alone runs as it would without a batcher. Per-stream state (the
    GSD-chosen input size) stays in each stream's :class:`~pipelines.motion.input_size.AutoSizedDetector`.
    """

    def __init__(
        self,
        inner: _Model,
        *,
        max_batch: int = 1,
        wait_ms: float = 0.0,
        on_batch: Callable[[int, Sequence[float]], None] | None = None,
    ) -> None:
        self.inner = inner
        if max_batch > 1 and not callable(getattr(inner, "detect_many", None)):
            raise TypeError(
                f"{type(inner).__name__} cannot run batches (no detect_many); max_batch must be 1"
            )
        self.batcher: Batcher[Any, sv.Detections] = Batcher(
            self._run, max_batch=max_batch, wait_s=wait_ms / 1000.0, name="detector-batch", on_batch=on_batch
        )

    @property
    def weights(self) -> Path:
        return self.inner.weights

    @property
    def imgsz(self) -> int:
        return self.inner.imgsz

    @property
    def device(self) -> str:
        return str(getattr(self.inner, "device", "cpu"))

    @property
    def calls(self) -> int:
        return self.batcher.calls

    @property
    def wait_s(self) -> float:
        """Time requests spent waiting for another stream's inference."""
        return self.batcher.wait_total_s

    def stats(self) -> dict[str, Any]:
        """The batcher's figures (:meth:`pipelines.batching.Batcher.stats`) with the device."""
        weights = getattr(self.inner, "weights", None) or type(self.inner).__name__  # a plug-in detector
        return {"device": self.device, "weights": str(weights), **self.batcher.stats()}

    def close(self) -> None:
        self.batcher.close()

    def __call__(self, image_bgr: np.ndarray) -> sv.Detections:
        return self.batcher(("call", None, image_bgr.shape), Frame(0, 0.0, image_bgr))

    def detect(self, frame: Frame) -> sv.Detections:
        return self.batcher(("detect", None, frame.image.shape), frame)

    def detect_at(self, frame: Frame, imgsz: int) -> sv.Detections:
        return self.batcher(("detect_at", int(imgsz), frame.image.shape), frame)

    def _run(self, key: Hashable, frames: list[Frame]) -> list[sv.Detections]:
        op, imgsz, _shape = key  # type: ignore[misc]
        if len(frames) == 1:  # as without a batcher
            return [ask(self.inner, op, frames[0], imgsz)]
        return list(self.inner.detect_many([f.image for f in frames], imgsz))  # type: ignore[attr-defined]
