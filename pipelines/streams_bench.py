"""How many streams one box's engine keeps at the camera's frame rate: ``airpatrol bench --streams``.

A live server's streams each run a pipeline on a thread of their own around the one detector
(:class:`~pipelines.motion.shared_detector.SharedDetector`, their frames batched per step). This
measures that engine alone, without receiving or decoding: the flight's frames are decoded once
into memory, and N pipelines run them at once, as fast as they can, for each N asked; each stream's
processed fps, the detector's batches, its busy share and the process's cores say how many streams
keep ``target_fps`` and what holds the next count back. On a GPU box (``--device cuda``) it is the
figure issue 42 asks for; on a CPU it is the engine's ceiling with decoding taken away.

Every stream plays the same frames from the first (identical work per stream; on a live server the
streams' frames differ, and batches form as they arrive).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from pipelines.config import PipelineConfig
from pipelines.types import Frame

log = logging.getLogger(__name__)


def run_streams(
    config: PipelineConfig,
    frames: Sequence[Frame],
    counts: Sequence[int],
    *,
    target_fps: float = 30.0,
    max_batch: int | None = None,
    model: Any = None,
    give_up_after: int | None = None,
    prepare_ahead: bool | None = None,
) -> dict[str, Any]:
    """For each stream count: every stream's fps over ``frames``, the detector's figures, the cores
    used; and the largest count whose streams all kept ``target_fps``, with what limits the next.
    ``model``: the loaded detector network (default: the config's, loaded once here);
    ``give_up_after``: leave the larger counts out once this many counts in a row missed the target
    and added no frames (:func:`gave_up`);
    ``prepare_ahead``: each stream's frames prepared one ahead on a second thread, as a live server
    does (None: as its default, where this process may use two CPUs or more)."""
    from pipelines.builder import build_detector_model, build_pipeline
    from pipelines.motion.shared_detector import SharedDetector, default_batch

    model = model if model is not None else build_detector_model(config.detector)
    device = str(getattr(model, "device", "cpu"))
    batch = default_batch(device, max_batch)
    warm = build_pipeline(config, model=model)
    try:  # the networks' first runs (compiling, a GPU's kernels) are no count's
        warm_up([warm], frames)
    finally:
        warm.close()
    ahead = default_prepare_ahead(prepare_ahead)
    runs = []
    for n in counts:
        shared = SharedDetector(model, max_batch=batch)
        pipelines = [build_pipeline(config, model=shared) for _ in range(n)]
        try:
            runs.append(_one_count(pipelines, frames, shared, target_fps, ahead))
        finally:
            shared.close()
            for p in pipelines:
                p.close()
        log_count(runs[-1])
        if gave_up(runs, give_up_after):
            break
    report = report_of(runs, frames, device=device, target_fps=target_fps, max_batch=batch, mode=THREADS)
    return {**report, "prepare_ahead": ahead}


def default_prepare_ahead(setting: bool | None) -> bool:
    """``setting``, or where it is None the live server's default: a prepare thread a stream where
    the process may use two CPUs or more (on one it would only add latency)."""
    return setting if setting is not None else len(os.sched_getaffinity(0)) >= 2


WARM_FRAMES = 3  # frames each new pipeline runs before any count is timed


def warm_up(pipelines: Sequence[Any], frames: Sequence[Frame]) -> None:
    """Each of ``pipelines`` over the first :data:`WARM_FRAMES` frames, at once (then let go: its
    tracks are not a count's)."""
    errors: list[BaseException] = []

    def run(p: Any) -> None:
        try:
            for frame in frames[:WARM_FRAMES]:
                p.process(frame)
        except BaseException as exc:  # noqa: BLE001 - raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(p,), name="warm-up") for p in pipelines]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


THREADS = "threads"  # the streams' pipelines on threads of one process (a server's default)
PROCESSES = "processes"  # a process per stream around the detector service (engine_processes)
# what holds streams back when neither the detector nor the cores are busy, by mode
SERIAL = {
    THREADS: "each stream's stages one after another, and the interpreter lock the streams share",
    PROCESSES: "each stream's stages one after another (a frame waits for its detector answer)",
}


def log_count(run: dict[str, Any]) -> None:
    log.info(
        "%d stream(s): %s fps each, detector busy %.0f %%",
        run["streams"],
        run["fps"],
        100 * run["detector_busy"],
    )


# A count "adds" frames when all its streams together process this much more than the count before.
GROWTH = 1.10


def gave_up(runs: Sequence[dict[str, Any]], give_up_after: int | None) -> bool:
    """Whether the last ``give_up_after`` counts all missed the target and none of them added
    frames (:data:`GROWTH` over the count before; None: never give up). Past that the larger counts
    would miss it too and the box is full: a device lent for minutes is better spent elsewhere. While
    more streams still add frames the counts go on, since where even one stream misses the target
    (a slow core) how many the box holds is what is left to measure."""
    if not give_up_after or len(runs) < give_up_after + 1:
        return False
    last = runs[-give_up_after - 1 :]
    missed = all(not r["kept_target"] for r in last[1:])
    flat = all(b["fps_total"] < GROWTH * a["fps_total"] for a, b in zip(last, last[1:], strict=False))
    if missed and flat:
        log.info(
            "%d count(s) in a row missed the target and added no frames: the larger counts are left out",
            give_up_after,
        )
        return True
    return False


def report_of(
    runs: list[dict[str, Any]],
    frames: Sequence[Frame],
    *,
    device: str,
    target_fps: float,
    max_batch: int,
    mode: str,
) -> dict[str, Any]:
    """The benchmark's report from its counts' runs: the largest count whose streams all kept
    ``target_fps``, and what held the next one back."""
    kept = [r for r in runs if r["kept_target"]]
    best = max((r["streams"] for r in kept), default=0)
    above = next((r for r in runs if r["streams"] > best), None)
    return {
        "mode": mode,
        "device": device,
        "frames": len(frames),
        "size": list(frames[0].image.shape[1::-1]) if frames else None,
        "target_fps": target_fps,
        "max_batch": max_batch,
        "cpus": len(os.sched_getaffinity(0)),
        "runs": runs,
        "streams_kept": best,
        "limit": _limit(above, SERIAL[mode]) if above is not None else None,
        # what bounded all the streams' frames together at the largest count run (where it missed)
        "limit_largest": _limit(runs[-1], SERIAL[mode]) if runs and not runs[-1]["kept_target"] else None,
    }


def _one_count(
    pipelines: list[Any], frames: Sequence[Frame], shared: Any, target_fps: float, prepare_ahead: bool
) -> dict[str, Any]:
    """Every pipeline over ``frames`` at once, each on a thread of its own."""
    walls, wall, cpu, stages = play(pipelines, frames, time.process_time, prepare_ahead)
    return count_figures(len(frames), walls, wall, cpu, shared.stats(), target_fps, stages)


def play(
    pipelines: Sequence[Any],
    frames: Sequence[Frame],
    cpu_s: Callable[[], float],
    prepare_ahead: bool = False,
) -> tuple[list[float], float, float, dict[str, float]]:
    """Every pipeline over ``frames`` at once, each from a thread of its own started together:
    each one's seconds, all of them's, the CPU seconds ``cpu_s`` counted meanwhile, and where a
    frame's time went (each stage's mean ms a frame over every stream, from the results' timings).
    ``prepare_ahead``: each stream's next frame prepared on a second thread while it processes one
    (:func:`prepared_ahead`), as a live server's streams are (``prepare_ahead``)."""
    n = len(pipelines)
    walls = [0.0] * n
    stage_ms: list[dict[str, float]] = [{} for _ in range(n)]
    errors: list[BaseException] = []
    start_gate = threading.Barrier(n + 1)

    def stream(k: int) -> None:
        try:
            start_gate.wait()
            t0 = time.perf_counter()
            sums = stage_ms[k]
            pipeline = pipelines[k]
            source = prepared_ahead(pipeline, frames) if prepare_ahead else ((f, None) for f in frames)
            for frame, prepared in source:
                result = (
                    pipeline.process(frame)
                    if prepared is None
                    else pipeline.process(frame, prepared=prepared)
                )
                for stage, ms in result.timings_ms.items():
                    sums[stage] = sums.get(stage, 0.0) + ms
            pipelines[k].finish()
            walls[k] = time.perf_counter() - t0
        except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread below
            errors.append(exc)

    threads = [threading.Thread(target=stream, args=(k,), name=f"stream-{k}") for k in range(n)]
    for t in threads:
        t.start()
    cpu0 = cpu_s()
    start_gate.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu = cpu_s() - cpu0
    if errors:
        raise errors[0]
    stages = {
        name: sum(d.get(name, 0.0) for d in stage_ms)
        for name in dict.fromkeys(k for d in stage_ms for k in d)
    }
    return walls, wall, cpu, {name: round(ms / (n * len(frames)), 2) for name, ms in stages.items()}


def prepared_ahead(pipeline: Any, frames: Sequence[Frame]) -> Iterator[tuple[Frame, Any]]:
    """``frames`` with each one's ``pipeline.prepare`` (grey image, camera motion) done on a thread
    of its own one frame ahead, as a live server's prepare thread does (edge_server.worker): the
    next frame is prepared while the caller processes this one, never two ahead."""
    ready: queue.SimpleQueue = queue.SimpleQueue()
    room = threading.Semaphore(1)
    stop = threading.Event()

    def prepare() -> None:
        try:
            for frame in frames:
                room.acquire()  # the frame before was taken
                if stop.is_set():
                    return
                ready.put((frame, pipeline.prepare(frame), None))
        except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread
            ready.put((None, None, exc))

    thread = threading.Thread(target=prepare, name="prepare", daemon=True)
    thread.start()
    try:
        for _ in range(len(frames)):
            frame, prepared, error = ready.get()
            if error is not None:
                raise error
            room.release()
            yield frame, prepared
    finally:
        stop.set()
        room.release()
        thread.join()


def count_figures(
    frames: int,
    walls: Sequence[float],
    wall: float,
    cpu: float,
    det: dict[str, Any],
    target_fps: float,
    stages: dict[str, float] | None = None,
) -> dict[str, Any]:
    """One count's row: each stream's fps over ``frames`` (``walls``: its seconds), the cores used
    (``cpu`` seconds over ``wall``), the detector's figures (``det``: a batcher's totals over the
    count, :meth:`pipelines.batching.Batcher.stats`), and each stage's mean ms a frame (``stages``)."""
    n = len(walls)
    fps = [round(frames / w, 2) for w in walls]
    runs, calls = det["batches"], det["calls"]
    return {
        "streams": n,
        "fps": fps,
        "fps_min": min(fps),
        "fps_total": round(sum(fps), 2),
        "kept_target": min(fps) >= target_fps,
        "cores": round(cpu / wall, 2),
        "detector_runs": runs,
        "detector_frames": calls,
        "mean_batch": round(calls / runs, 2) if runs else None,
        "batch_sizes": det["batch_sizes"],
        "detector_run_ms": round(1000 * det["run_s_total"] / runs, 2) if runs else None,
        "detector_queue_ms": round(1000 * det["queue_s_total"] / max(1, calls), 2),
        "detector_busy": round(det["run_s_total"] / wall, 3),
        "stages_ms": dict(stages or {}),
    }


# The share of the CPUs in use from which the cores are what holds a count back: with a process per
# stream the feeding thread, the service and the engines' waits leave a little idle even when every
# core is wanted (a lent 16-core GPU box: 14.2 of 16 at 16 streams, every engine single-threaded).
CPU_BOUND = 0.85


def _limit(run: dict[str, Any], serial: str) -> str:
    """What held ``run``'s streams under the target: the detector, the cores, or neither (then
    ``serial``: the streams' own serial work, and on threads the interpreter lock they share)."""
    cpus = len(os.sched_getaffinity(0))
    if run["detector_busy"] >= 0.9:
        return f"the detector: busy {100 * run['detector_busy']:.0f} % of the time (mean batch {run['mean_batch']})"
    if run["cores"] >= CPU_BOUND * cpus:
        return f"the CPU: {run['cores']} of {cpus} cores busy"
    return (
        f"neither the detector (busy {100 * run['detector_busy']:.0f} %) nor the CPU ({run['cores']} of {cpus} "
        f"cores): {serial}"
    )


def format_streams(report: dict[str, Any]) -> str:
    mode = {PROCESSES: "a process per stream around the detector service"}.get(report.get("mode", THREADS))
    lines = [
        f"{report['frames']} frames of {report['size'][0]}x{report['size'][1]} decoded once, every stream from the first; "
        f"detector on {report['device']}, batches up to {report['max_batch']}; {report['cpus']} CPUs"
        + (f"; {mode}" if mode else "")
        + ("; each frame prepared ahead on a second thread" if report.get("prepare_ahead") else ""),
        f"{'streams':>8}{'fps min':>9}{'fps all':>9}{'cores':>7}{'det busy':>10}{'batch':>7}{'run ms':>8}{'wait ms':>9}",
    ]
    for r in report["runs"]:
        lines.append(
            f"{r['streams']:>8}{r['fps_min']:>9.1f}{r['fps_total']:>9.1f}{r['cores']:>7.2f}"
            f"{100 * r['detector_busy']:>9.0f}%{r['mean_batch'] or 0:>7.2f}{r['detector_run_ms'] or 0:>8.1f}"
            f"{r['detector_queue_ms']:>9.1f}"
        )
    lines += [
        f"{r['streams']:>8} stream(s), ms a frame: {stage_line(r['stages_ms'])}" for r in report["runs"]
    ]
    lines.append(
        f"streams kept at {report['target_fps']:g} fps: {report['streams_kept']}"
        + (f"; the next count is held back by {report['limit']}" if report["limit"] else "")
    )
    largest = report.get("limit_largest")
    if largest and report["runs"][-1]["streams"] > report["streams_kept"] + 1:
        lines.append(f"at {report['runs'][-1]['streams']} streams all their frames are bounded by {largest}")
    return "\n".join(lines)


def stage_line(stages: dict[str, float]) -> str:
    """Each stage's ms a frame, the largest first, the total last ("-" where none was timed)."""
    parts = sorted(((k, v) for k, v in stages.items() if k != "total"), key=lambda kv: -kv[1])
    text = ", ".join(f"{k} {v:.1f}" for k, v in parts if v >= 0.05)
    if "total" in stages:
        text += f"; total {stages['total']:.1f}"
    return text or "-"


def frames_in_memory(frames: Any) -> list[Frame]:
    """The flight's frames decoded (their pixels in memory), for the streams to share."""
    out = [f for f in frames]
    if not out:
        raise ValueError("the video gave no frames")
    log.info("%d frames decoded (%.0f MB)", len(out), sum(np.asarray(f.image).nbytes for f in out) / 1e6)
    return out
