"""``airpatrol process`` as a batch job (:class:`ProcessJob`), and what a worker process sets up
once for every item it runs.

Models are loaded once per worker process (:func:`worker_detector`; the road U-Net is cached per
process by the builder), not once per flight; :func:`configure_worker` sets the process's CPU
threads. ``airpatrol eval``'s job (``eval.batch.SequenceJob``) uses them as well.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batch.commit import LOADS, frame_done
from batch.discovery import Flight
from pipelines.config import DetectorConfig, PipelineConfig

_DETECTORS: dict[str, Any] = {}
_DETECTORS_LOCK = threading.Lock()


def frames_in(video: Path, max_frames: int | None = None) -> int | None:
    """Frames of a video or frame folder from its header (None when it does not say)."""
    from pipelines.sources import open_source

    try:
        source = open_source(video, max_frames=max_frames)
    except Exception:  # noqa: BLE001 - a broken file fails in its own task, with its own message
        return None
    try:
        return source.frame_count
    finally:
        source.close()


def worker_detector(dcfg: DetectorConfig) -> Any:
    """The detector network of ``dcfg``, loaded once per process and reused by every flight this
    worker runs (each flight still gets its own pipeline: tracker, speed and rules state)."""
    from pipelines.builder import build_detector_model

    key = dcfg.model_dump_json(exclude={"imgsz", "auto_size"})
    with _DETECTORS_LOCK:
        if key not in _DETECTORS:
            _DETECTORS[key] = build_detector_model(dcfg)
            LOADS["detector"] += 1
        return _DETECTORS[key]


def configure_worker(config: PipelineConfig) -> None:
    """CPU threads of this process as ``config.detector.threads`` says (a batch task sharing the
    box's cores; None: the libraries' defaults, as in a single run): OpenCV's (optical flow,
    resizing), torch's and the BLAS libraries' pools capped at them
    (:func:`pipelines.threads.limit_threads`, as a live server's engine processes), OpenVINO's through
    the detector config. torch keeps them only when it runs the detector itself (weights other than
    OpenVINO/ONNX on the CPU, ``device: auto`` included where there is no GPU); otherwise it only
    moves tensors around OpenVINO and gets one: under Ray (which sets OMP_NUM_THREADS to the task's
    CPUs) its idle OpenMP threads spun against OpenVINO's, +50 % CPU per frame on a worker's second
    flight on the 2-core dev VM."""
    threads = config.detector.threads
    if not threads:
        return
    import torch

    from pipelines.devices import resolve_device
    from pipelines.threads import limit_threads

    limit_threads(threads)
    weights = str(config.detector.weights or "")
    on_cpu = resolve_device(config.detector.device, "the detector") == "cpu"
    torch_runs_it = on_cpu and weights.endswith((".pt", ".pth", ".torchscript"))
    if not torch_runs_it:
        torch.set_num_threads(1)


@dataclass(frozen=True)
class ProcessJob:
    """``airpatrol process`` for one flight (:func:`pipelines.runner.process_flight`)."""

    config: PipelineConfig
    max_frames: int | None = None
    write_video: bool = True
    camera: str | None = None
    fps: float | None = None

    @property
    def threads(self) -> int | None:
        return self.config.detector.threads

    def name_of(self, item: Flight) -> str:
        return item.name

    def frames_of(self, item: Flight) -> int | None:
        return frames_in(item.video, self.max_frames)

    def inputs_of(self, item: Flight) -> Sequence[Path]:
        return item.inputs

    def settings(self) -> Any:
        return {
            "job": "process",
            "config": json.loads(self.config.model_dump_json()),
            "max_frames": self.max_frames,
            "write_video": self.write_video,
            "camera": self.camera,
            "fps": self.fps,
        }

    def __call__(self, item: Flight, out_dir: Path) -> dict[str, Any]:
        from pipelines.runner import process_flight

        configure_worker(self.config)
        model = worker_detector(self.config.detector)
        summary = process_flight(
            item.video,
            self.config,
            out_dir,
            srt=item.srt,
            max_frames=self.max_frames,
            write_video=self.write_video,
            progress=False,
            camera=self.camera,
            fps=self.fps,
            model=model,
            on_result=lambda _: frame_done(),
        )
        return {k: summary.get(k) for k in ("frames", "tracks", "violations", "fps", "wall_s")}
