"""Batches: many recorded flights (or evaluation sequences) through one job, in this process or
fanned out to a Ray cluster, one task per item.

* :func:`discover_flights` turns folders, globs and list files into :class:`Flight` items.
* A job is a callable ``job(item, out_dir) -> dict`` that writes an item's outputs into a fresh
  folder and returns a small JSON summary (``airpatrol process``: :class:`ProcessJob`;
  ``airpatrol eval``: ``eval.batch.SequenceJob``).
* :func:`run_batch` runs the items not already done, with :class:`LocalExecutor` (one after
  another, the default) or :class:`RayExecutor` (``--ray``), and returns a :class:`BatchReport`
  (also written as ``batch.json`` and ``batch.md``).

Exactly once, whatever dies: a task writes into ``.partial/<item>.<attempt>/`` and commits by
renaming that folder to ``<item>/`` (atomic on one filesystem), with ``batch-record.json`` inside
holding the item's fingerprint (its input files' sizes and times, the job's settings). An item
whose committed record has the same fingerprint is done: a re-run skips it (resume), a retried
task that finds it returns it, and a second attempt that lost the rename race discards its own
folder. A worker killed mid-item leaves only a ``.partial`` folder, which Ray's retry (and the
next run) ignores and the driver removes at the end. A changed input or setting (a new model)
re-runs the item and replaces its folder.

Models are loaded once per worker process (:func:`worker_detector`; the road U-Net is cached per
process by the builder), not once per flight. Nothing here imports Ray unless a
:class:`RayExecutor` is used.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import logging
import os
import platform
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pipelines.config import DetectorConfig, PipelineConfig
from pipelines.errors import AirPatrolError, is_user_error
from pipelines.sinks import atomic_write_text

log = logging.getLogger(__name__)

VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".avi", ".m4v", ".ts", ".mts", ".webm")
LIST_SUFFIXES = (".txt", ".list", ".lst")
TELEMETRY_SUFFIXES = (".SRT", ".srt", ".Srt")
RECORD_NAME = "batch-record.json"
PARTIAL_DIR = ".partial"
RUNNING_DIR = ".running"
LOCK_NAME = ".batch.lock"


class BatchError(AirPatrolError):
    """A batch that cannot start: no flights found, two with one name, an output folder in use."""


# ---------------------------------------------------------------- items


@dataclass(frozen=True)
class Flight:
    """One recorded flight: a video file or frame folder, and its telemetry if any."""

    name: str  # unique in the batch; '/'-separated, becomes the output folder under the batch's
    video: Path
    srt: Path | None = None

    @property
    def inputs(self) -> tuple[Path, ...]:
        return (self.video,) if self.srt is None else (self.video, self.srt)


def sidecar_telemetry(video: Path) -> Path | None:
    """The DJI .SRT beside a video (same name), or inside a frame folder as ``<folder>.SRT``."""
    for suffix in TELEMETRY_SUFFIXES:
        candidate = video.with_suffix(suffix) if video.is_file() else video / f"{video.name}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def is_sequence_folder(path: Path) -> bool:
    """A folder that is one flight as frames (MOT/UAVDT/VisDrone layout: images in it or in its
    img1/), not a folder of flights."""
    from pipelines.sources import list_images, resolve_layout

    try:
        layout = resolve_layout(path)
        return bool(list_images(layout.image_dir, layout.extension))
    except (OSError, ValueError):
        return False


def safe_name_part(text: str) -> str:
    """One path component of an output name: letters, digits, '._-'; never hidden, never empty."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text).lstrip(".") or "_"


def _flight_name(relative: Path) -> str:
    parts = [p for p in relative.with_suffix("").parts if p not in ("", ".")]
    return "/".join(safe_name_part(p) for p in parts) or "flight"


def is_batch_output(folder: Path) -> bool:
    """A batch's output folder, or one flight's inside it: never a flight to process."""
    return (folder / LOCK_NAME).exists() or (folder / RECORD_NAME).exists()


def _flights_in(folder: Path) -> list[Flight]:
    """Every video file and frame folder under ``folder``, named by its path relative to ``folder``.
    Searched recursively, except inside a frame folder, a folder that holds videos (a flight's own
    folder: its subfolders are its masks, ground truth, ...) and a batch's outputs (an earlier run's
    annotated videos are not flights)."""
    found: list[Flight] = []
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        dirs.sort()
        if is_batch_output(here):
            dirs[:] = []
            continue
        if any(f.lower().endswith(VIDEO_SUFFIXES) and not f.startswith(".") for f in files):
            dirs[:] = []
        keep = []
        for d in dirs:
            if d.startswith("."):
                continue
            if is_sequence_folder(here / d):
                video = here / d
                found.append(Flight(_flight_name(video.relative_to(folder)), video, sidecar_telemetry(video)))
            else:
                keep.append(d)
        dirs[:] = keep
        for f in sorted(files):
            video = here / f
            if video.suffix.lower() in VIDEO_SUFFIXES and not f.startswith("."):
                name = _flight_name(video.relative_to(folder))
                found.append(Flight(name, video, sidecar_telemetry(video)))
    return found


def _flights_in_list(list_file: Path) -> list[Flight]:
    """A list file: one flight per line, ``VIDEO [TELEMETRY]`` (relative to the list file's
    folder); blank lines and ``#`` comments skipped. No telemetry given: the sidecar, if any."""
    base = list_file.parent
    flights = []
    for number, line in enumerate(list_file.read_text(encoding="utf-8").splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        fields = text.split()
        if len(fields) > 2:
            raise BatchError(f"{list_file}:{number}: expected 'VIDEO [TELEMETRY]', got {line.strip()!r}")
        video = (base / fields[0]).resolve()
        if not video.exists():
            raise BatchError(f"{list_file}:{number}: {fields[0]} not found")
        srt = (base / fields[1]).resolve() if len(fields) == 2 else sidecar_telemetry(video)
        if srt is not None and not srt.is_file():
            raise BatchError(f"{list_file}:{number}: telemetry {fields[1]} not found")
        named = Path(fields[0]) if not Path(fields[0]).is_absolute() else Path(video.name)
        flights.append(Flight(_flight_name(named), video, srt))
    return flights


def discover_flights(inputs: Iterable[str | Path], exclude: Path | None = None) -> list[Flight]:
    """The flights named by ``inputs``: video files, frame folders, folders of flights (searched
    recursively), glob patterns (quote them) and list files (``.txt``: one ``VIDEO [TELEMETRY]``
    per line). A video's telemetry is the .SRT of the same name beside it unless a list names one.
    Nothing under ``exclude`` (the batch's output folder) or under an earlier batch's outputs."""
    flights: list[Flight] = []
    for given in inputs:
        text = str(given)
        paths = (
            [Path(p) for p in sorted(glob.glob(os.path.expanduser(text), recursive=True))]
            if glob.has_magic(text)
            else [Path(text).expanduser()]
        )
        if not paths:
            raise BatchError(f"{text}: the pattern matches nothing")
        for path in paths:
            if not path.exists():
                raise BatchError(f"{path}: not found")
            if path.is_file() and path.suffix.lower() in LIST_SUFFIXES:
                flights += _flights_in_list(path)
            elif path.is_file() or is_sequence_folder(path):
                flights.append(Flight(_flight_name(Path(path.name)), path, sidecar_telemetry(path)))
            else:
                inside = _flights_in(path)
                if not inside:
                    raise BatchError(
                        f"{path}: no videos ({', '.join(VIDEO_SUFFIXES)}) or frame folders in it"
                    )
                flights += inside
    outside = exclude.resolve() if exclude is not None else None
    seen: dict[str, Flight] = {}
    videos: set[Path] = set()
    unique = []
    for f in flights:
        where = f.video.resolve()
        if (outside is not None and where.is_relative_to(outside)) or any(
            is_batch_output(parent) for parent in where.parents
        ):
            continue  # an output of this batch or an earlier one (a glob over everything)
        if where in videos:
            continue  # named twice (a folder and a glob): one flight, under its first name
        other = seen.get(f.name)
        if other is not None:
            raise BatchError(
                f"two flights would write to {f.name!r}: {other.video} and {f.video} (rename one)"
            )
        seen[f.name] = f
        videos.add(where)
        unique.append(f)
    if not unique:
        raise BatchError("no flights given")
    return unique


# ---------------------------------------------------------------- fingerprints


def _stat_of(path: Path) -> dict[str, Any]:
    """Size and modification time of a file, or of a folder's files (a frame folder)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return {
            "path": str(path.resolve()),
            "files": len(files),
            "bytes": sum(p.stat().st_size for p in files),
            "mtime_ns": max((p.stat().st_mtime_ns for p in files), default=0),
        }
    st = path.stat()
    return {"path": str(path.resolve()), "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}


def fingerprint(inputs: Sequence[Path], settings: Any) -> str:
    """What an item's outputs depend on: its input files (size, mtime) and the job's settings."""
    blob = json.dumps(
        {"inputs": [_stat_of(p) for p in inputs], "settings": settings}, sort_keys=True, default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- jobs


class Job(Protocol):
    """Runs one item into a fresh folder; returns a JSON-able summary of it."""

    def __call__(self, item: Any, out_dir: Path) -> dict[str, Any]: ...

    def name_of(self, item: Any) -> str: ...

    def inputs_of(self, item: Any) -> Sequence[Path]: ...

    def settings(self) -> Any: ...


_DETECTORS: dict[str, Any] = {}
_DETECTORS_LOCK = threading.Lock()
LOADS: dict[str, int] = {"detector": 0}  # models this process loaded (the batch report counts them)


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
    box's cores; None: the libraries' defaults, as in a single run). OpenCV gets them (optical
    flow, resizing), OpenVINO gets them through the detector config. torch gets them only when it
    runs the detector itself (weights other than OpenVINO/ONNX on the CPU); otherwise it only moves
    tensors around OpenVINO and gets one: under Ray (which sets OMP_NUM_THREADS to the task's CPUs)
    its idle OpenMP threads spun against OpenVINO's, +50 % CPU per frame on a worker's second
    flight on the 2-core dev VM."""
    threads = config.detector.threads
    if not threads:
        return
    import cv2
    import torch

    weights = str(config.detector.weights or "")
    torch_runs_it = config.detector.device == "cpu" and weights.endswith((".pt", ".pth", ".torchscript"))
    torch.set_num_threads(threads if torch_runs_it else 1)
    cv2.setNumThreads(threads)


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


# ---------------------------------------------------------------- one task


def _safe(name: str) -> str:
    return name.replace("/", "__")


def read_record(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def _commit(partial: Path, final: Path, fp: str) -> tuple[dict[str, Any], bool]:
    """Make ``partial`` the item's output folder; (record kept, whether it was this attempt's)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    old = read_record(final) if final.exists() else None
    if old is not None and old.get("fingerprint") == fp:
        shutil.rmtree(partial, ignore_errors=True)  # another attempt committed first
        return old, False
    if final.exists():  # stale outputs (inputs or settings changed since): replaced
        trash = partial.parent / f"{partial.name}.old"
        os.rename(final, trash)
        shutil.rmtree(trash, ignore_errors=True)
    try:
        os.rename(partial, final)
    except OSError:
        won = read_record(final)
        if won is None or won.get("fingerprint") != fp:
            raise
        shutil.rmtree(partial, ignore_errors=True)
        return won, False
    return read_record(final) or {}, True


FrameReporter = Callable[[str, str, int], None]  # (item name, attempt, frames done so far)
_frame_hook: Callable[[], None] | None = None


def frame_done() -> None:
    """Called by a job for every frame it has processed: the batch's progress (a no-op outside one)."""
    if _frame_hook is not None:
        _frame_hook()


@contextlib.contextmanager
def _reporting(name: str, attempt: str, report: FrameReporter | None, every_s: float):
    """Route :func:`frame_done` to ``report`` (at most every ``every_s`` seconds, and at the end)."""
    global _frame_hook
    if report is None:
        yield
        return
    count = 0
    last = 0.0

    def hook() -> None:
        nonlocal count, last
        count += 1
        now = time.monotonic()
        if now - last >= every_s:
            last = now
            report(name, attempt, count)

    _frame_hook = hook
    try:
        yield
    finally:
        _frame_hook = None
        report(name, attempt, count)


def run_item(
    job: Job,
    item: Any,
    out_root: Path,
    fp: str,
    attempt_note: str = "",
    report: FrameReporter | None = None,
    report_every_s: float = 0.0,
) -> dict[str, Any]:
    """Run one item of a batch exactly once into ``out_root/<name>/`` (see the module docstring).
    Returns its record: the job's summary plus name, fingerprint, status, worker and timing.
    ``report``: told the frames done as the job runs (the batch's progress)."""
    name = job.name_of(item)
    final = out_root / name
    done = read_record(final)
    if done is not None and done.get("fingerprint") == fp and done.get("status") == "done":
        return {**done, "status": "skipped"}
    attempt = uuid.uuid4().hex[:8]
    partial = out_root / PARTIAL_DIR / f"{_safe(name)}.{attempt}"
    partial.mkdir(parents=True)
    running = out_root / RUNNING_DIR / f"{_safe(name)}.{attempt}.json"
    running.parent.mkdir(parents=True, exist_ok=True)
    worker = {"host": socket.gethostname(), "pid": os.getpid(), "attempt": attempt}
    _write_json(
        running,
        {"name": name, **worker, "folder": str(partial), "started": time.time(), "note": attempt_note},
    )
    t0 = time.perf_counter()
    loads_before = dict(LOADS)
    try:
        with _reporting(name, attempt, report, report_every_s):
            summary = job(item, partial)
        record = {
            "name": name,
            "status": "done",
            "fingerprint": fp,
            "worker": worker,
            "task_wall_s": round(time.perf_counter() - t0, 3),
            "models_loaded": {k: LOADS[k] - loads_before.get(k, 0) for k in LOADS},
            "finished": time.time(),
            "summary": summary,
        }
        _write_json(partial / RECORD_NAME, record)
        kept, mine = _commit(partial, final, fp)
        return kept if mine else {**kept, "status": "skipped"}
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        with contextlib.suppress(OSError):
            running.unlink()


def running_attempts(out_root: Path) -> list[dict[str, Any]]:
    """The attempts running now in a batch's output folder: name, host, pid, attempt, started,
    and ``folder``, the attempt's own output folder as it fills (committed when it ends)."""
    found = []
    for marker in sorted((Path(out_root) / RUNNING_DIR).glob("*.json")):
        try:
            found.append(json.loads(marker.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue  # gone since (the attempt ended)
    return found


# ---------------------------------------------------------------- executors


@dataclass
class Outcome:
    name: str
    record: dict[str, Any] | None = None
    error: str | None = None


class LocalExecutor:
    """One item after another in this process: today's loop, with resume and a merged report."""

    description = "local, one flight at a time"

    def run(
        self,
        job: Job,
        items: Sequence[Any],
        fps: Sequence[str],
        out_root: Path,
        progress: BatchProgress,
    ) -> None:
        for item, fp in zip(items, fps, strict=True):
            name = job.name_of(item)
            try:
                record = run_item(job, item, out_root, fp, report=progress.running, report_every_s=0.2)
            except Exception as exc:  # noqa: BLE001 - one bad flight must not stop the batch
                if is_user_error(exc):
                    log.error("%s failed: %s", name, exc)
                else:
                    log.exception("%s failed", name)
                progress.done(Outcome(name, error=f"{type(exc).__name__}: {exc}"))
            else:
                progress.done(Outcome(name, record=record))


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast with a clear message when nothing listens at a cluster's address (ray.init would
    retry for minutes). ``auto`` is left to Ray (it reads the address of this machine's cluster)."""
    if address == "auto":
        return
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise BatchError(f"--ray {address}: expected 'auto', HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise BatchError(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or exc} (is `ray start --head` "
            "running there, and the port open?)"
        ) from None


def _ray_task(job: Job, item: Any, out_root: str, fp: str, tally: Any) -> dict[str, Any]:
    """The body of one Ray task (module level, so workers import it from the installed package)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    def report(name: str, attempt: str, frames: int) -> None:
        tally.running.remote(name, attempt, frames)

    return run_item(job, item, Path(out_root), fp, attempt_note="ray", report=report, report_every_s=1.0)


class _FrameTally:
    """A Ray actor the tasks tell their frames to; the driver reads it for the batch's progress."""

    def __init__(self) -> None:
        self.frames: dict[str, tuple[str, int]] = {}

    def running(self, name: str, attempt: str, frames: int) -> None:
        self.frames[name] = (attempt, frames)

    def snapshot(self) -> dict[str, tuple[str, int]]:
        return dict(self.frames)


@dataclass
class RayExecutor:
    """One Ray task per item. ``address``: None starts a local Ray on this machine with ``workers``
    task slots; ``"auto"`` joins the cluster this machine belongs to; ``host:port`` or
    ``ray://host:10001`` another one. Inputs and the output folder must be at the same path on every
    node (a shared filesystem; docs/scale-out.md). A task whose worker dies is retried (``retries``);
    a task that raises (a corrupt video) is reported as failed and not retried."""

    address: str | None = None
    workers: int | None = None
    cpus_per_task: float = 1.0
    gpus_per_task: float = 0.0
    retries: int = 3
    _started: bool = field(default=False, init=False)

    @property
    def description(self) -> str:
        where = "local Ray" if self.address is None else f"Ray at {self.address}"
        return (
            f"{where}, {self.cpus_per_task:g} CPU"
            + (f" + {self.gpus_per_task:g} GPU" if self.gpus_per_task else "")
            + " per task"
        )

    def start(self) -> dict[str, Any]:
        try:
            import ray
        except ImportError as exc:
            raise BatchError("--ray needs Ray: pip install 'airpatrol[ray]' (or ray>=2.40)") from exc
        if ray.is_initialized():
            return ray.cluster_resources()
        env = {"env_vars": {k: v for k, v in os.environ.items() if k.startswith(("AIRPATROL_", "YOLO_"))}}
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "runtime_env": env}
        if self.address is None:
            cpus = self.workers * self.cpus_per_task if self.workers else None
            kwargs |= {"num_cpus": cpus, "num_gpus": None}
            ray.init(**kwargs)
        else:
            _check_reachable(self.address)
            try:
                ray.init(address=self.address, **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise BatchError(f"cannot reach the Ray cluster at {self.address}: {exc}") from exc
        self._started = True
        return ray.cluster_resources()

    def stop(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
            self._started = False

    def run(
        self,
        job: Job,
        items: Sequence[Any],
        fps: Sequence[str],
        out_root: Path,
        progress: BatchProgress,
    ) -> None:
        import ray

        resources = self.start()
        log.info("Ray cluster: %s", {k: v for k, v in resources.items() if not k.startswith("node:")})
        if self.gpus_per_task and resources.get("GPU", 0) < self.gpus_per_task:
            raise BatchError(
                f"--gpus-per-task {self.gpus_per_task:g} but the Ray cluster has {resources.get('GPU', 0):g} GPU(s)"
            )
        remote = ray.remote(_ray_task).options(
            num_cpus=self.cpus_per_task,
            num_gpus=self.gpus_per_task,
            max_retries=self.retries,
            retry_exceptions=False,
        )
        job_ref = ray.put(job)
        tally = ray.remote(num_cpus=0)(_FrameTally).remote()
        pending = {}
        for item, fp in zip(items, fps, strict=True):
            ref = remote.remote(job_ref, item, str(out_root.resolve()), fp, tally)
            pending[ref] = job.name_of(item)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for name, (attempt, frames) in ray.get(tally.snapshot.remote()).items():
                progress.running(name, attempt, frames)
            for ref in ready:
                name = pending.pop(ref)
                try:
                    progress.done(Outcome(name, record=ray.get(ref)))
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if getattr(exc, "cause", None) is not None else exc
                    log.error("%s failed: %s", name, cause)
                    progress.done(Outcome(name, error=f"{type(cause).__name__}: {cause}"))
                except ray.exceptions.RayError as exc:  # worker died more often than retries allow
                    log.error("%s failed: %s", name, exc)
                    progress.done(Outcome(name, error=f"{type(exc).__name__}: {str(exc).splitlines()[0]}"))


Executor = LocalExecutor | RayExecutor


def executor_for(ray: str | None, **kwargs: Any) -> Executor:
    """``--ray`` as given: None -> local loop; "local" -> a local Ray; else a cluster address."""
    if ray is None:
        return LocalExecutor()
    return RayExecutor(address=None if ray == "local" else ray, **kwargs)


# ---------------------------------------------------------------- the batch


@dataclass
class BatchReport:
    out_dir: Path
    executor: str
    items: list[dict[str, Any]]
    wall_s: float
    threads: int | None = None  # CPU threads per task (None: the libraries' defaults, every core)
    machine: str = field(default_factory=lambda: f"{platform.node()} ({os.cpu_count()} CPUs)")

    def count(self, status: str) -> int:
        return sum(1 for r in self.items if r["status"] == status)

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.items if r["status"] == "failed"]

    def totals(self) -> dict[str, Any]:
        ran = [r for r in self.items if r["status"] in ("done", "skipped")]
        frames = sum(int((r.get("summary") or {}).get("frames") or 0) for r in ran)
        fresh = [r for r in self.items if r["status"] == "done"]
        fresh_frames = sum(int((r.get("summary") or {}).get("frames") or 0) for r in fresh)
        return {
            "items": len(self.items),
            "done": self.count("done"),
            "skipped": self.count("skipped"),
            "failed": self.count("failed"),
            "frames": frames,
            "violations": sum(int((r.get("summary") or {}).get("violations") or 0) for r in ran),
            "wall_s": round(self.wall_s, 2),
            "frames_per_s": round(fresh_frames / self.wall_s, 2) if self.wall_s > 0 else None,
            "workers": len({(r["worker"]["host"], r["worker"]["pid"]) for r in fresh if r.get("worker")}),
            "detector_loads": sum(int((r.get("models_loaded") or {}).get("detector", 0)) for r in fresh),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "executor": self.executor,
            "threads_per_task": self.threads,
            "machine": self.machine,
            "totals": self.totals(),
            "items": self.items,
        }

    def markdown(self) -> str:
        t = self.totals()
        lines = [
            f"# Batch {self.out_dir.name}",
            "",
            f"{t['items']} item(s): {t['done']} run, {t['skipped']} already done (skipped), {t['failed']} failed; "
            f"{t['frames']} frames, {t['violations']} violations; {t['wall_s']} s wall on {self.executor}, "
            f"{self.threads or 'default'} thread(s) per task "
            f"({self.machine}); {t['workers']} worker process(es), the detector loaded {t['detector_loads']} time(s).",
            "",
            "| item | status | frames | tracks | violations | fps | task s | worker |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in self.items:
            s = r.get("summary") or {}
            w = r.get("worker") or {}
            worker = f"{w.get('host', '')}:{w.get('pid', '')}" if w else ""
            status = r["status"] if r["status"] != "failed" else f"failed: {r.get('error', '')}"
            lines.append(
                f"| {r['name']} | {status.replace('|', '/')} | {s.get('frames', '')} | {s.get('tracks', '')} | "
                f"{s.get('violations', '')} | {s.get('fps', '')} | {r.get('task_wall_s', '')} | {worker} |"
            )
        return "\n".join(lines) + "\n"

    def write(self) -> None:
        _write_json(self.out_dir / "batch.json", self.to_dict())
        (self.out_dir / "batch.md").write_text(self.markdown(), encoding="utf-8")


@contextlib.contextmanager
def _exclusive(out_root: Path):
    """One batch driver per output folder at a time."""
    out_root.mkdir(parents=True, exist_ok=True)
    with open(out_root / LOCK_NAME, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BatchError(f"{out_root} is in use by another batch (lock {out_root / LOCK_NAME})") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_batch(
    job: Job,
    items: Sequence[Any],
    out_root: str | Path,
    executor: Executor | None = None,
    *,
    progress: bool = True,
) -> BatchReport:
    """Run ``job`` on every item not already done in ``out_root``; write batch.json and batch.md.

    Progress (items and frames across the whole batch) goes to a progress bar and the log."""
    out_root = Path(out_root)
    executor = executor or LocalExecutor()
    names = [job.name_of(i) for i in items]
    if len(set(names)) != len(names):
        raise BatchError("two items of the batch have one name")
    settings = job.settings()
    with _exclusive(out_root):
        shutil.rmtree(out_root / PARTIAL_DIR, ignore_errors=True)  # attempts of a killed earlier run
        shutil.rmtree(out_root / RUNNING_DIR, ignore_errors=True)
        per_item = getattr(job, "item_settings", None)
        fps = [fingerprint(job.inputs_of(i), [settings, per_item(i) if per_item else None]) for i in items]
        frames_of = getattr(job, "frames_of", None)
        counts = [frames_of(i) for i in items] if frames_of else []
        total = sum(counts) if counts and all(c is not None for c in counts) else None
        tracker = BatchProgress(len(items), total, show=progress)
        try:
            executor.run(job, items, fps, out_root, tracker)
        finally:
            tracker.close()
            if isinstance(executor, RayExecutor):
                executor.stop()
        outcomes = tracker.outcomes
        shutil.rmtree(out_root / PARTIAL_DIR, ignore_errors=True)
        shutil.rmtree(out_root / RUNNING_DIR, ignore_errors=True)
        report = BatchReport(
            out_root,
            executor.description,
            [outcomes.get(n, {"name": n, "status": "failed", "error": "no result"}) for n in names],
            tracker.elapsed_s,
            getattr(job, "threads", None),
        )
        report.write()
    return report


class BatchProgress:
    """Progress across the whole batch: items finished, and frames done (finished items' and the
    running attempts' as their tasks report them; a retried item counts from its new attempt) out
    of the batch's total when the inputs' headers give it. A progress bar, and a log line at most
    every ``log_every_s`` seconds and for every finished item."""

    def __init__(
        self, items: int, total_frames: int | None, show: bool = True, log_every_s: float = 10.0
    ) -> None:
        self.items = items
        self.total_frames = total_frames
        self.outcomes: dict[str, dict[str, Any]] = {}
        self._running: dict[str, tuple[str, int]] = {}
        self._finished_frames = 0
        self._t0 = time.perf_counter()
        self._logged = self._t0
        self._log_every_s = log_every_s
        self._bar = None
        if show:
            from tqdm import tqdm

            self._bar = tqdm(total=total_frames, unit="frame", desc="batch", dynamic_ncols=True)

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self._t0

    @property
    def frames(self) -> int:
        return self._finished_frames + sum(f for _, f in self._running.values())

    @property
    def failed(self) -> int:
        return sum(1 for r in self.outcomes.values() if r["status"] == "failed")

    def running(self, name: str, attempt: str, frames: int) -> None:
        if name in self.outcomes:
            return  # a late report of a finished item
        self._running[name] = (attempt, frames)
        self._refresh(force=False)

    def done(self, o: Outcome) -> None:
        self._running.pop(o.name, None)
        if o.record is not None:
            self.outcomes[o.name] = dict(o.record)
            self._finished_frames += int((o.record.get("summary") or {}).get("frames") or 0)
        else:
            self.outcomes[o.name] = {"name": o.name, "status": "failed", "error": o.error}
        self._refresh(force=True)

    def line(self) -> str:
        frames = self.frames
        of = f"/{self.total_frames}" if self.total_frames else ""
        text = f"{len(self.outcomes)}/{self.items} items ({self.failed} failed), {frames}{of} frames, {self.elapsed_s:.0f} s"
        if self.total_frames and 0 < frames < self.total_frames and len(self.outcomes) < self.items:
            left = max(0, self.total_frames - frames) * self.elapsed_s / frames
            text += f", about {left:.0f} s left"
        return text

    def _refresh(self, force: bool) -> None:
        now = time.perf_counter()
        if force or now - self._logged >= self._log_every_s:
            self._logged = now
            log.info("batch: %s", self.line())
        if self._bar is not None:
            self._bar.n = self.frames
            self._bar.set_postfix_str(
                f"{len(self.outcomes)}/{self.items} items, {self.failed} failed", refresh=False
            )
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
