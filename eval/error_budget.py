"""Issue 39's error budget: what a real drone's telemetry errors do to the speeds and the tickets, and
what each way of knowing the height above the road gives back.

From simulated flights (the ticket grid's, ``eval/examples/ticket_grid.sh``), :func:`build_grid`
derives, for each *scenario* (a telemetry error and its magnitude, :data:`SCENARIOS`) and each
correction *arm* (:mod:`eval.correction`: ``none``, ``site``, ``base``), a flight whose SRT carries
the errors and whose ``config.yaml`` carries what the arm knows (:func:`eval.simulate.derive_flight`:
the video and the truth are links). :func:`run_grid` runs every derived flight through
``airpatrol eval``'s :func:`~eval.runner.run_sequence` with the shipped detector, whose output is
computed once per video (:mod:`eval.detection_cache`: each source flight's first run records it, every
other run replays it and may not detect), ``--jobs`` at a time, and keeps one record per run under
``runs/<scenario>/<arm>/<flight>.json`` (the matched per-frame speeds, the ticket records, the
injected errors, what the arm knew, the scale the engine reported). :mod:`eval.error_budget_table`
makes the table. A run already recorded is kept (``--force`` runs it again); a failed one is run again.

Scenarios: ``exact``; the road's level against the take-off point ``road-15`` .. ``road+15`` (m, +:
the road above the take-off point, the drone reads higher); the barometer's bias ``alt+2`` /
``alt-2`` (m) and drift ``drift+2`` (m/min); the gimbal's pitch bias ``pitch+1`` .. ``pitch-2``
(deg); a late, slow feed ``late`` (0.5 s, 0.5 Hz); ``typical``: all of them at about one sigma
of the engine's priors; ``prior``: each flight's errors drawn (seeded) from :class:`ErrorPrior`, the
engine's own priors (road level 5 m, barometer 1.0 m, pitch 1 deg): pooled over flights, whether the
reported sigmas hold.

    python -m eval.error_budget run /work/bench/ticket_all/sims/alt60_pitch90_hover_steady_s00 ... \\
        --out /work/bench/error_budget [--scenarios exact,road+8,...] [--arms none,site,base] [--jobs 2]
    python -m eval.error_budget table /work/bench/error_budget [--markdown]
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import sys
import time
import zlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from eval.correction import ARMS, DEFAULT_ARMS, LASER, arm_config
from eval.error_budget_table import budget_rows, format_rows
from eval.simulate import ErrorPrior, FlightSpec, TelemetryErrors, derive_flight, read_errors
from pipelines.errors import AirPatrolError
from pipelines.lens import LensModel

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Scenario:
    """A telemetry error: fixed ``errors``, or drawn per flight from ``prior``."""

    name: str
    errors: TelemetryErrors = TelemetryErrors()
    prior: ErrorPrior | None = None

    def errors_for(self, seed: int, flight: str, draw: int = 0) -> TelemetryErrors:
        if self.prior is None:
            return self.errors
        return self.prior.draw(np.random.default_rng([seed, zlib.crc32(flight.encode()), draw]))

    def describe(self) -> str:
        return f"drawn per flight: {self.prior.describe()}" if self.prior else self.errors.describe()


def _scenarios() -> dict[str, Scenario]:
    out = [Scenario("exact")]
    out += [Scenario(f"road{v:+d}", TelemetryErrors(road_level_m=v)) for v in (-15, -8, 8, 15)]
    out += [Scenario(f"alt{v:+d}", TelemetryErrors(altitude_bias_m=v)) for v in (2, -2)]
    out += [Scenario("drift+2", TelemetryErrors(altitude_drift_m_per_min=2.0))]
    out += [Scenario(f"pitch{v:+d}", TelemetryErrors(pitch_bias_deg=v)) for v in (1, -1, 2, -2)]
    out += [Scenario("late", TelemetryErrors(delay_s=0.5, rate_hz=0.5))]
    typical = TelemetryErrors(
        road_level_m=5.0,
        altitude_bias_m=1.0,
        altitude_drift_m_per_min=0.5,
        pitch_bias_deg=1.0,
        delay_s=0.2,
        rate_hz=2.0,
    )
    out += [Scenario("typical", typical), Scenario("prior", prior=ErrorPrior())]
    return {s.name: s for s in out}


SCENARIOS = _scenarios()
# the default grid: leaves out drift+2 and late, which move nothing on the ticket grid's flights
# (8 s long, at a constant height: 0.3 m of drift, nothing for a late feed to lag behind)
DEFAULT_SCENARIOS = tuple(n for n in SCENARIOS if n not in ("drift+2", "late"))


@dataclass(frozen=True)
class Job:
    """One derived flight to run: where it is, where its record goes, whether it records detections."""

    flight: str
    scenario: str
    arm: str
    flight_dir: str
    result: str
    record: bool = False


def parse_names(text: str | None, known: Sequence[str], default: Sequence[str], what: str) -> list[str]:
    names = [n.strip() for n in (text or "").split(",") if n.strip()] or list(default)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown {what} {unknown}: known are {', '.join(known)}")
    return names


def source_flights(paths: Sequence[str | Path]) -> list[Path]:
    """Simulated flight folders: each path is one (``flight.yaml`` + ``video.mp4``) or holds some."""
    out: list[Path] = []
    for p in map(Path, paths):
        if (p / "flight.yaml").is_file():
            out.append(p)
        elif p.is_dir():
            out += sorted(
                q for q in p.iterdir() if (q / "flight.yaml").is_file() and (q / "video.mp4").is_file()
            )
        else:
            raise SystemExit(f"not a simulated flight or a folder of them: {p}")
    return out


def _failed(path: Path, job: dict, reason: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**job, "status": "failed", "error": reason}, indent=2))


def build_grid(
    sources: Sequence[Path],
    out: Path,
    scenarios: Sequence[str],
    arms: Sequence[str],
    *,
    seed: int = 0,
    prior_draws: int = 1,
    told: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Job]:
    """Derive every (flight, scenario, arm) flight under ``out/flights`` and list the runs; an arm that
    cannot be set up (a base with no road in view) is recorded as failed. One run per source flight
    records its detections: the first scenario's first arm (``exact``, ``none`` by default).
    ``told``: per source flight's name, the camera settings every arm is told (its profile's lens and
    readout: :mod:`eval.realistic_grid`); a base's ends are undone through that lens."""
    jobs: list[Job] = []
    for src in sources:
        spec = FlightSpec.from_yaml(src / "flight.yaml")
        camera_told = dict((told or {}).get(src.name, {}))
        lens = LensModel(**camera_told["lens"]) if camera_told.get("lens") else None
        for sc_name in scenarios:
            sc = SCENARIOS[sc_name]
            for d in range(prior_draws if sc.prior else 1):
                name = src.name if d == 0 else f"{src.name}_d{d}"  # more draws keep the first's runs
                errors = sc.errors_for(seed, src.name, d)
                for arm in arms:
                    dest = out / "flights" / sc_name / arm / name
                    result = out / "runs" / sc_name / arm / f"{name}.json"
                    job = Job(name, sc_name, arm, str(dest), str(result))
                    arm_seed = zlib.crc32(f"{seed}/{name}/{sc_name}".encode())
                    try:
                        config, record = arm_config(
                            arm,
                            spec,
                            errors,
                            arm_seed,
                            workdir=out / "terrain" / sc_name / arm / name,
                            lens=lens,
                        )
                        if camera_told:
                            config = dict(config or {})
                            config["camera"] = dict(config.get("camera", {})) | camera_told
                        extra = {"scenario": sc_name, "arm": arm, "flight": name, "arm_record": record}
                        laser = LASER if "lrf" in arm else None
                        derive_flight(
                            src, dest, errors, config=config, label=f"{sc_name}/{arm}", extra=extra,
                            laser=laser, seed=arm_seed,
                        )  # fmt: skip
                    except (AirPatrolError, ValueError) as exc:  # no base in view, a reading below 0.5 m
                        log.warning("%s / %s / %s: %s", name, sc_name, arm, exc)
                        _failed(result, asdict(job) | {"errors": errors.to_dict()}, f"setup: {exc}")
                        continue
                    jobs.append(job)
    return with_recorders(jobs)


def with_recorders(jobs: Sequence[Job]) -> list[Job]:
    """The jobs, the first run of each video marked to record its detections (the others replay them)."""
    first: dict[str, int] = {}
    for i, j in enumerate(jobs):
        first.setdefault(Path(j.flight_dir).joinpath("video.mp4").resolve().as_posix(), i)
    return [replace(j, record=i in first.values()) for i, j in enumerate(jobs)]


def _speeds(result) -> dict:
    s = result.speed_samples
    if s is None or not len(s):
        return {"frame": [], "gt_id": [], "gt_kmh": [], "pred_kmh": [], "sigma_kmh": [], "scale_source": []}
    ok = np.isfinite(s.pred_kmh)
    return {
        "frame": s.frames[ok].tolist(),  # 1-based, as gt.txt
        "gt_id": s.gt_ids[ok].tolist(),
        "gt_kmh": np.round(s.gt_kmh[ok], 4).tolist(),
        "pred_kmh": np.round(s.pred_kmh[ok], 4).tolist(),
        "sigma_kmh": [None if not np.isfinite(v) else round(float(v), 4) for v in s.sigma_kmh[ok]],
        "scale_source": [str(v) for v in s.scale_source[ok]],
    }


def _scales(result) -> list[dict]:
    out = []
    for v in result.predicted_violations:
        scale = getattr(v, "scale", None)
        if scale is not None:
            out.append(scale.to_dict() if hasattr(scale, "to_dict") else dict(scale))
    return out


def run_job(
    job: Job,
    cache_root: str,
    config_path: str | None = None,
    max_frames: int | None = None,
    threads: int | None = None,
) -> str:
    """Run one derived flight and write its record (``job.result``); returns a line for the log.
    ``threads``: the CPU threads of this run's libraries (runs sharing the cores)."""
    from batch.jobs import configure_worker
    from eval.datasets import sim_sequence
    from eval.detection_cache import DetectionCache
    from eval.runner import run_sequence
    from eval.variants import Variant
    from pipelines.config import PipelineConfig

    base = PipelineConfig.from_yaml(config_path) if config_path else PipelineConfig()
    if threads:
        base = base.with_overrides(detector={"threads": threads})  # not part of the cache key
    configure_worker(base)
    record = read_errors(job.flight_dir) or {}
    head = asdict(job) | {k: record.get(k) for k in ("errors", "injected", "arm_record", "config")}
    spec = FlightSpec.from_yaml(Path(job.flight_dir) / "flight.yaml")
    head |= {"altitude_m": spec.altitude_m, "pitch_deg": spec.pitch_deg}
    t0 = time.perf_counter()
    cache = DetectionCache(cache_root, record=job.record)
    try:
        r = run_sequence(
            sim_sequence(Path(job.flight_dir)),
            base,
            Variant("base"),
            progress=False,
            max_frames=max_frames,
            cache=cache,
        )
    except AirPatrolError as exc:
        _failed(Path(job.result), head, f"run: {exc}")
        return f"{job.scenario}/{job.arm}/{job.flight}: failed: {exc}"
    data = head | {
        "status": "ok",
        "frames": r.frames,
        "wall_s": round(time.perf_counter() - t0, 2),
        "detection_cache": r.pipeline.get("detection_cache"),
        "speed": _speeds(r),
        "tickets": r.ticket_samples.to_json() if r.ticket_samples is not None else None,
        "scale": _scales(r),
        "scale_check": _check(r.pipeline.get("scale_check")),
        "pitch_check": r.pipeline.get("pitch_check"),
    }
    path = Path(job.result)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, allow_nan=True))
    tmp.replace(path)
    return f"{job.scenario}/{job.arm}/{job.flight}: {len(data['speed']['gt_kmh'])} speeds in {data['wall_s']:.1f} s"


def _check(summary: dict | None) -> dict | None:
    """The session's scale check as it ended (its status, ratio, sigma, vehicles and reason)."""
    if summary is None:
        return None
    return {k: summary.get(k) for k in ("status", "ratio", "sigma", "n", "reason")}


def _succeeded(path: Path) -> bool:
    return path.is_file() and json.loads(path.read_text()).get("status") == "ok"


def run_grid(
    jobs: Sequence[Job],
    cache_root: Path,
    *,
    workers: int = 1,
    config_path: str | None = None,
    max_frames: int | None = None,
    force: bool = False,
) -> None:
    """Run the jobs not yet recorded (or recorded as failed): those that record detections first,
    then the replays."""
    todo = [j for j in jobs if force or not _succeeded(Path(j.result))]
    threads = max(1, (os.cpu_count() or 2) // workers) if workers > 1 else None
    args = (str(cache_root), config_path, max_frames, threads)
    log.info("%d of %d runs to do (%d record detections)", len(todo), len(jobs), sum(j.record for j in todo))
    done = 0
    for phase in ([j for j in todo if j.record], [j for j in todo if not j.record]):
        if workers <= 1:
            lines = (run_job(j, *args) for j in phase)
            for line in lines:
                done += 1
                log.info("[%d/%d] %s", done, len(todo), line)
            continue
        # spawned, not forked: a parent that has run OpenCV or torch threads (a simulation, say)
        # forks children that can wait for ever on a lock one of those threads held
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(run_job, j, *args) for j in phase]
            for f in futures:
                done += 1
                log.info("[%d/%d] %s", done, len(todo), f.result())


def load_runs(out: Path) -> list[dict]:
    """Every run record under ``out/runs``."""
    return [json.loads(p.read_text()) for p in sorted((out / "runs").rglob("*.json"))]


def on_source(run: dict, source: str) -> dict:
    """``run`` with only the speeds and tickets measured on the scale ``source`` (e.g. ``lrf``: the
    frames after the laser's third reading, where the image centre was the road's)."""
    speed = run.get("speed") or {}
    keep = [i for i, s in enumerate(speed.get("scale_source") or ()) if s == source]
    out = dict(run)
    if speed:
        out["speed"] = {k: [v[i] for i in keep] for k, v in speed.items()}
    tickets = run.get("tickets")
    if tickets:
        out["tickets"] = tickets | {
            "violations": [v for v in tickets.get("violations") or () if v.get("scale_source") == source]
        }
        out["scale"] = [s for s in run.get("scale") or () if s and s.get("source") == source]
    return out


def render(out: Path, markdown: bool = False, source: str | None = None) -> str:
    """The table of a budget folder, after the grid it was built with; ``source``: only the speeds
    and tickets measured on that scale source."""
    grid_path = out / "grid.json"
    grid = json.loads(grid_path.read_text()) if grid_path.is_file() else {}
    runs = load_runs(out)
    if source:
        runs = [on_source(r, source) for r in runs]
    rows = budget_rows(runs, grid.get("scenarios", DEFAULT_SCENARIOS), grid.get("arms", ARMS))
    if not rows:
        return f"no run records under {out / 'runs'}"
    lines = [format_rows(rows, markdown)]
    for name in dict.fromkeys(r.scenario for r in rows):
        if name in SCENARIOS:
            lines.append(f"{name}: {SCENARIOS[name].describe()}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eval.error_budget", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="derive the grid's flights, run them, print the table")
    r.add_argument("sources", nargs="+", help="simulated flight folders, or folders of them")
    r.add_argument("--out", type=Path, required=True, help="the budget folder (flights, runs, cache, table)")
    r.add_argument("--scenarios", help=f"comma separated (default: {','.join(DEFAULT_SCENARIOS)})")
    r.add_argument("--arms", help=f"comma separated, of {','.join(ARMS)} (default: {','.join(DEFAULT_ARMS)})")
    r.add_argument("--seed", type=int, default=0, help="draws of the prior and of the base's clicks")
    r.add_argument(
        "--prior-draws", type=int, default=1, help="flights drawn per source in the prior scenario"
    )
    r.add_argument("--jobs", type=int, default=1, help="runs at a time (processes)")
    r.add_argument("--cache", type=Path, help="detection cache (default OUT/detection_cache)")
    r.add_argument("--config", help="the pipeline config YAML (default: the shipped defaults)")
    r.add_argument("--max-frames", type=int, help="stop each run after N frames (a smoke test)")
    r.add_argument("--force", action="store_true", help="run again what is already recorded")
    r.add_argument("--markdown", action="store_true")
    t = sub.add_parser("table", help="print the table of a budget folder")
    t.add_argument("out", type=Path)
    t.add_argument("--markdown", action="store_true")
    t.add_argument(
        "--source", help="only the speeds and tickets measured on this scale source (flight, site, lrf ...)"
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "table":
        print(render(args.out, args.markdown, args.source))  # noqa: T201 - the table
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("pipelines").setLevel(logging.WARNING)  # not every violation of every run
    scenarios = parse_names(args.scenarios, list(SCENARIOS), DEFAULT_SCENARIOS, "scenarios")
    arms = parse_names(args.arms, ARMS, DEFAULT_ARMS, "arms")
    sources = source_flights(args.sources)
    args.out.mkdir(parents=True, exist_ok=True)
    grid = {
        "sources": [str(s) for s in sources],
        "scenarios": scenarios,
        "arms": arms,
        "seed": args.seed,
        "prior_draws": args.prior_draws,
        "described": {n: SCENARIOS[n].describe() for n in scenarios},
    }
    (args.out / "grid.json").write_text(json.dumps(grid, indent=2))
    jobs = build_grid(sources, args.out, scenarios, arms, seed=args.seed, prior_draws=args.prior_draws)
    t0 = time.perf_counter()
    run_grid(
        jobs,
        args.cache or args.out / "detection_cache",
        workers=args.jobs,
        config_path=args.config,
        max_frames=args.max_frames,
        force=args.force,
    )
    log.info("%d runs in %.0f s", len(jobs), time.perf_counter() - t0)
    text = render(args.out, args.markdown)
    (args.out / ("table.md" if args.markdown else "table.txt")).write_text(text + "\n")
    print(text)  # noqa: T201 - the table
    return 0


if __name__ == "__main__":
    sys.exit(main())
